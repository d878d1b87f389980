"""The state machine is a table: every legal event moves, every other event is refused and changes nothing."""

import pytest

from abilities_mcp.engine.machine import (
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    IllegalTransition,
    RunEvent,
    RunState,
    StepEvent,
    StepState,
    apply_run,
    apply_step,
)


@pytest.mark.parametrize(
    ("state", "event", "expected"),
    [
        (RunState.PENDING, RunEvent.START, RunState.RUNNING),
        (RunState.RUNNING, RunEvent.SUCCEED, RunState.COMPLETED),
        (RunState.RUNNING, RunEvent.AWAIT_AGENT, RunState.AWAITING_AGENT),
        (RunState.AWAITING_APPROVAL, RunEvent.PROCEED, RunState.RUNNING),
        (RunState.RUNNING, RunEvent.INTERRUPT, RunState.INTERRUPTED),
        (RunState.INTERRUPTED, RunEvent.RESUME, RunState.RUNNING),
        (RunState.FAILED, RunEvent.RESUME, RunState.RUNNING),
        (RunState.INTERRUPTED, RunEvent.CANCEL, RunState.CANCELLED),
    ],
    ids=lambda v: v.value if hasattr(v, "value") else str(v),
)
def test_legal_run_events_move_the_run(state, event, expected) -> None:
    assert apply_run(state, event) == expected


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (RunState.COMPLETED, RunEvent.START),
        (RunState.COMPLETED, RunEvent.CANCEL),
        (RunState.CANCELLED, RunEvent.RESUME),
        (RunState.RUNNING, RunEvent.RESUME),
        (RunState.PENDING, RunEvent.PROCEED),
        (RunState.FAILED, RunEvent.SUCCEED),
    ],
    ids=lambda v: v.value,
)
def test_illegal_run_events_are_refused_naming_the_event_the_state_and_the_legal_events(state, event) -> None:
    before = {s: dict(t) for s, t in RUN_TRANSITIONS.items()}
    with pytest.raises(IllegalTransition) as info:
        apply_run(state, event)
    text = str(info.value)
    assert repr(event.value) in text and repr(state.value) in text and "legal events:" in text
    legal = ", ".join(e.value for e in RUN_TRANSITIONS[state]) or "none (final state)"
    assert legal in text
    assert RUN_TRANSITIONS == before


def test_every_state_has_a_row_and_final_states_accept_nothing() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
    assert set(STEP_TRANSITIONS) == set(StepState)
    assert RUN_TRANSITIONS[RunState.COMPLETED] == {} and RUN_TRANSITIONS[RunState.CANCELLED] == {}
    assert STEP_TRANSITIONS[StepState.COMPLETED] == {}


@pytest.mark.parametrize(
    ("state", "event", "expected"),
    [
        (StepState.PENDING, StepEvent.START, StepState.RUNNING),
        (StepState.RUNNING, StepEvent.FAIL, StepState.FAILED),
        (StepState.FAILED, StepEvent.RETRY, StepState.RUNNING),
        (StepState.PENDING, StepEvent.SKIP, StepState.SKIPPED),
        (StepState.CANCELLED, StepEvent.RESET, StepState.PENDING),
        (StepState.AWAITING, StepEvent.REFUSE, StepState.AWAITING),  # a refused hand-back: handed out again
    ],
    ids=lambda v: v.value,
)
def test_legal_step_events_move_the_step(state, event, expected) -> None:
    assert apply_step(state, event) == expected


def test_a_completed_step_cannot_be_started_again() -> None:
    with pytest.raises(IllegalTransition, match="'completed' cannot take the event 'start'"):
        apply_step(StepState.COMPLETED, StepEvent.START)


@pytest.mark.parametrize("state", [StepState.PENDING, StepState.RUNNING, StepState.FAILED, StepState.COMPLETED])
def test_only_an_awaiting_step_can_have_a_hand_back_refused(state) -> None:
    with pytest.raises(IllegalTransition, match=f"'{state.value}' cannot take the event 'refuse'"):
        apply_step(state, StepEvent.REFUSE)
