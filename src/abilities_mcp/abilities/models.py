"""The ability file format as pydantic models: the single source of its JSON Schema.

Per-field checks live here; checks that need the whole file (needs graph, references) live in checks.py, and
checks that need the whole project (workflow targets, skills) in catalog.py.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from ..durations import parse_duration

ABILITY_NAME = r"^[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)*$"
STEP_ID = r"^[a-z0-9][a-z0-9_-]*$"
INPUT_NAME = r"^[A-Za-z_][A-Za-z0-9_-]*$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
StepType = Literal["script", "agent", "skill", "approval", "workflow"]
OnFailure = Literal["stop", "continue", "retry", "ask"]
Enforcement = Literal["strict", "normal", "loose"]
InputType = Literal["string", "integer", "number", "boolean", "array", "object"]
# Retries when `on_failure: retry` names no `max_retries`.
DEFAULT_MAX_RETRIES = 1
# Hand-backs an agent or skill step takes before on_failure applies, when it names no `max_attempts`.
DEFAULT_MAX_ATTEMPTS = 3
MAX_ATTEMPTS_DESCRIPTION = (
    "Hand-backs the agent may try before the step fails (default 3): a hand-back that fails `validation` is "
    "refused and the step is handed out again with the reason; when the attempts are used up, on_failure applies "
    "(retry: another round of max_attempts, up to max_retries rounds more). success=false ends the attempts at once"
)
# Script steps with no `timeout` (DESIGN §3).
DEFAULT_STEP_TIMEOUT_SECONDS = 300.0
# A trigger pattern longer than this is refused at load time: patterns run on every user prompt.
MAX_PATTERN_LENGTH = 500


def _one_or_many(value: Any) -> Any:
    """Authors write `needs: build` as often as `needs: [build]`."""
    return [value] if isinstance(value, str) else value


def _check_duration(value: Any) -> Any:
    parse_duration(value)
    return value


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


StrList = Annotated[list[str], BeforeValidator(_one_or_many)]
Duration = Annotated[
    str | float,
    BeforeValidator(_check_duration),
    Field(description="500ms | 30s | 5m | 1h | 1h30m | bare seconds", examples=["30s", "5m", "1h30m"]),
]
StepId = Annotated[str, Field(pattern=STEP_ID)]


class Strict(BaseModel):
    """Every model refuses unknown keys: a typo must not silently drop a rule."""

    # defer_build: validators are built on first use, not at import, so serving starts faster.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class InputSpec(Strict):
    """One declared input of an ability."""

    type: InputType = Field("string", description="Declared type; text from clients is coerced to it")
    required: bool = Field(False, description="Refuse the run when this input is missing and has no default")
    default: Any = Field(None, description="Value used when the input is not given; must fit the rules below")
    description: str | None = Field(None, description="What the input is, shown to the agent")
    enum: list[Any] | None = Field(None, description="The only values allowed")
    pattern: str | None = Field(None, description="Regular expression a string must match (searched, anchor it)")
    min: float | None = Field(None, description="Smallest number allowed")
    max: float | None = Field(None, description="Largest number allowed")
    min_length: int | None = Field(None, alias="minLength", ge=0, description="Shortest string or array allowed")
    max_length: int | None = Field(None, alias="maxLength", ge=0, description="Longest string or array allowed")


class ScriptValidation(Strict):
    """Checks a script step's result must pass."""

    exit_code: int = Field(0, description="Expected exit code (a different one fails the step)")
    stdout_contains: str | None = Field(None, description="Text stdout must contain")
    stderr_contains: str | None = Field(None, description="Text stderr must contain")
    file_exists: str | None = Field(None, description="Path (relative to the step's cwd) that must exist afterwards")


class AgentValidation(Strict):
    """Checks an agent's hand-back must pass."""

    output_contains: str | None = Field(None, description="Text the handed-back output must contain")
    output_matches: str | None = Field(None, description="Regular expression the output must match")
    output_schema: dict[str, Any] | None = Field(None, description="JSON Schema the output (as JSON) must satisfy")


class StepBase(Strict):
    """Fields every step has."""

    id: StepId = Field(description="Unique within the ability; lowercase, digits, - _")
    description: str | None = Field(None, description="What the step does, shown in plans and status")
    needs: StrList = Field(default_factory=list, description="Steps that must complete before this one")
    when: str | None = Field(
        None, description='Condition, e.g. inputs.environment == "production"; always(), failure()'
    )
    timeout: Duration | None = None
    on_failure: OnFailure | None = Field(
        None, description="stop | continue | retry | ask (default: settings.on_failure)"
    )
    max_retries: int | None = Field(None, ge=0, le=20, description="Extra attempts under on_failure: retry (default 1)")


class ScriptStep(StepBase):
    """A command the server runs with `sh -c`; placeholders arrive as single words, never as shell code."""

    type: Literal["script"]
    run: str = Field(min_length=1, description="Shell command; {{inputs.x}} / {{steps.id.output}} are safe words")
    cwd: str | None = Field(None, description="Working directory relative to the project root")
    env: dict[Annotated[str, Field(pattern=ENV_NAME)], Annotated[str, BeforeValidator(_as_text)]] = Field(
        default_factory=dict, description="Extra environment variables; names are letters, digits and _"
    )
    validation: ScriptValidation | None = None


class AgentStep(StepBase):
    """Work handed to the calling agent, checked when it comes back."""

    type: Literal["agent"]
    agent: str | None = Field(None, description="Agent (subagent) to delegate to")
    prompt: str = Field(min_length=1, description="Instructions; {{...}} placeholders are interpolated as text")
    context: StrList = Field(default_factory=list, description="Extra paths or text handed to the agent")
    summarize: bool | str = Field(False, description="Shorten prior steps' outputs in the context")
    tools: StrList = Field(default_factory=list, description="Extra client tools this step allows (hook)")
    validation: AgentValidation | None = None
    max_attempts: int = Field(DEFAULT_MAX_ATTEMPTS, ge=1, le=20, strict=True, description=MAX_ATTEMPTS_DESCRIPTION)


class SkillStep(StepBase):
    """A skill the calling agent applies, with its SKILL.md handed out."""

    type: Literal["skill"]
    skill: str = Field(min_length=1, description="Name of a skill in skills/")
    inputs: dict[str, Any] = Field(default_factory=dict, description="Values handed to the skill")
    prompt: str | None = None
    context: StrList = Field(default_factory=list)
    summarize: bool | str = False
    tools: StrList = Field(default_factory=list)
    validation: AgentValidation | None = None
    max_attempts: int = Field(DEFAULT_MAX_ATTEMPTS, ge=1, le=20, strict=True, description=MAX_ATTEMPTS_DESCRIPTION)


class ApprovalOption(Strict):
    """One answer a person may give."""

    label: str
    value: str
    approves: bool | None = Field(
        None, description="Whether choosing it approves; default: false for values like rejected/no/deny, else true"
    )


class ApprovalStep(StepBase):
    """A question only a person may answer."""

    type: Literal["approval"]
    prompt: str = Field(min_length=1, description="The question shown to the person")
    options: list[ApprovalOption] | None = None
    approval: Literal["person", "four-eyes"] = Field(
        "person",
        description="Who may say yes: any person (the default), or `four-eyes`: a person signed in on the team "
        "server other than whoever started the run",
    )


class WorkflowStep(StepBase):
    """Another ability run as a child of this one."""

    type: Literal["workflow"]
    workflow: str = Field(min_length=1, description="Name of the ability to run")
    inputs: dict[str, Any] = Field(default_factory=dict, description="Its inputs; {{...}} interpolated")


Step = Annotated[
    ScriptStep | AgentStep | SkillStep | ApprovalStep | WorkflowStep,
    Field(discriminator="type"),
]


class Triggers(Strict):
    """When an ability fits a request."""

    keywords: StrList = Field(default_factory=list, description="Whole words, case-insensitive")
    patterns: StrList = Field(default_factory=list, description="Regular expressions, case-insensitive")

    @field_validator("patterns")
    @classmethod
    def _bounded(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            if len(p) > MAX_PATTERN_LENGTH:
                raise ValueError(f"pattern is {len(p)} characters; keep it under {MAX_PATTERN_LENGTH}")
        return patterns


class Settings(Strict):
    """How the whole run behaves."""

    timeout: Duration | None = Field(None, description="Limit for the whole run")
    parallel: bool = Field(False, description="Run independent steps concurrently")
    enforcement: Enforcement = Field("strict", description="strict | normal | loose")
    on_failure: OnFailure = Field("stop", description="Default on_failure for steps")
    approval: Literal["none", "plan", "checkpoint"] = Field(
        "none",
        description="plan: approve the step plan before step one; checkpoint: approve each script or workflow step "
        "(each attempt) before the server runs it, a rejection fails that step",
    )


class Hooks(Strict):
    """Commands around the run."""

    before: StrList = Field(default_factory=list, description="Run before the first step; a failure fails the run")
    after: StrList = Field(default_factory=list, description="Run after the run ends, always; failures are recorded")


class Ability(Strict):
    """An ability: a workflow whose steps run in a fixed, validated order."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        defer_build=True,
        json_schema_extra={"title": "abilities-mcp ability"},
    )

    name: str | None = Field(None, pattern=ABILITY_NAME, description="Defaults to the file's path under abilities/")
    description: str = Field(min_length=1, description="One line saying what the ability does")
    version: Annotated[str, BeforeValidator(_as_text)] | None = None
    triggers: Triggers = Field(default_factory=Triggers)
    inputs: dict[Annotated[str, Field(pattern=INPUT_NAME)], InputSpec] = Field(default_factory=dict)
    steps: list[Step] = Field(min_length=1, description="Steps, run in topological order over needs")
    settings: Settings = Field(default_factory=Settings)
    hooks: Hooks = Field(default_factory=Hooks)
    compatible_agents: StrList = Field(default_factory=list, description="Agents that may run this ability")
    exclusive_agent: str | None = Field(None, description="The only agent that may run this ability")

    def step(self, step_id: str) -> ScriptStep | AgentStep | SkillStep | ApprovalStep | WorkflowStep:
        """The step with this id (the first, where a broken file has two)."""
        return self.steps_by_id[step_id]

    @functools.cached_property
    def steps_by_id(self) -> dict[str, ScriptStep | AgentStep | SkillStep | ApprovalStep | WorkflowStep]:
        """Each step by its id, built once: a 10,000-step ability is looked up in constant time."""
        found: dict[str, Any] = {}
        for s in self.steps:
            found.setdefault(s.id, s)
        return found
