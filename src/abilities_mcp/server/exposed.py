"""Upstream tools listed directly (gateway.json `expose: "all"`): each as `server__tool` in tools/list, called
through the same gates as tool_call, with `notifications/tools/list_changed` when the set changes.

A server middleware rather than registered tools: the set is the upstreams' own, known only once they answer and
changing with them and with gateway.json, and a call needs the connection's session (its upstreams, its records).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.subscriptions import SubscriptionBus, ToolsListChanged
from mcp_types import CallToolResult, TextContent, Tool, ToolAnnotations

from ..errors import AbilitiesError
from ..gateway.config import SEPARATOR, Gateway
from ..gateway.directory import Entry, discover
from ..gateway.proxy import Outcome, Proxy, SessionOf
from ..gateway.upstreams import Progress, Started
from ..prerequisites.in_force import Workflows
from ..prerequisites.sessions import SessionState
from .forms import era_of, session_asker
from .session import session_of_request

if TYPE_CHECKING:
    from .gateway_tools import Finish, Go

log = logging.getLogger(__name__)
# How long tools/list waits for the exposed upstreams to list their tools: one that is slower is left out of this
# answer (and logged), and the client is told the list changed once it answers.
LIST_SECONDS = 10.0


class ExposedTools:
    """Server middleware: adds the exposed upstream tools to tools/list, serves their tools/call through the gates,
    and declares and sends tools/list_changed."""

    def __init__(self, gateway: Gateway, workflows: Workflows, ttl_seconds: float, own: set[str], bus: SubscriptionBus):
        self.gateway, self.workflows, self.ttl = gateway, workflows, ttl_seconds
        self.own = own  # this server's own tool names: never shadowed by an upstream's
        self.bus = bus  # the server's subscriptions/listen streams

    async def tell(self, session: Any) -> None:
        """Tell the client the tool list changed: on a handshake-era connection with notifications/tools/list_changed
        (which the SDK drops at 2026), and on every subscriptions/listen stream (the 2026 way; none otherwise)."""
        await session.send_tool_list_changed()
        await self.publish()

    async def publish(self) -> None:
        """The change, to the subscriptions/listen streams only."""
        await self.bus.publish(ToolsListChanged())

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method not in ("initialize", "tools/list") and self.changed_since_listed(session_of_request(ctx)):
            await self.tell(ctx.session)
        if ctx.method == "tools/call" and self.exposed_name((ctx.params or {}).get("name")):
            return await self._call(ctx)
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            tools = result.get("capabilities", {}).get("tools")
            if isinstance(tools, dict):
                tools["listChanged"] = True
        elif ctx.method == "tools/list" and isinstance(result, dict) and not (ctx.params or {}).get("cursor"):
            listed = await self._tools(ctx)
            result["tools"] = [*result.get("tools", []), *(_wire(t) for t in listed)]
            session_of_request(ctx).exposed_servers = set(self._servers())
        return result

    def _servers(self) -> list[str]:
        config = self.gateway.current()
        return [name for name in config.upstreams if name in config.exposed]

    def exposed_name(self, name: Any) -> bool:
        """Whether a tools/call of this name is an exposed upstream tool's."""
        if not isinstance(name, str) or name in self.own or SEPARATOR not in name:
            return False
        return name.partition(SEPARATOR)[0] in self._servers()

    async def _tools(self, ctx: Any) -> list[Tool]:
        servers = self._servers()
        session = session_of_request(ctx)
        if not servers or session.upstreams is None:
            return []
        config = self.gateway.current()
        entries: list[Entry] = []
        late: list[str] = []

        async def one(server: str) -> None:
            with anyio.move_on_after(LIST_SECONDS):
                listing = await discover(config, session.upstreams, only=server)
                for problem in listing.problems:
                    log.warning("exposed upstream %r is left out of tools/list: %s", server, problem)
                entries.extend(listing.entries)
                return
            late.append(server)

        async with anyio.create_task_group() as tasks:
            for server in servers:
                tasks.start_soon(one, server)
        for server in late:
            log.warning("exposed upstream %r did not list its tools within %gs: left out for now", server, LIST_SECONDS)
            session.upstreams.background(lambda s=server: self._announce_when_listed(ctx, s), name=f"list {server}")
        return [_tool(e) for e in sorted(entries, key=lambda e: (servers.index(e.server), e.name))]

    async def _announce_when_listed(self, ctx: Any, server: str) -> None:
        """A slow upstream finished listing: tell the client its tools are there now."""
        try:
            await discover(self.gateway.current(), session_of_request(ctx).upstreams, only=server)
            await self.tell(ctx.session)
        except Exception:  # the client may be gone; nothing else depends on this
            log.info("could not announce %r's tools", server, exc_info=True)

    async def _call(self, ctx: Any) -> CallToolResult:
        params = ctx.params or {}
        session = session_of_request(ctx)
        session_id = session.session_id(SimpleNamespace(request_context=ctx))
        meta = ctx.meta if isinstance(ctx.meta, dict) else {}
        token = meta.get("progress_token", meta.get("progressToken"))  # the SDK's name for it, or the wire's

        async def progress(value: float, total: float | None, message: str | None) -> None:
            if token is not None:
                await ctx.session.send_progress_notification(
                    token, value, total, message, related_request_id=ctx.request_id
                )

        sdk = ctx.session  # the client's form for a call a workflow holds for a person (handshake era)
        era = era_of(getattr(sdk, "client_capabilities", None), getattr(ctx, "protocol_version", None))
        ask = session_asker(sdk, ctx.request_id) if era == "legacy" and session.forms_work else None
        return await self.call(session, params["name"], params.get("arguments") or {}, session_id, progress, ask)

    async def call(
        self, session: Any, name: str, arguments: Any, session_id: str, progress: Progress | None, ask: Any = None
    ) -> CallToolResult:
        """An exposed tool's call through the gates: the upstream's result as it gave it, or a refusal as an error
        result."""
        if session.upstreams is None:
            return _refused("this server has no gateway connections")
        if not isinstance(arguments, dict):
            return _refused("arguments must be a JSON object")
        try:
            outcome = await self._proxy(session).call(name, arguments, session_id, progress=progress, ask=ask)
        except AbilitiesError as exc:
            return _refused(str(exc))
        return _passed_through(outcome)

    def ready_now(self, session: Any, name: str, arguments: Any) -> Go | None:
        """`call` ready to start from a loop callback when nothing has to be waited for before it is sent
        (Proxy.ready_now): its Go starts it for a session, handing `finish` a function that returns its result.
        None when it must take `call`'s way."""
        if session.upstreams is None or not isinstance(arguments, dict):
            return None  # `call` refuses it, saying why
        ready = self._proxy(session).ready_now(name, arguments)
        if ready is None:
            return None

        def go(session_id_of: SessionOf, progress: Progress | None, finish: Finish) -> Started | None:
            def finished(outcome: Callable[[], Outcome]) -> None:
                finish(lambda: _answer_of(outcome))

            return ready(session_id_of, finished, progress)

        return go

    def _proxy(self, session: Any) -> Proxy:
        """The gateway's calls for this connection: its upstreams and its session records."""
        return Proxy(self.gateway, self.workflows, session.upstreams, SessionState(session.store, self.ttl))

    def changed_since_listed(self, session: Any) -> bool:
        """Whether gateway.json changed which servers are exposed since this client listed the tools (true once:
        the client is to be told, and will list again)."""
        if self.to_tell(session):
            session.exposed_servers = None
            return True
        return False

    def to_tell(self, session: Any) -> bool:
        """changed_since_listed's answer, without taking it."""
        listed = getattr(session, "exposed_servers", None)
        return listed is not None and listed != set(self._servers())


def _answer_of(outcome: Callable[[], Outcome]) -> CallToolResult:
    """A started call's result as `call` gives it: the upstream's as it gave it, or a refusal as an error result."""
    try:
        return _passed_through(outcome())
    except AbilitiesError as exc:
        return _refused(str(exc))


def _tool(entry: Entry) -> Tool:
    return Tool(
        name=entry.qualified,
        description=f"[{entry.server}, through the abilities-mcp gateway] {entry.description}",
        input_schema=entry.input_schema or {"type": "object"},
        annotations=ToolAnnotations(read_only_hint=entry.read_only),
    )


def _wire(tool: Tool) -> dict[str, Any]:
    return tool.model_dump(by_alias=True, mode="json", exclude_none=True)


def _refused(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _passed_through(outcome: Outcome) -> CallToolResult:
    """The upstream's result as it gave it, what the gates did added after its content."""
    gate, result = outcome.gate, outcome.result
    notes = [f"[gateway] ran first: {r.tool} (workflow {r.workflow!r}, step {r.step})" for r in gate.ran]
    notes += [f"[gateway] {w}" for w in gate.warnings]
    extra = [TextContent(type="text", text="\n".join(notes))] if notes else []
    return CallToolResult(
        content=[*result.content, *extra], structured_content=result.structured_content, is_error=result.is_error
    )
