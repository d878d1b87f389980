"""Where a session's live run stands, read straight from the state file: the hook's view of a run (DESIGN §6, §7).

The hook asks this on every tool call, so it reads a few rows with plain SQL: no engine, no pydantic. A workflow
step's child run is followed down to the step that is current at the bottom.

Which run is the session's: the newest live top-level run of the hook's session id. Claude Code gives a hook the
new id after `/clear`, while its server keeps the id it was started with; so when the session has none, the run
of a server started by the same client process counts (found through the process tree: the client is the first
ancestor of both that is not a shell or a launcher). A run whose server died is not live: it is interrupted and
waits for `ability_resume`, so it gates nothing.

On a team server a session id is `<owner>:<id>` (server/session.py); a client whose MCP calls name no session of
its own (Claude Code over HTTP) files its runs under the connection's, which its hooks cannot know: there the
caller's newest live run counts (`newest_of`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from ..records import Record
from ..state.owners import Owner, client_of, owner_alive

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LIVE = ("pending", "running", "awaiting_agent", "awaiting_approval", "awaiting_decision")
# Nested abilities are at most this deep (a guard against a cycle in a damaged file, not a product limit).
MAX_NESTING = 16
# Whether a run's owner lives (Database.owner_alive), for the position's owner_alive.
Alive = Callable[[Owner], bool]
_RUN_COLUMNS = (
    "run_id, ability, session_id, status, enforcement, definition, question, owner_pid, owner_start, owner_replica, "
    "owner_host"
)
_STRICTNESS = ("loose", "normal", "strict")


class Position(
    Record,
    fields=(
        "run_id ability enforcement status inner_run step_id step_type description agent skill tools question "
        "owner_alive"
    ),
):
    """A live run and the step it is at (the innermost one, through child runs)."""

    __slots__ = ()

    run_id: str  # the top-level run: the one to cancel
    ability: str
    enforcement: str  # the strictest along the chain of runs: a child cannot loosen its parent
    status: str  # the innermost run's status
    inner_run: str  # the run the current step belongs to
    step_id: str | None  # None between steps
    step_type: str | None  # script, agent, skill, workflow; approval or decision while a person is asked
    description: str | None
    agent: str | None  # the agent an agent step names
    skill: str | None  # the skill a skill step names
    tools: tuple[str, ...]  # the client tools the step itself allows (its `tools:`)
    question: dict[str, Any] | None  # what a person is asked, while the run waits for one
    owner_alive: bool

    @property
    def waits_for_person(self) -> bool:
        return self.status in ("awaiting_approval", "awaiting_decision") or self.question is not None

    @property
    def waits_for_agent(self) -> bool:
        return self.status == "awaiting_agent"


def find(
    db: sqlite3.Connection, session_ids: list[str], client_pid: int | None = None, alive: Alive | None = None
) -> Position | None:
    """The session's live run, or (failing that) the live run of a server started by the same client. `alive`:
    whether a run's owner lives (the Database's `owner_alive`: on PostgreSQL a replica anywhere is alive while its
    lock is held, which no pid on this machine can tell); by default its process on this machine."""
    for session_id in dict.fromkeys(s for s in session_ids if s):
        row = db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_run IS NULL AND session_id=? "
            f"AND status IN ({','.join('?' * len(LIVE))}) ORDER BY started_at DESC, rowid DESC LIMIT 1",
            (session_id, *LIVE),
        ).fetchone()
        if row is not None:
            return locate(db, row, alive)
    client = client_of(client_pid) if client_pid else None
    if client is None:
        return None
    rows = db.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_run IS NULL AND status IN ({','.join('?' * len(LIVE))}) "
        "ORDER BY started_at DESC, rowid DESC",
        LIVE,
    ).fetchall()
    for row in rows:
        if row["owner_pid"] and owner_alive(row["owner_pid"], row["owner_start"]):
            if client_of(row["owner_pid"]) == client:
                return locate(db, row)
    return None


def newest_of(db: sqlite3.Connection, prefix: str, alive: Alive | None = None) -> Position | None:
    """The newest live top-level run of any session whose id starts with `prefix` (a team caller's `<owner>:`)."""
    row = db.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE parent_run IS NULL AND substr(session_id, 1, ?) = ? "
        f"AND status IN ({','.join('?' * len(LIVE))}) ORDER BY started_at DESC, rowid DESC LIMIT 1",
        (len(prefix), prefix, *LIVE),
    ).fetchone()
    return None if row is None else locate(db, row, alive)


def locate(db: sqlite3.Connection, top: sqlite3.Row, alive: Alive | None = None) -> Position:
    """The step a top-level run is at, following workflow steps into their live child runs."""
    run, enforcement = top, top["enforcement"]
    for _ in range(MAX_NESTING):
        # With `parallel: true` a script may run beside the step that waits: the waiting one is the agent's.
        step = db.execute(
            "SELECT step_id, type, child_run FROM steps WHERE run_id=? AND status IN ('running', 'awaiting') "
            "ORDER BY (status = 'awaiting') DESC, position LIMIT 1",
            (run["run_id"],),
        ).fetchone()
        child = _live_child(db, step)
        if child is None:
            break
        run = child
        enforcement = max(enforcement, child["enforcement"], key=_strictness)
    return _position(top, run, step, enforcement, alive or _alive_here)


def _live_child(db: sqlite3.Connection, step: sqlite3.Row | None) -> sqlite3.Row | None:
    if step is None or step["type"] != "workflow" or not step["child_run"]:
        return None
    return db.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id=? AND status IN ({','.join('?' * len(LIVE))})",
        (step["child_run"], *LIVE),
    ).fetchone()


def _alive_here(owner: Owner) -> bool:
    return bool(owner.pid) and owner_alive(owner.pid, owner.start)


def _position(top: sqlite3.Row, run: sqlite3.Row, step: sqlite3.Row | None, enforcement: str, alive: Alive) -> Position:
    question = json.loads(run["question"]) if run["question"] else None
    step_id = question.get("step_id") if question else (step["step_id"] if step else None)
    spec = _step_spec(run["definition"], step_id)
    step_type = step["type"] if step else None
    if question is not None:
        step_type = "decision" if question.get("kind") == "decision" else "approval"
    return Position(
        run_id=top["run_id"],
        ability=top["ability"],
        enforcement=enforcement,
        status=run["status"],
        inner_run=run["run_id"],
        step_id=step_id,
        step_type=step_type,
        description=spec.get("description"),
        agent=spec.get("agent"),
        skill=spec.get("skill"),
        tools=tuple(t for t in spec.get("tools") or () if isinstance(t, str)),
        question=question,
        owner_alive=alive(Owner(top["owner_pid"], top["owner_start"], top["owner_replica"], top["owner_host"])),
    )


def _step_spec(definition: str, step_id: str | None) -> dict[str, Any]:
    if step_id is None:
        return {}
    steps = json.loads(definition).get("steps") or []
    return next((s for s in steps if isinstance(s, dict) and s.get("id") == step_id), {})


def _strictness(level: str) -> int:
    return _STRICTNESS.index(level) if level in _STRICTNESS else len(_STRICTNESS)  # unknown: treat as strictest
