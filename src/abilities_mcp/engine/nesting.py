"""Workflow steps: another ability runs as a child of this run, driven inside the parent's task.

The parent step waits for the child; the child's status and summary become the step's result. While the child
waits for someone, the parent shows the same waiting state (so a caller waiting on the parent wakes up), and the
parent's view hands out the child's step. Stopping the parent stops the child; a resumed parent resumes its
interrupted child rather than starting the work over.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from ..abilities.catalog import MAX_NESTING
from ..abilities.inputs import resolve_inputs
from ..abilities.templates import render_value
from ..errors import AbilitiesError
from .live import AWAITING_STATES, LiveRun, seconds
from .machine import RunEvent, RunState, StepEvent, StepState

_AWAIT = {
    RunState.AWAITING_AGENT: RunEvent.AWAIT_AGENT,
    RunState.AWAITING_APPROVAL: RunEvent.AWAIT_APPROVAL,
    RunState.AWAITING_DECISION: RunEvent.AWAIT_DECISION,
}
# How much of the child's last output the parent step keeps as its own output (the rest is in the child run).
CHILD_OUTPUT_CHARS = 8_000


class ChildRuns:
    """Mixed into Engine: needs its store, catalog, live runs, _drive, _new_run, _revive, _step_event, _run_event."""

    async def _workflow(self, live: LiveRun, step, attempt: int) -> str | None:
        """One attempt of a workflow step; returns why it failed, or None when the child run completed."""
        event = StepEvent.START if attempt == 1 else StepEvent.RETRY
        started = dict(attempts=attempt, started_at=time.time(), error=None)
        try:
            child = self._child_for(live, step, attempt)
        except AbilitiesError as exc:
            return self._fail_unstarted(live, step.id, event, started, str(exc))
        self._step_event(live, step.id, event, child_run=child.run_id, **started)
        live.children.append(child)
        try:
            with anyio.move_on_after(seconds(step.timeout)) as deadline:  # the child is cancelled when it fires
                await self._drive(child, resumed=child.status != RunState.PENDING)
        finally:
            live.children.remove(child)
        record = self.store.get_run(child.run_id)
        problem = (
            None if record.status == RunState.COMPLETED else f"child run {child.run_id} {record.status}: {record.error}"
        )
        if deadline.cancelled_caught:
            problem = f"child run {child.run_id} did not finish within {step.timeout}; it was cancelled"
        output = child_summary(record)
        live.outputs[step.id]["output"] = output
        self._step_event(
            live,
            step.id,
            StepEvent.SUCCEED if problem is None else StepEvent.FAIL,
            output=output,
            error=problem,
            duration_ms=int((time.time() - started["started_at"]) * 1000),
            finished_at=time.time(),
        )
        return problem

    def _child_for(self, live: LiveRun, step, attempt: int) -> LiveRun:
        """The child run to drive: the one an interrupted parent left behind, or a new one."""
        if live.depth + 1 > MAX_NESTING:
            raise AbilitiesError(f"workflow steps nest at most {MAX_NESTING} deep; {step.workflow!r} would be deeper")
        previous = self.store.get_run(live.run_id).step(step.id).child_run
        if attempt == 1 and previous:
            record = self.store.get_run(previous)
            if record is not None and record.status in (RunState.INTERRUPTED, RunState.FAILED):
                return self._revive(record, live.session_id, parent=live)
        definition = self.catalog.get(step.workflow)
        if not self.catalog.is_valid(definition):
            raise AbilitiesError(
                f"ability {step.workflow!r} is not valid; run `abilities-mcp validate {step.workflow}`"
            )
        ability = definition.ability
        assert ability is not None
        inputs = {k: render_value(v, live.resolve) for k, v in step.inputs.items()}
        values = resolve_inputs(ability.inputs, inputs)
        return self._new_run(
            definition.name,
            ability,
            str(definition.path),
            values,
            live.session_id,
            parent=live,
            note=definition.trust_note,
        )

    def _mirror(self, child: LiveRun) -> None:
        """Show a child's waiting on its parent (and up the chain), so whoever waits on the parent wakes."""
        parent = child.parent
        if parent is None or parent.status not in (RunState.RUNNING, *AWAITING_STATES):
            return
        want = child.status if child.status in AWAITING_STATES else RunState.RUNNING
        if parent.status == want:
            return
        if parent.status != RunState.RUNNING:
            self._run_event(parent, RunEvent.PROCEED, f"child run {child.run_id}: {child.message}")
        if want != RunState.RUNNING:
            self._run_event(parent, _AWAIT[want], f"child run {child.run_id}: {child.message}")


def child_summary(record: Any) -> str:
    """A child run as its parent step's output: one status line, then the last step's output."""
    counts: dict[str, int] = {}
    for s in record.steps:
        counts[s.status] = counts.get(s.status, 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in counts.items())
    last = next((s for s in reversed(record.steps) if s.status == StepState.COMPLETED and s.output), None)
    lines = [f"run {record.run_id} of {record.ability} {record.status} ({tally})"]
    if last is not None:
        lines.append(last.output[-CHILD_OUTPUT_CHARS:])
    return "\n".join(lines)
