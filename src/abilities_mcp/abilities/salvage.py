"""What still parses of an ability file its model refuses, so the file's other checks run in the same pass.

`validate` reports every problem of a file at once: where the model finds a key or a type wrong, the needs graph,
the references, the conditions and the inputs are still checked on the rest. Each refused value is left out (a
key of a mapping: its default applies; an input declared as anything but a mapping: a plain string input), and
a step the model cannot read gives way to a stand-in that keeps its id, needs and when, so no other step's
reference to it is reported as unknown and no step's index (in every field path) shifts. The result is only ever
checked, never run.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import ValidationError

from .models import STEP_ID, Ability, StepType

# Rounds of leaving out what the model refused: a refused required key becomes its step's stand-in in the next.
MAX_ROUNDS = 4
STEP_TYPES: tuple[StepType, ...] = ("script", "agent", "skill", "approval", "workflow")
# The stand-in's own fields: it answers to the step's id and keeps its place in the graph, nothing else.
_STAND_IN = {"type": "approval", "prompt": "(a step the model refused)"}
_PLACEHOLDER_ID = "x"
_PLACEHOLDER_DESCRIPTION = "(refused)"


def salvage(data: dict[str, Any], errors: list[Any]) -> Ability | None:
    """The ability with every refused value left out, for the checks; None when no steps are left to check."""
    data = copy.deepcopy(data)  # plain YAML containers (anchors are refused), never the caller's
    odd_ids: dict[int, str] = {}  # stand-ins whose id the model refused: the text they answer to in the checks
    for _ in range(MAX_ROUNDS):
        if not _leave_out(data, [tuple(e["loc"]) for e in errors], odd_ids):
            return None
        try:
            ability = Ability.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            continue
        for i, sid in odd_ids.items():
            ability.steps[i] = ability.steps[i].model_copy(update={"id": sid})
        return ability
    return None


def _leave_out(data: dict[str, Any], locs: list[tuple], odd_ids: dict[int, str]) -> bool:
    """Leave out what each error points at; every target is found before any is removed, so two errors in one
    list or mapping do not move each other's targets."""
    removed: list[tuple[Any, Any]] = []
    stand_ins: set[int] = set()
    plain_inputs: set[str] = set()
    for loc in locs:
        if not loc or (loc[0] == "steps" and (len(loc) == 1 or not isinstance(data.get("steps"), list))):
            return False  # no steps (missing, empty or not a list): nothing the checks could judge
        if loc[0] == "description":
            removed.append((data, "description"))
        elif loc[0] == "inputs" and len(loc) == 2 and isinstance(data.get("inputs"), dict):
            plain_inputs.add(loc[1])  # a declaration that is not a mapping still declares the input
        elif loc[0] == "steps" and isinstance(loc[1], int):
            target = _step_target(data["steps"][loc[1]], loc[2:])
            if target is None:
                stand_ins.add(loc[1])
            else:
                removed.append(target)
        elif (target := _target(data, loc)) is not None:
            removed.append(target)
    for holder, key in removed:
        holder.pop(key, None)
    for name in plain_inputs:
        data["inputs"][name] = {}
    if "description" not in data:
        data["description"] = _PLACEHOLDER_DESCRIPTION
    for i in stand_ins:
        data["steps"][i] = _stand_in(data["steps"][i], i, odd_ids)
    return True


def _target(node: Any, loc: tuple) -> tuple[dict, Any] | None:
    """(mapping, key) of the innermost mapping entry along an error's location that exists in the data."""
    found = None
    for part in loc:
        if isinstance(node, dict) and part in node:
            found, node = (node, part), node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break
    return found


def _step_target(step: Any, loc: tuple) -> tuple[dict, Any] | None:
    """What to leave out of a step; None when the step itself must give way to a stand-in."""
    if not isinstance(step, dict):
        return None
    if loc and loc[0] in STEP_TYPES and step.get("type") == loc[0]:
        loc = loc[1:]  # the model's tag for the step's type, not a key of the step
    target = _target(step, loc) if loc else None
    if target is None or (target[0] is step and target[1] in ("id", "type")):
        return None
    return target


def _stand_in(step: Any, i: int, odd_ids: dict[int, str]) -> dict[str, Any]:
    """A step that keeps the place of one the model cannot read: its id, and its needs and when if they read."""
    fields = step if isinstance(step, dict) else {}
    raw = fields.get("id")
    if isinstance(raw, str) and re.match(STEP_ID, raw):
        sid = raw
    else:
        sid = _PLACEHOLDER_ID
        odd_ids[i] = str(raw) if raw is not None else f"steps[{i}]"
    kept: dict[str, Any] = {"id": sid, **_STAND_IN}
    needs = fields.get("needs")
    if isinstance(needs, str) or (isinstance(needs, list) and all(isinstance(n, str) for n in needs)):
        kept["needs"] = needs
    if isinstance(fields.get("when"), str):
        kept["when"] = fields["when"]
    return kept
