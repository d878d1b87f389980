"""Server-sent events: the page hears when something it shows changed in the state file, and a running step's output
as it arrives. The server watches the file (its events table's newest id, the call approvals, the session records,
read every POLL_SECONDS); the browser only listens, it never polls.

`/events` sends `ready` once, then `change` with the runs that changed (`{"runs": {run_id: status}, "calls": bool,
"sessions": bool}`) whenever the file says so; app.js then fetches the page it shows and swaps in what differs. A
step's `/follow` stream sends `output` (its new text, inert) and one `end` (`{"status", "exit_code"}`).
"""

from __future__ import annotations

import codecs
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

import anyio

from ..state.database import Database
from ..state.spool import Follower, spool_path
from ..state.store import LIVE, Store
from .markup import inert

# How often the server reads the state file for changes (the page shows a change within about this long).
POLL_SECONDS = 0.5
# A comment line this often keeps an idle stream open through anything that times out quiet connections.
HEARTBEAT_SECONDS = 15.0
# How long the browser waits before it reconnects a dropped stream.
RETRY_MS = 2000
# How often a step's output stream looks for new bytes in its spool.
FOLLOW_SECONDS = 0.2


class Seen(NamedTuple):
    """What the state file held at one look, enough to tell that something the page shows changed."""

    event_id: int
    runs: int
    calls: tuple[Any, ...]
    sessions: tuple[Any, ...]


def look(db: Database) -> Seen:
    """The state file now: one cheap read of each table the pages show."""
    q = db.db.execute
    calls = q(
        "SELECT count(*), coalesce(max(requested_at), 0), coalesce(max(answered_at), 0), coalesce(max(used_at), 0), "
        "count(CASE WHEN status = 'pending' AND expires_at > ? THEN 1 END) FROM call_approvals",
        (time.time(),),
    ).fetchone()
    return Seen(
        q("SELECT coalesce(max(id), 0) FROM events").fetchone()[0],
        q("SELECT count(*) FROM runs").fetchone()[0],
        tuple(calls),
        tuple(q("SELECT count(*), coalesce(max(at), 0) FROM prereq_records").fetchone()),
    )


def changed_runs(db: Database, since: int) -> dict[str, str]:
    """The runs with an event after `since`, and their status now."""
    rows = db.db.execute(
        "SELECT DISTINCT runs.run_id, runs.status FROM events JOIN runs ON runs.run_id = events.run_id "
        "WHERE events.id > ?",
        (since,),
    )
    return {r[0]: r[1] for r in rows}


def message(event: str, data: object, event_id: int | None = None) -> str:
    """One server-sent event."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n"


async def changes(state: Path | str, stopping: threading.Event, poll: float = POLL_SECONDS) -> AsyncIterator[str]:
    """The stream `/events` sends until the browser leaves or the server stops (`state`: Project.state_location)."""
    db = Database(state)
    try:
        seen = look(db)
        yield f"retry: {RETRY_MS}\n" + message("ready", {"event_id": seen.event_id}, seen.event_id)
        quiet_since = time.monotonic()
        while not stopping.is_set():
            await anyio.sleep(poll)
            now = look(db)
            if now != seen:
                data = {"runs": changed_runs(db, seen.event_id), "calls": now.calls != seen.calls}
                data["sessions"] = now.sessions != seen.sessions
                yield message("change", data, now.event_id)
                seen, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                yield ": still here\n\n"
                quiet_since = time.monotonic()
    finally:
        db.close()


async def output(
    state: Path | str,
    state_dir: Path,
    run_id: str,
    step_id: str,
    stopping: threading.Event,
    poll: float = FOLLOW_SECONDS,
) -> AsyncIterator[str]:
    """A step's output as it arrives (what `abilities-mcp logs --follow` reads), until the step stops running."""
    store = Store(state)
    reader = Follower(spool_path(state_dir, run_id, step_id))
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while not stopping.is_set():
            text = decoder.decode(reader.read())
            if text:
                yield message("output", inert(text))
            ended = _ended(store, run_id, step_id)
            if ended is not None:
                rest = decoder.decode(reader.read(), final=True)
                if rest:
                    yield message("output", inert(rest))
                yield message("end", ended)
                return
            await anyio.sleep(poll)
    finally:
        reader.close()
        store.close()


def _ended(store: Store, run_id: str, step_id: str) -> dict[str, Any] | None:
    """How the step ended, or None while it runs or waits to run in a live run."""
    record = store.get_run(run_id)
    step = next((s for s in record.steps if s.step_id == step_id), None) if record is not None else None
    if record is None or step is None:
        return {"status": "gone", "exit_code": None}
    if step.status == "running" or (step.status == "pending" and record.status in LIVE):
        return None
    return {"status": step.status, "exit_code": step.exit_code}
