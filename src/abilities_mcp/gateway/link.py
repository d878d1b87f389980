"""A stdio upstream's pipes: the SDK client's two streams over them, and a direct lane that sends a tools/call and
picks its answer off the pipe without the client's per-call machinery.

The SDK's client does the handshake, lists the tools, answers the upstream's own requests and owns every other
message. A proxied call, the gateway's hot path, is one line down the pipe with an id from a range the client never
uses (it counts from 0); the reader hands the answer with that id, and the progress notifications for it, straight
to the call, everything else to the client exactly as the SDK's own reader would (each line validated as a JSON-RPC
message, a line that is not one handed over as an error). A call may also be started from a loop callback, with no
task to wait for it (`start_call`): its line goes down the pipe in one atomic write or not at all, and its answer is
handed to a function from the callback that reads it. Spawning and stopping follow the SDK's stdio client: a
session (process group) of its own, the SDK's default environment under the entry's, stdin closed first, then TERM
and KILL to the group, every wait bounded.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import select
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import IO, Any, NamedTuple

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .. import tracing
from ..children import forget, spawned
from ..pipes import MAX_LINE_BYTES, Inbox, write_all

log = logging.getLogger(__name__)

# The lane's request ids: far above any id the SDK's client, counting from 0, will reach.
FIRST_LANE_ID = 10**12
# After stdin closes, the upstream gets this long to exit; after TERM, this long again before KILL (the SDK's
# figures).
EXIT_GRACE_SECONDS = 2.0
# How often a stopping upstream is checked for having exited.
EXIT_POLL_SECONDS = 0.01
# What the client has queued may take this long to be written when the link closes.
FLUSH_SECONDS = 0.5
# A cancelled call's notifications/cancelled may wait this long for the pipe.
CANCEL_NOTICE_SECONDS = 1.0

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# Where a call started with `start_call` gets its answer (a JSON-RPC answer) or why there is none.
Deliver = Callable[[dict[str, Any] | BaseException], None]


class _Line(NamedTuple):
    """A line the upstream wrote, and its JSON object when a lane call may want it."""

    raw: bytes
    whole: bool
    message: dict[str, Any] | None


class _Call:
    """One lane call waiting for its answer: an event its task waits on, or a function the answer is handed to."""

    __slots__ = ("answered", "answer", "progress", "deliver")

    def __init__(self, progress: Progress | None, deliver: Deliver | None = None):
        self.answered = anyio.Event() if deliver is None else None
        self.answer: dict[str, Any] | BaseException | None = None
        self.progress = progress
        self.deliver = deliver


class Link:
    """One stdio upstream process: `streams()` runs it for the SDK's client, `call_tool` is the lane beside it."""

    def __init__(
        self,
        command: str,
        args: list[str],
        env: dict[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        errlog: IO[bytes],
    ):
        self._argv = [command, *args]
        self._env = get_default_environment() | (env or {})
        self._cwd = cwd
        self._errlog = errlog
        self._ids = itertools.count(FIRST_LANE_ID)
        self._calls: dict[int, _Call] = {}
        self._writing = anyio.Lock(fast_acquire=True)  # uncontended (the usual case), taking it does not yield
        self._closed: BaseException | None = None  # why the lane takes no more calls
        self._stdin = self._stdout = -1
        self._notices: set[asyncio.Task[None]] = set()  # cancel notices waiting for the pipe

    @asynccontextmanager
    async def streams(
        self,
    ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[Any]]]:
        """Start the upstream and serve the SDK client's (read, write) streams until the block ends; then stop it."""
        process = subprocess.Popen(  # raises FileNotFoundError / PermissionError: the caller names the command
            self._argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errlog,
            env=self._env,
            cwd=self._cwd,
            start_new_session=True,  # its own process group: stopping it stops what it started
            bufsize=0,
        )
        spawned(process.pid)  # its exit is its Popen's to read: a server's reaping of adopted orphans leaves it
        assert process.stdin is not None and process.stdout is not None
        self._stdin, self._stdout = process.stdin.fileno(), process.stdout.fileno()
        os.set_blocking(self._stdin, False)
        os.set_blocking(self._stdout, False)
        to_client, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, from_client = anyio.create_memory_object_stream[SessionMessage](0)
        written = anyio.Event()
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read, to_client)
                tasks.start_soon(self._write, from_client, written)
                try:
                    yield read_stream, write_stream
                finally:
                    with anyio.CancelScope(shield=True):
                        write_stream.close()
                        with anyio.move_on_after(FLUSH_SECONDS):
                            await written.wait()
                        self._close(ConnectionError("the connection to the upstream was closed"))
                        await _stop(process)
                        read_stream.close()
                    tasks.cancel_scope.cancel()
        finally:
            for pipe in (process.stdin, process.stdout):
                with suppress(OSError):
                    pipe.close()

    async def call_tool(self, name: str, arguments: dict[str, Any], progress: Progress | None = None) -> dict[str, Any]:
        """Send tools/call and return the result as the upstream wrote it. Raises MCPError for an error answer,
        ConnectionError when the upstream is gone; cancelling the call tells the upstream (notifications/cancelled),
        as the SDK's client does."""
        if self._closed is not None:
            raise self._closed
        request_id = next(self._ids)
        call = self._calls[request_id] = _Call(progress)
        assert call.answered is not None
        try:
            await self._send(_request(request_id, name, arguments, progress))
            await call.answered.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_NOTICE_SECONDS):
                with suppress(OSError, ConnectionError):
                    await self._send(_cancelled(request_id))
            raise
        finally:
            self._calls.pop(request_id, None)
        answer = call.answer
        if isinstance(answer, BaseException):
            raise answer
        assert answer is not None
        return result_of(answer)

    def start_call(
        self, name: str, arguments: dict[str, Any], deliver: Deliver, progress: Progress | None = None
    ) -> int | None:
        """Send tools/call from a loop callback, without a task: its answer (or why none came) is handed to
        `deliver` as it arrives. The id to `forget` it by; None when it cannot go at once (the link is closed,
        another line is being written, the pipe is full, the line is longer than one atomic write): then nothing
        was sent, and the caller takes the waiting way."""
        if self._closed is not None or self._writing.locked():
            return None
        request_id = next(self._ids)
        if not self._write_now(_encoded(_request(request_id, name, arguments, progress))):
            return None
        self._calls[request_id] = _Call(progress, deliver)
        return request_id

    def forget(self, request_id: int) -> None:
        """Drop a started call: its answer, if one comes, goes nowhere; the upstream is told, as call_tool's
        cancellation tells it."""
        if self._calls.pop(request_id, None) is None or self._closed is not None:
            return
        notice = _encoded(_cancelled(request_id))
        if not self._write_now(notice):
            self._notices.add(task := asyncio.get_running_loop().create_task(self._notify(notice)))
            task.add_done_callback(self._notices.discard)

    async def _notify(self, notice: bytes) -> None:
        with anyio.move_on_after(CANCEL_NOTICE_SECONDS), suppress(ConnectionError):
            await self._write_line(notice)

    def _write_now(self, data: bytes) -> bool:
        """Write a whole line at once, or nothing: a pipe takes a write of at most PIPE_BUF bytes whole or not at
        all, so no other line can be cut in two by it."""
        if len(data) > select.PIPE_BUF or self._writing.locked():
            return False
        try:
            return os.write(self._stdin, data) == len(data)
        except OSError:  # full (EAGAIN), or the upstream stopped reading: the waiting way says which
            return False

    async def _send(self, message: dict[str, Any]) -> None:
        await self._write_line(_encoded(message))

    async def _write_line(self, data: bytes) -> None:
        async with self._writing:  # one line at a time: the client's and the lane's never interleave
            try:
                await write_all(self._stdin, data)
            except OSError as exc:
                raise ConnectionError(f"the upstream stopped reading its stdin ({exc.strerror})") from None

    async def _write(self, from_client: MemoryObjectReceiveStream[SessionMessage], written: anyio.Event) -> None:
        """The client's messages, serialized as the SDK's writer does."""
        try:
            async with from_client:
                async for message in from_client:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self._write_line(text.encode() + b"\n")
        except ConnectionError as exc:
            self._close(exc)
        finally:
            written.set()

    async def _read(self, to_client: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        """Every line the upstream writes: a lane call's answer to that call (on arrival, in the loop's callback,
        unless lines before it still wait), its progress to that call, the rest to the client. At the end of its
        stdout, every waiting call fails and the client sees the stream close."""
        try:
            async with to_client:
                async for line, _ in Inbox(self._stdout, self._line, self._answered).items():
                    if not line.raw.strip():
                        continue
                    if not line.whole:
                        self._close(ConnectionError(f"the upstream wrote a line longer than {MAX_LINE_BYTES} bytes"))
                        continue
                    if self._answered(line) or await self._progressed(line):
                        continue
                    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await to_client.send(_parsed(line.raw))
        finally:
            self._close(ConnectionError("the upstream closed its stdout (it exited or crashed)"))

    def _line(self, raw: bytes, whole: bool) -> _Line:
        """A line as read, decoded only while lane calls wait (the client's own traffic is left to its parser)."""
        message = None
        if self._calls and whole:
            with suppress(ValueError):
                message = json.loads(raw)
        return _Line(raw, whole, message if isinstance(message, dict) else None)

    def _answered(self, line: _Line) -> bool:
        """Hand a lane call its answer; False for any other line."""
        message = line.message
        if message is None or "id" not in message or "method" in message:
            return False
        call = self._call_of(message["id"])
        if call is None:
            return False
        self._settle(message["id"], call, message)
        return True

    async def _progressed(self, line: _Line) -> bool:
        """Pass a lane call its progress; False for any other line."""
        message = line.message
        if message is None or message.get("method") != "notifications/progress":
            return False
        params = message.get("params")
        call = self._call_of(params.get("progressToken") if isinstance(params, dict) else None)
        if call is None or call.progress is None:
            return False
        await _report(call.progress, params)  # type: ignore[arg-type]
        return True

    def _call_of(self, request_id: Any) -> _Call | None:
        """The lane call an id (or progress token) names; "7" names 7, as the SDK correlates them."""
        if type(request_id) not in (int, str):
            return None
        return self._calls.get(coerce_request_id(request_id))  # type: ignore[arg-type]

    def _close(self, why: BaseException) -> None:
        """No more lane calls; the waiting ones fail with `why`."""
        if self._closed is None:
            self._closed = why
        for request_id, call in list(self._calls.items()):
            if call.answer is None:
                self._settle(request_id, call, why)

    def _settle(self, request_id: Any, call: _Call, answer: dict[str, Any] | BaseException) -> None:
        """Give a call its answer: wake its task, or hand it over (a started call is done with then)."""
        call.answer = answer
        if call.answered is not None:
            call.answered.set()
            return
        self._calls.pop(coerce_request_id(request_id), None)  # type: ignore[arg-type]
        assert call.deliver is not None
        try:
            call.deliver(answer)
        except Exception:  # a bug of the receiver's: the link and the other calls go on
            log.exception("handing an upstream's answer over failed")


def result_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The result of a tools/call answer; MCPError for an error answer or one without a result."""
    if "error" in answer:
        raise MCPError.from_error_data(types.ErrorData.model_validate(answer["error"]))
    result = answer.get("result")
    if not isinstance(result, dict):
        raise MCPError(types.INVALID_PARAMS, f"the upstream answered tools/call with {result!r}, not a result")
    return result


def _request(request_id: int, name: str, arguments: dict[str, Any], progress: Progress | None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    meta: dict[str, Any] = {} if progress is None else {"progressToken": request_id}
    tracing.inject(meta)  # the current span's trace, as the SDK's client sends it (none while tracing is off)
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _cancelled(request_id: int) -> dict[str, Any]:
    notice = {"requestId": request_id, "reason": "the gateway's caller cancelled the call"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": notice}


def _encoded(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _parsed(line: bytes) -> SessionMessage | Exception:
    """A line for the SDK's client, as its own reader makes it."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        log.warning("an upstream wrote a line that is not a JSON-RPC message: %.200r", line)
        return exc


async def _report(progress: Progress, params: dict[str, Any]) -> None:
    value, total, message = params.get("progress"), params.get("total"), params.get("message")
    if not isinstance(value, int | float):
        return
    try:
        await progress(float(value), total if isinstance(total, int | float) else None, message)
    except Exception:  # our own caller is gone: the upstream's call goes on regardless
        log.info("could not pass an upstream's progress on", exc_info=True)


async def _stop(process: subprocess.Popen[bytes]) -> None:
    """Close its stdin and wait; then TERM its process group and wait; then KILL it (the MCP spec's order). Once
    reaped, its pid is forgotten (children.py): it may be anyone's now."""
    assert process.stdin is not None
    with suppress(OSError):
        process.stdin.close()
    if await _exited(process):
        return
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sent)
        if await _exited(process):
            return
    log.warning("upstream process %d is still alive after SIGKILL; abandoning it", process.pid)


async def _exited(process: subprocess.Popen[bytes]) -> bool:
    with anyio.move_on_after(EXIT_GRACE_SECONDS):
        while process.poll() is None:
            await anyio.sleep(EXIT_POLL_SECONDS)
        forget(process.pid)
        return True
    return False
