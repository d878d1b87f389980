"""The gateway's hot path on stdio: a tools/call of `tool_call` or of an exposed upstream tool, taken off the
transport and answered directly, skipping the SDK server's per-request machinery, with the answer the SDK would
send (the same result, the same per-version sieve, the same error texts).

The SDK keeps everything else, and every call of these that is out of the ordinary: the lane takes a call only
once the handshake is done on a handshake-era protocol version, and only in the plain shape (`name`, `arguments`,
`_meta`; tool_call's arguments exactly `tool` and an optional object `arguments`). Any other goes the SDK's way,
whose errors are the canonical ones. Progress goes out as the SDK's `report_progress` sends it; a
`notifications/cancelled` for a call the lane holds cancels it, and the call is not answered, as the SDK does.

A call the gateway can send without waiting for anything (its upstream up and listed, its arguments fitting, no
prerequisite to run, no workflow that may ask a person: gateway/proxy.py `Proxy.ready_now`) is started right in the
loop's callback that read its line, and answered from the callback that reads the upstream's; any other gets a task
of its own (`_answer`), or is the SDK's when a workflow may ask a person (its context shows the client's form).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp_types import PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY, CallToolResult, TextContent
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .. import tracing
from ..errors import AbilitiesError

if TYPE_CHECKING:
    from ..gateway.upstreams import Started
    from .exposed import ExposedTools
    from .gateway_tools import CallNow, CallThrough, Go
    from .session import Session

log = logging.getLogger(__name__)

# The one tool of this server the lane serves (the exposed upstream tools are the others).
TOOL_CALL = "tool_call"
_PARAMS = frozenset({"name", "arguments", "_meta"})
_TOOL_CALL_ARGUMENTS = frozenset({"tool", "arguments"})

# A call the lane took: (session, its JSON-RPC params, progress) -> the tool's result.
Work = Callable[["Session", Mapping[str, Any], Any], Awaitable[CallToolResult]]


class Lane:
    """The stdio transport's shortcut for gateway calls: `take` each message read, `sent` each one written."""

    def __init__(self) -> None:
        self.session: Session | None = None  # the connection's, while the server's lifespan runs
        self.call_through: CallThrough | None = None  # tool_call's work (server/gateway_tools.py)
        self.call_now: CallNow | None = None  # the same, started without a task when nothing must be waited for
        self.exposed: ExposedTools | None = None  # the exposed upstream tools (server/exposed.py)
        self.server_info: Callable[[], dict[str, Any]] | None = None  # the SDK's serverInfo stamp (2026 results)
        # Whether a gateway call may wait for a person's yes (a workflow with an approval): such calls go the SDK's
        # way, whose context shows the client's form.
        self.asks_person: Callable[[], bool] | None = None
        self._modern: bool | None = None  # the connection's era, decided by its first request as the SDK decides it
        self._initialize_id: types.RequestId | None = None
        self._version: str | None = None  # negotiated, when it is a handshake-era version
        self._initialized = False
        self._calls: dict[types.RequestId, anyio.CancelScope] = {}
        self._started: dict[types.RequestId, Started] = {}  # calls started without a task, waiting for the upstream
        self._spans: dict[types.RequestId, tracing.Span] = {}  # their spans, ended with their answer
        self._tasks: TaskGroup | None = None
        self._out: Callable[[types.JSONRPCMessage], Awaitable[None]] | None = None
        self._out_now: Callable[[types.JSONRPCMessage], None] | None = None

    def attach(
        self,
        tasks: TaskGroup,
        out: Callable[[types.JSONRPCMessage], Awaitable[None]],
        out_now: Callable[[types.JSONRPCMessage], None],
    ) -> None:
        """Where the lane's calls run and how its messages are written (in turn with the server's): `out` from a
        task, `out_now` from a loop callback."""
        self._tasks, self._out, self._out_now = tasks, out, out_now

    def detach(self) -> None:
        """The transport is closing: calls still running are not answered."""
        self._out = self._out_now = None
        for scope in self._calls.values():
            scope.cancel()
        for started in self._started.values():
            started.cancel()
        self._started.clear()
        for span in self._spans.values():
            span.end()
        self._spans.clear()

    def take(self, message: types.JSONRPCMessage) -> bool:
        """Whether the lane handles this incoming message; the SDK never sees one it takes."""
        if isinstance(message, types.JSONRPCRequest):
            if self._modern is None:
                self._modern = message.method != "initialize" and _enveloped(message.params)
            if message.method == "initialize" and not self._modern:
                self._initialize_id, self._version, self._initialized = message.id, None, False
            elif message.method == "tools/call" and (version := self._version_for(message.params)) is not None:
                work = self._work(message.params)
                if work is not None:
                    go = self._ready(message.id, message.params, exposed=work == self._exposed_call)
                    if go is None and self.asks_person is not None and self.asks_person():
                        return False  # it may wait for a person's yes: the SDK's way, whose context shows the form
                    span = _span(message.id, message.params, version)
                    with span.current():
                        work = self._now_or_later(message.id, message.params, work, version, span, go)
                        if work is None:
                            return True
                        assert self._tasks is not None
                        log.debug("tools/call %r (id %r) taken by the gateway lane", message.params["name"], message.id)
                        self._tasks.start_soon(self._answer, message.id, message.params, work, span, version)
                    return True
        elif isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/initialized":
                self._initialized = True
            elif message.method == "notifications/cancelled":
                return self._cancelled((message.params or {}).get("requestId"))
        return False

    def _cancelled(self, request_id: Any) -> bool:
        """Cancel a call the lane holds (started at once: dropped, the upstream told; in a task: its scope
        cancelled); False for any other id, which is the SDK's."""
        key = coerce_request_id(request_id) if type(request_id) in (int, str) else None
        if key is None:
            return False
        started = self._started.pop(key, None)
        if started is not None:
            started.cancel()
            self._spans.pop(key, tracing.QUIET).end()
            return True
        scope = self._calls.get(key)
        if scope is not None:
            scope.cancel()
            return True
        return False

    def sent(self, message: types.JSONRPCMessage) -> None:
        """Watch the answer to initialize for the protocol version it settled on."""
        if self._initialize_id is None or not isinstance(message, types.JSONRPCResponse):
            return
        if message.id == self._initialize_id:
            version = message.result.get("protocolVersion")
            self._version = version if version in HANDSHAKE_PROTOCOL_VERSIONS else None
            self._initialize_id = None

    def _version_for(self, params: Any) -> str | None:
        """The protocol version a tools/call is answered in, when the lane may take it: a handshake-era connection's
        once its handshake is done; on a 2026 connection, the version the call's own envelope names when the SDK's
        ladder accepts it (a call it refuses goes to the SDK, whose refusal is the canonical one)."""
        if self.session is None or self._out is None:
            return None
        if not self._modern:  # an enveloped call here is the SDK's to refuse (INVALID_REQUEST)
            return self._version if self._initialized and not _enveloped(params) else None
        route = classify_inbound_request({"method": "tools/call", "params": params})
        return None if isinstance(route, InboundLadderRejection) else route.protocol_version

    def _work(self, params: Any) -> Work | None:
        """What to do for a tools/call the lane can take; None for any the SDK must judge."""
        if not isinstance(params, dict) or not params.keys() <= _PARAMS:
            return None
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(params.get("_meta", {}), dict) or not isinstance(arguments, dict | None):
            return None
        if name == TOOL_CALL and self.call_through is not None and _plain_tool_call(arguments):
            return self._tool_call
        if isinstance(name, str) and self.exposed is not None and self.exposed.exposed_name(name):
            return self._exposed_call
        return None

    def _now_or_later(
        self,
        request_id: types.RequestId,
        params: dict[str, Any],
        work: Work,
        version: str,
        span: tracing.Span,
        go: Go | None,
    ) -> Work | None:
        """The call started at once (None), or its work for a task. Either way its session is found here, once: an
        announcement the hook made for it (state/claims.py) is used up by the claim. A call started at once claims
        it before it is sent only when its gates read the session (a workflow triggers on it); else just after,
        while the upstream works on the call."""
        session_id_of = _SessionOf(self.session, params)  # type: ignore[arg-type]
        if go is not None and self._start(request_id, params, session_id_of, version, go, span):
            try:
                session_id_of()
            except Exception:  # the call is out; what needs the session (its record) fails and says why
                log.exception("finding the session of a tools/call sent at once failed")
            return None
        try:
            session_id = session_id_of()
        except Exception:  # the task looks again, and answers the failure
            log.exception("finding the session of a tools/call failed")
            return work
        return functools.partial(work, session_id=session_id)

    def _ready(self, request_id: types.RequestId, params: dict[str, Any], exposed: bool) -> Go | None:
        """The call, ready to start in the loop's callback when the gateway has nothing to wait for before sending
        it (gateway/proxy.py: Proxy.ready_now), found without reading or writing anything of its session; None
        when it must take the waiting way (a task of its own: `_answer`, or the SDK's when a person may be asked)."""
        session, key = self.session, coerce_request_id(request_id)
        if self._out_now is None or key in self._started or key in self._calls:
            return None
        assert session is not None
        if self.exposed is not None and self.exposed.to_tell(session):
            return None  # the client is told first, which takes a task
        arguments = params.get("arguments") or {}
        try:
            if exposed:
                assert self.exposed is not None
                return self.exposed.ready_now(session, params["name"], arguments)
            if self.call_now is not None:
                return self.call_now(session, arguments["tool"], arguments.get("arguments") or {})
        except Exception:  # a bug of ours before anything was sent: the waiting way says what it is
            log.exception("readying %r to start at once failed; it takes the waiting way", params.get("name"))
        return None

    def _start(
        self,
        request_id: types.RequestId,
        params: dict[str, Any],
        session_id_of: Callable[[], str],
        version: str,
        go: Go,
        span: tracing.Span = tracing.QUIET,
    ) -> bool:
        """Start a ready call here, in the loop's callback; its answer is written when the upstream's arrives.
        False when it must take the waiting way after all (prerequisites to run), which then does everything but
        find the session."""
        key = coerce_request_id(request_id)
        token = (params.get("_meta") or {}).get("progressToken")
        progress = self._progress(token) if isinstance(token, int | str) else None

        def finish(result: Callable[[], CallToolResult]) -> None:
            if self._started.pop(key, None) is None or self._out_now is None:
                return  # cancelled, or the transport is closing
            answer = self._finished(request_id, result, params["name"], version)
            _ended(self._spans.pop(key, span), answer)
            self._out_now(answer)

        try:
            started = go(session_id_of, progress, finish)
        except Exception:  # a bug of ours before anything was sent: the waiting way says what it is
            log.exception("starting %r at once failed; it takes the waiting way", params.get("name"))
            return False
        if started is None:
            return False
        log.debug("tools/call %r (id %r) started at once by the gateway lane", params.get("name"), request_id)
        self._started[key] = started
        self._spans[key] = span
        return True

    def _finished(
        self, request_id: types.RequestId, result: Callable[[], CallToolResult], name: str, version: str
    ) -> types.JSONRPCMessage:
        """The answer to a call started at once, as `_answer` gives it: tool_call's failures in MCPServer's words, a
        bug in an exposed tool's call as a JSON-RPC error (the middleware's path)."""
        try:
            return self._response(request_id, result(), version)
        except Exception as exc:
            if name == TOOL_CALL:
                return self._response(request_id, _failed(exc), version)
            log.error("tool %r raised an unexpected exception", name, exc_info=exc)
            return _failure(request_id, types.INTERNAL_ERROR, "Internal error")

    async def _tool_call(
        self, session: Session, params: Mapping[str, Any], progress: Any, session_id: str | None = None
    ) -> CallToolResult:
        assert self.call_through is not None
        arguments = params["arguments"]
        try:
            if session_id is None:
                session_id = _session_id(session, params)
            return await self.call_through(
                session, arguments["tool"], arguments.get("arguments") or {}, session_id, progress
            )
        except Exception as exc:
            return _failed(exc)

    async def _exposed_call(
        self, session: Session, params: Mapping[str, Any], progress: Any, session_id: str | None = None
    ) -> CallToolResult:
        assert self.exposed is not None
        arguments = params.get("arguments") or {}
        if session_id is None:
            session_id = _session_id(session, params)
        return await self.exposed.call(session, params["name"], arguments, session_id, progress)

    async def _answer(
        self, request_id: types.RequestId, params: dict[str, Any], work: Work, span: tracing.Span, version: str
    ) -> None:
        """Answer a call from a task of its own, in the span `take` began for it."""
        answer: types.JSONRPCMessage | None = None
        try:
            answer = await self._answered(request_id, params, work, version)
        finally:
            _ended(span, answer)
        if answer is not None:
            await self._send(answer)

    async def _answered(
        self, request_id: types.RequestId, params: dict[str, Any], work: Work, version: str
    ) -> types.JSONRPCMessage | None:
        """The call's answer; None when it was cancelled (then it is not answered, as the SDK does)."""
        session = self.session
        assert session is not None
        token = (params.get("_meta") or {}).get("progressToken")
        answer: types.JSONRPCMessage | None = None
        with anyio.CancelScope() as scope:
            self._calls[coerce_request_id(request_id)] = scope  # "7" and 7 are one id, as the SDK correlates them
            try:
                if self.exposed is not None and self.exposed.changed_since_listed(session):
                    if not self._modern:  # at 2026 only subscriptions/listen streams carry it
                        changed = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/tools/list_changed")
                        await self._send(changed)
                    await self.exposed.publish()
                progress = self._progress(token) if isinstance(token, int | str) else None
                answer = self._response(request_id, await work(session, params, progress), version)
            except Exception:  # a bug of ours in an exposed call (the middleware's path): a JSON-RPC error
                log.exception("tool %r raised an unexpected exception", params.get("name"))
                answer = _failure(request_id, types.INTERNAL_ERROR, "Internal error")
            finally:
                self._calls.pop(coerce_request_id(request_id), None)
        return None if scope.cancelled_caught else answer

    def _response(self, request_id: types.RequestId, result: CallToolResult, version: str) -> types.JSONRPCMessage:
        """The result as the SDK puts it on the wire: dumped, sieved by the version's schema, and at 2026 stamped
        with the server's identity (mcp.server.runner: ServerRunner._serialize)."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            shaped = serialize_server_result("tools/call", version, dumped)
        except ValidationError:
            log.exception("a gateway call's result does not fit the protocol's schema")
            return _failure(request_id, types.INTERNAL_ERROR, "Handler returned an invalid result")
        if version in MODERN_PROTOCOL_VERSIONS and self.server_info is not None:
            meta = shaped.get("_meta")
            if meta is None:
                shaped["_meta"] = {SERVER_INFO_META_KEY: self.server_info()}
            elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
                shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: self.server_info()}
        return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=shaped)

    def _progress(self, token: types.ProgressToken) -> Callable[[float, float | None, str | None], Awaitable[None]]:
        async def report(value: float, total: float | None, message: str | None) -> None:
            params: dict[str, Any] = {"progressToken": token, "progress": value}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            await self._send(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params))

        return report

    async def _send(self, message: types.JSONRPCMessage) -> None:
        if self._out is None:
            log.info("the client left before a gateway call's answer could be written")
            return
        await self._out(message)


def _span(request_id: types.RequestId, params: dict[str, Any], version: str) -> tracing.Span:
    """The span the SDK's OpenTelemetryMiddleware gives a tools/call, for one the lane takes past it: the same
    name and attributes, continuing the trace the client sent in `_meta`."""
    name = params["name"]
    attributes = {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": version,
        "jsonrpc.request.id": str(request_id),
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
    }
    if name == TOOL_CALL:
        attributes["abilities.tool"] = (params.get("arguments") or {}).get("tool")
    return tracing.begin(f"tools/call {name}", attributes, kind="server", carrier=params.get("_meta"))


def _ended(span: tracing.Span, answer: types.JSONRPCMessage | None) -> None:
    """End a call's span with its outcome, as the middleware marks it: a JSON-RPC error or a tool error."""
    if isinstance(answer, types.JSONRPCError):
        span.set({"error.type": str(answer.error.code), "rpc.response.status_code": str(answer.error.code)})
        span.fail(answer.error.message)
    elif isinstance(answer, types.JSONRPCResponse) and answer.result.get("isError") is True:
        span.set({"error.type": "tool_error"})
        span.fail("tool_error")
    span.end()


def _failed(exc: Exception) -> CallToolResult:
    """tool_call's failure as MCPServer words it: a ToolError raised by the tool function (a refusal, a bad argument,
    an upstream that failed), or a tool that crashed (a bug of ours, the cause kept in the log)."""
    if isinstance(exc, AbilitiesError):
        return _error(f"Error executing tool {TOOL_CALL}: {exc}")
    log.error("tool %r raised an unexpected exception", TOOL_CALL, exc_info=exc)
    return _error(f"Error executing tool {TOOL_CALL}")


def _enveloped(params: Any) -> bool:
    """Whether a request carries the 2026 per-request envelope (its protocol version key), as the SDK tells a
    connection's era by its first request."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _plain_tool_call(arguments: Mapping[str, Any] | None) -> bool:
    """tool_call's arguments exactly as its signature takes them: a string `tool`, an object or null `arguments`."""
    return (
        arguments is not None
        and arguments.keys() <= _TOOL_CALL_ARGUMENTS
        and isinstance(arguments.get("tool"), str)
        and isinstance(arguments.get("arguments"), dict | None)
    )


def _session_id(session: Session, params: Mapping[str, Any]) -> str:
    return session.session_of_request(params.get("_meta") or {}, "tools/call", params, None)


class _SessionOf:
    """A call's session id, found when first asked for and then kept (a failure is not kept: asked again, it is
    looked for again, as the waiting way does)."""

    __slots__ = ("_session", "_params", "_found")

    def __init__(self, session: Session, params: Mapping[str, Any]):
        self._session, self._params = session, params
        self._found: str | None = None

    def __call__(self) -> str:
        if self._found is None:
            self._found = _session_id(self._session, self._params)
        return self._found


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _failure(request_id: types.RequestId, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
