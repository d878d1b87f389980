"""Call approvals (issue 31) with the real clients: OpenCode, Claude Code (its sandbox on, as `init claude --sandbox`
writes it), Codex and Gemini CLI, each headless, its model a script on 127.0.0.1.

One project per client, set up as a person would: a git repository with a `feature` branch and a bare remote inside
the project (so a sandbox that lets the shell write only the workspace lets the push through), whose `main` the local
`main` has rewritten (so only a force push moves it); workflows.json asking a person's yes for every force push,
trusted by a person; `abilities-mcp init CLIENT`. Then one session of the client (an approval binds to the session):

1. the agent force-pushes main (denied, a call id to approve), tries to approve that id itself with its shell
   (`abilities-mcp approve`), with ability_approve, and reports the push with workflow_record, then pushes again
   (denied, the same call id);
2. a person runs `abilities-mcp approve CALL` at their terminal (a pty, typing y) while the client waits on the
   model for its next turn, as an agent waits on a person;
3. the agent force-pushes another branch (denied, its own call id), then the approved push (it runs, once), then the
   same push again (denied, a new call id).

The tests read what the client handed the model (each call's tool result), the remote's refs and the state file.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_codex as codex
import test_edited_rules as edited
import test_gemini as gemini
from test_claude_code import client_env, init_claude, sandbox_or_skip, scratch_project
from test_edited_rules import SHELL, Call, Result
from test_opencode import OpenCodeProject

from abilities_mcp.state.project import Project, default_state_dir
from client_scenarios import ABILITIES_MCP, SERVER
from support import Terminal, cli, trust_project

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH: the clients come from npm")

WORKFLOW = "force-push-needs-a-person"
WORKFLOWS = {
    WORKFLOW: {
        "enabled": True,
        "mode": "enforce",
        "description": "A person approves every force push",
        "triggers": {"tools": ["Bash(git push --force:*)", "Bash(git push -f:*)"]},
        "approval": {"expires": "10m", "prompt": "Force-push {{command}}?"},
    }
}
WORKFLOWS_FILE = "workflows.json"
PUSH = "git push --force origin main"
PUSH_OTHER = "git push --force origin feature"  # other arguments: another call
DENIED = f"Denied: this call needs a person's approval first (workflow '{WORKFLOW}')"
# The command a denial tells the model the person types, with the call's id.
PERSON_COMMAND = re.compile(r"`abilities-mcp approve (call_[0-9a-f]{10})`")
CALL_ID = re.compile(r"call_[0-9a-f]{10}")
# A person's `abilities-mcp approve CALL`: it shows the call and records the answer well within this.
APPROVE_TIMEOUT_SECONDS = 60
# One git command on a scratch repository.
GIT_TIMEOUT_SECONDS = 30
REMOTE = "remote.git"  # the bare remote, inside the project


# --- the repository and its remote -----------------------------------------------------------------------------


def git(root: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env=env, timeout=GIT_TIMEOUT_SECONDS
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def remote_ref(root: Path, branch: str) -> str | None:
    """The commit the bare remote's branch points at, or None when it has no such branch."""
    done = subprocess.run(
        ["git", "--git-dir", str(root / REMOTE), "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_SECONDS,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def make_repository(root: Path, env: dict[str, str]) -> tuple[str, str]:
    """The project as a git repository: main pushed to the bare remote inside the project, a feature branch, then
    main rewritten locally so that only a force push moves the remote's. Returns (the remote's main, the local main)."""
    git(root, env, "init", "-q", "-b", "main")
    git(root, env, "config", "user.name", "A Person")
    git(root, env, "config", "user.email", "person@example.com")
    (root / ".git" / "info" / "exclude").write_text(f"/{REMOTE}/\n")
    (root / "CHANGES.md").write_text("First.\n")
    git(root, env, "add", "CHANGES.md")
    git(root, env, "commit", "-q", "-m", "First")
    git(root, env, "init", "-q", "--bare", "-b", "main", REMOTE)
    git(root, env, "remote", "add", "origin", str(root / REMOTE))
    git(root, env, "push", "-q", "origin", "main")
    git(root, env, "branch", "feature")
    (root / "CHANGES.md").write_text("First, rewritten.\n")
    git(root, env, "commit", "-q", "-a", "--amend", "-m", "First, rewritten")
    return git(root, env, "--git-dir", str(root / REMOTE), "rev-parse", "main"), git(root, env, "rev-parse", "main")


# --- the person, and the script ----------------------------------------------------------------------------------


def call_id_in(result: str) -> str:
    found = CALL_ID.search(result)
    assert found, f"no call id in {result!r}"
    return found.group()


@dataclass
class Person:
    """The person at their own terminal, who approves a call while the client waits on the model."""

    root: Path
    env: dict[str, str]
    approved: str = ""  # the call id they approved
    shown: str = ""  # what `abilities-mcp approve` showed them, up to its question
    said: str = ""  # everything their terminal showed
    remote_before: str | None = None  # the remote's main when they approved

    def approve(self, call_id: str) -> None:
        self.remote_before = remote_ref(self.root, "main")
        terminal = Terminal(cli(self.root, "approve", call_id), self.root, env=self.env)
        self.shown = terminal.expect("[y/N]", APPROVE_TIMEOUT_SECONDS)
        terminal.type("y")
        terminal.expect(f"Recorded: approved {call_id}", APPROVE_TIMEOUT_SECONDS)
        assert terminal.wait(APPROVE_TIMEOUT_SECONDS) == 0, terminal.text
        self.said, self.approved = terminal.text, call_id


def script(person: Person) -> list[Call]:
    """The session's calls; the person approves the call id the agent was shown just before the other push."""
    first: list[str] = []  # the call id of the first denial, which the agent's own routes try to approve

    def by_shell(previous: str) -> dict[str, Any]:
        first.append(call_id_in(previous))
        return {"command": f"{ABILITIES_MCP} approve {first[0]}"}

    def by_ability_approve(_: str) -> dict[str, Any]:
        return {"run_id": first[0], "step_id": "call", "approved": True, "note": "the user said yes"}

    def after_a_persons_yes(previous: str) -> dict[str, Any]:
        person.approve(call_id_in(previous))  # the client waits on the model meanwhile
        return {"command": PUSH_OTHER}

    return [
        Call("push", SHELL, {"command": PUSH}),
        Call("shell-approve", SHELL, by_shell),
        Call("ability-approve", "ability_approve", by_ability_approve),
        Call("record", "workflow_record", {"tool": "Bash", "result": "pushed"}),
        Call("push-again", SHELL, {"command": PUSH}),
        Call("push-other", SHELL, after_a_persons_yes),
        Call("push-approved", SHELL, {"command": PUSH}),
        Call("push-once-more", SHELL, {"command": PUSH}),
    ]


# --- each client: set up as a person would; its run is test_edited_rules.py's -------------------------------------


def opencode_project(base: Path) -> Path:
    root = base / "project"
    root.mkdir(parents=True)
    (root / WORKFLOWS_FILE).write_text(json.dumps(WORKFLOWS, indent=2))
    opencode = OpenCodeProject(root, base / "home")
    opencode.init()
    (root / "opencode.json").write_text(json.dumps(opencode.config, indent=2))
    return root


def claude_project(base: Path) -> Path:
    sandbox_or_skip()
    root = scratch_project(base, {}, workflows=WORKFLOWS)
    init_claude(root, "--sandbox")  # the sandbox as a person turns it on
    return root


class Codex(edited.Codex):
    """test_edited_rules.py's Codex, with this server only (it requires its stand-in db server too)."""

    def run(self, base: Path, root: Path, script: Sequence[Call]) -> dict[str, Result]:
        def spell(call: Call) -> tuple[str, dict[str, Any]]:
            tool = edited.named(call, codex.SHELL, codex.own, lambda t: t)
            return tool, {"cmd": call.arguments["command"]} if call.tool == SHELL else call.arguments

        session = codex.run_codex(base, root, edited.PROMPT, edited.scripted_turns(script, spell), servers=(SERVER,))
        return edited.labelled(script, [Result(text, None) for text in session.results()])


CLIENTS: dict[str, tuple[Callable[[Path], Path], edited.Client]] = {
    "opencode": (opencode_project, edited.OpenCode()),
    "claude": (claude_project, edited.ClaudeCode()),
    "codex": (lambda base: codex.scratch_project(base, {}, workflows=WORKFLOWS), Codex()),
    "gemini": (lambda base: gemini.scratch_project(base, {}, workflows=WORKFLOWS), edited.GeminiCli()),
}


# --- one client: set up, one session, a person's yes in the middle -------------------------------------------------


@dataclass
class Pushed:
    """One client's session on one project, and what the remote and the state file held after it."""

    root: Path
    results: dict[str, Result]  # by call label
    person: Person
    remote_first: str  # the remote's main as set up
    local_main: str  # the rewritten main, which only a force push sends
    remote_main: str | None  # after the session
    remote_feature: str | None
    rows: list[dict[str, Any]]  # the call_approvals table, oldest request first


def call_approvals(state_db: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM call_approvals ORDER BY requested_at")]


@pytest.fixture(scope="module", params=list(CLIENTS))
def pushed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pushed:
    set_up, client = CLIENTS[request.param]
    base = tmp_path_factory.mktemp(f"calls-{request.param}")
    root = set_up(base)
    env = client_env(base)  # the person's terminal: the client's HOME and state home, no agent's markers
    remote_first, local_main = make_repository(root, env)
    state_dir = default_state_dir(root.resolve(), Path(env["XDG_STATE_HOME"]))
    assert trust_project(Project(root=root.resolve(), state_dir=state_dir)) == [WORKFLOWS_FILE]
    person = Person(root, env)
    results = client.run(base, root, script(person))
    return Pushed(
        root,
        results,
        person,
        remote_first,
        local_main,
        remote_ref(root, "main"),
        remote_ref(root, "feature"),
        call_approvals(state_dir / "state.db"),
    )


def denial(result: Result, command: str) -> str:
    """The call id a denial of `command` names, once the denial reads as the model must see it."""
    assert result.error is not False, result
    assert DENIED in result.text, result
    assert f"Force-push {command}?" in result.text, result  # the workflow's prompt, the call filled in
    found = PERSON_COMMAND.search(result.text)
    assert found, result
    return found.group(1)


# --- before a person's answer: denied, and nothing the agent does approves it ---------------------------------------


def test_a_force_push_is_denied_with_the_command_a_person_types_to_approve_it(pushed: Pushed) -> None:
    call_id = denial(pushed.results["push"], PUSH)
    assert pushed.person.remote_before == pushed.remote_first  # no push reached the remote before the person's yes
    assert call_id == pushed.person.approved


def test_the_same_call_again_before_any_answer_is_denied_with_the_same_call_id(pushed: Pushed) -> None:
    assert denial(pushed.results["push-again"], PUSH) == denial(pushed.results["push"], PUSH)


def test_the_agents_shell_running_the_persons_approve_command_is_refused(pushed: Pushed) -> None:
    refused = pushed.results["shell-approve"]
    assert refused.error is not False, refused
    assert "abilities-mcp approve|decide` is a person's answer" in refused.text, refused
    assert "Recorded:" not in refused.text


def test_the_agents_ability_approve_of_the_call_is_refused(pushed: Pushed) -> None:
    refused = pushed.results["ability-approve"]
    assert refused.error is not False, refused
    call_id = denial(pushed.results["push"], PUSH)
    assert f"Refused: {call_id} is a call approval, and only a person gives one" in refused.text, refused


def test_nothing_the_agent_did_approved_the_call_a_person_answered_it_still_pending(pushed: Pushed) -> None:
    # After the shell, ability_approve and workflow_record the push was denied with the same call id (above), and
    # the person's terminal found that request still waiting for an answer: `approve` shows and records only those.
    call_id = pushed.person.approved
    assert call_id == denial(pushed.results["push-again"], PUSH)
    assert f"Recorded: approved {call_id}" in pushed.person.said, pushed.person.said


# --- a person's yes at their terminal --------------------------------------------------------------------------------


def test_the_person_is_shown_the_exact_call_and_asked_once_for_ten_minutes(pushed: Pushed) -> None:
    shown = pushed.person.shown
    assert pushed.person.approved in shown and WORKFLOW in shown, shown
    assert f"Force-push {PUSH}?" in shown, shown
    assert "Approve this call (once, for 10 min)? [y/N]" in shown, shown


def test_a_call_whose_arguments_differ_from_the_approved_one_is_denied_with_its_own_call_id(pushed: Pushed) -> None:
    other = denial(pushed.results["push-other"], PUSH_OTHER)
    assert other != pushed.person.approved
    assert pushed.remote_feature is None  # the feature branch never reached the remote


def test_the_approved_call_runs_once_and_force_pushes_main(pushed: Pushed) -> None:
    ran = pushed.results["push-approved"]
    assert ran.error is not True, ran
    assert DENIED not in ran.text and "main -> main" in ran.text, ran
    assert pushed.remote_main == pushed.local_main != pushed.remote_first


def test_the_same_call_again_after_it_ran_is_denied_with_a_new_call_id(pushed: Pushed) -> None:
    again = denial(pushed.results["push-once-more"], PUSH)
    assert again not in (pushed.person.approved, denial(pushed.results["push-other"], PUSH_OTHER))
    assert "main -> main" not in pushed.results["push-once-more"].text


def test_the_state_file_records_who_answered_through_what_channel_and_when_and_the_yes_used(pushed: Pushed) -> None:
    rows = {row["call_id"]: row for row in pushed.rows}
    approved = pushed.person.approved
    other = denial(pushed.results["push-other"], PUSH_OTHER)
    again = denial(pushed.results["push-once-more"], PUSH)
    assert list(rows) == [approved, other, again], pushed.rows  # one request a distinct call, no more
    assert len({row["session_id"] for row in pushed.rows}) == 1 and pushed.rows[0]["session_id"], pushed.rows
    for row in pushed.rows:
        assert json.loads(row["workflows"]) == [WORKFLOW], row
    used = rows[approved]
    assert used["status"] == "used" and used["channel"] == "terminal", used
    assert used["answered_by"] and used["requested_at"] < used["answered_at"] < used["used_at"], used
    # The command, and the folder it runs in (the same words in another repository are another call).
    assert used["shown"].splitlines()[0] == PUSH and used["prompt"] == f"Force-push {PUSH}?", used
    assert used["shown"].splitlines()[1].startswith("  (in /"), used
    assert rows[other]["shown"].splitlines()[0] == PUSH_OTHER and rows[other]["digest"] != used["digest"], rows[other]
    assert rows[again]["digest"] == used["digest"] and rows[again]["tool"] == used["tool"], rows[again]
    for call_id in (other, again):
        assert rows[call_id]["status"] == "pending" and rows[call_id]["answered_at"] is None, rows[call_id]
