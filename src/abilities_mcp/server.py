"""The MCP server: the only module that knows MCP. Tools are thin: check, call the engine, return a model."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from . import __version__
from .catalog import Catalog
from .engine import Engine, LiveRun
from .errors import AbilitiesError, NextCall, Refused
from .project import Project
from .results import AbilityList, History, Run, ValidationReport
from .store import DEFAULT_HISTORY_DAYS, DEFAULT_HISTORY_RUNS, Store
from .views import ability_info, history_view, run_view, validation_report

READ_ONLY = ToolAnnotations(read_only_hint=True)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False)
# Clients cut server instructions around 2 KB.
INSTRUCTIONS = """\
abilities-mcp runs project workflows ("abilities") whose steps must happen in order.
- Find one: ability_list (or ability_validate to see broken files).
- Start it: ability_run(name, inputs). Script steps are run by the server; do not run them yourself.
- A run returns when it ends, waits for you, or wait_seconds pass. Then follow `next_calls` exactly:
  usually ability_status(run_id, wait_seconds=30) until it ends.
- Agent steps come back to you as current_step.instructions: do the work (delegate to the named agent), then
  hand it back with ability_step_complete(run_id, step_id, output). Hand-backs are checked.
- Out-of-step calls are refused with the legal next call in the message.
- ability_cancel stops a run and kills its processes; ability_resume continues an interrupted or failed run.
"""


@dataclass
class Session:
    """Per-connection state: the engine and this client's session id."""

    engine: Engine
    store: Store
    default_session_id: str

    def session_id(self, ctx: Context) -> str:
        """$CLAUDE_CODE_SESSION_ID, else OpenCode's _meta.sessionID, else the id minted for this connection."""
        if env := os.environ.get("CLAUDE_CODE_SESSION_ID"):
            return env
        meta = ctx.request_context.meta or {}
        return str(meta.get("sessionID") or self.default_session_id)


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

    server = MCPServer("abilities-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)
    _add_ability_tools(server, catalog)
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
            found = [a for a in found if _agent_may_run(catalog, a.name, agent)]
        return AbilityList(abilities=sorted(found, key=lambda a: a.name))

    @server.tool(name="ability_validate", annotations=READ_ONLY)
    async def ability_validate(
        name: Annotated[str | None, Field(description="One ability; omit to check every file")] = None,
    ) -> ValidationReport:
        """Check ability files (and workflows.json): each problem with its file, field path and the fix."""
        with tool_errors():
            if name is not None:
                catalog.get(name)
            return validation_report(catalog, name)

    @server.tool(name="ability_run", annotations=ACTS)
    async def ability_run(
        name: Annotated[str, Field(description="Ability name from ability_list")],
        ctx: Context,
        inputs: Annotated[dict[str, Any] | str | list[Any] | None, Field(description="Input values by name")] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
    ) -> Run:
        """Start an ability. Returns when the run ends, waits for you, or wait_seconds pass; then follow next_calls."""
        session = _session(ctx)
        with tool_errors():
            run_id = session.engine.start(name, _parse_inputs(inputs), session.session_id(ctx))

        async def progress(live: LiveRun) -> None:
            await ctx.report_progress(live.finished_steps(), len(live.ability.steps), live.message)

        await session.engine.wait(run_id, wait_seconds, progress)
        return run_view(session.store.get_run(run_id))

    @server.tool(name="ability_status", annotations=READ_ONLY)
    async def ability_status(
        ctx: Context,
        run_id: Annotated[str | None, Field(description="Default: this session's live or latest run")] = None,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Wait up to this long for a change")] = 0,
    ) -> Run:
        """Read a run: status, current step, step results and the legal next calls."""
        session = _session(ctx)
        with tool_errors():
            rid = _pick_run(session, ctx, run_id)
            await session.engine.wait(rid, wait_seconds, first_change=True)
            return run_view(session.store.get_run(rid))

    @server.tool(name="ability_step_complete", annotations=ACTS)
    async def ability_step_complete(
        ctx: Context,
        run_id: Annotated[str, Field(description="The run waiting for you")],
        step_id: Annotated[str, Field(description="The current step's id (current_step.id)")],
        output: Annotated[str, Field(description="Your result for the step, checked against its validation")],
        success: Annotated[bool, Field(description="false when you could not do the step (say why in output)")] = True,
        wait_seconds: Annotated[float, Field(ge=0, le=600, description="Return after this long at most")] = 20,
    ) -> Run:
        """Hand the current agent step back. A hand-back that fails the step's validation is refused (an attempt)."""
        session = _session(ctx)
        with tool_errors():
            problem = session.engine.complete(run_id, step_id, output, success)
        await session.engine.wait(run_id, wait_seconds)
        view = run_view(session.store.get_run(run_id))
        if problem is not None:
            raise ToolError(_refused_handback(problem, view))
        return view

    @server.tool(name="ability_cancel", annotations=ToolAnnotations(destructive_hint=True))
    async def ability_cancel(
        ctx: Context,
        run_id: Annotated[str | None, Field(description="Default: this session's live run")] = None,
    ) -> Run:
        """Cancel a run: its step processes are killed before this returns."""
        session = _session(ctx)
        with tool_errors():
            rid = _pick_run(session, ctx, run_id, live_only=True)
            await session.engine.cancel(rid)
            return run_view(session.store.get_run(rid))

    @server.tool(name="ability_resume", annotations=ACTS)
    async def ability_resume(
        ctx: Context,
        run_id: Annotated[str, Field(description="An interrupted or failed run")],
        wait_seconds: Annotated[float, Field(ge=0, le=600)] = 20,
    ) -> Run:
        """Continue an interrupted or failed run from the step that did not finish, adopting it into this session."""
        session = _session(ctx)
        with tool_errors():
            session.engine.resume(run_id, session.session_id(ctx))
        await session.engine.wait(run_id, wait_seconds)
        return run_view(session.store.get_run(run_id))

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
    after = (
        f"Step {step.id!r} is handed out again (attempt {next(s.attempts for s in view.steps if s.id == step.id)})"
        if step
        else f"The run is now {view.status}"
    )
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


def _agent_may_run(catalog: Catalog, name: str, agent: str) -> bool:
    ability = catalog.winners[name].ability
    if ability is None:
        return False
    if ability.exclusive_agent:
        return ability.exclusive_agent == agent
    return not ability.compatible_agents or agent in ability.compatible_agents
