"""The MCP server and the ability tools. Tools are thin: check, call the engine, return a model."""

from __future__ import annotations

import json
import os
import secrets
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from mcp_types import InputRequiredResult
from pydantic import BaseModel, Field

from .. import __version__
from ..abilities import agents
from ..abilities.catalog import Catalog
from ..abilities.triggers import Matcher, MatchList
from ..engine.core import Engine
from ..engine.live import LiveRun
from ..errors import AbilitiesError, NextCall, Refused
from ..prerequisites.sessions import DEFAULT_TTL_SECONDS
from ..state.project import Project
from ..state.store import DEFAULT_HISTORY_DAYS, DEFAULT_HISTORY_RUNS, Store
from .forms import MAX_FORMS_PER_CALL, answer_from_retry, ask_by_form, form_era, input_required, open_question
from .results import AbilityList, History, Run, ValidationReport
from .skill_tools import SkillServer, add_skill_tools
from .views import ability_info, history_view, run_view, validation_report
from .workflow_tools import add_workflow_tools

READ_ONLY = ToolAnnotations(read_only_hint=True)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False)
# Clients cut server instructions around 2 KB.
INSTRUCTIONS = """\
abilities-mcp runs project workflows ("abilities") whose steps must happen in order, and serves Agent Skills.
- Find one: ability_match(text) ranks abilities whose triggers fit the request; ability_list shows all.
- Start it: ability_run(name, inputs). Script steps are run by the server; do not run them yourself.
- A run returns when it ends, waits for you, or wait_seconds pass. Then follow `next_calls` exactly:
  usually ability_status(run_id, wait_seconds=30) until it ends.
- Agent and skill steps come back to you as current_step.instructions: do the work (delegate to the named agent,
  follow the skill handed out), then hand it back with ability_step_complete(run_id, step_id, output).
- Out-of-step calls are refused with the legal next call in the message.
- Approval and decision steps are answered by a person (a form your client shows, or `abilities-mcp approve`
  in their terminal), never by you unless the ability is enforcement: loose.
- ability_cancel stops a run and kills its processes; ability_resume continues an interrupted or failed run.
Skills: before a specialised task (documents, spreadsheets, slides, testing, design ...), call
skill_route(task); when it returns a match, skill_load(name) and follow the instructions it returns. Read a
skill's other files only when those instructions point to them: skill_read(name, path). An empty skill_route
means no skill fits: do the task without one. skill_list shows every skill.
Workflows: before calling another server's tool that a workflow gates (workflow_list), call workflow_check(tool,
task). On deny, call the missing tools in order, workflow_record(tool, result) after each, then check again.
"""


@dataclass
class Session:
    """Per-connection state: the engine and this client's session id."""

    engine: Engine
    store: Store
    default_session_id: str
    forms_work: bool = True  # cleared when this client failed a form: its runs wait for the terminal command

    def view(self, run_id: str, warning: str | None = None) -> Run:
        view = run_view(self.store.get_run(run_id), self.store.get_run)
        if warning:
            view.warnings.append(warning)
        return view

    async def settle(
        self, ctx: Context, run_id: str, wait_seconds: float, progress=None, *, first_change: bool = False
    ) -> Run | InputRequiredResult:
        """Wait as the caller asked; when the run then waits for a person and the client shows forms, ask there."""
        await self.engine.wait(run_id, wait_seconds, progress, first_change=first_change)
        for _ in range(MAX_FORMS_PER_CALL):
            asking = open_question(self.engine, run_id)
            era = form_era(ctx) if asking is not None and self.forms_work else None
            if asking is None or era is None:
                break
            if era == "modern":
                return input_required(run_id, *asking)
            if not await ask_by_form(self.engine, ctx, *asking):
                self.forms_work = False
                break
            await self.engine.wait(run_id, wait_seconds, progress)
        return self.view(run_id)

    async def act_then_settle(
        self, ctx: Context, run_id: str, wait_seconds: float, act: Callable[[], object]
    ) -> Run | InputRequiredResult:
        """Do what the call asks (refused or, under loose, warned), then wait as the caller asked."""
        try:
            act()
        except Refused as refusal:
            return self.refused_or_warned(run_id, refusal)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        return await self.settle(ctx, run_id, wait_seconds)

    def refused_or_warned(self, run_id: str | None, refusal: Refused) -> Run:
        """Under enforcement: loose an out-of-step call is answered with a warning and changes nothing."""
        record = self.store.get_run(run_id) if run_id else None
        if record is None or record.enforcement != "loose":
            raise ToolError(str(refusal)) from refusal
        return self.view(record.run_id, f"Not done (enforcement: loose, so this is a warning): {refusal}")

    def session_id(self, ctx: Context) -> str:
        """$CLAUDE_CODE_SESSION_ID, else OpenCode's _meta.sessionID, else the id minted for this connection."""
        if env := os.environ.get("CLAUDE_CODE_SESSION_ID"):
            return env
        meta = ctx.request_context.meta or {}
        return str(meta.get("sessionID") or self.default_session_id)


class AbilitiesServer(SkillServer):
    """The MCPServer with skill resources, generating each result model's output schema once, not once per tool.

    Seven tools return a Run; generating its JSON Schema for each cost ~5 ms apiece at start-up. FuncMetadata's
    fields are read live (the SDK documents this), so later tools get the first one's schema.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._schemas: dict[type, dict[str, Any]] = {}

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> None:
        model = _result_model(fn)
        if model is None or model not in self._schemas:
            super().add_tool(fn, name, **kwargs)
            if model is not None:
                self._schemas[model] = self._tool_manager.get_tool(name or fn.__name__).fn_metadata.output_schema
            return
        super().add_tool(fn, name, **{**kwargs, "structured_output": False})
        metadata = self._tool_manager.get_tool(name or fn.__name__).fn_metadata
        metadata.output_model, metadata.output_schema = model, self._schemas[model]


def _result_model(fn: Callable[..., Any]) -> type | None:
    """The pydantic model a tool returns (an InputRequiredResult alternative aside), or None for anything else."""
    returned = typing.get_type_hints(fn).get("return")
    found = [t for t in typing.get_args(returned) or (returned,) if t is not InputRequiredResult]
    if len(found) == 1 and isinstance(found[0], type) and issubclass(found[0], BaseModel):
        return found[0]
    return None


@contextmanager
def tool_errors() -> Iterator[None]:
    """The caller's mistakes become tool errors (isError) with the text that says what to do."""
    try:
        yield
    except AbilitiesError as exc:
        raise ToolError(str(exc)) from exc


def create_server(
    project: Project,
    *,
    retry_base: float | None = None,
    history_runs: int = DEFAULT_HISTORY_RUNS,
    history_days: float = DEFAULT_HISTORY_DAYS,
    session_ttl: float = DEFAULT_TTL_SECONDS,
) -> MCPServer:
    """Build a server for one project; each connection gets its own engine over the shared state file."""
    catalog = Catalog(project)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Session]:
        store = Store(project.state_db)
        store.prune(history_runs, history_days)
        engine = Engine(store, catalog, **({"retry_base": retry_base} if retry_base is not None else {}))
        try:
            async with engine.running():
                yield Session(engine, store, f"mcp-{secrets.token_hex(6)}")
        finally:
            store.close()

    server = AbilitiesServer(
        catalog.skillset, "abilities-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan
    )
    _add_ability_tools(server, catalog)
    _add_matching_tools(server, catalog)
    add_skill_tools(server, catalog.skillset)
    add_workflow_tools(server, catalog.workflows, session_ttl)
    return server


def _session(ctx: Context) -> Session:
    return ctx.request_context.lifespan_context


def _add_ability_tools(server: MCPServer, catalog: Catalog) -> None:
    @server.tool(name="ability_list", annotations=READ_ONLY)
    async def ability_list(
        agent: Annotated[str | None, Field(description="Only abilities this agent may run")] = None,
    ) -> AbilityList:
        """List the project's abilities (workflows with enforced steps): names, inputs, steps, and whether valid."""
        catalog.refresh()
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
        with tool_errors():
            if name is not None:
                catalog.require_file(name)
            return validation_report(catalog, name)

    @server.tool(name="ability_run", annotations=ACTS)
    async def ability_run(
        name: Annotated[str, Field(description="Ability name from ability_list")],
        ctx: Context,
        inputs: Annotated[dict[str, Any] | str | list[Any] | None, Field(description="Input values by name")] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
        agent: Annotated[str | None, Field(description="The agent running it (checked against the ability)")] = None,
    ) -> Run | InputRequiredResult:
        """Start an ability. Returns when the run ends, waits for you, or wait_seconds pass; then follow next_calls."""
        session = _session(ctx)
        run_id = answer_from_retry(session.engine, ctx)  # a 2026-era client repeating the call with a form answer
        if run_id is None:
            with tool_errors():
                if agent:
                    agents.refuse_agent(catalog, name, agent)
                run_id = session.engine.start(name, _parse_inputs(inputs), session.session_id(ctx))

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
        session = _session(ctx)
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
        """Hand the current agent step back. A hand-back that fails the step's validation is refused (an attempt)."""
        session = _session(ctx)
        if answer_from_retry(session.engine, ctx) is not None:  # the hand-back was taken in the first round
            return await session.settle(ctx, run_id, wait_seconds)
        try:
            problem = session.engine.complete(run_id, step_id, output, success)
        except Refused as refusal:
            return session.refused_or_warned(run_id, refusal)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        result = await session.settle(ctx, run_id, wait_seconds)
        if problem is not None:
            raise ToolError(_refused_handback(problem, session.view(run_id)))
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
        session = _session(ctx)
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
        session = _session(ctx)
        act = partial(session.engine.relay, run_id, step_id, decision=decision)
        return await session.act_then_settle(ctx, run_id, wait_seconds, act)

    @server.tool(name="ability_cancel", annotations=ToolAnnotations(destructive_hint=True))
    async def ability_cancel(
        ctx: Context,
        run_id: Annotated[str | None, Field(description="Default: this session's live run")] = None,
    ) -> Run:
        """Cancel a run: its step processes are killed before this returns."""
        session = _session(ctx)
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
        session = _session(ctx)
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
        session = _session(ctx)
        session.engine.recover()  # a dead server's runs are listed as interrupted, as ability_status shows them
        return history_view(session.store.runs(limit=limit))


def _refused_handback(problem: str, view: Run) -> str:
    """A refused hand-back: the reason, what it cost, and the legal next call."""
    step = view.current_step
    if view.status == "awaiting_agent" and step is not None:
        attempt = next((s.attempts for s in view.steps if s.id == step.id), 0)
        after = f"Step {step.id!r} is handed out again (attempt {attempt})"
    elif view.status == "awaiting_decision":
        after = "A person now decides whether to retry, continue or stop (on_failure: ask)"
    else:
        after = f"The run is now {view.status}"
    calls = "; ".join(f"{c.tool}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in view.next_calls)
    return f"Hand-back refused: {problem}. It counted as an attempt. {after}. Legal next call(s): {calls or 'none'}."


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


def _add_matching_tools(server: MCPServer, catalog: Catalog) -> None:
    matcher = Matcher(catalog)

    @server.tool(name="ability_match", annotations=READ_ONLY)
    async def ability_match(
        text: Annotated[str, Field(description="The request in the user's words, e.g. 'ship v1.2 to production'")],
    ) -> MatchList:
        """Find the abilities whose triggers (keywords, patterns) fit a request; best first, every fit listed.

        Use before ability_run when unsure which ability applies. Empty when nothing fits.
        """
        return matcher.match(text)
