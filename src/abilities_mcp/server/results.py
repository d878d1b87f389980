"""What the tools return (DESIGN §5): pydantic models, so every tool has structured output and a schema."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema


class Result(BaseModel):
    """A tool's result. Its validator is built on first use, not at import: start-up takes the tools' schemas from
    server/schema_data.py, and no tool runs before tools/list is answered."""

    model_config = ConfigDict(defer_build=True)


class NextCallModel(Result):
    """A tool call the caller may legally make next."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Progress(Result):
    done: int = Field(description="Steps finished (completed, failed, skipped or cancelled)")
    total: int


class CurrentStep(Result):
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


class StepResult(Result):
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


class AnswerInfo(Result):
    """A person's answer to one of the run's questions, and where it came from."""

    step: str = Field(description="The step asked about (plan: the plan approval)")
    answer: str = Field(description="What was answered, by which channel, from where (terminal and process chain)")
    at: str


class Run(Result):
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
    answers: list[AnswerInfo] = Field(default_factory=list, description="Every answer to its questions, oldest first")
    warnings: list[str] = Field(
        default_factory=list,
        description="Why the run enforces other than its file says (nobody trusted the file, or an edit waits for a "
        "person's `abilities-mcp trust`); under enforcement: loose, out-of-step calls answered here, not refused",
    )


# Any JSON value, with the types spelled out: a schema item without a type draws a warning from the MCP Inspector.
JSON_TYPES = ["string", "number", "integer", "boolean", "array", "object", "null"]
# One `type` a branch: the Inspector's portability check warns on a list of types (Gemini's dialect takes one).
AnyJson = Annotated[Any, WithJsonSchema({"anyOf": [{"type": t} for t in JSON_TYPES]})]


class InputInfo(Result):
    type: str
    required: bool
    default: AnyJson = None
    description: str | None = None
    enum: list[AnyJson] | None = None


class StepInfo(Result):
    id: str
    type: str
    description: str | None = None
    needs: list[str] = Field(default_factory=list)


class AbilityInfo(Result):
    name: str
    description: str | None = None
    source: str = Field(description="project or user")
    path: str
    inputs: dict[str, InputInfo] = Field(default_factory=dict)
    steps: list[StepInfo] = Field(default_factory=list)
    triggers: dict[str, list[str]] = Field(default_factory=dict)
    enforcement: str | None = Field(None, description="The level its runs enforce (strict while nobody trusted it)")
    valid: bool
    trust: str = Field(
        "trusted",
        description="trusted | tightened (edited, no gate lowered) | new (nobody trusted it: runs strict) | waiting "
        "(an edit would lower a gate: the trusted version runs until a person's `abilities-mcp trust`)",
    )
    warnings: list[str] = Field(default_factory=list, description="Why it runs other than its file says")


class AbilityList(Result):
    abilities: list[AbilityInfo]


class ErrorInfo(Result):
    path: str = Field(description="Field path inside the file, e.g. steps[2].needs[0]")
    message: str


class FileReport(Result):
    name: str
    kind: str = Field(description="ability, skill, workflows, tool cache, settings or gateway")
    path: str
    valid: bool
    errors: list[ErrorInfo] = Field(default_factory=list)
    warnings: list[ErrorInfo] = Field(
        default_factory=list, description="What loads but deserves a look; a file with only warnings is valid"
    )


class ValidationReport(Result):
    valid: bool
    files: list[FileReport]


class CallApprovalView(Result):
    call_id: str = Field(description="What a person types: abilities-mcp approve CALL_ID")
    tool: str
    call: str = Field(description="The call exactly: a shell command's line, else the tool and its arguments")
    digest: str = Field(description="SHA-256 of the tool and its exact arguments: the approval fits only this call")
    workflows: list[str]
    status: Literal["pending", "approved", "rejected", "used", "expired"]
    requested_at: str
    expires_at: str = Field(description="A pending request lapses then; so does an approval not used by then")
    answered_at: str | None = None
    answered_by: str | None = Field(None, description="Who answered")
    channel: Literal["terminal", "form", "web"] | None = Field(None, description="Where the answer was given")
    used_at: str | None = Field(None, description="When the approved call ran (an approval is used once)")


class HistoryEntry(Result):
    run_id: str
    ability: str
    status: str
    started_at: str
    finished_at: str | None = None


class History(Result):
    runs: list[HistoryEntry]
    call_approvals: list[CallApprovalView] = Field(
        default_factory=list, description="The latest tool calls held for a person's yes, newest first"
    )


class SkillInfo(Result):
    name: str
    description: str
    location: str = Field(description="project or user")
    path: str = Field(description="The skill's SKILL.md")
    warnings: list[str] = Field(default_factory=list, description="What loading had to forgive; see ability_validate")


class SkillList(Result):
    skills: list[SkillInfo]
    notes: list[str] = Field(default_factory=list, description="Folders skipped while looking for skills, and why")


class SkillMatch(Result):
    name: str
    description: str
    score: float = Field(description="0-1; only skills above the fit threshold are listed")
    reasons: list[str]


class SkillRoute(Result):
    matches: list[SkillMatch] = Field(description="Best first; empty when no skill fits the task")


class SkillLoaded(Result):
    name: str
    directory: str = Field(description="The skill's folder; its relative paths start here")
    content: str = Field(description="SKILL.md without its frontmatter")
    resources: list[str] = Field(description="The skill's other files (not read): skill_read(name, path) reads one")
    text: str = Field(description="The body in <skill_content> with the folder and the file list, ready to follow")
    already_loaded: bool = Field(False, description="This session loaded it before (returned again after compaction)")


class SkillFileRead(Result):
    name: str
    path: str
    uri: str = Field(description="The same file as an MCP resource")
    mime_type: str
    size: int = Field(description="The file's size in bytes")
    text: str | None = Field(None, description="The file's text; null for a binary file (sent as a resource)")
    truncated: bool = Field(False, description="Only the head of a large file was returned")


class PlanTask(Result):
    text: str = Field(description="The task, its skill hints removed")
    line: int = Field(description="Its line in the plan (0 for a task given as text)")
    section: str | None = Field(None, description="The heading it is under")
    parent: str | None = Field(None, description="The task it is a step of, for a nested item")


class ChosenSkill(Result):
    name: str
    reason: str


class SkillProblem(Result):
    name: str
    error: str


class SkillPlan(Result):
    task: PlanTask | None = Field(description="The step's task; null when every task of the plan is done")
    step_kind: str = Field(description="implementation or review")
    skills: list[ChosenSkill] = Field(description="The skills for this step, in the order to follow them")
    strategy: str = Field(description="hint (the task named skills), match (the router chose), or none")
    errors: list[SkillProblem] = Field(description="Named skills that do not exist or could not be read")
    truncated: list[str] = Field(description="Skills whose SKILL.md was cut to the budget in the prompt")
    prompt: str = Field(description="OpenSkills' <available_skills> catalog and the chosen skills, ready to paste")


class PrerequisiteInfo(Result):
    step: int
    tool: str
    description: str
    required: bool
    params: dict[str, Any] = Field(default_factory=dict, description="Default arguments for the tool")


class ApprovalInfo(Result):
    expires: float = Field(description="Seconds a person's yes to one call stays usable, and a request waits for one")
    prompt: str = Field(description="What the person is asked ({{command}}, {{tool}}, {{args.NAME}} filled in)")


class WorkflowInfo(Result):
    name: str
    description: str
    mode: str = Field(description="enforce (deny until done), warn (ask) or suggest (mention)")
    enabled: bool
    triggers: dict[str, Any] = Field(description="category, tools, keywords: any one triggers the workflow")
    prerequisites: list[PrerequisiteInfo] = Field(description="In step order")
    approval: ApprovalInfo | None = Field(None, description="Each call it triggers needs a person's yes")
    path: str = Field(description="The file it comes from")


class WorkflowList(Result):
    workflows: list[WorkflowInfo]
    problems: list[str] = Field(default_factory=list, description="Entries not applied and why (fix, then validate)")


class WorkflowMatch(Result):
    workflow: str
    mode: str
    verdict: str = Field(description="This workflow's own verdict")
    reasons: list[str] = Field(description="What matched: tool, category or keyword")
    missing: list[str] = Field(description="Required prerequisite tools not yet recorded in this session, in order")
    optional: list[str] = Field(default_factory=list, description="Optional prerequisites not yet recorded")
    done: list[str] = Field(description="Prerequisite tools recorded in this session")


class WorkflowCheck(Result):
    """Whether a tool may run now; the strictest verdict of every workflow it triggers."""

    verdict: str = Field(description="deny, warn, suggest or allow (deny > warn > suggest > allow)")
    tool: str
    matched: list[WorkflowMatch]
    message: str
    next_calls: list[NextCallModel] = Field(default_factory=list, description="Missing prerequisites, in order")
    warnings: list[str] = Field(default_factory=list, description="Broken workflows that enforce nothing until fixed")


class RecordedStep(Result):
    workflow: str
    step: int
    tool: str


class WorkflowRecord(Result):
    recorded: list[RecordedStep] = Field(description="Steps this call completed")
    already: list[RecordedStep] = Field(default_factory=list, description="Steps recorded earlier in this session")
    session_id: str
    self_reported: bool = Field(
        False,
        description="true: recorded on the agent's word; it does not count where a call of the tool is seen (the "
        "gateway's upstreams, every tool of a session whose client runs the hooks)",
    )
    message: str


class CompletedStep(Result):
    step: int
    tool: str
    server: str | None = Field(None, description="The server it ran on; null: a client's own tool, or none was named")
    how: Literal["observed", "reported"] = Field(
        description="observed: seen run and succeed (the client's hook, the gateway); reported: by workflow_record"
    )
    result: str | None = Field(None, description="The summary given when it was recorded (200 characters at most)")
    at: str


class WorkflowStatus(Result):
    session_id: str
    started_at: str
    expires_at: str = Field(description="After this, the session's records are cleared")
    completed: dict[str, list[CompletedStep]] = Field(description="Recorded prerequisites by workflow")
    call_approvals: list[CallApprovalView] = Field(
        default_factory=list,
        description="This session's calls held for a person's yes, newest first: pending, answered, used, expired",
    )


class WorkflowReset(Result):
    session_id: str
    workflow: str | None = Field(None, description="The workflow cleared; null: all")
    cleared: int = Field(description="How many recorded steps were forgotten")
