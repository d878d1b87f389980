"""`abilities-mcp approve CALL`: a person's yes (or no) to one tool call a workflow holds for them, typed at their
own terminal under the same person check as a run's approval; and the list of what waits for a person.

The call is shown exactly as it would run, made inert (cli/inert.py): what a person approves is what they read.
"""

from __future__ import annotations

import getpass
import sys
import time

from ..prerequisites.approvals import PENDING, CallApprovals, NotPending, describe, person_command
from ..state.database import Database
from ..state.project import Project
from . import person
from .inert import inert

EXIT_USAGE = 2


def answer_call(project: Project, call_id: str, reject: bool, note: str | None) -> int:
    """Show the call, take the person's confirmation, record the answer with who, where and when."""
    if (why := person.refusal()) is not None:
        return _refused(why)
    db = Database.open(project)
    try:
        approvals = CallApprovals(db)
        found = approvals.get(call_id)
        if found is None or found.state() != PENDING:
            said = f"no call approval {call_id!r} was asked for in this project" if found is None else describe(found)
            print(f"abilities-mcp: {call_id}: {said}. `abilities-mcp approve` lists what waits.", file=sys.stderr)
            return EXIT_USAGE
        print(shown(found.call_id, found.prompt, found.tool, found.shown, found.workflows, found.client), flush=True)
        verb = "Reject" if reject else "Approve"
        print(f"\n{verb} this call (once, for {_minutes(found.lifetime)})? [y/N] ", end="", flush=True)
        reply = sys.stdin.readline().strip().lower()
        if reply not in ("y", "yes"):
            print("Nothing recorded.", flush=True)
            return 1
        if (why := person.refusal()) is not None:  # checked again: a terminal can change hands while it waits
            return _refused(f"{why}; nothing was recorded")
        try:
            answered = approvals.answer(call_id, not reject, _user(), "terminal", person.origin(), note)
        except NotPending as exc:
            print(f"abilities-mcp: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"Recorded: {'rejected' if reject else 'approved'} {answered.call_id}.", flush=True)
        if not reject:
            until = time.strftime("%H:%M:%S", time.localtime(answered.expires_at))
            print(f"The agent's identical call runs once, until {until}.")
        return 0
    finally:
        db.close()


def shown(call_id: str, prompt: str, tool: str, call: str, workflows: tuple[str, ...], client: str) -> str:
    """A call approval as a person reads it before answering: every character of the call inert."""
    return "\n".join(
        [
            f"Call approval {call_id}: {tool}, in a session of {client or 'a client'}.",
            "",
            "The call, exactly:",
            *(f"    {line}" for line in inert(call).split("\n")),
            "",
            f"Workflow {', '.join(workflows)} asks: {inert(prompt)}",
        ]
    )


def waiting(project: Project) -> int:
    """`abilities-mcp approve` with nothing named: the call approvals and runs waiting for a person."""
    from ..state.store import Store

    db = Database.open(project)
    try:
        calls = CallApprovals(db).waiting()
    finally:
        db.close()
    store = Store.open(project)
    try:
        runs = [r for r in store.runs(limit=500) if r.status in ("awaiting_approval", "awaiting_decision")]
    finally:
        store.close()
    if not calls and not runs:
        print("Nothing waits for a person's answer.")
        return 0
    for call in calls:
        first = inert(call.shown.splitlines()[0] if call.shown else "")
        print(f"{person_command(call.call_id)}    {call.tool}: {first}  ({describe(call)})")
    for run in runs:
        print(
            f"abilities-mcp {'decide' if run.status == 'awaiting_decision' else 'approve'} {run.run_id}    "
            f"ability {run.ability}: {run.status}"
        )
    return 0


def _refused(why: str) -> int:
    print(
        f"abilities-mcp: refused: {why}. A call approval comes from a person typing this command in their own "
        "terminal; an agent's tools cannot give it.",
        file=sys.stderr,
    )
    return EXIT_USAGE


def _user() -> str:
    try:
        return f"{getpass.getuser()} at a terminal"
    except (KeyError, OSError):
        return "a person at a terminal"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
