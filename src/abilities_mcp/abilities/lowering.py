"""What an edit of an ability loosens of the gates a person trusted, in words (docs/abilities.md#trust).

Safe by default: every field either may change freely (words for people and the model: descriptions, prompts,
triggers, version), tightens in a known direction (enforcement raised, an approval or agent step added, validation
added, tools narrowed, `when` dropped), or must stay as trusted. What the server runs is part of what a person
trusted, so a changed command, working folder, environment or hook waits for them too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .models import Ability, ScriptStep

# Weakest first: moving left on one of these lowers the gate.
ENFORCEMENT_ORDER = ("loose", "normal", "strict")
APPROVAL_ORDER = ("none", "plan", "checkpoint")
# on_failure, weakest first: `continue` goes on past a failure; retry stops when its tries run out; stop and ask
# (a person decides) never go on by themselves.
ON_FAILURE_RANK = {"continue": 0, "retry": 1, "stop": 2, "ask": 2}
# A step's fields that may change freely: words for people and the model, and limits that only bound waiting.
FREE_STEP_FIELDS = {"description", "prompt", "context", "summarize", "timeout", "max_retries", "max_attempts"}
# Fields compared by their own rule below rather than for equality.
RULED_STEP_FIELDS = {"id", "type", "needs", "when", "on_failure", "validation", "tools", "approval"}
# An approval step's `approval`, weakest first: asking for four eyes tightens, dropping them lowers.
STEP_APPROVAL_ORDER = ("person", "four-eyes")
# New steps of these types only add to what must happen: a person's answer, or the agent's work checked on return.
ADDED_STEP_TYPES_THAT_TIGHTEN = {"approval", "agent", "skill"}


def lowerings(trusted: Ability, current: Ability) -> list[str]:
    """Each way `current` loosens `trusted`'s gates; empty when every gate holds or tightens."""
    return [*_settings(trusted, current), *_steps(trusted, current), *_rest(trusted, current)]


def _settings(trusted: Ability, current: Ability) -> Iterator[str]:
    then, now = trusted.settings, current.settings
    if ENFORCEMENT_ORDER.index(now.enforcement) < ENFORCEMENT_ORDER.index(then.enforcement):
        yield f"settings.enforcement {then.enforcement} → {now.enforcement}"
    if APPROVAL_ORDER.index(now.approval) < APPROVAL_ORDER.index(then.approval):
        yield f"settings.approval {then.approval} → {now.approval}"
    for field in ("before", "after"):
        if getattr(trusted.hooks, field) != getattr(current.hooks, field):
            yield f"hooks.{field} changed (commands the server runs)"


def _steps(trusted: Ability, current: Ability) -> Iterator[str]:
    for then in trusted.steps:
        now = current.steps_by_id.get(then.id)
        if now is None:
            yield f"step {then.id!r} ({then.type}) removed"
        elif now.type != then.type:
            yield f"step {then.id!r} changed from {then.type} to {now.type}"
        else:
            yield from (f"step {then.id!r}: {why}" for why in _step(trusted, then, current, now))
    for now in current.steps:
        if now.id not in trusted.steps_by_id and now.type not in ADDED_STEP_TYPES_THAT_TIGHTEN:
            yield f"step {now.id!r} ({now.type}) added: {_what_it_runs(now)}"


def _step(trusted: Ability, then: Any, current: Ability, now: Any) -> Iterator[str]:
    if now.when is not None and now.when != then.when:
        yield f"runs only when {now.when!r}" + (f" (was {then.when!r})" if then.when else "")
    dropped = sorted(set(then.needs) - set(now.needs))
    if dropped:
        yield f"no longer waits for {', '.join(dropped)}"
    was, is_now = then.on_failure or trusted.settings.on_failure, now.on_failure or current.settings.on_failure
    if ON_FAILURE_RANK[is_now] < ON_FAILURE_RANK[was]:
        yield f"on_failure {was} → {is_now}"
    if not _validation_kept(getattr(then, "validation", None), getattr(now, "validation", None)):
        yield "validation loosened"
    if then.type == "approval" and STEP_APPROVAL_ORDER.index(now.approval) < STEP_APPROVAL_ORDER.index(then.approval):
        yield f"approval {then.approval} → {now.approval}"
    widened = sorted(set(getattr(now, "tools", ())) - set(getattr(then, "tools", ())))
    if widened:
        yield f"allows more tools ({', '.join(widened)})"
    for field in sorted(set(type(then).model_fields) - FREE_STEP_FIELDS - RULED_STEP_FIELDS):
        if getattr(then, field) != getattr(now, field):
            yield f"{field} changed"


def _validation_kept(then: Any, now: Any) -> bool:
    """Every check the trusted step made is still made, unchanged (more checks are fine)."""
    if then is None:
        return True
    if now is None:
        return False
    kept = now.model_dump()
    return all(kept.get(key) == value for key, value in then.model_dump().items() if value is not None)


def _what_it_runs(step: Any) -> str:
    if isinstance(step, ScriptStep):
        return f"the server would run {step.run!r}"
    return f"it runs ability {step.workflow!r}" if step.type == "workflow" else "it is new"


def _rest(trusted: Ability, current: Ability) -> Iterator[str]:
    if (current.name or None) != (trusted.name or None):
        yield f"name {trusted.name!r} → {current.name!r}"
    for key, spec in trusted.inputs.items():
        now = current.inputs.get(key)
        then_rules = spec.model_dump(exclude={"description"})
        if now is not None and now.model_dump(exclude={"description"}) != then_rules:
            yield f"input {key!r} changed (its type, default or allowed values)"
    if trusted.exclusive_agent and current.exclusive_agent != trusted.exclusive_agent:
        yield f"exclusive_agent {trusted.exclusive_agent!r} → {current.exclusive_agent!r}"
    widened = set(current.compatible_agents) - set(trusted.compatible_agents)
    if trusted.compatible_agents and (widened or not current.compatible_agents):
        yield f"more agents may run it ({', '.join(sorted(widened)) or 'any agent'})"
