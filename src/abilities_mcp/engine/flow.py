"""Which steps run: the GitHub Actions rule for needs and `when`."""

from __future__ import annotations

from typing import Any

from ..abilities.checks import ancestors
from ..abilities.expressions import parse_condition
from ..abilities.models import Ability
from .machine import StepState


def skip_reason(ability: Ability, step, inputs: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> str | None:
    """Why a step must be skipped, or None to run it.

    A step runs when every need completed and its `when` holds. `always()` in `when` lifts the needs rule;
    `failure()` lifts it too and is true when a step it depends on (directly or not) failed.
    """
    cond = parse_condition(step.when) if step.when else None
    statuses = _Statuses(outputs)
    # Only failure() asks about every step this one depends on: walk them only then (a long chain is quadratic).
    uses_failure = cond is not None and "failure" in cond.functions
    failed = uses_failure and any(statuses.get(a) == StepState.FAILED for a in ancestors(ability, step.id))
    if cond is None or not cond.functions & {"always", "failure"}:
        for need in step.needs:
            if statuses.get(need) != StepState.COMPLETED:
                return f"needs {need!r}, which {statuses.get(need) or 'did not run'}"
    if cond is not None and not cond.evaluate(inputs, outputs, failed):
        return f"when: {step.when} was false"
    return None


class _Statuses:
    """Each step's status, read from the outputs as asked (a step asks only of its needs and ancestors)."""

    def __init__(self, outputs: dict[str, dict[str, Any]]):
        self.outputs = outputs

    def get(self, step_id: str) -> Any:
        return self.outputs.get(step_id, {}).get("status")
