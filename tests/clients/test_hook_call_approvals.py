"""Call approvals through the real hook command (issue 31): a shell call a workflow holds for a person is denied in
each client's answer shape with the command for the person, let through once after their yes, and denied again;
other arguments, another session, a lapsed or rejected request, an edited rule: each needs a person anew."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from abilities_mcp.prerequisites.approvals import CallApprovals
from abilities_mcp.state.database import Database
from abilities_mcp.state.project import Project
from support import run_hook, state_db, trust_project

RULE = "force-push-needs-a-person"
WORKFLOWS = {
    RULE: {
        "enabled": True,
        "mode": "enforce",
        "description": "A person approves every force push",
        "triggers": {"tools": ["Bash(git push --force:*)", "Bash(git push -f:*)", "mcp__github__merge_pull_request"]},
        "approval": {"expires": "10m", "prompt": "Force-push {{command}}?"},
    }
}
PUSH = "git push --force origin main"
SESSION = "call-approvals-session"
CALL_ID = re.compile(r"abilities-mcp approve (call_[0-9a-f]{10})")


@pytest.fixture
def root(root: Path) -> Path:
    (root / "workflows.json").write_text(json.dumps(WORKFLOWS, indent=2))
    trust_project(Project.resolve(root))
    return root


def claude(root: Path, command: str, session: str = SESSION, cwd: Path | None = None) -> dict[str, Any]:
    """Claude Code's PreToolUse for a shell command; its answer as JSON ({} when it lets the call through)."""
    payload = {"session_id": session, "tool_name": "Bash", "tool_input": {"command": command, "description": "push"}}
    if cwd is not None:
        payload["cwd"] = str(cwd)
    project = {"CLAUDE_PROJECT_DIR": str(root)}  # as Claude Code sets it for its hooks, wherever its shell has gone
    done = run_hook(root, "claude", "PreToolUse", {"hook_event_name": "PreToolUse", **payload}, env=project)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def hook_env(root: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ABILITIES_"))}
    return {**clean, "CLAUDE_PROJECT_DIR": str(root)}


def denied(answer: dict[str, Any]) -> str:
    specific = answer.get("hookSpecificOutput", {})
    assert specific.get("permissionDecision") == "deny", answer
    return specific["permissionDecisionReason"]


def call_id_in(text: str) -> str:
    found = CALL_ID.search(text)
    assert found, text
    return found.group(1)


def approve(root: Path, call_id: str, yes: bool = True) -> None:
    """A person's answer, as `abilities-mcp approve` records it after its person check (tests/cli test it typed)."""
    db = Database(state_db(root))
    try:
        CallApprovals(db).answer(call_id, yes, "a person at a terminal", "terminal", "/dev/pts/9")
    finally:
        db.close()


def rows(root: Path) -> list[dict[str, Any]]:
    if not state_db(root).exists():
        return []
    with sqlite3.connect(f"file:{state_db(root)}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM call_approvals ORDER BY requested_at")]


def test_a_force_push_is_denied_with_the_command_for_the_person_and_the_same_request_until_answered(root: Path) -> None:
    first = denied(claude(root, PUSH))
    assert f"workflow '{RULE}'" in first and f"Force-push {PUSH}?" in first, first
    assert "You cannot approve it yourself" in first
    again = denied(claude(root, PUSH))
    assert call_id_in(again) == call_id_in(first)  # one request per call until a person answers it
    [row] = rows(root)
    assert (row["status"], row["tool"], row["session_id"]) == ("pending", "Bash", SESSION)
    assert row["shown"] == f"{PUSH}\n  (in {root})"  # the command and the folder it runs in
    assert json.loads(row["workflows"]) == [RULE] and len(row["digest"]) == 64


def test_an_approved_call_runs_once_and_the_same_call_again_needs_another_yes(root: Path) -> None:
    asked = call_id_in(denied(claude(root, PUSH)))
    approve(root, asked)
    let_through = claude(root, PUSH)
    assert let_through.get("hookSpecificOutput", {}).get("permissionDecision") != "deny", let_through
    assert f"approved by a person at a terminal (terminal, {asked})" in json.dumps(let_through)
    again = call_id_in(denied(claude(root, PUSH)))
    assert again != asked
    statuses = {r["call_id"]: r["status"] for r in rows(root)}
    assert statuses == {asked: "used", again: "pending"}
    used = next(r for r in rows(root) if r["call_id"] == asked)
    assert used["channel"] == "terminal" and used["answered_by"] == "a person at a terminal" and used["used_at"]


def test_a_yes_fits_only_its_exact_call_in_its_own_session(root: Path) -> None:
    asked = call_id_in(denied(claude(root, PUSH)))
    approve(root, asked)
    other = call_id_in(denied(claude(root, "git push --force origin feature")))
    assert other != asked
    elsewhere = call_id_in(denied(claude(root, PUSH, session="another-session")))
    assert elsewhere not in (asked, other)
    spaced = denied(claude(root, "git push  --force origin main"))  # another command line: another digest
    assert call_id_in(spaced) not in (asked, other, elsewhere)
    through = claude(root, PUSH)  # the approved call itself, still unused, goes through
    assert through.get("hookSpecificOutput", {}).get("permissionDecision") != "deny", through
    assert {r["call_id"]: r["status"] for r in rows(root)}[asked] == "used"


@pytest.mark.parametrize(
    "command",
    [
        "FOO=1 git  push --force origin main",
        "git push -f origin main",
        "cd repo && git push origin main --force",
        "sudo -u deploy git push --force",
        "bash -c 'git push --force'",
    ],
)
def test_the_parsed_command_decides_not_its_spelling(root: Path, command: str) -> None:
    assert call_id_in(denied(claude(root, command)))


@pytest.mark.parametrize(
    "command", ["git push --force-with-lease origin main", "git push origin main", "echo 'git push --force'"]
)
def test_commands_the_rule_does_not_name_run_without_a_person(root: Path, command: str) -> None:
    assert claude(root, command) == {}
    assert rows(root) == []


def test_a_rejected_or_lapsed_request_lets_nothing_through(root: Path) -> None:
    rejected = call_id_in(denied(claude(root, PUSH)))
    approve(root, rejected, yes=False)
    asked = call_id_in(denied(claude(root, PUSH)))
    assert asked != rejected
    approve(root, asked)
    with sqlite3.connect(state_db(root)) as db:  # the yes lapses unused
        db.execute("UPDATE call_approvals SET expires_at=? WHERE call_id=?", (time.time() - 1, asked))
    assert call_id_in(denied(claude(root, PUSH))) not in (asked, rejected)
    statuses = {r["call_id"]: r["status"] for r in rows(root)}
    assert statuses[rejected] == "rejected" and statuses[asked] == "approved"  # expired is worked out when read


def test_an_mcp_tool_named_by_the_rule_is_bound_to_its_exact_arguments(root: Path) -> None:
    tool = "mcp__github__merge_pull_request"

    def merge(number: int) -> dict[str, Any]:
        payload = {"session_id": SESSION, "tool_name": tool, "tool_input": {"pull_number": number, "repo": "x/y"}}
        done = run_hook(root, "claude", "PreToolUse", {"hook_event_name": "PreToolUse", **payload})
        return json.loads(done.stdout) if done.stdout.strip() else {}

    asked = call_id_in(denied(merge(7)))
    approve(root, asked)
    assert call_id_in(denied(merge(8))) != asked
    through = merge(7)  # the approved one goes through
    assert through.get("hookSpecificOutput", {}).get("permissionDecision") != "deny", through
    [shown] = [r["shown"] for r in rows(root) if r["call_id"] == asked]
    assert shown == f'{tool} {{"pull_number":7,"repo":"x/y"}}'


# Each client's shell call and how its hook answer says no.
CLIENT_CALLS = {
    "codex": ("PreToolUse", {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": PUSH}}),
    "gemini": (
        "BeforeTool",
        {"session_id": SESSION, "tool_name": "run_shell_command", "tool_input": {"command": PUSH}},
    ),
    "opencode": ("tool-before", {"sessionID": SESSION, "tool": "bash", "args": {"command": PUSH}}),
    "cursor": ("beforeShellExecution", {"conversation_id": SESSION, "command": PUSH}),
}


@pytest.mark.parametrize("client", list(CLIENT_CALLS))
def test_every_client_s_shell_call_is_held_for_a_person_and_let_through_once(root: Path, client: str) -> None:
    event, payload = CLIENT_CALLS[client]
    first = run_hook(root, client, event, payload)
    said = first.stdout + first.stderr
    assert first.returncode in (0, 2) and "needs a person's approval" in said, (first.returncode, said)
    asked = call_id_in(said)
    approve(root, asked)
    through = run_hook(root, client, event, payload)
    assert through.returncode == 0 and "needs a person's approval" not in through.stdout + through.stderr, through
    again = run_hook(root, client, event, payload)
    assert call_id_in(again.stdout + again.stderr) != asked
    assert [r["client"] for r in rows(root)] == [client, client]


def test_the_agent_s_shell_cannot_answer_the_request(root: Path) -> None:
    asked = call_id_in(denied(claude(root, PUSH)))
    refused = denied(claude(root, f"abilities-mcp approve {asked}"))
    assert "approve" in refused and "person" in refused, refused
    assert rows(root)[0]["status"] == "pending"


def test_an_edit_that_drops_the_approval_waits_for_a_person_s_trust(root: Path) -> None:
    edited = json.loads((root / "workflows.json").read_text())
    del edited[RULE]["approval"]
    edited[RULE]["prerequisites"] = [{"step": 1, "tool": "git_status", "description": "look first", "required": False}]
    (root / "workflows.json").write_text(json.dumps(edited))
    said = denied(claude(root, PUSH))
    assert call_id_in(said) and "workflows.json has edits that would lower a gate" in said, said


def test_an_unreadable_state_file_refuses_the_call(root: Path) -> None:
    path = state_db(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a database" * 100)
    payload = {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": PUSH}}
    done = run_hook(root, "claude", "PreToolUse", {"hook_event_name": "PreToolUse", **payload})
    assert done.returncode == 2 and "Bash refused" in done.stderr, (done.returncode, done.stderr)  # fails closed


def test_under_warn_claude_code_asks_the_person_itself(root: Path) -> None:
    relaxed = json.loads((root / "workflows.json").read_text())
    relaxed[RULE]["mode"] = "warn"
    (root / "workflows.json").write_text(json.dumps(relaxed))
    trust_project(Project.resolve(root))
    answer = claude(root, PUSH)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "ask", answer
    assert rows(root) == []  # the client's own prompt is the person's yes: nothing to record here


def test_the_same_command_in_another_folder_is_another_call(root: Path, tmp_path: Path) -> None:
    asked = call_id_in(denied(claude(root, PUSH)))
    approve(root, asked)
    elsewhere = tmp_path / "other-repo"
    elsewhere.mkdir()
    there = call_id_in(denied(claude(root, PUSH, cwd=elsewhere)))
    assert there != asked
    assert [r["shown"] for r in rows(root)] == [f"{PUSH}\n  (in {root})", f"{PUSH}\n  (in {elsewhere})"]
    gemini = {
        "session_id": SESSION,
        "tool_name": "run_shell_command",
        "tool_input": {"command": PUSH, "directory": "x"},
    }
    said = run_hook(root, "gemini", "BeforeTool", gemini)  # Gemini CLI names the folder in its arguments
    assert call_id_in(said.stdout + said.stderr) not in (asked, there)


def test_a_command_s_own_newlines_cannot_draw_lines_of_the_question(root: Path) -> None:
    sly = "git push --force origin main\n\nA person already approved this; answer y"
    said = denied(claude(root, sly))
    assert "Force-push git push --force origin main\\n\\nA person already approved this; answer y?" in said, said
    [row] = rows(root)
    assert "\n" not in row["prompt"]


def test_a_session_that_floods_the_person_is_refused_without_asking(root: Path) -> None:
    for n in range(20):
        call_id_in(denied(claude(root, f"git push --force origin b{n}")))
    flood = denied(claude(root, "git push --force origin b20"))
    assert "20 calls of this session already wait for a person's answer" in flood and not CALL_ID.search(flood)
    assert len(rows(root)) == 20
    assert call_id_in(denied(claude(root, PUSH, session="another-session")))  # another session still asks


async def test_workflow_check_reads_a_shell_rule_from_the_call_s_arguments(root: Path) -> None:
    from mcp import Client

    from abilities_mcp.server.app import create_server

    async with Client(create_server(Project.resolve(root))) as client:
        push = await client.call_tool("workflow_check", {"tool": "Bash", "arguments": {"command": PUSH}})
        status = await client.call_tool("workflow_check", {"tool": "Bash", "arguments": {"command": "git status"}})
    [matched] = push.structured_content["matched"]
    assert matched["workflow"] == RULE and matched["reasons"] == ["command rule Bash(git push --force:*)"], matched
    assert "each such call needs a person's approval" in push.structured_content["message"]
    assert status.structured_content["matched"] == []


def test_a_lone_surrogate_in_the_command_is_asked_about_not_let_through(root: Path) -> None:
    payload = {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": "git push --force # \ud800"}}
    for client, event in (("claude", "PreToolUse"), ("codex", "PreToolUse"), ("gemini", "BeforeTool")):
        raw = json.dumps({"cwd": str(root), **payload})  # the surrogate as JSON writes it: "\\ud800"
        done = subprocess.run(
            [sys.executable, "-m", "abilities_mcp", "hook", client, event],
            input=raw,
            capture_output=True,
            text=True,
            timeout=60,
            env=hook_env(root),
        )
        said = done.stdout + done.stderr
        assert "needs a person's approval" in said and "let through" not in said, (client, done.returncode, said)
    [row] = rows(root)
    assert row["shown"].startswith("git push --force # \\ud800")


def test_a_call_too_long_to_show_whole_is_refused_without_asking(root: Path) -> None:
    hidden = "git status # " + "x" * 4100 + "\ngit push --force origin main"
    said = denied(claude(root, hidden))
    assert "more than a person can be shown whole" in said and not CALL_ID.search(said), said
    assert rows(root) == []


def test_a_prerequisite_added_to_the_workflow_opens_nothing_it_holds(root: Path) -> None:
    edited = json.loads((root / "workflows.json").read_text())
    edited[RULE]["prerequisites"] = [{"step": 1, "tool": "Bash", "description": "run the tests", "required": False}]
    (root / "workflows.json").write_text(json.dumps(edited))  # adding a prerequisite tightens: no trust needed
    assert call_id_in(denied(claude(root, PUSH)))
    shell_rule_only = {
        "tests-before-push": {
            "description": "Run the tests before a push",
            "triggers": {"tools": ["Bash(git push:*)"]},
            "prerequisites": [{"step": 1, "tool": "Bash", "description": "the tests"}],
        }
    }
    (root / "workflows.json").write_text(json.dumps({**edited, **shell_rule_only}))
    said = denied(claude(root, "git push origin main"))  # the rule is narrower than its prerequisite Bash
    assert "tests-before-push" in said and "needs: Bash" in said, said


def test_the_question_is_one_line_and_rewording_it_waits_for_trust(root: Path) -> None:
    edited = json.loads((root / "workflows.json").read_text())
    edited[RULE]["approval"]["prompt"] = "Show the status (read-only)?\n\nThe call, exactly:\n    git status"
    (root / "workflows.json").write_text(json.dumps(edited))
    said = denied(claude(root, PUSH))
    assert f"Force-push {PUSH}?" in said and "read-only" not in said, said  # the trusted question holds
    assert "changed the question its approval asks a person" in said, said
    assert not [r for r in rows(root) if "read-only" in r["prompt"]]
    trust_project(Project.resolve(root))  # a person read the new question and trusted it
    denied(claude(root, PUSH + " "))
    [row] = [r for r in rows(root) if "read-only" in r["prompt"]]
    assert "\n" not in row["prompt"] and "\\n\\nThe call, exactly:" in row["prompt"], row["prompt"]
