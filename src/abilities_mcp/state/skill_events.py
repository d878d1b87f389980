"""What happened to skills, as structured events with counters: discovered, selected, failed to load, truncated.

The orchestrator's seed asks for these so a person can see why a step got the skills it got (or none). Events are
kept in the state file with the session and run they belong to; the table keeps the newest MAX_EVENTS rows.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .database import Database

DISCOVERED = "SKILLS_DISCOVERED"
SELECTED = "SKILLS_SELECTED"
LOAD_FAILED = "SKILLS_LOAD_FAILED"
TRUNCATED = "SKILLS_TRUNCATED"
KINDS = (DISCOVERED, SELECTED, LOAD_FAILED, TRUNCATED)
# The table's bound: the oldest rows go first.
MAX_EVENTS = 10_000


def record(db: Database, kind: str, detail: dict[str, Any], session_id: str | None, run_id: str | None = None) -> None:
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO skill_events (kind, session_id, run_id, detail, at) VALUES (?,?,?,?,?)",
            (kind, session_id, run_id, json.dumps(detail, ensure_ascii=False, default=str), time.time()),
        )
        conn.execute(
            "DELETE FROM skill_events WHERE id <= (SELECT id FROM skill_events ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (MAX_EVENTS,),
        )


def record_discovery(
    db: Database, session_id: str, scopes: dict[str, int], names: list[str], failures: list[dict[str, str]]
) -> None:
    """What a session found: the skills by scope (SKILLS_DISCOVERED) and each SKILL.md that did not load."""
    record(db, DISCOVERED, {"count": len(names), "locations": scopes, "names": names}, session_id)
    for failure in failures:
        record(db, LOAD_FAILED, failure, session_id)


def record_selection(
    db: Database, session_id: str, selection: dict[str, Any], truncated: list[str], budget: int
) -> None:
    """What a plan's step was given: the selection (SKILLS_SELECTED, its `errors` each a SKILLS_LOAD_FAILED too) and
    each skill whose body was cut to the budget (SKILLS_TRUNCATED). The shape the skill_plan tool records."""
    record(db, SELECTED, selection, session_id)
    for error in selection.get("errors") or []:
        record(db, LOAD_FAILED, error, session_id)
    for name in truncated:
        record(db, TRUNCATED, {"name": name, "max_chars": budget}, session_id)


def events(
    db: Database,
    kind: str | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
    since: float | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The newest events that fit the filters, oldest first."""
    where, args = _filters(kind, session_id, run_id, since)
    rows = db.db.execute(
        f"SELECT kind, session_id, run_id, detail, at FROM skill_events{where} ORDER BY id DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [
        {"kind": r["kind"], "session_id": r["session_id"], "run_id": r["run_id"], "at": r["at"], **_detail(r)}
        for r in reversed(rows)
    ]


def counters(db: Database, session_id: str | None = None, since: float | None = None) -> dict[str, int]:
    """skills_<kind>_total: how many events of each kind; for selections, how many skills were selected."""
    where, args = _filters(None, session_id, None, since)
    totals = {f"skills_{k.removeprefix('SKILLS_').lower()}_total": 0 for k in KINDS}
    for row in db.db.execute(f"SELECT kind, detail FROM skill_events{where}", args):
        key = f"skills_{row['kind'].removeprefix('SKILLS_').lower()}_total"
        if key in totals:
            totals[key] += len(_detail(row).get("skills") or []) if row["kind"] == SELECTED else 1
    return totals


def _filters(kind, session_id, run_id, since) -> tuple[str, tuple[Any, ...]]:
    clauses = [(c, v) for c, v in (("kind=?", kind), ("session_id=?", session_id), ("run_id=?", run_id)) if v]
    if since is not None:
        clauses.append(("at>=?", since))
    where = " WHERE " + " AND ".join(c for c, _ in clauses) if clauses else ""
    return where, tuple(v for _, v in clauses)


def _detail(row: Any) -> dict[str, Any]:
    try:
        found = json.loads(row["detail"])
    except (TypeError, ValueError):
        return {"detail": row["detail"]}
    return found if isinstance(found, dict) else {"detail": found}
