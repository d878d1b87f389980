"""The ability tools (DESIGN §5): list, validate, match, run, status, hand-back, answers, cancel, resume, history.

Thin: check the call, ask the engine, return a model from results.py; a refusal becomes a tool error that names
the legal next call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from mcp_types import InputRequiredResult
from pydantic import Field

from ..abilities import agents
from ..abilities.catalog import Catalog
from ..abilities.models import DEFAULT_MAX_ATTEMPTS
from ..abilities.triggers import Matcher, MatchList
from ..engine.live import LiveRun
from ..errors import AbilitiesError, NextCall, Refused
from ..prerequisites.approvals import ID_PREFIX as CALL_ID_PREFIX
from ..prerequisites.approvals import CallApprovals, person_command
from ..state import audit
from ..state.store import RunRecord
from .forms import answer_from_retry
from .results import AbilityList, AnyJson, History, Run, ValidationReport
from .session import Session, session_of
from .views import ability_info, history_view, validation_report

READ_ONLY = ToolAnnotations(read_only_hint=True)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False)


@contextmanager
def tool_errors() -> Iterator[None]:
    """The caller's mistakes become tool errors (isError) with the text that says what to do."""
    try:
        yield
    except AbilitiesError as exc:
        raise ToolError(str(exc)) from exc


async def fresh(catalog: Catalog) -> None:
    """Re-read changed files in a worker thread: checking a huge ability must not hold up other calls (ping too)."""
    await anyio.to_thread.run_sync(catalog.refresh)


def add_ability_tools(server: MCPServer, catalog: Catalog) -> None:
    @server.tool(name="ability_list", annotations=READ_ONLY)
    async def ability_list(
        agent: Annotated[str | None, Field(description="Only abilities this agent may run")] = None,
    ) -> AbilityList:
        """List the project's abilities (workflows with enforced steps): names, inputs, steps, and whether valid."""
        await fresh(catalog)
        found = [ability_info(catalog, d) for d in catalog.winners.values()]
        if agent:
            found = [a for a in found if agents.agent_may_run(catalog, a.name, agent)]
        return AbilityList(abilities=sorted(found, key=lambda a: a.name))

    @server.tool(name="ability_validate", annotations=READ_ONLY)
    async def ability_validate(
        name: Annotated[str | None, Field(description="One ability or skill; omit to check every file")] = None,
    ) -> ValidationReport:
        """Check abilities, skills (the Agent Skills spec) and workflows.json: each problem with its file, field
        path and the fix."""
        await fresh(catalog)
        with tool_errors():
            if name is not None:
                catalog.require_file(name)
            return validation_report(catalog, name)

    @server.tool(name="ability_run", annotations=ACTS)
    async def ability_run(
        name: Annotated[str, Field(description="Ability name from ability_list")],
        ctx: Context,
        inputs: Annotated[
            dict[str, AnyJson] | str | list[AnyJson] | None, Field(description="Input values by name")
        ] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
        agent: Annotated[str | None, Field(description="The agent running it (checked against the ability)")] = None,
    ) -> Run | InputRequiredResult:
        """Start an ability. Returns when the run ends, waits for you, or wait_seconds pass; then follow next_calls."""
        session = session_of(ctx)
        run_id = answer_from_retry(session.engine, ctx)  # a 2026-era client repeating the call with a form answer
        if run_id is None:
            await fresh(catalog)
            with tool_errors():
                if agent:
                    agents.refuse_agent(catalog, name, agent)
                run_id = session.engine.start(
                    name, _parse_inputs(inputs), session.session_id(ctx), started_by=session.started_by
                )

        async def progress(live: LiveRun) -> None:
            await ctx.report_progress(live.finished_steps(), len(live.ability.steps), live.message)

        return await session.settle(ctx, run_id, wait_seconds, progress)

    @server.tool(name="ability_status", annotations=READ_ONLY)
    async def ability_status(
        ctx: Context,
        run_id: Annotated[str | None, Field(description="Default: this session's live or latest run")] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Wait up to this long for a change")] = 0,
    ) -> Run | InputRequiredResult:
        """Read a run: status, current step, step results and the legal next calls."""
        session = session_of(ctx)
        rid = answer_from_retry(session.engine, ctx)
        with tool_errors():
            rid = rid or _pick_run(session, ctx, run_id)
        return await session.settle(ctx, rid, wait_seconds, first_change=True)

    @server.tool(name="ability_step_complete", annotations=ACTS)
    async def ability_step_complete(
        ctx: Context,
        run_id: Annotated[str, Field(description="The run waiting for you")],
        step_id: Annotated[str, Field(description="The current step's id (current_step.id)")],
        output: Annotated[str, Field(description="Your result for the step, checked against its validation")],
        success: Annotated[bool, Field(description="false when you could not do the step (say why in output)")] = True,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
    ) -> Run | InputRequiredResult:
        """Hand the current agent step back. A hand-back that fails the step's validation is refused and the step
        is handed out again with the reason, up to its max_attempts (default 3); then its on_failure applies."""
        session = session_of(ctx)
        if answer_from_retry(session.engine, ctx) is not None:  # the hand-back was taken in the first round
            return await session.settle(ctx, run_id, wait_seconds)
        try:  # taken here, or by the replica that drives the run (engine/replicas.py)
            problem, handed_out = await session.engine.hand_back(run_id, step_id, output, success)
        except Refused as refusal:
            return session.refused_or_warned(run_id, refusal)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        result = await session.settle(ctx, run_id, wait_seconds)
        if problem is not None:
            record = session.store.get_run(run_id)
            assert record is not None  # complete() found it
            refusal = _refused_handback(problem, record, step_id, success, handed_out, session.view(run_id))
            detail = {"run_id": run_id, "step": step_id, "state": record.status}
            audit.append(
                session.store,
                "refused",
                session_id=record.session_id,
                tool="ability_step_complete",
                verdict="refused",
                channel="mcp",
                reason=refusal,
                detail=detail,
            )  # the step's validation refused what the agent handed back: the trail keeps every refused attempt
            raise ToolError(refusal)
        return result

    @server.tool(name="ability_approve", annotations=ACTS)
    async def ability_approve(
        ctx: Context,
        run_id: Annotated[str, Field(description="The run waiting for approval")],
        step_id: Annotated[str, Field(description="The approval step's id (current_step.id; 'plan' for the plan)")],
        approved: Annotated[bool, Field(description="The person's answer, as they gave it")],
        note: Annotated[str | None, Field(description="What the person said, for the record")] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
    ) -> Run | InputRequiredResult:
        """Relay a person's approval. Only abilities with enforcement: loose accept it; otherwise the person
        answers themselves (their client's form, or `abilities-mcp approve RUN_ID` in a terminal)."""
        session = session_of(ctx)
        if run_id.startswith(CALL_ID_PREFIX):  # a call a workflow holds for a person: never the agent's to approve
            raise ToolError(
                f"Refused: {run_id} is a call approval, and only a person gives one (state: awaiting a person's "
                f"approval). Ask the user to run `{person_command(run_id)}` at their own terminal, then make the "
                "identical call again."
            )
        act = partial(session.engine.relay, run_id, step_id, approved=approved, note=note)
        return await session.act_then_settle(ctx, run_id, wait_seconds, act)

    @server.tool(name="ability_decide", annotations=ACTS)
    async def ability_decide(
        ctx: Context,
        run_id: Annotated[str, Field(description="The run waiting for a decision")],
        step_id: Annotated[str, Field(description="The failed step's id (current_step.id)")],
        decision: Annotated[Literal["retry", "continue", "stop"], Field(description="The person's decision")],
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
    ) -> Run | InputRequiredResult:
        """Relay a person's decision after a failed step (on_failure: ask). Only under enforcement: loose; otherwise
        the person answers themselves (their client's form, or `abilities-mcp decide RUN_ID ...` in a terminal)."""
        session = session_of(ctx)
        act = partial(session.engine.relay, run_id, step_id, decision=decision)
        return await session.act_then_settle(ctx, run_id, wait_seconds, act)

    @server.tool(name="ability_cancel", annotations=ToolAnnotations(destructive_hint=True))
    async def ability_cancel(
        ctx: Context,
        run_id: Annotated[str | None, Field(description="Default: this session's live run")] = None,
    ) -> Run:
        """Cancel a run: its step processes are killed before this returns."""
        session = session_of(ctx)
        with tool_errors():
            rid = _pick_run(session, ctx, run_id, live_only=True)
        try:
            await session.engine.cancel(rid)
        except Refused as refusal:
            return session.refused_or_warned(rid, refusal)
        return session.view(rid)

    @server.tool(name="ability_resume", annotations=ACTS)
    async def ability_resume(
        ctx: Context,
        run_id: Annotated[str, Field(description="An interrupted or failed run")],
        wait_seconds: Annotated[float, Field(ge=0, le=600)] = 20,
    ) -> Run | InputRequiredResult:
        """Continue an interrupted or failed run from the step that did not finish, adopting it into this session."""
        session = session_of(ctx)
        if answer_from_retry(session.engine, ctx) is not None:  # resumed in the first round already
            return await session.settle(ctx, run_id, wait_seconds)
        act = partial(session.engine.resume, run_id, session.session_id(ctx))
        return await session.act_then_settle(ctx, run_id, wait_seconds, act)

    @server.tool(name="ability_history", annotations=READ_ONLY)
    async def ability_history(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=500, description="How many runs, newest first")] = 20,
    ) -> History:
        """List past and current runs, newest first."""
        session = session_of(ctx)
        session.engine.recover()  # a dead server's runs are listed as interrupted, as ability_status shows them
        return history_view(session.store.runs(limit=limit), CallApprovals(session.store).listed(limit=limit))


def _refused_handback(
    problem: str, record: RunRecord, step_id: str, success: bool, handed_out: tuple[int, int], view: Run
) -> str:
    """A refused hand-back: the reason, which attempt it was, what follows (the step handed out again, or the
    step's on_failure), the run's state and the legal next call. `handed_out`: the attempt the agent handed back
    and the last one of its round, as they were before the hand-back."""
    spec = next((s for s in record.definition.get("steps", []) if s.get("id") == step_id), {})
    per = spec.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    policy = spec.get("on_failure") or record.definition.get("settings", {}).get("on_failure", "stop")
    attempt, round_last = handed_out
    step = next(s for s in view.steps if s.id == step_id)
    again = view.status == "awaiting_agent" and view.current_step is not None and view.current_step.id == step_id
    if success and attempt < round_last:
        head = f"Hand-back refused: {problem}. It counted as an attempt ({attempt} of {round_last})"
        after = (
            f"Step {step_id!r} is handed out again (attempt {attempt + 1}) with the reason in "
            f"current_step.instructions; {round_last - attempt} of its max_attempts {per} left before on_failure: "
            f"{policy} applies; the run stays {view.status}"
        )
    else:
        if success:
            head = (
                f"Hand-back refused: {problem}. It counted as an attempt, the last of max_attempts {per} "
                f"({attempt} of {round_last}), so on_failure: {policy} applies"
            )
        else:
            head = (
                f"Step {step_id!r} failed: {problem}. It counted as an attempt ({attempt}); success=false uses no "
                f"more attempts, so on_failure: {policy} applies"
            )
        if again:
            after = (
                f"Step {step_id!r} is handed out again (attempt {step.attempts}) with the reason in "
                f"current_step.instructions: a new round of {per} attempts; the run is {view.status}"
            )
        elif view.status == "awaiting_decision":
            after = (
                f"A person now decides whether to retry (another {per} attempts), continue or stop; the run is "
                f"{view.status}"
            )
        else:
            after = f"Step {step_id!r} is {step.status}; the run is now {view.status}"
    calls = "; ".join(f"{c.tool}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in view.next_calls)
    return f"{head}. {after}. Legal next call(s): {calls or 'none'}."


def _parse_inputs(inputs: dict[str, Any] | str | list[Any] | None) -> dict[str, Any] | None:
    """Some clients send the inputs object as JSON text; anything but an object is refused with an example."""
    if inputs is None or isinstance(inputs, dict):
        return inputs
    if isinstance(inputs, list):
        raise ToolError('inputs must be an object keyed by input name, e.g. {"version": "v1.2.3"}; got a list')
    try:
        parsed = json.loads(inputs) if inputs.strip() else {}
    except json.JSONDecodeError as exc:
        example = '{"version": "v1.2.3"}'
        raise ToolError(f"inputs must be an object, e.g. {example}; got text that is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ToolError('inputs must be an object, e.g. {"version": "v1.2.3"}')
    return parsed


def _pick_run(session: Session, ctx: Context, run_id: str | None, live_only: bool = False) -> str:
    session.engine.recover()  # runs a dead server left live read as interrupted, not running
    if run_id is not None:
        if session.store.get_run(run_id) is None:
            raise Refused(f"there is no run {run_id!r}", "unknown", [NextCall("ability_history", {"limit": 20})])
        return run_id
    sid = session.session_id(ctx)
    runs = session.store.runs(session_id=sid, live_only=True, limit=1) or (
        [] if live_only else session.store.runs(session_id=sid, limit=1)
    )
    if not runs:
        kind = "live run" if live_only else "run"
        raise Refused(
            f"this session has no {kind}; pass run_id",
            "no run",
            [NextCall("ability_history", {"limit": 20}), NextCall("ability_list", {})],
        )
    return runs[0].run_id


def add_matching_tools(server: MCPServer, catalog: Catalog) -> None:
    matcher = Matcher(catalog)

    @server.tool(name="ability_match", annotations=READ_ONLY)
    async def ability_match(
        text: Annotated[str, Field(description="The request in the user's words, e.g. 'ship v1.2 to production'")],
    ) -> MatchList:
        """Find the abilities whose triggers (keywords, patterns) fit a request; best first, every fit listed.

        Use before ability_run when unsure which ability applies. Empty when nothing fits.
        """
        await fresh(catalog)
        return matcher.match(text)
