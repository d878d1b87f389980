"""Run and step states as transition tables, with one function that applies an event or refuses it.

No I/O here: the engine asks `apply()` for the next state before it writes anything, so an illegal event changes
nothing.
"""

from __future__ import annotations

from enum import StrEnum

from ..errors import Refused


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    AWAITING_AGENT = "awaiting_agent"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_DECISION = "awaiting_decision"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


class RunEvent(StrEnum):
    START = "start"
    AWAIT_AGENT = "await_agent"
    AWAIT_APPROVAL = "await_approval"
    AWAIT_DECISION = "await_decision"
    PROCEED = "proceed"  # the awaited answer came back
    SUCCEED = "succeed"
    FAIL = "fail"
    CANCEL = "cancel"
    INTERRUPT = "interrupt"  # the server stopped while the run was live
    RESUME = "resume"


class StepState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    AWAITING = "awaiting"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class StepEvent(StrEnum):
    START = "start"
    AWAIT = "await"
    SUCCEED = "succeed"
    FAIL = "fail"
    RETRY = "retry"  # another attempt of a failed step
    REFUSE = "refuse"  # a hand-back that failed validation: the step stays awaiting, handed out again
    SKIP = "skip"
    CANCEL = "cancel"
    RESET = "reset"  # back to pending, for resume


_LIVE_EXITS = {
    RunEvent.FAIL: RunState.FAILED,
    RunEvent.CANCEL: RunState.CANCELLED,
    RunEvent.INTERRUPT: RunState.INTERRUPTED,
}
_AWAITING = {RunEvent.PROCEED: RunState.RUNNING, **_LIVE_EXITS}

RUN_TRANSITIONS: dict[RunState, dict[RunEvent, RunState]] = {
    RunState.PENDING: {RunEvent.START: RunState.RUNNING, **_LIVE_EXITS},
    RunState.RUNNING: {
        RunEvent.AWAIT_AGENT: RunState.AWAITING_AGENT,
        RunEvent.AWAIT_APPROVAL: RunState.AWAITING_APPROVAL,
        RunEvent.AWAIT_DECISION: RunState.AWAITING_DECISION,
        RunEvent.SUCCEED: RunState.COMPLETED,
        **_LIVE_EXITS,
    },
    RunState.AWAITING_AGENT: dict(_AWAITING),
    RunState.AWAITING_APPROVAL: dict(_AWAITING),
    RunState.AWAITING_DECISION: dict(_AWAITING),
    RunState.FAILED: {RunEvent.RESUME: RunState.RUNNING},
    RunState.INTERRUPTED: {RunEvent.RESUME: RunState.RUNNING, RunEvent.CANCEL: RunState.CANCELLED},
    RunState.COMPLETED: {},
    RunState.CANCELLED: {},
}

STEP_TRANSITIONS: dict[StepState, dict[StepEvent, StepState]] = {
    StepState.PENDING: {
        StepEvent.START: StepState.RUNNING,
        StepEvent.AWAIT: StepState.AWAITING,
        StepEvent.SKIP: StepState.SKIPPED,
        StepEvent.CANCEL: StepState.CANCELLED,
    },
    StepState.RUNNING: {
        StepEvent.SUCCEED: StepState.COMPLETED,
        StepEvent.FAIL: StepState.FAILED,
        StepEvent.AWAIT: StepState.AWAITING,
        StepEvent.CANCEL: StepState.CANCELLED,
        StepEvent.RESET: StepState.PENDING,
    },
    StepState.AWAITING: {
        StepEvent.START: StepState.RUNNING,
        StepEvent.SUCCEED: StepState.COMPLETED,
        StepEvent.FAIL: StepState.FAILED,
        StepEvent.REFUSE: StepState.AWAITING,
        StepEvent.CANCEL: StepState.CANCELLED,
        StepEvent.RESET: StepState.PENDING,
    },
    StepState.FAILED: {StepEvent.RETRY: StepState.RUNNING, StepEvent.RESET: StepState.PENDING},
    StepState.CANCELLED: {StepEvent.RESET: StepState.PENDING},
    StepState.COMPLETED: {},
    StepState.SKIPPED: {StepEvent.RESET: StepState.PENDING},
}

LIVE_RUN_STATES = frozenset(
    {
        RunState.PENDING,
        RunState.RUNNING,
        RunState.AWAITING_AGENT,
        RunState.AWAITING_APPROVAL,
        RunState.AWAITING_DECISION,
    }
)
FINISHED_STEP_STATES = frozenset({StepState.COMPLETED, StepState.FAILED, StepState.SKIPPED, StepState.CANCELLED})


class IllegalTransition(Refused):
    """An event the current state does not accept; nothing changed."""


def apply_run(state: RunState | str, event: RunEvent) -> RunState:
    """The run's next state after an event, or IllegalTransition."""
    return _apply("run", RUN_TRANSITIONS, RunState(state), event)


def apply_step(state: StepState | str, event: StepEvent) -> StepState:
    """The step's next state after an event, or IllegalTransition."""
    return _apply("step", STEP_TRANSITIONS, StepState(state), event)


def _apply(kind: str, table: dict, state, event):
    try:
        return table[state][event]
    except KeyError:
        legal = ", ".join(e.value for e in table[state]) or "none (final state)"
        raise IllegalTransition(
            f"a {kind} in state {state.value!r} cannot take the event {event.value!r}; legal events: {legal}",
            state.value,
        ) from None
