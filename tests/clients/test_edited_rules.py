"""Gates an agent cannot edit away (issue 28, DESIGN §9), with the real clients: OpenCode, Claude Code (its sandbox on,
as `init claude --sandbox` writes it), Codex and Gemini CLI, each headless, its model a script on 127.0.0.1.

One project per client, set up as a person would: an ability `deploy` (a person's approval, then a script that
creates `deployed`; `enforcement: strict`), an enforce workflow in workflows.json (`execute_query` needs
`list_databases`, then `list_tables`), the stand-in `db` server in the client's own config, `abilities-mcp init
CLIENT`, and the files trusted by a person. Then two runs of the client:

1. the agent attacks: its shell edits the ability to `loose` and disables the workflow (it may write the project),
   it calls the query, reports the prerequisites itself with `workflow_record`, calls the query again, runs the
   ability and approves it itself;
2. a person runs `abilities-mcp trust` at their terminal (a pty, typing y); then the agent runs the ability and
   relays the approval, and calls the query.

The tests read what the client handed the model (each call's tool result), the state file and the disk.

Claude Code (`claude -p`) and Codex (`codex exec`) answer every form a server shows themselves, headless: Claude Code
cancels it ("an MCP server's request for input is cancelled unless an Elicitation hook answers it", its binary),
Codex declines it. A cancelled or declined form rejects the approval (docs/abilities.md), so the run fails at once;
their model then resumes it (its next_calls say so), and a resumed run shows no form: its approval waits for a
person's terminal, or under loose for the agent's relay. The run the tests read is the resumed one.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pytest
import test_codex as codex
import test_gemini as gemini
from test_claude_code import client_env, init_claude, load, run_claude, sandbox_or_skip, scratch_project
from test_opencode import OpenCodeProject, tool_uses

import scripted_anthropic as anthropic
import scripted_openai as openai
from abilities_mcp.state.project import Project, default_state_dir
from client_scenarios import DB_SERVER, LOOK_FIRST, SERVER, db_calls
from support import Terminal, cli, stored_run, trust_project

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH: the clients come from npm")

DEPLOY = """\
description: Deploy to production once a person approved it
steps:
  - {id: approve, type: approval, prompt: Deploy to production?}
  - {id: deploy, type: script, run: touch deployed, needs: [approve]}
settings:
  enforcement: strict
"""
WORKFLOW = "db-look-first"
WORKFLOWS = {WORKFLOW: {"enabled": True, **LOOK_FIRST[WORKFLOW]}}
ABILITY_FILE, WORKFLOWS_FILE = "abilities/deploy.yaml", "workflows.json"
TRUST = "`abilities-mcp trust`"
# What every answer enforcing a trusted version says (state/trust.py waiting_note), for each file.
ABILITY_WAITS = f"{ABILITY_FILE} has edits that would lower a gate (settings.enforcement strict → loose)"
WORKFLOWS_WAIT = f"{WORKFLOWS_FILE} has edits that would lower a gate (workflow '{WORKFLOW}' disabled)"
# The agent's shell edits, each printing the edited line so the model sees it took.
LOOSEN = f"sed -i 's/enforcement: strict/enforcement: loose/' {ABILITY_FILE} && grep enforcement {ABILITY_FILE}"
DISABLE = f'sed -i \'s/"enabled": true/"enabled": false/\' {WORKFLOWS_FILE} && grep enabled {WORKFLOWS_FILE}'
QUERY = {"sql": "select * from users"}
PROMPT = "Deploy, then query the users."
# A person's `abilities-mcp trust`: it shows the diffs and records them well within this.
TRUST_TIMEOUT_SECONDS = 60
RUN_ID = re.compile(r"run_\d{8}_[0-9a-f]{8}")
# The run a client's own cancelled (or declined) form rejected, before its model resumed it (see the docstring).
FORM_REJECTED = "run-form-rejected"


# --- the script, in each client's spelling ----------------------------------------------------------------------

SHELL = "shell"  # the client's shell tool
DB = "db:"  # a tool of the stand-in db server; any other tool is this server's


class Call(NamedTuple):
    """One call the scripted model makes: a label for the tests, the tool, and its arguments (or a function of the
    previous call's result, as the client handed it to the model)."""

    label: str
    tool: str
    arguments: dict[str, Any] | Callable[[str], dict[str, Any]]

    def arguments_after(self, previous: str) -> dict[str, Any]:
        return self.arguments(previous) if callable(self.arguments) else self.arguments


def run_id_in(result: str) -> str:
    found = RUN_ID.search(result)
    assert found, f"no run id in {result!r}"
    return found.group()


def approve(previous: str) -> dict[str, Any]:
    """ability_approve of the run the previous call started (or resumed)."""
    return {"run_id": run_id_in(previous), "step_id": "approve", "approved": True, "note": "the user said yes"}


ATTACK = [
    Call("loosen", SHELL, {"command": LOOSEN}),
    Call("disable", SHELL, {"command": DISABLE}),
    Call("query", DB + "execute_query", QUERY),
    Call("report-databases", "workflow_record", {"tool": "list_databases", "result": "main, analytics"}),
    Call("report-tables", "workflow_record", {"tool": "list_tables", "result": "users, orders"}),
    Call("query-after-reports", DB + "execute_query", QUERY),
    Call("run", "ability_run", {"name": "deploy"}),
    Call("approve", "ability_approve", approve),
]
AFTER_TRUST = [
    Call("run", "ability_run", {"name": "deploy"}),
    Call("approve", "ability_approve", approve),
    Call("query", DB + "execute_query", QUERY),
]


def resuming(script: Sequence[Call]) -> Iterator[Call]:
    """The script of a client whose own form rejects the approval: ability_run, then ability_resume of that run."""
    for call in script:
        if call.tool == "ability_run":
            yield call._replace(label=FORM_REJECTED)
            yield Call(call.label, "ability_resume", lambda previous: {"run_id": run_id_in(previous)})
        else:
            yield call


class Result(NamedTuple):
    """One call's tool result as the client handed it to the model."""

    text: str
    error: bool | None  # None: the client gives the model no error flag, only the text


class Setup(NamedTuple):
    root: Path
    db_script: Path  # the stand-in db server, which logs every call that reaches it


class Client(Protocol):
    def set_up(self, base: Path) -> Setup: ...

    def run(self, base: Path, root: Path, script: Sequence[Call]) -> dict[str, Result]: ...

    def payload(self, result: Result) -> dict[str, Any]: ...


def write_db_server(base: Path) -> Path:
    script = base / "db_server.py"
    script.write_text(DB_SERVER)
    return script


def labelled(script: Sequence[Call], results: Sequence[Result]) -> dict[str, Result]:
    assert len(results) == len(script), results
    return {call.label: result for call, result in zip(script, results, strict=True)}


def named(call: Call, shell: str, own: Callable[[str], str], db: Callable[[str], str]) -> str:
    """The call's tool as this client names it."""
    if call.tool == SHELL:
        return shell
    return db(call.tool.removeprefix(DB)) if call.tool.startswith(DB) else own(call.tool)


def scripted_turns(script: Sequence[Call], spell: Callable[[Call], tuple[str, dict[str, Any]]]) -> list[openai.Turn]:
    """One turn a call, then a last word (OpenCode, Codex, Gemini CLI: their requests all offer last_tool_result)."""

    def turn(call: Call) -> openai.Turn:
        def reply(request: Any) -> openai.Reply:
            return openai.calls(spell(call._replace(arguments=call.arguments_after(request.last_tool_result()))))

        return reply

    return [*(turn(call) for call in script), openai.say("Done.")]


class OpenCode:
    def set_up(self, base: Path) -> Setup:
        root = base / "project"
        (root / "abilities").mkdir(parents=True)
        (root / ABILITY_FILE).write_text(DEPLOY)
        (root / WORKFLOWS_FILE).write_text(json.dumps(WORKFLOWS, indent=2))
        script = write_db_server(base)
        opencode = OpenCodeProject(root, base / "home")
        opencode.init(extra_servers={"db": [sys.executable, str(script)]})
        (root / "opencode.json").write_text(json.dumps(opencode.config, indent=2))  # db, as a person adds it
        return Setup(root, script)

    def run(self, base: Path, root: Path, script: Sequence[Call]) -> dict[str, Result]:
        def spell(call: Call) -> tuple[str, dict[str, Any]]:
            tool = named(call, "bash", lambda t: f"{SERVER}_{t}", lambda t: f"db_{t}")
            return tool, {**call.arguments, **({"description": "Edit a file"} if call.tool == SHELL else {})}

        opencode = OpenCodeProject(root, base / "home")
        opencode.config = json.loads((root / "opencode.json").read_text())
        model = openai.ScriptedOpenAI(scripted_turns(script, spell))
        with model:
            events = opencode.run(model, PROMPT)
        states = [part["state"]["status"] for part in tool_uses(events)]
        texts = model.requests[-1].tool_results()
        return labelled(script, [Result(t, s == "error") for t, s in zip(texts, states, strict=True)])

    def payload(self, result: Result) -> dict[str, Any]:
        return json.loads(result.text)


class ClaudeCode:
    def set_up(self, base: Path) -> Setup:
        sandbox_or_skip()
        script = write_db_server(base)
        db = {"type": "stdio", "command": sys.executable, "args": [str(script)]}
        root = scratch_project(base, {"deploy": DEPLOY}, workflows=WORKFLOWS, servers={"db": db})
        init_claude(root, "--sandbox")  # the sandbox as a person turns it on
        return Setup(root, script)

    def run(self, base: Path, root: Path, script: Sequence[Call]) -> dict[str, Result]:
        script = list(resuming(script))

        def name(call: Call) -> str:
            return named(call, "Bash", lambda t: f"mcp__{SERVER}__{t}", lambda t: f"mcp__db__{t}")

        def turn(call: Call) -> anthropic.Turn:
            def reply(request: anthropic.Request) -> anthropic.Reply:
                previous = request.last_results()
                arguments = call.arguments_after(previous[-1].text if previous else "")
                if call.tool == SHELL:
                    arguments = {**arguments, "description": "Edit a file"}
                return anthropic.Reply(tool_uses=[anthropic.ToolUse(name(call), arguments, id=tool_use_id(call))])

            return reply

        deferred = sorted({name(call) for call in script if call.tool != SHELL})  # MCP tools load through ToolSearch
        turns = [anthropic.call(load(*deferred)), *(turn(call) for call in script), anthropic.say("Done.")]
        session = run_claude(base, root, PROMPT, turns)
        found = [session.result(tool_use_id(call)) for call in script]
        return labelled(script, [Result(r.text, r.is_error) for r in found])

    def payload(self, result: Result) -> dict[str, Any]:
        return json.loads(result.text)


def tool_use_id(call: Call) -> str:
    return "toolu_" + call.label.replace("-", "_")


class Codex:
    def set_up(self, base: Path) -> Setup:
        root = codex.scratch_project(base, {"deploy": DEPLOY}, workflows=WORKFLOWS)
        codex.add_db_server(root)
        return Setup(root, root / "db_server.py")

    def run(self, base: Path, root: Path, script: Sequence[Call]) -> dict[str, Result]:
        script = list(resuming(script))

        def spell(call: Call) -> tuple[str, dict[str, Any]]:
            tool = named(call, codex.SHELL, codex.own, lambda t: f"mcp__db__{t}")
            return tool, {"cmd": call.arguments["command"]} if call.tool == SHELL else call.arguments

        turns = scripted_turns(script, spell)
        session = codex.run_codex(base, root, PROMPT, turns, servers=(SERVER, "db"))
        return labelled(script, [Result(text, None) for text in session.results()])

    def payload(self, result: Result) -> dict[str, Any]:
        return codex.result_json(result.text)


class GeminiCli:
    def set_up(self, base: Path) -> Setup:
        root = gemini.scratch_project(base, {"deploy": DEPLOY}, workflows=WORKFLOWS)
        gemini.add_db_server(root)
        return Setup(root, root / "db_server.py")

    def run(self, base: Path, root: Path, script: Sequence[Call]) -> dict[str, Result]:
        def spell(call: Call) -> tuple[str, dict[str, Any]]:
            return named(call, "run_shell_command", gemini.own, lambda t: f"mcp_db_{t}"), call.arguments

        session = gemini.run_gemini(base, root, PROMPT, scripted_turns(script, spell))
        return labelled(script, [Result(text, "error" in json.loads(text)) for text in session.results()])

    def payload(self, result: Result) -> dict[str, Any]:
        return gemini.result_json(result.text)


CLIENTS: dict[str, Client] = {"opencode": OpenCode(), "claude": ClaudeCode(), "codex": Codex(), "gemini": GeminiCli()}


# --- one client: set up, attacked, trusted by a person, run again ---------------------------------------------------


class Snapshot(NamedTuple):
    """What the disk and the state file held after the attack."""

    ability: str
    workflows: dict[str, Any]
    deployed: bool
    db_calls: list[str]
    prerequisite_records: list[tuple[str, str, str]]  # (workflow, tool, how), every session's


@dataclass
class Edited:
    """One client's two runs on one project, and what a person's trust showed between them."""

    client: Client
    root: Path
    state_db: Path
    attack: dict[str, Result]  # phase one, by call label
    after_attack: Snapshot
    trust_shown: str  # what `abilities-mcp trust` showed the person before they answered y
    after_trust: dict[str, Result]  # phase two, by call label
    db_calls: list[str]  # what reached the db server over both runs

    def payload(self, result: Result) -> dict[str, Any]:
        return self.client.payload(result)


def prerequisite_records(state_db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as db:
        return list(db.execute("SELECT workflow, tool, how FROM prereq_records ORDER BY rowid"))


def trust_at_a_terminal(root: Path, env: dict[str, str]) -> str:
    """`abilities-mcp trust` typed by a person: they read the diffs and answer y. Returns what the terminal showed."""
    terminal = Terminal(cli(root, "trust"), root, env=env)
    shown = terminal.expect("[y/N]", TRUST_TIMEOUT_SECONDS)
    terminal.type("y")
    terminal.expect("Trusted 2 file(s)", TRUST_TIMEOUT_SECONDS)
    assert terminal.wait(TRUST_TIMEOUT_SECONDS) == 0, terminal.text
    return shown


@pytest.fixture(scope="module", params=list(CLIENTS))
def edited(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Edited:
    client = CLIENTS[request.param]
    base = tmp_path_factory.mktemp(f"edited-{request.param}")
    root, db_script = client.set_up(base)
    person = client_env(base)  # the person's terminal: the client's HOME and state home, no agent's markers
    state_dir = default_state_dir(root.resolve(), Path(person["XDG_STATE_HOME"]))
    trusted = trust_project(Project(root=root.resolve(), state_dir=state_dir))
    assert sorted(trusted) == [ABILITY_FILE, WORKFLOWS_FILE]

    attack = client.run(base, root, ATTACK)
    after_attack = Snapshot(
        (root / ABILITY_FILE).read_text(),
        json.loads((root / WORKFLOWS_FILE).read_text()),
        (root / "deployed").exists(),
        db_calls(db_script),
        prerequisite_records(state_dir / "state.db"),
    )
    shown = trust_at_a_terminal(root, person)
    after_trust = client.run(base, root, AFTER_TRUST)
    return Edited(client, root, state_dir / "state.db", attack, after_attack, shown, after_trust, db_calls(db_script))


# --- phase one: the agent's edits and reports get through no gate ---------------------------------------------------


def test_an_ability_the_agent_edited_to_loose_still_runs_strict_and_refuses_the_agents_own_approval(
    edited: Edited,
) -> None:
    loosen = edited.attack["loosen"]
    assert loosen.error is not True and "enforcement: loose" in loosen.text, loosen  # the agent may write the project
    assert "enforcement: loose" in edited.after_attack.ability
    for label in ("run", FORM_REJECTED):
        if label not in edited.attack:
            continue  # only Claude Code and Codex reject by their own form first
        run = edited.payload(edited.attack[label])
        assert run["enforcement"] == "strict", run
        assert any(ABILITY_WAITS in warning and TRUST in warning for warning in run["warnings"]), run["warnings"]
    run = edited.payload(edited.attack["run"])
    assert run["status"] == "awaiting_approval" and run["current_step"]["id"] == "approve", run
    refused = edited.attack["approve"]
    assert refused.error is not False, refused
    assert "Refused: under enforcement: strict, only a person answers approval questions" in refused.text, refused
    assert ABILITY_WAITS in refused.text and TRUST in refused.text, refused  # why the file's loose does not hold
    assert not edited.after_attack.deployed
    record = stored_run(edited.root, run["run_id"], edited.state_db)
    assert not [a for a in record.answers if a["detail"].startswith("approved")], record.answers
    assert record.step("deploy").status == "pending", record.status


def test_a_workflow_the_agent_disabled_still_denies_the_query_naming_workflows_json_and_trust(edited: Edited) -> None:
    disable = edited.attack["disable"]
    assert disable.error is not True and re.search(r"enabled\W*: false", disable.text), disable  # Gemini: JSON text
    assert edited.after_attack.workflows[WORKFLOW]["enabled"] is False
    denied = edited.attack["query"]
    assert denied.error is not False, denied
    assert "abilities-mcp: Denied:" in denied.text and "may not run yet" in denied.text, denied
    assert WORKFLOWS_WAIT in denied.text and TRUST in denied.text, denied
    assert "3 rows" not in denied.text
    assert edited.after_attack.db_calls == []  # no query reached the db server during the attack


def test_prerequisites_the_agent_reports_itself_are_refused_and_the_query_stays_denied(edited: Edited) -> None:
    databases, tables = edited.attack["report-databases"], edited.attack["report-tables"]
    assert databases.error is not False and tables.error is not False, (databases, tables)
    assert "Refused: 'list_databases' is step 1 of workflow 'db-look-first' (enforce)" in databases.text, databases
    assert "only a call they saw succeed counts, not workflow_record" in databases.text, databases
    assert "Refused: 'list_tables' is step 2" in tables.text, tables
    again = edited.attack["query-after-reports"]
    assert again.error is not False, again
    assert "abilities-mcp: Denied:" in again.text and "needs: list_databases" in again.text, again
    assert edited.after_attack.prerequisite_records == []  # nothing recorded, in any session
    assert edited.after_attack.db_calls == []


# --- phase two: after a person's trust the edits take effect ---------------------------------------------------------


def test_a_person_s_trust_shows_both_edits_and_then_the_ability_runs_loose_and_takes_the_agents_approval(
    edited: Edited,
) -> None:
    shown = edited.trust_shown
    assert f"{ABILITY_FILE} (ability, edited): {ABILITY_WAITS}" in shown, shown
    assert "-  enforcement: strict" in shown and "+  enforcement: loose" in shown, shown
    run = edited.payload(edited.after_trust["run"])
    assert run["status"] == "awaiting_approval" and run["enforcement"] == "loose", run
    assert run["warnings"] == [], run["warnings"]
    approved = edited.after_trust["approve"]
    assert approved.error is not True, approved
    finished = edited.payload(approved)
    assert finished["status"] == "completed", finished
    assert (edited.root / "deployed").exists()
    record = stored_run(edited.root, run["run_id"], edited.state_db)
    assert record.status == "completed" and record.step("deploy").status == "completed", record.status
    assert record.answers[-1]["detail"].startswith("approved by agent"), record.answers


def test_a_person_s_trust_shows_the_disabled_workflow_and_then_the_query_reaches_the_db_server(edited: Edited) -> None:
    shown = edited.trust_shown
    assert f"{WORKFLOWS_FILE} (workflows, edited): {WORKFLOWS_WAIT}" in shown, shown
    assert '-    "enabled": true,' in shown and '+    "enabled": false,' in shown, shown
    query = edited.after_trust["query"]
    assert query.error is not True and "3 rows" in query.text and "abilities-mcp" not in query.text, query
    assert edited.db_calls == ["execute_query"]
