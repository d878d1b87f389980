"""`abilities-mcp approve CALL` (issue 31): a person's yes to one tool call, typed at their own terminal; the call
shown exactly and inert; an agent's routes refused; `approve` alone lists what waits; `history` shows the answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.cli import person
from abilities_mcp.prerequisites.approvals import CallApprovals, Request
from abilities_mcp.state.database import Database
from support import Terminal, cli, state_db

CLI_TIMEOUT = 60
PUSH = "git push --force origin main"


def ask(root: Path, shown: str = PUSH, lifetime: float = 600.0, session: str = "s1") -> str:
    """A request as the hook leaves it for a shell call; returns its id."""
    db = Database(state_db(root))
    try:
        request = Request("Bash", "d" * 64 + shown, shown, ("force-push",), f"Force-push {shown}?", lifetime)
        return CallApprovals(db).ask(session, "claude", request).call_id
    finally:
        db.close()


def stored(root: Path, call_id: str):
    db = Database(state_db(root))
    try:
        return CallApprovals(db).get(call_id)
    finally:
        db.close()


def person_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in person.AGENT_ENV}


def test_a_person_approves_a_call_at_their_terminal_seeing_it_exactly(root: Path) -> None:
    call_id = ask(root)
    term = Terminal(cli(root, "approve", call_id), root, env=person_env())
    shown = term.expect("[y/N]")
    term.type("y")
    said = term.expect("runs once")  # the last words it prints: "Recorded" alone may arrive before the rest
    assert term.wait() == 0
    assert f"Call approval {call_id}: Bash, in a session of claude." in shown, shown
    assert shown.index(f"The call, exactly:\n    {PUSH}\n") < shown.index(
        f"Workflow force-push asks: Force-push {PUSH}?"
    )
    assert "once, for 10 min" in shown, shown
    assert f"Recorded: approved {call_id}." in said and "runs once" in said, said
    found = stored(root, call_id)
    assert (found.status, found.channel) == ("approved", "terminal")
    assert found.answered_by.endswith("at a terminal") and found.origin.startswith("/dev/pts/"), found


def test_a_person_can_reject_and_anything_but_yes_records_nothing(root: Path) -> None:
    kept = ask(root)
    term = Terminal(cli(root, "approve", kept), root, env=person_env())
    term.expect("[y/N]")
    term.type("")
    term.expect("Nothing recorded.")
    assert term.wait() == 1 and stored(root, kept).status == "pending"
    term = Terminal(cli(root, "approve", kept, "--reject", "--note", "not today"), root, env=person_env())
    assert "Reject this call" in term.expect("[y/N]")
    term.type("y")
    term.expect("Recorded: rejected")
    assert term.wait() == 0
    found = stored(root, kept)
    assert (found.status, found.note) == ("rejected", "not today")


def test_what_the_call_holds_reaches_the_terminal_inert(root: Path) -> None:
    hostile = "git push --force \x1b[2K\x1b[1A\rgit status\u202e"
    call_id = ask(root, hostile)
    term = Terminal(cli(root, "approve", call_id), root, env=person_env())
    shown = term.expect("[y/N]")
    term.type("n")
    term.wait()
    assert "\x1b" not in shown and "\u202e" not in shown and "\\x1b[2K" in shown, shown


def test_no_route_an_agent_has_answers_a_call(root: Path) -> None:
    call_id = ask(root)
    piped = subprocess.run(
        cli(root, "approve", call_id),
        input="y\n",
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env=person_env(),
    )
    assert piped.returncode == 2 and "stdin is not a terminal" in piped.stderr, piped.stderr
    term = Terminal(cli(root, "approve", call_id), root, env={**person_env(), "CLAUDECODE": "1"})
    said = term.expect("own terminal")
    assert term.wait() == 2 and "CLAUDECODE" in said, said
    assert stored(root, call_id).status == "pending"


@pytest.mark.parametrize("state", ["answered", "lapsed", "unknown"])
def test_a_call_that_waits_for_nothing_is_said_so(root: Path, state: str) -> None:
    call_id = ask(root, lifetime=0.001 if state == "lapsed" else 600.0)
    if state == "answered":
        db = Database(state_db(root))
        CallApprovals(db).answer(call_id, True, "someone", "terminal", "/dev/pts/1")
        db.close()
    name = "call_0000000000" if state == "unknown" else call_id
    term = Terminal(cli(root, "approve", name), root, env=person_env())
    said = term.expect("lists what waits")
    assert term.wait() == 2
    expected = {"answered": "approved by someone (terminal)", "lapsed": "expired at", "unknown": "no call approval"}
    assert expected[state] in said, said


def test_approve_alone_lists_what_waits_and_history_shows_the_answers(root: Path) -> None:
    waiting = ask(root)
    answered = ask(root, "git push -f origin feature")
    db = Database(state_db(root))
    CallApprovals(db).answer(answered, True, "someone", "terminal", "/dev/pts/1")
    db.close()
    listed = subprocess.run(cli(root, "approve"), capture_output=True, text=True, timeout=CLI_TIMEOUT)
    assert listed.returncode == 0 and f"abilities-mcp approve {waiting}" in listed.stdout, listed
    assert answered not in listed.stdout
    history = subprocess.run(cli(root, "history"), capture_output=True, text=True, timeout=CLI_TIMEOUT)
    assert f"{waiting}  pending   Bash: {PUSH}" in history.stdout, history.stdout
    assert f"{answered}  approved  Bash: git push -f origin feature" in history.stdout, history.stdout
    as_json = subprocess.run(cli(root, "history", "--json"), capture_output=True, text=True, timeout=CLI_TIMEOUT)
    calls = {c["call_id"]: c for c in json.loads(as_json.stdout)["call_approvals"]}
    assert calls[answered]["channel"] == "terminal" and calls[answered]["answered_by"] == "someone"
    assert calls[waiting]["status"] == "pending" and calls[waiting]["call"] == PUSH


def test_the_cli_grammar_takes_a_call_id(root: Path) -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "approve", "--help"], capture_output=True, text=True
    )
    assert "call_" in helped.stdout and "RUN_OR_CALL" in helped.stdout
