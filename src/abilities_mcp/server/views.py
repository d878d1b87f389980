"""Stored records and loaded definitions turned into what the tools return."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ..abilities.catalog import Catalog
from ..abilities.loader import Definition
from ..abilities.models import ScriptStep
from ..durations import parse_duration
from ..engine.handoff import AGENT_TOOLS, SKILL_TOOLS
from ..engine.machine import FINISHED_STEP_STATES, LIVE_RUN_STATES, StepState
from ..engine.questions import Question
from ..engine.scripts import step_timeout
from ..gateway.config import file_report
from ..prerequisites.approvals import CallApproval
from ..prerequisites.gates import Check
from ..prerequisites.workflows import Workflow, WorkflowSet
from ..skills.skillset import SkillSet
from ..state.store import RunRecord, StepRecord
from .results import (
    AbilityInfo,
    AnswerInfo,
    ApprovalInfo,
    CallApprovalView,
    CurrentStep,
    ErrorInfo,
    FileReport,
    History,
    HistoryEntry,
    InputInfo,
    NextCallModel,
    PrerequisiteInfo,
    Progress,
    Run,
    SkillInfo,
    SkillList,
    StepInfo,
    StepResult,
    ValidationReport,
    WorkflowCheck,
    WorkflowInfo,
    WorkflowList,
    WorkflowMatch,
)

# StepResult.output keeps the last this-many characters (DESIGN §5: tail, ≤ 4 KiB).
OUTPUT_TAIL_CHARS = 4096


def iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds") if ts else None


def run_view(record: RunRecord, lookup: Callable[[str], RunRecord | None] | None = None) -> Run:
    """A stored run as the tools show it, with the legal next calls.

    `lookup` reads other runs: while a workflow step's child run waits for someone, the parent hands out the
    child's step and the calls that answer it.
    """
    current = next((s for s in record.steps if s.status in (StepState.RUNNING, StepState.AWAITING)), None)
    child = _waiting_child(record, current, lookup)
    question = Question.from_json(record.question) if record.question else None
    if question is not None:
        step, calls = _question_step(record, question), _question_calls(record, question)
    elif child is not None:
        step, calls = _child_step(current, child), [*child.next_calls, _cancel(record)]
    else:
        step = _current_step(record, current) if current else None
        calls = next_calls(record)
    return Run(
        run_id=record.run_id,
        ability=record.ability,
        status=record.status,
        enforcement=record.enforcement,
        current_step=step,
        progress=Progress(done=sum(s.status in FINISHED_STEP_STATES for s in record.steps), total=len(record.steps)),
        steps=[_step_result(s) for s in record.steps],
        next_calls=calls,
        error=record.error,
        started_at=iso(record.started_at) or "",
        finished_at=iso(record.finished_at),
        parent_run=record.parent_run,
        answers=[
            AnswerInfo(step=a["step_id"] or "plan", answer=a["detail"], at=iso(a["at"]) or "") for a in record.answers
        ],
        warnings=[record.trust_note] if record.trust_note else [],
    )


def next_calls(record: RunRecord) -> list[NextCallModel]:
    rid = {"run_id": record.run_id}
    awaited = next((s for s in record.steps if s.status == StepState.AWAITING), None)
    if record.status == "awaiting_agent" and awaited is not None:
        handback = {**rid, "step_id": awaited.step_id, "output": "<your result>"}
        return [NextCallModel(tool="ability_step_complete", arguments=handback), _cancel(record)]
    if record.status in LIVE_RUN_STATES:
        return [NextCallModel(tool="ability_status", arguments={**rid, "wait_seconds": 30}), _cancel(record)]
    if record.status == "interrupted" and record.parent_run:  # it dies and resumes with its parent
        return [NextCallModel(tool="ability_resume", arguments={"run_id": record.parent_run})]
    if record.status == "interrupted":
        return [NextCallModel(tool="ability_resume", arguments=rid), _cancel(record)]
    if record.status == "failed" and not record.parent_run:
        return [NextCallModel(tool="ability_resume", arguments=rid)]
    return []


def _cancel(record: RunRecord) -> NextCallModel:
    return NextCallModel(tool="ability_cancel", arguments={"run_id": record.parent_run or record.run_id})


def _waiting_child(
    record: RunRecord, current: StepRecord | None, lookup: Callable[[str], RunRecord | None] | None
) -> Run | None:
    if current is None or current.type != "workflow" or not current.child_run or lookup is None:
        return None
    child = lookup(current.child_run)
    if child is None or child.status not in LIVE_RUN_STATES:
        return None
    view = run_view(child, lookup)
    # The parent's view adds its own cancel (the whole tree); the child's would repeat it or name a middle run.
    view.next_calls = [c for c in view.next_calls if c.tool != "ability_cancel"]
    return view


def _child_step(current: StepRecord, child: Run) -> CurrentStep:
    inner = child.current_step
    where = f"Step {current.step_id!r} runs ability {child.ability!r} as child run {child.run_id}"
    if inner is None:
        return CurrentStep(id=current.step_id, type="workflow", instructions=f"{where}; wait for it.")
    return inner.model_copy(update={"instructions": f"{where}, now at step {inner.id!r}.\n\n{inner.instructions}"})


def _question_step(record: RunRecord, question: Question) -> CurrentStep:
    spec = next((s for s in record.definition.get("steps", []) if s.get("id") == question.step_id), {})
    answer = (
        "You may relay the user's answer with "
        + ("ability_decide" if question.kind == "decision" else "ability_approve")
        + " (enforcement: loose)."
        if record.enforcement == "loose"
        else "You cannot answer it: only a person can."
    )
    return CurrentStep(
        id=question.step_id,
        type="decision" if question.kind == "decision" else "approval",
        description=spec.get("description") if question.kind != "plan" else "Approve the step plan",
        instructions=(
            f"The run waits for a person's answer:\n{question.prompt}\n\n{answer} Ask the user to answer the form "
            f"their client shows, or to type {question.typed(record.run_id)} in a terminal. Then "
            f"wait with ability_status(run_id={record.run_id!r}, wait_seconds=60)."
        ),
        prompt=question.prompt,
        allowed_tools=[],
        deadline=iso(question.deadline),
    )


def _question_calls(record: RunRecord, question: Question) -> list[NextCallModel]:
    calls = [NextCallModel(tool="ability_status", arguments={"run_id": record.run_id, "wait_seconds": 60})]
    if record.enforcement == "loose":
        relay = question.relay_call(record.run_id)
        calls.insert(0, NextCallModel(tool=relay.tool, arguments=relay.arguments))
    return [*calls, _cancel(record)]


def _current_step(record: RunRecord, step: StepRecord) -> CurrentStep:
    spec = next((s for s in record.definition.get("steps", []) if s.get("id") == step.step_id), {})
    if step.type in ("agent", "skill"):
        return _handed_out_step(record, step, spec)
    deadline = None
    if step.type == "script" and step.started_at:
        deadline = iso(step.started_at + step_timeout(ScriptStep.model_validate(spec)))
    what = (
        f"The server is running script step {step.step_id!r} itself; do not run it yourself."
        if step.type == "script"
        else f"Step {step.step_id!r} runs ability {spec.get('workflow')!r} as a child run ({step.child_run})."
    )
    return CurrentStep(
        id=step.step_id,
        type=step.type,
        description=spec.get("description"),
        instructions=f"{what} Wait with ability_status(run_id={record.run_id!r}, wait_seconds=30).",
        allowed_tools=[],
        deadline=deadline,
    )


def _handed_out_step(record: RunRecord, step: StepRecord, spec: dict) -> CurrentStep:
    timeout = spec.get("timeout")
    deadline = iso(step.started_at + parse_duration(timeout)) if timeout and step.started_at else None
    return CurrentStep(
        id=step.step_id,
        type=step.type,
        description=spec.get("description"),
        instructions=step.instructions or "",
        agent=spec.get("agent"),
        skill=spec.get("skill"),
        prompt=step.prompt,
        allowed_tools=[*(SKILL_TOOLS if step.type == "skill" else AGENT_TOOLS), *spec.get("tools", [])],
        deadline=deadline,
    )


def _step_result(step: StepRecord) -> StepResult:
    output = step.output
    if output is not None and len(output) > OUTPUT_TAIL_CHARS:
        output = f"[{len(output) - OUTPUT_TAIL_CHARS} characters truncated]" + output[-OUTPUT_TAIL_CHARS:]
    return StepResult(
        id=step.step_id,
        type=step.type,
        status=step.status,
        attempts=step.attempts,
        exit_code=step.exit_code,
        duration_ms=step.duration_ms,
        output=output,
        output_bytes=step.output_bytes,
        error=step.error,
        child_run=step.child_run,
    )


def ability_info(catalog: Catalog, d: Definition) -> AbilityInfo:
    """One ability as ability_list shows it (invalid ones too, marked valid: false)."""
    a = d.ability
    return AbilityInfo(
        name=d.name,
        description=a.description if a else None,
        source=d.scope,
        path=str(d.path),
        inputs={
            k: InputInfo(type=v.type, required=v.required, default=v.default, description=v.description, enum=v.enum)
            for k, v in (a.inputs.items() if a else [])
        },
        steps=[
            StepInfo(id=s.id, type=s.type, description=s.description, needs=s.needs) for s in (a.steps if a else [])
        ],
        triggers={"keywords": a.triggers.keywords, "patterns": a.triggers.patterns} if a else {},
        enforcement=a.settings.enforcement if a else None,
        valid=catalog.is_valid(d),
        trust=d.trust,
        warnings=[d.trust_note] if d.trust_note else [],
    )


def validation_report(catalog: Catalog, name: str | None = None) -> ValidationReport:
    """Every file the server loads (or one ability's or skill's), with field paths and fixes."""
    catalog.refresh()
    every = catalog.files() + file_report(catalog.project)
    files = [f for f in every if name is None or (f.kind in ("ability", "skill") and f.name == name)]
    reports = [
        FileReport(
            name=f.name,
            kind=f.kind,
            path=str(f.path),
            valid=not f.diagnostics,
            errors=[ErrorInfo(path=x.path, message=x.message) for x in f.diagnostics],
            warnings=[ErrorInfo(path=x.path, message=x.message) for x in f.warnings],
        )
        for f in files
    ]
    return ValidationReport(valid=all(r.valid for r in reports), files=reports)


def history_view(records: list[RunRecord], calls: list[CallApproval] | None = None) -> History:
    return History(
        call_approvals=[call_approval_view(c) for c in calls or ()],
        runs=[
            HistoryEntry(
                run_id=r.run_id,
                ability=r.ability,
                status=r.status,
                started_at=iso(r.started_at) or "",
                finished_at=iso(r.finished_at),
            )
            for r in records
        ],
    )


def skill_list_view(skillset: SkillSet) -> SkillList:
    """Every loaded skill, sorted by name, with its warnings; also what `abilities-mcp skills list --json` prints."""
    skills = [
        SkillInfo(
            name=s.name, description=s.description, location=s.scope, path=str(s.path), warnings=skillset.warnings(s)
        )
        for s in sorted(skillset.skills.values(), key=lambda s: s.name)
    ]
    return SkillList(skills=skills, notes=skillset.notes)


def workflow_info(w: Workflow) -> WorkflowInfo:
    triggers = {"category": w.category, "tools": list(w.tools), "keywords": list(w.keywords)}
    steps = [PrerequisiteInfo(**p._asdict()) for p in w.prerequisites]
    return WorkflowInfo(
        name=w.name,
        description=w.description,
        mode=w.mode,
        enabled=w.enabled,
        triggers={k: v for k, v in triggers.items() if v},
        prerequisites=steps,
        approval=ApprovalInfo(expires=w.approval.expires, prompt=w.approval.prompt) if w.approval else None,
        path=w.source,
    )


def workflow_list_view(found: WorkflowSet) -> WorkflowList:
    """The workflows in file order, with what kept others out."""
    return WorkflowList(workflows=[workflow_info(w) for w in found.workflows.values()], problems=found.warnings())


def workflow_check_view(check: Check, found: WorkflowSet) -> WorkflowCheck:
    matched = [
        WorkflowMatch(
            workflow=m.workflow.name,
            mode=m.workflow.mode,
            verdict=m.verdict,
            reasons=m.reasons,
            missing=[p.tool for p in m.missing],
            optional=[p.tool for p in m.optional],
            done=[p.tool for p in m.done],
        )
        for m in check.matched
    ]
    calls = [NextCallModel(tool=tool, arguments=args) for tool, args in check.next_calls]
    return WorkflowCheck(
        verdict=check.verdict,
        tool=check.tool,
        matched=matched,
        message=check.message,
        next_calls=calls,
        warnings=found.warnings(),
    )


def call_approval_view(approval: CallApproval) -> CallApprovalView:
    """One call approval as workflow_status and `history --json` show it."""
    return CallApprovalView(
        call_id=approval.call_id,
        tool=approval.tool,
        call=approval.shown,
        digest=approval.digest,
        workflows=list(approval.workflows),
        status=approval.state(),
        requested_at=iso(approval.requested_at) or "",
        expires_at=iso(approval.expires_at) or "",
        answered_at=iso(approval.answered_at),
        answered_by=approval.answered_by,
        channel=approval.channel,
        used_at=iso(approval.used_at),
    )
