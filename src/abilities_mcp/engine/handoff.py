"""Steps handed to the calling agent: the instructions it gets, and the checks its hand-back must pass."""

from __future__ import annotations

import json
from typing import Any

from ..abilities.models import AgentStep
from ..abilities.templates import as_text
from ..patterns import PatternTooSlow, search
from ..skills.skillset import skill_content
from ..skills.spec import Skill

# Each prior step's output in the context is cut to this, and all of them together to the total (DESIGN §3).
CONTEXT_STEP_CHARS = 40_000
CONTEXT_TOTAL_CHARS = 80_000
# `summarize: true` keeps this much of each prior output instead.
SUMMARY_STEP_CHARS = 4_000
# Client tools an agent step allows besides its own `tools` (DESIGN §7): delegating to a subagent.
AGENT_TOOLS = ["Task"]
# ... and a skill step: the client's own Skill tool (DESIGN §7; read-only tools are always allowed by the hook).
SKILL_TOOLS = ["Skill"]


def cut(text: str, limit: int) -> str:
    """Keep the head and the tail of a long text, saying how much was left out."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[{len(text) - 2 * half} characters truncated]\n{text[-half:]}"


def prior_context(step: AgentStep, outputs: dict[str, dict[str, Any]]) -> str:
    """The `## Context from prior steps` section: the outputs of the steps this one needs."""
    if not step.needs:
        return ""
    per_step = SUMMARY_STEP_CHARS if step.summarize else CONTEXT_STEP_CHARS
    budget = CONTEXT_TOTAL_CHARS
    parts = ["## Context from prior steps"]
    for need in step.needs:
        result = outputs.get(need, {})
        text = cut(str(result.get("output") or ""), min(per_step, max(budget, 0)))
        budget -= len(text)
        status = result.get("status", "unknown")
        parts.append(f"### {need} ({status})\n{text or '(no output)'}")
    return "\n\n".join(parts)


def agent_instructions(
    run_id: str,
    ability: str,
    step: AgentStep,
    prompt: str,
    context: str,
    attempt: int,
    attempts: int,
    previous_problem: str | None,
    skill: str = "",
) -> str:
    """Everything the agent needs to do the step and hand it back, as one text (`skill`: a skill step's handout)."""
    lines = [f"Step {step.id!r} of ability {ability!r} (run {run_id}), attempt {attempt} of {attempts}."]
    if getattr(step, "agent", None):
        lines.append(
            f"Delegate this step to the agent {step.agent!r} (your Task/subagent tool), then hand back its result."
        )
    if previous_problem:
        lines.append(f"The previous hand-back was refused: {previous_problem}. Fix that this time.")
    if prompt.strip():
        lines += ["", prompt.strip()]
    if skill:
        lines += ["", skill]
    if step.context:
        lines += ["", "Also look at: " + ", ".join(step.context)]
    rules = describe_validation(step)
    if rules:
        lines += ["", "Your output must " + " and ".join(rules) + "."]
    if context:
        lines += ["", context]
    lines += [
        "",
        f"When done, call ability_step_complete(run_id={run_id!r}, step_id={step.id!r}, output=<your result>). "
        "If you cannot do it, call it with success=false and say why. Do not start other steps yourself.",
    ]
    return "\n".join(lines)


def skill_handout(skill: Skill, inputs: dict[str, Any]) -> str:
    """A skill step's part of the instructions: what to apply, with which inputs, and the skill itself."""
    lines = [
        f"Apply the skill {skill.name!r}: follow its instructions below (its SKILL.md). Read its other files only "
        f"when the instructions call for them, from its directory or with skill_read(name={skill.name!r}, path=...)."
    ]
    if inputs:
        lines += ["", "Inputs for the skill:", *(f"- {key}: {as_text(value)}" for key, value in inputs.items())]
    return "\n".join([*lines, "", skill_content(skill)])


def describe_validation(step: AgentStep) -> list[str]:
    rules = step.validation
    if rules is None:
        return []
    out = []
    if rules.output_contains is not None:
        out.append(f"contain {rules.output_contains!r}")
    if rules.output_matches is not None:
        out.append(f"match the regular expression {rules.output_matches!r}")
    if rules.output_schema is not None:
        out.append(f"be JSON valid against this schema: {json.dumps(rules.output_schema)}")
    return out


def check_handback(step: AgentStep, output: str, success: bool) -> str | None:
    """Why a hand-back is refused, or None when it passes the step's validation."""
    if not success:
        return f"the agent reported that the step failed: {cut(output, 500)}"
    rules = step.validation
    if rules is None:
        return None
    if rules.output_contains is not None and rules.output_contains not in output:
        return f"the output does not contain {rules.output_contains!r} (validation.output_contains)"
    if rules.output_matches is not None:
        try:
            if not search(rules.output_matches, output):
                return f"the output does not match {rules.output_matches!r} (validation.output_matches)"
        except PatternTooSlow as exc:
            return f"{exc} (validation.output_matches)"
    if rules.output_schema is not None:
        return _schema_problem(rules.output_schema, output)
    return None


def _schema_problem(schema: dict[str, Any], output: str) -> str | None:
    import jsonschema

    try:
        value = json.loads(output)
    except json.JSONDecodeError as exc:
        return f"the output is not JSON ({exc}); hand back JSON that fits validation.output_schema"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        return f"the output does not fit validation.output_schema at {where}: {exc.message}"
    return None
