"""Stored records and loaded definitions turned into what the tools return."""

from __future__ import annotations

from datetime import UTC, datetime

from .catalog import Catalog
from .durations import parse_duration
from .handoff import AGENT_TOOLS
from .loader import Definition
from .machine import FINISHED_STEP_STATES, LIVE_RUN_STATES, StepState
from .models import ScriptStep
from .results import (
    AbilityInfo,
    CurrentStep,
    ErrorInfo,
    FileReport,
    History,
    HistoryEntry,
    InputInfo,
    NextCallModel,
    Progress,
    Run,
    StepInfo,
    StepResult,
    ValidationReport,
)
from .scripts import step_timeout
from .store import RunRecord, StepRecord

# StepResult.output keeps the last this-many characters (DESIGN §5: tail, ≤ 4 KiB).
OUTPUT_TAIL_CHARS = 4096


def iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds") if ts else None


def run_view(record: RunRecord) -> Run:
    """A stored run as the tools show it, with the legal next calls."""
    current = next((s for s in record.steps if s.status in (StepState.RUNNING, StepState.AWAITING)), None)
    return Run(
        run_id=record.run_id,
        ability=record.ability,
        status=record.status,
        enforcement=record.enforcement,
        current_step=_current_step(record, current) if current else None,
        progress=Progress(done=sum(s.status in FINISHED_STEP_STATES for s in record.steps), total=len(record.steps)),
        steps=[_step_result(s) for s in record.steps],
        next_calls=next_calls(record),
        error=record.error,
        started_at=iso(record.started_at) or "",
        finished_at=iso(record.finished_at),
    )


def next_calls(record: RunRecord) -> list[NextCallModel]:
    rid = {"run_id": record.run_id}
    awaited = next((s for s in record.steps if s.status == StepState.AWAITING), None)
    if record.status == "awaiting_agent" and awaited is not None:
        handback = {**rid, "step_id": awaited.step_id, "output": "<your result>"}
        return [
            NextCallModel(tool="ability_step_complete", arguments=handback),
            NextCallModel(tool="ability_cancel", arguments=rid),
        ]
    if record.status in LIVE_RUN_STATES:
        return [
            NextCallModel(tool="ability_status", arguments={**rid, "wait_seconds": 30}),
            NextCallModel(tool="ability_cancel", arguments=rid),
        ]
    if record.status == "interrupted":
        return [
            NextCallModel(tool="ability_resume", arguments=rid),
            NextCallModel(tool="ability_cancel", arguments=rid),
        ]
    if record.status == "failed":
        return [NextCallModel(tool="ability_resume", arguments=rid)]
    return []


def _current_step(record: RunRecord, step: StepRecord) -> CurrentStep:
    spec = next((s for s in record.definition.get("steps", []) if s.get("id") == step.step_id), {})
    if step.type == "agent":
        return _handed_out_step(record, step, spec)
    deadline = None
    if step.type == "script" and step.started_at:
        deadline = iso(step.started_at + step_timeout(ScriptStep.model_validate(spec)))
    return CurrentStep(
        id=step.step_id,
        type=step.type,
        description=spec.get("description"),
        instructions=(
            f"The server is running script step {step.step_id!r} itself; do not run it yourself. "
            f"Wait with ability_status(run_id={record.run_id!r}, wait_seconds=30)."
        ),
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
        allowed_tools=[*AGENT_TOOLS, *spec.get("tools", [])],
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
    )


def validation_report(catalog: Catalog, name: str | None = None) -> ValidationReport:
    """Every file the server loads (or one ability's), with field paths and fixes."""
    catalog.refresh()
    files = [f for f in catalog.files() if name is None or (f.kind == "ability" and f.name == name)]
    reports = [
        FileReport(
            name=f.name,
            kind=f.kind,
            path=str(f.path),
            valid=not f.diagnostics,
            errors=[ErrorInfo(path=x.path, message=x.message) for x in f.diagnostics],
        )
        for f in files
    ]
    return ValidationReport(valid=all(r.valid for r in reports), files=reports)


def history_view(records: list[RunRecord]) -> History:
    return History(
        runs=[
            HistoryEntry(
                run_id=r.run_id,
                ability=r.ability,
                status=r.status,
                started_at=iso(r.started_at) or "",
                finished_at=iso(r.finished_at),
            )
            for r in records
        ]
    )
