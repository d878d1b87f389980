"""Waiting on, cancelling and resuming runs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..abilities.models import Ability
from ..errors import NextCall, Refused
from ..state.store import RunRecord
from .live import LiveRun
from .machine import LIVE_RUN_STATES, RunEvent, RunState, StepEvent, StepState, apply_run
from .questions import Question

# Progress notifications come at most this often: a run of short steps changes far faster than anyone reads.
PROGRESS_SECONDS = 0.1
# How long cancel waits for a run's processes to be killed before it answers.
CANCEL_WAIT_SECONDS = 10.0


class RunControl:
    """Mixed into Engine: needs its store, live runs, owner, _launch, _store_step and _refuse_second_strict_run."""

    async def wait(
        self,
        run_id: str,
        seconds: float,
        on_change: Callable[[LiveRun], Awaitable[None]] | None = None,
        *,
        first_change: bool = False,
    ) -> None:
        """Wait until the run ends or waits for someone (or, with first_change, changes at all), at most `seconds`;
        a run another replica drives is read from the state (engine/replicas.py)."""
        live = self.live.get(run_id)
        if live is None and seconds > 0 and self._owned_elsewhere(run_id) is not None:
            await self._wait_in_store(run_id, seconds, first_change=first_change)
        if live is None or seconds <= 0:
            return
        settled = lambda: live.done.is_set() or live.waits_for_someone()  # noqa: E731
        with anyio.move_on_after(seconds):
            change = live.changed
            while not live.done.is_set() and (first_change or not live.waits_for_someone()):
                await change.wait()
                change = live.changed  # set by any change from here on
                if on_change is not None:
                    await on_change(live)
                if first_change:
                    return
                if on_change is not None:  # what changes in the next moment is told at once, after it: one
                    with anyio.move_on_after(PROGRESS_SECONDS):  # notification, not one per short step
                        while not settled():
                            await live.changed.wait()
            if on_change is not None and change.is_set():  # the last change (the run's end) is told too
                await on_change(live)

    async def cancel(self, run_id: str) -> None:
        """Stop a run: its processes are killed before this returns."""
        record = self._require(run_id)
        live = self.live.get(run_id)
        if live is not None:
            live.stop("cancel")
            with anyio.move_on_after(CANCEL_WAIT_SECONDS):
                await live.done.wait()
            return
        if record.status == RunState.INTERRUPTED:
            self._cancel_stopped(record)
            return
        if self._owned_elsewhere(run_id) is not None:  # another replica drives it: asked through the state
            await self._cancel_elsewhere(record, CANCEL_WAIT_SECONDS)
            return
        self._refuse_if_owned_elsewhere(record, "cancel")
        raise Refused(f"run {run_id!r} already ended", record.status, [NextCall("ability_status", {"run_id": run_id})])

    def _cancel_stopped(self, record: RunRecord) -> None:
        """Cancel an interrupted run and the interrupted child runs its workflow steps left behind."""
        self.store.update_run(
            record.run_id,
            RunEvent.CANCEL,
            "cancelled while interrupted",
            status=apply_run(record.status, RunEvent.CANCEL),
            finished_at=time.time(),
        )
        for child in self.store.children(record.run_id):
            if child.status == RunState.INTERRUPTED:
                self._cancel_stopped(child)

    def resume(self, run_id: str, session_id: str) -> None:
        """Continue an interrupted or failed run from the step that did not finish, in this session."""
        record = self._require(run_id)
        if run_id in self.live:
            raise Refused(
                f"run {run_id!r} is live in this server",
                record.status,
                [NextCall("ability_status", {"run_id": run_id, "wait_seconds": 30})],
            )
        self._refuse_if_owned_elsewhere(record, "resume")
        if record.parent_run:
            raise Refused(
                f"run {run_id!r} is a child of run {record.parent_run!r}; resuming the parent resumes it",
                record.status,
                [NextCall("ability_resume", {"run_id": record.parent_run})],
            )
        if record.status not in (RunState.INTERRUPTED, RunState.FAILED):
            raise Refused(
                f"only interrupted or failed runs resume; {run_id!r} is {record.status}",
                record.status,
                [NextCall("ability_run", {"name": record.ability})],
            )
        apply_run(record.status, RunEvent.RESUME)  # refuses before anything is written
        self._refuse_second_strict_run(session_id)
        self._launch(self._revive(record, session_id), resumed=True)

    def _revive(
        self, record: RunRecord, session_id: str, parent: LiveRun | None = None, note: str | None = None
    ) -> LiveRun:
        """Adopt a stopped run into this process and session: finished steps stay, the rest go back to pending. A
        run another replica takes over (engine/replicas.py) keeps the question it waits on, and any answer to it."""
        carried = record.run_id in self._carry
        self._carry.discard(record.run_id)
        ability = Ability.model_validate(record.definition)
        outputs: dict[str, dict[str, Any]] = {}
        for step in record.steps:
            if step.status == StepState.COMPLETED:
                outputs[step.step_id] = {
                    "status": StepState.COMPLETED,
                    "output": step.output,
                    "exit_code": step.exit_code,
                }
            elif step.status != StepState.PENDING:
                self._store_step(record.run_id, step, StepEvent.RESET, error=None)
        question = {} if carried else dict(question=None, question_id=None, answer=None)
        self.store.update_run(
            record.run_id,
            "adopted",
            note or f"resumed by session {session_id}",
            session_id=session_id,
            **self.store.owner_fields(self.owner),
            error=None,
            finished_at=None,
            **question,
        )
        live = LiveRun(
            record.run_id,
            record.ability,
            ability,
            record.inputs,
            outputs,
            session_id=session_id,
            started_by=record.started_by,  # resuming is not starting: the run stays its first caller's
            status=record.status,
            resumed=True,
            carried=Question.from_json(record.question) if carried and record.question else None,
        )
        return self._register(live, parent)

    def _refuse_if_owned_elsewhere(self, record: RunRecord, verb: str) -> None:
        owner = self._owner if self.store.replicated else self.owner  # a replica's lock only once it drives runs
        mine = owner is not None and (record.owner_pid, record.owner_replica) == (owner.pid, owner.replica)
        elsewhere = not mine and self.store.owner_alive(record.owner)
        if record.status in LIVE_RUN_STATES and elsewhere:
            raise Refused(
                f"run {record.run_id!r} is live in another server process (pid {record.owner_pid}); {verb} it there",
                record.status,
                [NextCall("ability_status", {"run_id": record.run_id})],
            )

    def _require(self, run_id: str) -> RunRecord:
        self.recover()
        record = self.store.get_run(run_id)
        if record is None:
            raise Refused(f"there is no run {run_id!r}", "unknown", [NextCall("ability_history", {"limit": 20})])
        return record
