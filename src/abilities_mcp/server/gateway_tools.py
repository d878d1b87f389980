"""The gateway tools (DESIGN §5): tool_search, tool_call, tool_batch and tool_chain over the upstream servers of
gateway.json.

Thin: gateway/proxy.py does the work (discovery, arguments, gates, prerequisites, the upstream call); here its
answers become results and its refusals tool errors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, NamedTuple

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ..errors import AbilitiesError
from ..gateway import batch, cache
from ..gateway.config import Gateway
from ..gateway.directory import broken, search
from ..gateway.person import Ask, FormFirst
from ..gateway.proxy import Gate, Outcome, Proxy, SessionOf
from ..gateway.upstreams import Progress, Started
from ..prerequisites.approvals import APPROVED, USED, CallApproval, CallApprovals, describe
from ..prerequisites.gates import categories_of
from ..prerequisites.in_force import Workflows
from ..prerequisites.sessions import SessionState
from .forms import call_answer_from_retry, call_asker, call_input_required, form_era
from .session import session_of
from .views import iso


class FoundTool(BaseModel):
    tool: str = Field(description="The name to pass to tool_call: server__tool")
    server: str = Field(description="The upstream server (gateway.json) that offers it")
    category: str | None = Field(None, description="Its category in the tool-routing cache, if it has one")
    description: str
    input_schema: dict[str, Any] = Field(description="The JSON Schema its arguments must fit")
    score: float = Field(description="0..1, higher fits the task better")
    reasons: list[str] = Field(description="The task's words found in its name or description")


class ToolCache(BaseModel):
    refreshed_at: str | None = Field(description="When the tools were listed")
    stale: bool = Field(description="true: the listing is older than a day and is being refreshed")


class ToolSearch(BaseModel):
    tools: list[FoundTool] = Field(description="Best first; empty when no tool fits")
    cache: ToolCache
    warnings: list[str] = Field(default_factory=list, description="Upstream servers that could not be listed, and why")


class RanPrerequisite(BaseModel):
    workflow: str
    step: int
    tool: str = Field(description="The upstream tool the gateway called (server__tool)")
    arguments: dict[str, Any]
    attempts: int = Field(description="1 unless earlier attempts failed")


class GateInfo(BaseModel):
    verdict: str = Field(
        description="allow | suggest | warn | deny (deny: an enforce workflow's prerequisites were missing and "
        "the gateway ran them first: ran_prerequisites)"
    )
    ran_prerequisites: list[RanPrerequisite] = Field(description="What the gateway ran before the call, in order")
    warnings: list[str] = Field(description="warn workflows' missing steps, suggest workflows' notes")


class ToolCallOutput(BaseModel):
    tool: str = Field(description="The upstream tool called (server__tool); its result is this call's content")
    server: str
    is_error: bool = Field(description="The upstream reported an error")
    text: str = Field(
        description="The upstream's result as text: its text blocks, other blocks as [image], [resource_link]..."
    )
    structured_content: dict[str, Any] | None = Field(None, description="The upstream's structured result, if any")
    gate: GateInfo


class BatchCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="server__tool as tool_search names it, or the bare tool name")
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("arguments", "params"),
        description="The tool's arguments, fitting its input_schema",
    )


class ChainStep(BatchCall):
    output_as: str | None = Field(
        None, description='Name this step\'s result; later steps\' arguments use it as "$name" or "$name.field"'
    )


class CallResult(BaseModel):
    tool: str = Field(description="The upstream tool (server__tool), or the name given when it could not be resolved")
    status: Literal["ok", "error", "refused"] = Field(
        description="ok; error: the upstream failed or reported an error; refused: the gateway sent nothing"
    )
    result: Any = Field(None, description="ok: the upstream's structured content if any, else its text")
    error: str | None = Field(None, description="Why it failed or was refused")
    gate: GateInfo | None = Field(None, description="What the gates did (absent when refused before the gates)")
    duration_ms: float
    bytes: int = Field(description="The size of result (or error) as UTF-8 JSON")
    attempts: int = Field(description="How many times it was sent: 0 when refused, up to 3 for a read-only tool")


class BatchOutput(BaseModel):
    results: list[CallResult] = Field(description="One per call, in the order given")


class ChainOutput(BaseModel):
    results: list[CallResult] = Field(description="One per step run, in order; the failed step last")
    variables: dict[str, Any] = Field(description="The results named by output_as, as later steps saw them")
    failed_step: int | None = Field(description="The step (from 1) the chain stopped at, null when all ran")


log = logging.getLogger(__name__)
READ_ONLY = ToolAnnotations(read_only_hint=True)
# An upstream tool may do anything: the gateway cannot promise it is read-only or harmless.
PROXIES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)


# tool_call's work for a connection's Session: (session, tool, arguments, session_id, progress) -> its result.
CallThrough = Callable[[Any, str, dict[str, Any], str, Progress | None], Awaitable[CallToolResult]]
# Where tool_call started without a task ends: handed a function that returns its result or raises as call_through.
Finish = Callable[[Callable[[], CallToolResult]], None]
# A call ready to start without a task: (session_id_of, progress, finish) -> Started, or None when it must wait after
# all; session_id_of() is the call's session id, asked for only when the gates or the record need it (Proxy.ready_now).
Go = Callable[[SessionOf, Progress | None, Finish], Started | None]
# tool_call ready to start without a task (session, tool, arguments); None when it must wait.
CallNow = Callable[[Any, str, dict[str, Any]], Go | None]


class GatewayCalls(NamedTuple):
    """tool_call's work, for the stdio transport's direct lane (server/lane.py): awaited, or started at once."""

    through: CallThrough
    now: CallNow


def add_gateway_tools(server: MCPServer, gateway: Gateway, workflows: Workflows, ttl_seconds: float) -> GatewayCalls:
    """tool_search, tool_call, tool_batch and tool_chain, over the upstreams of gateway.json and the connection's
    session records. Returns tool_call's work, for the stdio transport's direct lane (server/lane.py)."""

    def proxy(ctx: Context) -> tuple[Proxy, str]:
        return proxy_of(session_of(ctx)), session_of(ctx).session_id(ctx)

    def proxy_of(session: Any) -> Proxy:
        return Proxy(gateway, workflows, session.upstreams, SessionState(session.store, ttl_seconds))

    async def call_through(
        session: Any,
        tool: str,
        arguments: dict[str, Any],
        session_id: str,
        progress: Progress | None,
        ask: Ask | None = None,
        form_first: bool = False,
    ) -> CallToolResult:
        """tool_call: the upstream's result with what the gates did; raises AbilitiesError (a refusal, a bad
        argument, an upstream that failed) and FormFirst (a 2026-era client's form for a person's yes)."""
        outcome = await proxy_of(session).call(
            tool, arguments, session_id, progress=progress, ask=ask, form_first=form_first
        )
        return _result(outcome)

    def call_now(session: Any, tool: str, arguments: dict[str, Any]) -> Go | None:
        """tool_call ready to start at once when nothing has to be waited for first (Proxy.ready_now); None
        otherwise. Finding that out reads nothing of the call's session: the lane claims it only for a call it
        keeps."""
        ready = proxy_of(session).ready_now(tool, arguments)
        if ready is None:
            return None

        def go(session_id_of: SessionOf, progress: Progress | None, finish: Finish) -> Started | None:
            def finished(outcome: Callable[[], Outcome]) -> None:
                finish(lambda: _result(outcome()))

            return ready(session_id_of, finished, progress)

        return go

    refreshing: set[str] = set()  # cache files a background refresh is writing now

    async def refresh_in_background(connections: Any) -> None:
        path = cache.cache_path(gateway.root)
        try:
            found = await cache.refresh(path, gateway.current(), connections)
            if not found.written:  # kept as it was: the next search tries again
                log.warning("the tool cache %s was not refreshed: %s", path, "; ".join(found.problems))
        except Exception:  # a background refresh must never take the server down; the next search tries again
            log.warning("refreshing the tool cache %s failed", path, exc_info=True)
        finally:
            refreshing.discard(str(path))

    async def tools_for_search(ctx: Context) -> tuple[Any, dict[str, str], bool]:
        """The tools to route over: the cache when it fits gateway.json (a stale one is refreshed in the
        background), else live discovery."""
        found = cache.read(cache.cache_path(gateway.root), gateway.current())
        if found is None:
            return await proxy(ctx)[0].listing(), {}, False
        path = str(cache.cache_path(gateway.root))
        if found.stale and path not in refreshing:
            refreshing.add(path)
            connections = session_of(ctx).upstreams
            connections.background(lambda: refresh_in_background(connections), name="tool cache refresh")
        return found.listing._replace(problems=broken(gateway.current())), found.categories, found.stale

    @server.tool(name="tool_search", annotations=READ_ONLY)
    async def tool_search(
        task: Annotated[str, Field(description="What you want to do, in the user's words")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=50, description="How many tools at most")] = 5,
    ) -> ToolSearch:
        """Find the tool for a task among the MCP servers behind this gateway (gateway.json). Call the one you pick
        with tool_call(tool, arguments), its arguments fitting input_schema."""
        listing, cached_categories, stale = await tools_for_search(ctx)
        categories = workflows.current().categories
        tools = [
            FoundTool(
                tool=f.entry.qualified,
                server=f.entry.server,
                category=cached_categories.get(f.entry.qualified)
                or min(categories_of(f.entry.qualified, categories), default=None),
                description=f.entry.description,
                input_schema=f.entry.input_schema,
                score=f.score,
                reasons=f.reasons,
            )
            for f in search(listing, task, limit)
        ]
        state = ToolCache(refreshed_at=iso(listing.refreshed_at), stale=stale)
        return ToolSearch(tools=tools, cache=state, warnings=listing.problems)

    @server.tool(name="tool_call", annotations=PROXIES)
    async def tool_call(
        tool: Annotated[str, Field(description="server__tool as tool_search names it, or the bare tool name")],
        ctx: Context,
        arguments: Annotated[
            dict[str, Any] | None, Field(description="The tool's arguments, fitting its input_schema")
        ] = None,
    ) -> ToolCallOutput | InputRequiredResult:
        """Call a tool of an MCP server behind this gateway. Workflows (workflows.json) apply: in enforce mode the
        gateway first runs the missing prerequisite tools itself (gate.ran_prerequisites), or refuses naming the
        calls to make; warn and suggest workflows add gate.warnings."""
        session = session_of(ctx)
        # A call a workflow holds for a person's yes: the client's form asks them where it shows forms (a 2026-era
        # client by repeating this call with the answer), racing `abilities-mcp approve` at their terminal.
        repeated = call_answer_from_retry(ctx, CallApprovals(session.store))
        if isinstance(repeated, CallApproval) and repeated.state() not in (APPROVED, USED):
            raise ToolError(
                f"Refused: call approval {repeated.call_id} is {describe(repeated)}; the call was not sent."
            )
        era = form_era(ctx) if session.forms_work else None
        try:
            return await call_through(
                session,
                tool,
                arguments or {},
                session.session_id(ctx),
                ctx.report_progress,
                ask=call_asker(ctx) if era == "legacy" else None,
                form_first=era == "modern" and not repeated,
            )
        except FormFirst as first:
            return call_input_required(first.approval)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(name="tool_batch", annotations=PROXIES)
    async def tool_batch(
        calls: Annotated[
            list[BatchCall],
            Field(
                description=f"At most {batch.MAX_BATCH} calls, run in this order",
                json_schema_extra={"maxItems": batch.MAX_BATCH},
            ),
        ],
        ctx: Context,
    ) -> BatchOutput:
        """Call several tools behind this gateway in one request, in order, each through the same gates as
        tool_call. A failed call does not stop the others; a read-only tool is tried up to 3 times. Each result
        has its status (ok, error, refused)."""
        gated, session_id = proxy(ctx)
        try:
            items = await batch.batch(gated, [(c.tool, c.arguments) for c in calls], session_id)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        return BatchOutput(results=[_call_result(i) for i in items])

    @server.tool(name="tool_chain", annotations=PROXIES)
    async def tool_chain(
        steps: Annotated[
            list[ChainStep],
            Field(
                description=f"At most {batch.MAX_CHAIN} steps, run in this order",
                json_schema_extra={"maxItems": batch.MAX_CHAIN},
            ),
        ],
        ctx: Context,
    ) -> ChainOutput:
        """Call tools behind this gateway one after another, passing results on: a step with output_as "x" names
        its result, and a later step's argument written "$x" takes it whole, "$x.field" one field of it (of the
        structured content, or of the text parsed as JSON). Each step passes the same gates as tool_call. Stops at
        the first failure: failed_step says which."""
        gated, session_id = proxy(ctx)
        try:
            chained = await batch.chain(gated, [(s.tool, s.arguments, s.output_as) for s in steps], session_id)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        return ChainOutput(
            results=[_call_result(i) for i in chained.items],
            variables=chained.variables,
            failed_step=chained.failed_step,
        )

    return GatewayCalls(call_through, call_now)


def _gate_info(gate: Gate) -> GateInfo:
    return GateInfo(
        verdict=gate.verdict,
        ran_prerequisites=[RanPrerequisite(**r._asdict()) for r in gate.ran],
        warnings=gate.warnings,
    )


def _call_result(item: batch.Item) -> CallResult:
    fields = item._asdict()
    fields["gate"] = _gate_info(item.gate) if item.gate is not None else None
    return CallResult(**fields)


def _result(outcome: Outcome) -> Any:
    """The upstream's content as this call's content (its warnings after it), the gate in structured content."""
    gate = outcome.gate
    result = outcome.result
    # ToolCallOutput's dump, made directly: every value already has its field's type (the hot path's, once a call).
    output = {
        "tool": outcome.entry.qualified,
        "server": outcome.entry.server,
        "is_error": bool(result.is_error),
        "text": batch.text_of(result),
        "structured_content": result.structured_content,
        "gate": {
            "verdict": gate.verdict,
            "ran_prerequisites": [r._asdict() for r in gate.ran],
            "warnings": list(gate.warnings),
        },
    }
    notes = [f"[gateway] ran first: {r.tool} (workflow {r.workflow!r}, step {r.step})" for r in gate.ran]
    notes += [f"[gateway] {w}" for w in gate.warnings]
    extra = [TextContent(type="text", text="\n".join(notes))] if notes else []
    return CallToolResult(content=[*result.content, *extra], structured_content=output, is_error=result.is_error)
