"""Runs, their steps and events, in the state database (database.py: the SQLite file, or PostgreSQL).

Every write commits before the method returns: a crash loses nothing that was reported.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from .acting import ACTING
from .database import Database
from .owners import Owner, owner_alive, process_start

__all__ = ["Store", "RunRecord", "StepRecord", "owner_alive", "process_start"]
log = logging.getLogger(__name__)
# History kept by default (DESIGN §4): the newest runs and the last days.
DEFAULT_HISTORY_RUNS = 500
DEFAULT_HISTORY_DAYS = 30.0
# The answer trail (who answered a run's questions, when, through what) outlives history's limits: a run that
# carries an answer is kept this many days after its last one, whatever history.runs / history.days say, because
# the project file that sets those is one an agent can write. Only the environment may raise it, never lower it:
# whoever starts a command sets its environment, an agent's shell too.
ANSWER_TRAIL_DAYS = 30.0
ANSWER_TRAIL_ENV = "ABILITIES_ANSWER_TRAIL_DAYS"

RUN_COLUMNS = (
    "run_id, ability, session_id, status, enforcement, definition, source_path, inputs, parent_run, error, "
    "owner_pid, owner_start, started_at, finished_at, updated_at, started_by, owner_replica, owner_host"
).split(", ")
LIVE = ("pending", "running", "awaiting_agent", "awaiting_approval", "awaiting_decision")


@dataclass
class StepRecord:
    """One step of a run as stored."""

    step_id: str
    position: int
    type: str
    status: str = "pending"
    attempts: int = 0
    exit_code: int | None = None
    duration_ms: int | None = None
    output: str | None = None
    stderr: str | None = None
    output_bytes: int | None = None
    stderr_bytes: int | None = None
    instructions: str | None = None
    prompt: str | None = None
    error: str | None = None
    pgid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    child_run: str | None = None  # a workflow step's child run


@dataclass
class RunRecord:
    """One run as stored, with its steps in execution order."""

    run_id: str
    ability: str
    session_id: str
    status: str
    enforcement: str
    definition: dict[str, Any]
    source_path: str | None
    inputs: dict[str, Any]
    parent_run: str | None
    error: str | None
    owner_pid: int | None
    owner_start: int | None
    started_at: float
    finished_at: float | None
    updated_at: float
    steps: list[StepRecord] = field(default_factory=list)
    # The question a person must answer while the run waits (questions.Question as JSON), and the answer once given.
    question: dict[str, Any] | None = None
    question_id: str | None = None
    answer: dict[str, Any] | None = None
    # Every answer given to the run's questions: {step_id, detail ("approved by terminal /dev/pts/3 ..."), at}.
    answers: list[dict[str, Any]] = field(default_factory=list)
    # Why the definition it runs is not the file as written (nobody trusted it, or an edit waits for trust): kept
    # with its `created` event, so the run says it for as long as it is kept.
    trust_note: str | None = None
    # Who started it on a team server (an identity's key, state/identities.py); None for a local run.
    started_by: str | None = None
    # On PostgreSQL, the replica driving it and where its pid means something (owners.py, replicas.py).
    owner_replica: int | None = None
    owner_host: str | None = None

    @property
    def owner(self) -> Owner:
        return Owner(self.owner_pid, self.owner_start, self.owner_replica, self.owner_host)

    def step(self, step_id: str) -> StepRecord:
        return next(s for s in self.steps if s.step_id == step_id)


class Store(Database):
    """Runs, step attempts and events in the state database."""

    def create_run(self, run: RunRecord) -> None:
        """Write a new run and its pending steps."""
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({','.join('?' * len(RUN_COLUMNS))})",
                (
                    run.run_id,
                    run.ability,
                    run.session_id,
                    run.status,
                    run.enforcement,
                    json.dumps(run.definition),
                    run.source_path,
                    json.dumps(run.inputs),
                    run.parent_run,
                    run.error,
                    run.owner_pid,
                    run.owner_start,
                    run.started_at,
                    run.finished_at,
                    run.updated_at,
                    run.started_by,
                    run.owner_replica,
                    run.owner_host,
                ),
            )
            db.executemany(
                "INSERT INTO steps (run_id, step_id, position, type, status) VALUES (?,?,?,?,?)",
                [(run.run_id, s.step_id, s.position, s.type, s.status) for s in run.steps],
            )
            self._event(run.run_id, None, "created", run.trust_note)

    def update_run(self, run_id: str, event: str, detail: str | None = None, **fields: Any) -> None:
        """Change a run's fields and log the event, atomically."""
        fields["updated_at"] = time.time()
        with self.transaction() as db:
            db.execute(
                f"UPDATE runs SET {', '.join(f'{k}=?' for k in fields)} WHERE run_id=?", (*fields.values(), run_id)
            )
            self._event(run_id, None, event, detail)

    def update_step(
        self,
        run_id: str,
        step_id: str,
        event: str,
        detail: str | None = None,
        *,
        first: tuple[str, float] | None = None,
        **fields: Any,
    ) -> None:
        """Change a step's fields and log the event, atomically; `first`: an event that came before it and when (a
        short step's start, written with its end in one commit)."""
        with self.transaction() as db:
            db.execute(
                f"UPDATE steps SET {', '.join(f'{k}=?' for k in fields)} WHERE run_id=? AND step_id=?",
                (*fields.values(), run_id, step_id),
            )
            if first is not None:
                self._event(run_id, step_id, first[0], None, at=first[1])
            self._event(run_id, step_id, event, detail)

    def answer(self, run_id: str, question_id: str, answer: dict[str, Any], step_id: str | None = None) -> bool:
        """Record the first answer to a pending question; False when it was answered already or is gone."""
        with self.transaction() as db:
            cur = db.execute(
                "UPDATE runs SET answer=?, updated_at=? WHERE run_id=? AND question_id=? AND answer IS NULL",
                (json.dumps(answer), time.time(), run_id, question_id),
            )
            if cur.rowcount:
                origin = f" ({answer['origin']})" if answer.get("origin") else ""
                self._event(run_id, step_id, "answered", f"{answer['value']} by {answer['by']}{origin}")
            return cur.rowcount == 1

    def answer_to(self, run_id: str, question_id: str) -> dict[str, Any] | None:
        """The answer given to a question, if any (another process may have written it); {} for one that is not
        JSON, which the engine ignores like any other malformed answer."""
        row = self.db.execute(
            "SELECT answer FROM runs WHERE run_id=? AND question_id=?", (run_id, question_id)
        ).fetchone()
        if not row or not row["answer"]:
            return None
        try:
            return json.loads(row["answer"])
        except (TypeError, ValueError, RecursionError):
            return {}

    def discard_answer(self, run_id: str, question_id: str, step_id: str | None, why: str) -> None:
        """Clear an answer the engine cannot take (not one of this program's), so a person can still answer; only
        if it is still the one read, never a real answer written since."""
        with self.transaction() as db:
            row = db.execute("SELECT answer FROM runs WHERE run_id=? AND question_id=?", (run_id, question_id))
            found = row.fetchone()
            if found is None or not found["answer"]:
                return
            db.execute(
                "UPDATE runs SET answer=NULL WHERE run_id=? AND question_id=? AND answer=?",
                (run_id, question_id, found["answer"]),
            )
            self._event(run_id, step_id, "ignored", why)

    def children(self, run_id: str) -> list[RunRecord]:
        rows = self.db.execute("SELECT * FROM runs WHERE parent_run=? ORDER BY started_at", (run_id,)).fetchall()
        return [self._with_steps(r) for r in rows]

    def _event(self, run_id: str, step_id: str | None, event: str, detail: str | None, at: float | None = None) -> None:
        self.db.execute(
            "INSERT INTO events (run_id, step_id, event, detail, at, actor) VALUES (?,?,?,?,?,?)",
            (run_id, step_id, event, detail, time.time() if at is None else at, ACTING.get()),
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        """A run with its steps, or None; read in one snapshot so another process's commit cannot split it."""
        with self._snapshot():
            row = self.db.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
            return self._with_steps(row) if row else None

    def run_state(self, run_id: str) -> tuple[str, float, bool] | None:
        """A run's status, when it last changed and whether its question has an answer: one light read, for
        waiting on a run another process drives."""
        row = self.db.execute("SELECT status, updated_at, answer FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return None if row is None else (row["status"], row["updated_at"], row["answer"] is not None)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT step_id, event, detail, at, actor FROM events WHERE run_id=? ORDER BY id", (run_id,)
        )
        return [dict(r) for r in rows]

    def runs(self, *, limit: int = 20, session_id: str | None = None, live_only: bool = False) -> list[RunRecord]:
        """Newest runs first, optionally one session's or only live ones."""
        sql, args = "SELECT * FROM runs WHERE parent_run IS NULL", []
        if session_id is not None:
            sql, args = sql + " AND session_id=?", [session_id]
        if live_only:
            sql += f" AND status IN ({','.join('?' * len(LIVE))})"
            args += LIVE
        rows = self.db.execute(sql + " ORDER BY started_at DESC, rowid DESC LIMIT ?", (*args, limit)).fetchall()
        return [self._with_steps(r) for r in rows]

    def orphaned_runs(self) -> list[RunRecord]:
        """Live runs whose owner is gone (a server that died; on PostgreSQL, a replica whose lock was released)."""
        rows = self.db.execute(
            "SELECT run_id, owner_pid, owner_start, owner_replica, owner_host FROM runs "
            f"WHERE status IN ({','.join('?' * len(LIVE))})",
            LIVE,
        ).fetchall()
        owners = [Owner(r["owner_pid"], r["owner_start"], r["owner_replica"], r["owner_host"]) for r in rows]
        dead = [r["run_id"] for r, alive in zip(rows, self.owners_alive(owners), strict=True) if not alive]
        found = [self.get_run(run_id) for run_id in dead]
        return [run for run in found if run is not None and run.status in LIVE]

    def claim_orphan(self, run: RunRecord, status: str, error: str, owner: Owner | None = None) -> bool:
        """Mark a dead owner's run, only if nobody changed it since it was read (two recoverers, one winner);
        `owner`: the replica taking it over, recorded as its owner in the same write."""
        taken = {} if owner is None else self.owner_fields(owner)
        sets = "".join(f", {k}=?" for k in taken)
        with self.transaction() as db:
            cur = db.execute(
                f"UPDATE runs SET status=?, error=?, updated_at=?{sets} WHERE run_id=? AND status=? "
                "AND owner_pid IS ? AND owner_start IS ? AND owner_replica IS ?",
                (
                    status,
                    error,
                    time.time(),
                    *taken.values(),
                    run.run_id,
                    run.status,
                    run.owner_pid,
                    run.owner_start,
                    run.owner_replica,
                ),
            )
            if cur.rowcount:
                self._event(run.run_id, None, "interrupt", error)
            return cur.rowcount == 1

    @staticmethod
    def owner_fields(owner: Owner) -> dict[str, Any]:
        """An owner as the run's columns."""
        return dict(owner_pid=owner.pid, owner_start=owner.start, owner_replica=owner.replica, owner_host=owner.host)

    def prune(self, keep_runs: int = DEFAULT_HISTORY_RUNS, keep_days: float = DEFAULT_HISTORY_DAYS) -> int:
        """Forget finished runs beyond the newest `keep_runs` or older than `keep_days`; returns how many. A run
        answered within the answer trail's days (answer_trail_days) is kept whatever the two say.

        Only top-level runs are ranked and aged (a child whose parent is gone counts as one); a workflow step's
        child runs go with their parent and stay with it, and an answer in a child keeps the whole run.
        """
        now = time.time()
        cutoff, answered_since = now - keep_days * 86400, now - answer_trail_days() * 86400
        top = "(parent_run IS NULL OR parent_run NOT IN (SELECT run_id FROM runs))"
        with self.transaction() as db:
            cur = db.execute(
                f"""DELETE FROM runs WHERE run_id IN (
                    WITH RECURSIVE family(top, run_id) AS (
                        SELECT run_id, run_id FROM runs WHERE {top}
                        UNION SELECT family.top, runs.run_id FROM runs JOIN family ON runs.parent_run = family.run_id),
                    answered(run_id) AS (
                        SELECT family.top FROM family JOIN events ON events.run_id = family.run_id
                        WHERE events.event = 'answered' AND events.at >= ?),
                    doomed(run_id) AS (
                        SELECT run_id FROM runs WHERE {top} AND status NOT IN ({",".join("?" * len(LIVE))})
                        AND run_id NOT IN (SELECT run_id FROM answered)
                        AND (started_at < ? OR run_id NOT IN (
                            SELECT run_id FROM runs WHERE {top} ORDER BY started_at DESC LIMIT ?))
                        UNION SELECT runs.run_id FROM runs JOIN doomed ON runs.parent_run = doomed.run_id)
                    SELECT run_id FROM doomed)""",
                (answered_since, *LIVE, cutoff, keep_runs),
            )
            return cur.rowcount

    def _with_steps(self, row: Any) -> RunRecord:
        data = dict(row)
        data["definition"] = json.loads(data["definition"])
        data["inputs"] = json.loads(data["inputs"])
        for key in ("question", "answer"):
            data[key] = json.loads(data[key]) if data[key] else None
        steps = self.db.execute("SELECT * FROM steps WHERE run_id=? ORDER BY position", (row["run_id"],)).fetchall()
        noted = self.db.execute(
            "SELECT step_id, detail, at, event FROM events WHERE run_id=? AND event IN ('answered', 'created') "
            "ORDER BY id",
            (row["run_id"],),
        ).fetchall()
        answers = [{k: a[k] for k in ("step_id", "detail", "at")} for a in noted if a["event"] == "answered"]
        created = next((a["detail"] for a in noted if a["event"] == "created"), None)
        return RunRecord(
            **data,
            steps=[StepRecord(**{k: v for k, v in dict(s).items() if k != "run_id"}) for s in steps],
            answers=answers,
            trust_note=created,
        )


def answer_trail_days() -> float:
    """How long a run's answers are kept at least: ANSWER_TRAIL_DAYS, or more when $ABILITIES_ANSWER_TRAIL_DAYS
    says so. A value that would lower it (or is no number) is ignored, with a warning in the log."""
    text = os.environ.get(ANSWER_TRAIL_ENV, "").strip()
    if not text:
        return ANSWER_TRAIL_DAYS
    try:
        wanted = float(text)
    except ValueError:
        wanted = math.nan
    if not wanted >= ANSWER_TRAIL_DAYS:  # also NaN
        log.warning(
            "$%s=%r is ignored: it can only raise how long answered runs are kept (at least %g days, a number); "
            "unset it or give a larger number",
            ANSWER_TRAIL_ENV,
            text,
            ANSWER_TRAIL_DAYS,
        )
        return ANSWER_TRAIL_DAYS
    return wanted
