"""What the tools return (DESIGN §5): pydantic models, so every tool has structured output and a schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class NextCallModel(BaseModel):
    """A tool call the caller may legally make next."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Progress(BaseModel):
    done: int = Field(description="Steps finished (completed, failed, skipped or cancelled)")
    total: int


class CurrentStep(BaseModel):
    """The step the run is at, and what the caller should do about it."""

    id: str
    type: str
    description: str | None = None
    instructions: str = Field(description="What to do now")
    agent: str | None = None
    skill: str | None = None
    prompt: str | None = None
    allowed_tools: list[str] = Field(default_factory=list)
    deadline: str | None = Field(None, description="ISO time when the step times out")


class StepResult(BaseModel):
    id: str
    type: str
    status: str
    attempts: int = 0
    exit_code: int | None = None
    duration_ms: int | None = None
    output: str | None = Field(None, description="Tail of the output, at most 4 KiB")
    output_bytes: int | None = Field(None, description="Total size of what the step printed to stdout")
    error: str | None = None
    child_run: str | None = Field(None, description="A workflow step's child run (read it with ability_status)")


class Run(BaseModel):
    """A run of an ability: where it is, what happened, and the legal next calls."""

    run_id: str
    ability: str
    status: str
    enforcement: str
    current_step: CurrentStep | None = None
    progress: Progress
    steps: list[StepResult]
    next_calls: list[NextCallModel] = Field(default_factory=list)
    error: str | None = None
    started_at: str
    finished_at: str | None = None
    parent_run: str | None = Field(None, description="The run whose workflow step started this one")
    warnings: list[str] = Field(
        default_factory=list, description="Under enforcement: loose, out-of-step calls are answered here, not refused"
    )


class InputInfo(BaseModel):
    type: str
    required: bool
    default: Any = None
    description: str | None = None
    enum: list[Any] | None = None


class StepInfo(BaseModel):
    id: str
    type: str
    description: str | None = None
    needs: list[str] = Field(default_factory=list)


class AbilityInfo(BaseModel):
    name: str
    description: str | None = None
    source: str = Field(description="project or user")
    path: str
    inputs: dict[str, InputInfo] = Field(default_factory=dict)
    steps: list[StepInfo] = Field(default_factory=list)
    triggers: dict[str, list[str]] = Field(default_factory=dict)
    enforcement: str | None = None
    valid: bool


class AbilityList(BaseModel):
    abilities: list[AbilityInfo]


class ErrorInfo(BaseModel):
    path: str = Field(description="Field path inside the file, e.g. steps[2].needs[0]")
    message: str


class FileReport(BaseModel):
    name: str
    kind: str = Field(description="ability, skill or workflows")
    path: str
    valid: bool
    errors: list[ErrorInfo] = Field(default_factory=list)


class ValidationReport(BaseModel):
    valid: bool
    files: list[FileReport]


class HistoryEntry(BaseModel):
    run_id: str
    ability: str
    status: str
    started_at: str
    finished_at: str | None = None


class History(BaseModel):
    runs: list[HistoryEntry]
