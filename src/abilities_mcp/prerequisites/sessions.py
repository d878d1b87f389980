"""Each session's recorded prerequisites (DESIGN §6), in the shared SQLite file.

Once per session, workflow, step and server (the same step run on two servers is two records), each with how it
is known: observed (seen run and succeed: the hook's after-event, the gateway's own call) or reported
(workflow_record); gates.counts says which count where. Results cut to 200 characters; the state expires a set
time after the session started (24 hours unless configured) and a session that comes back after that starts over.
The server and the hook record from different processes: every read-check-write happens in one IMMEDIATE
transaction, so two recorders queue and neither loses the other's record. Stdlib only (the hook's path).
"""

from __future__ import annotations

import time

from ..records import Record
from ..state import audit
from ..state.acting import ACTING
from ..state.database import Database
from .gates import NOBODY, OBSERVED, REPORTED, Check, Done, Observer, RecordPlan, name_of, plan_record
from .names import Name
from .workflows import WorkflowSet

DEFAULT_TTL_SECONDS = 24 * 3600.0
TTL_ENV = "ABILITIES_SESSION_TTL"
# Result summaries are kept this short (the skill-manager's session rule).
MAX_RESULT_CHARS = 200
# Sessions untouched this long after they expired are deleted (their state is gone anyway).
FORGET_AFTER_SECONDS = 7 * 86400.0


class Completion(Record, fields="workflow step tool result at server how", defaults=(None, OBSERVED)):
    """One prerequisite recorded in a session."""

    __slots__ = ()

    workflow: str
    step: int
    tool: str
    result: str | None
    at: float
    server: str | None  # = None; the server it ran on; None: a client's own tool (or a report naming none)
    how: str  # = OBSERVED; observed | reported


class SessionInfo(Record, fields="session_id started_at expires_at"):
    __slots__ = ()
    session_id: str
    started_at: float
    expires_at: float


class SessionState:
    """Recorded prerequisites per session and workflow."""

    def __init__(self, store: Database, ttl_seconds: float = DEFAULT_TTL_SECONDS):
        self.store = store
        self.ttl = ttl_seconds

    def session(self, session_id: str) -> SessionInfo:
        """The session's clock, started at first use; an expired session is cleared and starts again now."""
        row = self._row(session_id)
        if row is None or row[0] + self.ttl <= time.time():
            with self.store.transaction():
                row = self._row(session_id)
                if row is None or row[0] + self.ttl <= time.time():
                    self._start(session_id)
                    row = self._row(session_id)
        return SessionInfo(session_id, row[0], row[0] + self.ttl)

    def done(self, session_id: str) -> Done:
        """workflow -> step -> its Completions (one per server), for a live session (an expired one reads as
        empty)."""
        self.session(session_id)
        rows = self.store.db.execute(
            "SELECT workflow, step, tool, result, at, server, how FROM prereq_records WHERE session_id=? "
            "ORDER BY at, rowid",
            (session_id,),
        )
        out: dict[str, dict[int, list[Completion]]] = {}
        for r in rows:
            record = Completion(
                r["workflow"], r["step"], r["tool"], r["result"], r["at"], r["server"] or None, r["how"]
            )
            out.setdefault(r["workflow"], {}).setdefault(r["step"], []).append(record)
        return out

    def record(
        self,
        session_id: str,
        workflows: WorkflowSet,
        tool: str | Name,
        result: str | None = None,
        only: str | None = None,
        observer: Observer = NOBODY,
        how: str = OBSERVED,
    ) -> RecordPlan:
        """Record a tool that ran (`how` OBSERVED: it was seen to; REPORTED: the agent says so) in every workflow
        that lists it, on the server it ran on (in order, and not a report someone could have seen: gates.plan_record).
        An observed record replaces a report of the same step on the same server."""
        name = name_of(tool)
        summary = None if result is None else result[:MAX_RESULT_CHARS]
        with self.store.transaction() as db:
            # done() renews an expired session
            plan = plan_record(workflows, name, self.done(session_id), only, observer, how)
            rows = [
                (session_id, w.name, p.step, name.server or "", p.tool, how, summary, time.time(), ACTING.get())
                for w, p in plan.record
            ]
            db.executemany(_UPSERT if how == OBSERVED else _INSERT, rows)
            for verdict, steps in (("counted", plan.record), ("not counted", [(w, p) for w, p, _ in plan.refused])):
                for w, p in steps:
                    rule = f"{w.name} step {p.step}"
                    audit.append(
                        self.store,
                        "record",
                        session_id=session_id,
                        tool=name.raw,
                        verdict=verdict,
                        rule=rule,
                        reason=summary,
                        channel=how,
                    )
        return plan

    def reset(self, session_id: str, workflow: str | None = None) -> int:
        """Forget what this session recorded (for one workflow, or all); returns how many steps were forgotten."""
        with self.store.transaction() as db:
            sql, args = "DELETE FROM prereq_records WHERE session_id=?", [session_id]
            if workflow is not None:
                sql, args = sql + " AND workflow=?", [*args, workflow]
            return db.execute(sql, args).rowcount

    def _row(self, session_id: str) -> tuple[float] | None:
        row = self.store.db.execute("SELECT started_at FROM prereq_sessions WHERE session_id=?", (session_id,))
        found = row.fetchone()
        return None if found is None else (found[0],)

    def _start(self, session_id: str) -> None:
        db, now = self.store.db, time.time()
        db.execute("DELETE FROM prereq_records WHERE session_id=?", (session_id,))
        db.execute("INSERT OR REPLACE INTO prereq_sessions (session_id, started_at) VALUES (?, ?)", (session_id, now))
        forget = now - max(self.ttl, DEFAULT_TTL_SECONDS) - FORGET_AFTER_SECONDS
        db.execute("DELETE FROM prereq_sessions WHERE started_at < ?", (forget,))


_INSERT = (
    "INSERT OR IGNORE INTO prereq_records (session_id, workflow, step, server, tool, how, result, at, actor) "
    "VALUES (?,?,?,?,?,?,?,?,?)"
)
# A call seen to run replaces a report of the same step on the same server (kept, the report would hide it where
# only what was seen counts); a record seen already is kept with its first result.
_UPSERT = (
    _INSERT.replace("INSERT OR IGNORE", "INSERT")
    + " ON CONFLICT (session_id, workflow, step, server) DO UPDATE SET how=excluded.how, tool=excluded.tool, "
    f"result=excluded.result, at=excluded.at, actor=excluded.actor WHERE prereq_records.how = '{REPORTED}'"
)


def audited(store: Database, result: Check, session_id: str, channel: str, client: str | None = None) -> None:
    """One gate decision in the audit trail (state/audit.py), when a workflow triggered on the call: the tool, the
    verdict, the workflows that decided it and the reason given, as `channel` (hook, gateway, workflow_check) saw it."""
    if result.matched:
        rule = ", ".join(m.workflow.name for m in result.matched)
        audit.append(
            store,
            "gate",
            session_id=session_id,
            client=client,
            tool=result.tool,
            verdict=result.verdict,
            rule=rule,
            reason=result.message,
            channel=channel,
        )
