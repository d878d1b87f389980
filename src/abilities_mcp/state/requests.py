"""What a call that reached a replica other than its run's owner asks of that owner, through the state.

Behind a load balancer without stickiness (and a 2026-07-28 request carries no session to stick to) a hand-back or
a cancel may reach any replica. The one that got the call writes a request here; the owner, which reads the open
requests of the runs it drives every few hundred milliseconds (engine/replicas.py), takes it, acts on it as if the
call had come to it and writes the outcome; the first replica reads that outcome and answers its caller. Taking a
request and withdrawing it (the caller stopped waiting) are one compare-and-set on `taken_at`: a request is acted
on once or not at all.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from .database import Database

HANDBACK, CANCEL = "handback", "cancel"
# Taken requests are forgotten after this long (their outcome was read within seconds).
KEEP_SECONDS = 3600.0


@dataclass(frozen=True)
class Request:
    """One open request to a run's owner."""

    id: int
    run_id: str
    kind: str
    step_id: str | None
    body: dict[str, Any]
    at: float


def ask(db: Database, run_id: str, kind: str, step_id: str | None = None, body: dict[str, Any] | None = None) -> int:
    """Write a request for the run's owner; returns its id."""
    with db.transaction() as conn:
        conn.execute("DELETE FROM run_requests WHERE taken_at < ?", (time.time() - KEEP_SECONDS,))
        row = conn.execute(
            "INSERT INTO run_requests (run_id, kind, step_id, body, at) VALUES (?,?,?,?,?) RETURNING id",
            (run_id, kind, step_id, json.dumps(body or {}), time.time()),
        ).fetchone()
    return int(row[0])


def open_requests(db: Database, run_ids: list[str]) -> list[Request]:
    """The requests nobody took yet for these runs, oldest first."""
    if not run_ids:
        return []
    rows = db.db.execute(
        "SELECT id, run_id, kind, step_id, body, at FROM run_requests WHERE taken_at IS NULL "
        f"AND run_id IN ({','.join('?' * len(run_ids))}) ORDER BY id",
        run_ids,
    ).fetchall()
    return [
        Request(r["id"], r["run_id"], r["kind"], r["step_id"], json.loads(r["body"] or "{}"), r["at"]) for r in rows
    ]


def take(db: Database, request_id: int) -> bool:
    """The owner takes a request before acting on it: False when it was taken or withdrawn already."""
    cur = db.db.execute("UPDATE run_requests SET taken_at=? WHERE id=? AND taken_at IS NULL", (time.time(), request_id))
    return cur.rowcount == 1


def settle(db: Database, request_id: int, outcome: dict[str, Any]) -> None:
    """What became of a request the owner took, for the replica whose caller waits."""
    db.db.execute("UPDATE run_requests SET outcome=? WHERE id=?", (json.dumps(outcome), request_id))


def withdraw(db: Database, request_id: int) -> bool:
    """The caller stopped waiting: the request is not to be acted on (False: the owner took it already)."""
    cur = db.db.execute(
        "UPDATE run_requests SET taken_at=?, outcome=? WHERE id=? AND taken_at IS NULL",
        (time.time(), json.dumps({"withdrawn": True}), request_id),
    )
    return cur.rowcount == 1


def outcome(db: Database, request_id: int) -> dict[str, Any] | None:
    """What the owner made of a request, once it acted on it; None while it is open or being acted on."""
    row = db.db.execute("SELECT outcome FROM run_requests WHERE id=?", (request_id,)).fetchone()
    return None if row is None or row["outcome"] is None else json.loads(row["outcome"])
