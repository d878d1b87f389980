"""Connections to the upstream servers: opened on first use, kept for the server's life, restarted after a failure.

Each connection lives in its own task of the server's task group (the SDK's client must be entered and left by one
task), talks through the official SDK client, and sends the upstream's stderr to a file of its own, so it never
reaches our stdout and its tail can be quoted when the upstream fails. A failure is a `UpstreamError` for the
call that met it, never for the server: the next call starts the upstream again.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import IO, Any, NamedTuple

import anyio
from anyio.abc import TaskGroup
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp_types import CallToolResult, Tool

from .. import tracing
from ..errors import AbilitiesError
from . import hints
from .arguments import surely_fits
from .config import Upstream
from .link import Link, result_of

log = logging.getLogger(__name__)

# This much of an upstream's stderr is quoted when it fails: its last lines say why.
STDERR_TAIL_BYTES = 2_000
# Past this size an upstream's stderr file is cut back to its tail (checked at each call): a chatty server that
# runs for days must not fill the disk.
MAX_STDERR_BYTES = 1_000_000
# A connection whose last call timed out must answer a tools/list this fast before it is trusted again (ping is
# deprecated by the 2026 protocol; every server answers tools/list).
PROBE_SECONDS = 5.0
# Starting an upstream (npx fetching a package, node loading) may take longer than one of its calls may: its
# handshake gets at least this long.
MIN_START_SECONDS = 30.0
# An upstream listing more pages of tools than this is cut off there (a paginator that never ends).
MAX_TOOL_PAGES = 50
# What a failed start says, and the SDK's error for a connection whose other end went away.
STARTING = "failed to start"
CLOSED = "Connection closed"
# A gateway call's span when the upstream's tool answered with an error result.
TOOL_ERROR = "the upstream's tool returned an error result"


# Where an upstream's progress notifications go: (progress, total, message), as the SDK's client hands them over.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# Where a call started without a task ends: handed a function that returns its result or raises why there is none.
Done = Callable[[Callable[[], CallToolResult]], None]


class UpstreamError(AbilitiesError):
    """An upstream that failed to start, died, or did not answer in time: its name, what happened, its stderr."""

    def __init__(self, server: str, what: str, stderr: str = "", fix: str = ""):
        self.server = server
        self.attempts = 1  # how many times the call that met it was sent
        tail = f" Its stderr ends with:\n{stderr.rstrip()}" if stderr.strip() else " It wrote nothing to stderr."
        then = fix or "If it keeps failing, check its entry in gateway.json."
        super().__init__(f"Upstream server {server!r} {what}.{tail}\n{then}\nThe next call starts it again.")


class Connection:
    """One upstream server: its client while it lives, its tools, its stderr file."""

    def __init__(self, upstream: Upstream, tasks: TaskGroup):
        self.upstream = upstream
        self._tasks = tasks
        self._lock = anyio.Lock(fast_acquire=True)  # taken twice a call: uncontended, it does not yield
        self._client: Client | None = None
        self._link: Link | None = None  # a stdio upstream's pipes, with the lane proxied calls take
        self._stop = anyio.Event()
        self._stderr: IO[bytes] | None = None
        self._tools: list[Tool] | None = None
        self._suspect = False  # the last call timed out: probe it before trusting it again

    @property
    def name(self) -> str:
        return self.upstream.name

    async def tools(self) -> list[Tool]:
        """The upstream's tools, listed once per connection."""
        client, _ = await self._connected()
        self._trim()
        if self._tools is None:
            self._tools = await self._guarded(client, self._list_tools(client), "listing its tools")
        return self._tools

    async def call(self, tool: str, arguments: dict[str, Any], progress: Progress | None = None) -> CallToolResult:
        """Call one tool; an upstream error result is returned as it is, a failure raises UpstreamError. The
        upstream's progress notifications go to `progress`; cancelling the call sends the upstream
        `notifications/cancelled` (the SDK's client does)."""
        with tracing.span(f"tools/call {tool}", self._span_attributes(tool), kind="client") as span:
            client, link = await self._connected()
            self._trim()
            if link is not None:
                work = self._through_lane(client, link, tool, arguments, progress)
            else:
                work = client.call_tool(tool, arguments, progress_callback=progress)
            result = await self._guarded(client, work, f"calling {tool!r}")
            if result.is_error:
                span.fail(TOOL_ERROR)
            return result

    def _span_attributes(self, tool: str) -> dict[str, Any]:
        """What a person filters a gateway call's span on: the upstream and its tool."""
        return {"abilities.upstream": self.name, "gen_ai.tool.name": tool, "mcp.method.name": "tools/call"}

    def tools_now(self) -> list[Tool] | None:
        """The upstream's tools when it is up, listed and trusted (no task needed to know them); else None."""
        if not self._ready():
            return None
        self._trim()
        return self._tools

    def _ready(self) -> bool:
        """Up, listed, trusted, and no task starting or probing it now."""
        return self._client is not None and self._tools is not None and not self._suspect and not self._lock.locked()

    def call_now(
        self, tool: str, arguments: dict[str, Any], done: Done, progress: Progress | None = None
    ) -> Started | None:
        """Start a call from a loop callback, without a task, when the upstream is up, listed and trusted and speaks
        over a link. `done` is handed a function that returns the result or raises the UpstreamError, as `call`
        does. None when the call cannot start so (nothing was sent): `call` is the way then."""
        client, link = self._client, self._link
        if not self._ready() or client is None or link is None:  # listed: discover_now has trimmed its stderr
            return None
        if tool not in client.session._tool_output_schemas:  # checking its result would have to list the tools
            return None

        def answered(answer: dict[str, Any] | BaseException) -> None:
            timer.cancel()
            _ended(span, answer)
            done(lambda: self._result(client, tool, answer))

        def timed_out() -> None:
            link.forget(request_id)
            self._suspect = self._client is client
            error = self._timed_out(f"calling {tool!r}")
            _ended(span, error)
            done(functools.partial(_raise, error))

        span = tracing.begin(f"tools/call {tool}", self._span_attributes(tool), kind="client")
        with span.current():  # the line sent carries its trace context
            request_id = link.start_call(tool, arguments, answered, progress)
        if request_id is None:
            span.end()  # nothing was sent: `call` sends it, in a span of its own
            return None
        timer = asyncio.get_running_loop().call_later(self.upstream.timeout, timed_out)
        return Started(lambda: (timer.cancel(), link.forget(request_id), span.end()))

    def _result(self, client: Client, tool: str, answer: dict[str, Any] | BaseException) -> CallToolResult:
        """A started call's answer checked as _through_lane checks one; a failure handled as _guarded handles it."""
        try:
            if isinstance(answer, BaseException):
                raise answer
            result = CallToolResult.model_validate(result_of(answer))
            if not result.is_error and not _output_fits(client, tool, result):
                _at_once(client.session.validate_tool_result(tool, result))
            return result
        except Exception as exc:  # the connection is gone or confused: whatever it is, start afresh next time
            if self._client is client:
                self._drop()
            raise self._failure(exc, f"failed while calling {tool!r}") from None

    async def _through_lane(
        self, client: Client, link: Link, tool: str, arguments: dict[str, Any], progress: Progress | None
    ) -> CallToolResult:
        """The call down the link's lane, its answer checked as the SDK's client checks one (the result's shape,
        and its structured content against the tool's output schema)."""
        result = CallToolResult.model_validate(await link.call_tool(tool, arguments, progress))
        if not result.is_error and not _output_fits(client, tool, result):
            await client.session.validate_tool_result(tool, result)
        return result

    async def close(self) -> None:
        """Stop the upstream (the SDK closes its stdin, then terminates its process group)."""
        self._drop()

    def _drop(self) -> None:
        self._stop.set()
        self._client, self._link, self._tools = None, None, None

    async def retire(self) -> None:
        """Stop for good: gateway.json changed this upstream's entry."""
        await self.close()
        self.release()

    def release(self) -> None:
        """Close the stderr file once the connection's task has ended."""
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def stderr_tail(self) -> str:
        """The last lines the upstream wrote to stderr."""
        if self._stderr is None:
            return ""
        return _tail(self._stderr.fileno()).decode("utf-8", "replace")

    def _trim(self) -> None:
        """Cut the stderr file back to its tail once it passes MAX_STDERR_BYTES (it is opened O_APPEND, so the
        upstream's next line lands after that tail, not past a hole at its old offset)."""
        if self._stderr is None:
            return
        fd = self._stderr.fileno()
        if os.fstat(fd).st_size > MAX_STDERR_BYTES:
            kept = _tail(fd)
            os.ftruncate(fd, 0)
            os.write(fd, kept)

    async def _connected(self) -> tuple[Client, Link | None]:
        async with self._lock:
            if self._client is not None and self._suspect and not await self._answers(self._client):
                await self.close()
            if self._client is None:
                self._client, self._link = await self._start()
                self._suspect = False
            return self._client, self._link

    async def _answers(self, client: Client) -> bool:
        with anyio.move_on_after(min(PROBE_SECONDS, self.upstream.timeout)):
            try:
                await client.list_tools()
                return True
            except Exception:  # a dead or confused upstream: either way it is restarted
                return False
        return False

    async def _start(self) -> tuple[Client, Link | None]:
        """Start the upstream in a task of its own and wait for its handshake (bounded: `_start_bound`)."""
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115  # closed at the next start or at shutdown
        flags = fcntl.fcntl(self._stderr.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(self._stderr.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)  # shared with the upstream's stderr
        self._stop = anyio.Event()
        ready = anyio.Event()
        outcome: list[Client | BaseException] = []
        link = self._link_for(self._stderr)
        transport = link.streams() if link is not None else self._transport()
        self._tasks.start_soon(self._serve, ready, outcome, self._stop, transport, name=f"upstream {self.name}")
        await ready.wait()
        if isinstance(outcome[0], BaseException):
            raise self._failure(outcome[0], STARTING)
        return outcome[0], link

    async def _serve(self, ready: anyio.Event, outcome: list, stop: anyio.Event, transport: Any) -> None:
        """The connection's task: enter the client, hand it over, hold it until stopped; never raise."""
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + self._start_bound()
            try:
                async with Client(transport, mode="legacy") as client:
                    scope.deadline = math.inf
                    outcome.append(client)
                    ready.set()
                    await stop.wait()
            except Exception as exc:  # anything the upstream does must not reach the server's task group
                if not outcome:
                    outcome.append(exc)
                else:
                    log.info("upstream %r closed: %s", self.name, exc)
        if not outcome:
            outcome.append(TimeoutError(f"did not answer the MCP handshake within {self._start_bound():g}s"))
        ready.set()

    def _start_bound(self) -> float:
        return max(self.upstream.timeout, MIN_START_SECONDS)

    def _link_for(self, stderr: IO[bytes]) -> Link | None:
        """A stdio upstream's link (None for one reached by URL)."""
        u = self.upstream
        if u.url is not None:
            return None
        return Link(u.command or "", list(u.args), u.env or None, u.cwd, stderr)

    def _transport(self) -> Any:
        """The SDK's streamable HTTP transport, for an upstream reached by URL."""
        assert self.upstream.url is not None
        return _http(self.upstream.url, self.upstream.headers)

    async def _list_tools(self, client: Client) -> list[Tool]:
        tools: list[Tool] = []
        cursor = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _guarded(self, client: Client, work: Any, doing: str) -> Any:
        """Await upstream work within the timeout; a failure stops that client (unless a newer one replaced it)
        and says why, stderr and all. A timeout only marks it: the next call probes it first."""
        try:
            with anyio.fail_after(self.upstream.timeout):
                return await work
        except TimeoutError:
            self._suspect = self._client is client
            raise self._timed_out(doing) from None
        except Exception as exc:  # the connection is gone or confused: whatever it is, start afresh next time
            if self._client is client:
                await self.close()
            raise self._failure(exc, f"failed while {doing}") from None

    def _timed_out(self, doing: str) -> UpstreamError:
        return self._error(f"did not answer within {self.upstream.timeout:g}s while {doing}")

    def _error(self, what: str) -> UpstreamError:
        """An UpstreamError quoting the upstream's stderr, with the fix it points to if it is a failure we know."""
        tail = self.stderr_tail()
        return UpstreamError(self.name, what, tail, hints.fix(self.upstream, tail))

    def _failure(self, exc: BaseException, what: str) -> UpstreamError:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # the SDK's task groups wrap the cause
            exc = exc.exceptions[0]
        if isinstance(exc, FileNotFoundError | PermissionError):
            why = f"cannot run {self.upstream.command!r} ({exc.strerror}); fix `command` in gateway.json"
            return UpstreamError(self.name, f"{what}: {why}")
        detail = str(exc) or type(exc).__name__
        if detail == CLOSED and what == STARTING:  # the SDK's words for a process that exited before it answered
            detail = "it closed the connection before answering the MCP handshake (it exited or crashed)"
        return self._error(f"{what}: {detail}")


class Started(NamedTuple):
    """A call started without a task: `cancel()` drops it (the upstream is told; `done` is never called)."""

    cancel: Callable[[], object]


def _ended(span: tracing.Span, answer: dict[str, Any] | BaseException) -> None:
    """End a started call's span with its outcome: an error answer, a tool error or no answer marks it failed."""
    if isinstance(answer, BaseException):
        span.fail(str(answer) or type(answer).__name__)
    elif isinstance(answer.get("error"), dict):
        span.fail(str(answer["error"].get("message")))
    elif isinstance(answer.get("result"), dict) and answer["result"].get("isError") is True:
        span.fail(TOOL_ERROR)
    span.end()


def _output_fits(client: Client, tool: str, result: CallToolResult) -> bool:
    """Whether the SDK client's check of a result (validate_tool_result) would surely pass it, found without that
    check's validator: the tool has no output schema, or it has one the client has compiled (so it is a valid
    schema) and the structured content fits it by arguments.py's quick check, which never passes what a
    validator refuses. False: the client's check judges it (and words what is wrong)."""
    session = client.session
    schemas = getattr(session, "_tool_output_schemas", None)  # the SDK's own: another release may name it otherwise
    if not isinstance(schemas, dict) or tool not in schemas:  # the check would list the tools first
        return False
    schema = schemas[tool]
    if schema is None:
        return True
    compiled = getattr(session, "_tool_output_validators", {})  # a schema that failed to compile is never kept
    return compiled.get(tool) is not None and surely_fits(schema, result.structured_content)


def _raise(error: BaseException) -> Any:
    raise error


def _at_once(work: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that has nothing to wait for to its end, outside any task; RuntimeError if it would wait."""
    try:
        work.send(None)
    except StopIteration:
        return
    work.close()
    raise RuntimeError("a check that was to finish at once waited for something")


def _tail(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))


@asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the entry's headers (the SDK closes only an HTTP client it made itself)."""
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


class Upstreams:
    """Every connection of one server's life, by upstream name; nothing connects until a call needs it."""

    def __init__(self, tasks: TaskGroup):
        self._tasks = tasks
        self._connections: dict[str, Connection] = {}

    def connection(self, upstream: Upstream) -> Connection:
        """The connection to an upstream; a changed entry in gateway.json replaces the old one."""
        found = self._connections.get(upstream.name)
        if found is None or found.upstream != upstream:
            if found is not None:
                self._tasks.start_soon(found.retire)
            found = self._connections[upstream.name] = Connection(upstream, self._tasks)
        return found

    def background(self, work: Callable[[], Awaitable[None]], name: str) -> None:
        """Run work in the server's task group (it must not raise: a failure would end the server)."""
        self._tasks.start_soon(work, name=name)

    def all(self) -> list[Connection]:
        return list(self._connections.values())

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()


@asynccontextmanager
async def upstreams() -> AsyncIterator[Upstreams]:
    """The server's upstream connections, all stopped when it shuts down."""
    found: Upstreams | None = None
    try:
        async with anyio.create_task_group() as tasks:
            found = Upstreams(tasks)
            try:
                yield found
            finally:
                await found.close()
    finally:
        for connection in found.all() if found is not None else ():
            connection.release()
