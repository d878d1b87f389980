"""A run this process is executing, and the few facts about runs every part of the engine shares."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..abilities.models import Ability
from ..durations import parse_duration
from .machine import FINISHED_STEP_STATES, RunState
from .questions import Question

AWAITING_STATES = (RunState.AWAITING_AGENT, RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION)


@dataclass
class LiveRun:
    """A run this process is executing."""

    run_id: str
    name: str
    ability: Ability
    inputs: dict[str, Any]
    outputs: dict[str, dict[str, Any]]
    session_id: str = ""
    started_by: str | None = None  # the identity that started it (its root run's, for a child); None: a local run
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)
    reason: str | None = None  # why it is being stopped: "cancel" | "shutdown"
    halt_error: str | None = None  # set by a step whose failure stops the run
    message: str = ""
    status: str = RunState.PENDING
    # Why the agent's hand-back of the awaited step was refused (None: accepted), and the event that wakes the run.
    handback_problem: str | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    # The awaited step's round of hand-backs: the attempt handed out, the last one before on_failure applies, and
    # the instructions for an attempt after a refusal (a refused hand-back is handed out again with them).
    attempt: int = 0
    last_attempt: int = 0
    reissue: Callable[[int, str], str] | None = None
    # The question a person must answer now (one at a time), the event an answer sets, and the forms showing it.
    question: Question | None = None
    question_answered: anyio.Event = field(default_factory=anyio.Event)
    asking: anyio.Lock = field(default_factory=anyio.Lock)
    forms_open: set[str] = field(default_factory=set)
    # A run resumed after its server stopped: whoever resumed it (maybe a client of the agent's own, killing the
    # server on purpose) is no proof of a person, so its questions are answered at a terminal, not in a form.
    resumed: bool = False
    # Taken over from a replica that died (engine/replicas.py): when, and the question it waited on, asked again
    # under the same id so that an answer given anywhere, before the move or after, counts.
    adopted_at: float | None = None
    carried: Question | None = None
    # A workflow step's child runs are driven inside the parent's task; stopping the parent stops them.
    parent: LiveRun | None = None
    children: list[LiveRun] = field(default_factory=list)
    depth: int = 0
    # The server's environment, copied once per run (reading os.environ per step costs more than the spawn's setup).
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def forms_allowed(self) -> bool:
        """Whether a client's form may carry a person's answer for this run (not once it or a parent was resumed)."""
        return not self.resumed and (self.parent is None or self.parent.forms_allowed)

    def innermost(self) -> LiveRun:
        """The deepest run this one waits on through workflow steps (itself when none)."""
        run = self
        while (child := next((c for c in run.children if not c.done.is_set()), None)) is not None:
            run = child
        return run

    def waits_for_someone(self) -> bool:
        """Paused for the agent or a person (an answer given but not yet taken up does not count)."""
        child = next((c for c in self.children if not c.done.is_set()), None)
        if child is not None:  # a parent only mirrors its child's waiting: the child knows whether it still waits
            return self.status in AWAITING_STATES and child.waits_for_someone()
        answered = self.question is not None and self.question_answered.is_set()
        return self.status in AWAITING_STATES and not answered

    def notify(self, message: str) -> None:
        """Wake everyone waiting for this run to change."""
        self.message = message
        self.changed.set()
        self.changed = anyio.Event()

    def resolve(self, ref: tuple[str, ...]) -> Any:
        """The value of a {{...}} reference in this run."""
        if ref[0] == "input":
            return self.inputs.get(ref[1])
        return self.outputs.get(ref[1], {}).get(ref[2])

    def finished_steps(self) -> int:
        return sum(o.get("status") in FINISHED_STEP_STATES for o in self.outputs.values())

    def stop(self, reason: str) -> None:
        self.reason = self.reason or reason
        for child in self.children:
            child.stop(reason)
        self.scope.cancel()


def seconds(duration: str | float | None) -> float:
    return parse_duration(duration) if duration is not None else float("inf")
