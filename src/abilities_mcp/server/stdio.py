"""The stdio transport: newline-delimited JSON-RPC on the process's stdin and stdout, every line answered.

Our own rather than the SDK's, for two reasons. The SDK's reader drops a line that is not a JSON-RPC message (not
JSON, `"jsonrpc": "1.0"`, params that are not an object, nesting past its parser's depth, a lone surrogate): no
answer, so a caller waits forever for its request (docs/upstream/mcp-sdk-malformed-messages.md). Here each such line
is answered as JSON-RPC 2.0 says: -32700 when it does not parse, -32600 when it parses but is not a valid message,
with the request's id whenever one can be read (null otherwise), and the server goes on serving. A request whose id
is not a string or an integer (1.5, null, true, {}), which the SDK takes for a notification, and one whose id is
already in flight ("7" while 7 is: the SDK takes them for one id), are refused the same way. And the SDK moves
every line read and every answer written through a worker thread (three thread round trips a call); here the
event loop waits on the descriptors themselves, and each line is parsed once.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import NamedTuple

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ..pipes import MAX_LINE_BYTES, Inbox, pollable, write_all
from .lane import Lane

log = logging.getLogger(__name__)
# Characters of a refused line shown in the log and of the reason sent back.
SHOWN_CHARS = 200
# How long the answers already queued may take to be written once the client has closed stdin.
DRAIN_SECONDS = 5.0
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_DECODER = json.JSONDecoder()

Incoming = SessionMessage | Exception


async def run_stdio(server: MCPServer) -> None:
    """Serve `server` on stdin and stdout until the client closes stdin (its gateway calls down its lane, if it
    has one: server/lane.py)."""
    lowlevel = server._lowlevel_server  # what run_stdio_async runs; the SDK offers no public handle
    async with wire(getattr(server, "lane", None)) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


@asynccontextmanager
async def wire(
    lane: Lane | None = None,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]]:
    """The server's two streams over the process's stdin and stdout, each claimed for the protocol alone; the
    messages `lane` takes never reach the streams, and its answers are written in turn with the server's."""
    with _claimed(0, os.O_RDONLY) as stdin, _claimed(1, os.O_WRONLY) as stdout:
        incoming, read_stream = anyio.create_memory_object_stream[Incoming](0)
        write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        answers = write_stream.clone()  # refusals of unreadable lines, written in turn with the server's answers
        ids = InFlight()
        out = Stdout(stdout, lane, ids)
        async with anyio.create_task_group() as tg:
            if lane is not None:
                lane.attach(tg, out.write, out.write_now)
            tg.start_soon(_read, stdin, incoming, answers, lane, ids)
            writer = anyio.Event()
            tg.start_soon(_write, outgoing, out, writer)
            try:
                yield read_stream, write_stream
            finally:
                if lane is not None:
                    lane.detach()
                write_stream.close()  # the server is done: what is queued is written, then the writer ends
                with anyio.move_on_after(DRAIN_SECONDS):
                    await writer.wait()
                    await out.flush()
                tg.cancel_scope.cancel()


async def _read(
    fd: int,
    incoming: MemoryObjectSendStream[Incoming],
    answers: MemoryObjectSendStream[SessionMessage],
    lane: Lane | None,
    ids: InFlight,
) -> None:
    """Each line to the server, answered with a refusal when it is not a message; the lane's calls it takes on
    arrival, in the loop's own callback (server/lane.py), or here when lines before them still wait."""
    taken = _taker(lane) if lane is not None else None
    async with incoming, answers:
        async for item, offered in Inbox(fd, ids.parse, taken).items():
            if item is None:
                continue
            if isinstance(item, _Refusal):
                await answers.send(SessionMessage(item.answer))
            elif lane is None or offered or not lane.take(item):
                await incoming.send(SessionMessage(item))


class _Refusal(NamedTuple):
    """The answer to a line that is not a message."""

    answer: types.JSONRPCError


def _message(line: bytes, whole: bool) -> types.JSONRPCMessage | _Refusal | None:
    """A line read as a message (None for a blank one)."""
    if not line.strip():
        return None
    text = line.decode("utf-8", errors="replace")
    if not whole:
        return _Refusal(_too_long(text))
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        answer = refusal_of(text, exc)
        log.warning("refused a protocol line (%s): %.*s", answer.error.message, SHOWN_CHARS, text.strip())
        return _Refusal(answer)
    if isinstance(message, types.JSONRPCNotification) and (bad := _unusable_id(text)) is not None:
        return _refused(INVALID_ID.format(bad), None, text)
    return message


INVALID_ID = "Invalid Request: id {}: a request's id is a string or an integer (never null)"
REUSED_ID = (
    'Invalid Request: the id {!r} is already taken by a request still in flight (7 and "7" are one id); use a new id'
)


def _refused(what: str, request_id: types.RequestId | None, text: str) -> _Refusal:
    log.warning("refused a protocol line (%s): %.*s", what, SHOWN_CHARS, text.strip())
    error = types.ErrorData(
        code=types.INVALID_REQUEST, message=f"{what[:SHOWN_CHARS]}; send one JSON-RPC 2.0 object per line"
    )
    return _Refusal(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _unusable_id(text: str) -> str | None:
    """The top-level id of a line the SDK read as a notification, as JSON, when it has one (1.5, null, true, {}):
    it was meant as a request, and JSON-RPC answers an id it cannot use with null."""
    found, value = _top_level_id(text)
    if not found:
        return None
    return "an object" if value is _NESTED else json.dumps(value)


class InFlight:
    """The ids of the client's requests not yet answered, as the SDK correlates them ("7" and 7 one id): a request
    whose id is taken is refused at the door; the SDK would overwrite the first and answer one of them."""

    def __init__(self) -> None:
        self._open: set[int | str] = set()

    def parse(self, line: bytes, whole: bool) -> types.JSONRPCMessage | _Refusal | None:
        message = _message(line, whole)
        if isinstance(message, types.JSONRPCRequest):
            key = coerce_request_id(message.id)
            if key in self._open:
                return _refused(REUSED_ID.format(message.id), message.id, line.decode("utf-8", "replace"))
            self._open.add(key)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")  # never answered now: its id is free again
            if type(cancelled) in (int, str):
                self._open.discard(coerce_request_id(cancelled))
        return message

    def answered(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._open.discard(coerce_request_id(message.id))


def _taker(lane: Lane) -> Callable[[types.JSONRPCMessage | _Refusal | None], bool]:
    def taken(item: types.JSONRPCMessage | _Refusal | None) -> bool:
        return item is None or (not isinstance(item, _Refusal) and lane.take(item))

    return taken


def _too_long(head: str) -> types.JSONRPCError:
    log.warning("refused a protocol line longer than %d bytes: %.*s", MAX_LINE_BYTES, SHOWN_CHARS, head)
    message = (
        f"Invalid Request: the line is longer than {MAX_LINE_BYTES // 2**20} MiB, the most the server reads; "
        "send one JSON-RPC 2.0 object per line"
    )
    error = types.ErrorData(code=types.INVALID_REQUEST, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id(head), error=error)


class Stdout:
    """The protocol's stdout: each message a whole line, whoever writes it (the server's writer task, the lane, which
    writes its answers itself rather than hand them to another task, even from a loop callback: `write_now`)."""

    def __init__(self, fd: int, lane: Lane | None, ids: InFlight | None = None):
        self.fd, self.lane, self.ids = fd, lane, ids or InFlight()
        self._writing = anyio.Lock(fast_acquire=True)  # lines never interleave; uncontended, taking it does not yield
        self._broken = False
        self._backlog: deque[bytes] = deque()  # what write_now could not write at once, in order: written first
        self._flushing: asyncio.Task[None] | None = None

    async def write(self, message: types.JSONRPCMessage) -> None:
        self.ids.answered(message)
        if self.lane is not None:
            self.lane.sent(message)
        if self._broken:
            return
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        async with self._writing:
            await self._drain()
            await self._put(data)

    def write_now(self, message: types.JSONRPCMessage) -> None:
        """Write from a loop callback, without a task: at once when no other line is being written and the pipe
        has room; the rest (or all of it) after whatever is being written, by a task of its own."""
        if self.lane is not None:
            self.lane.sent(message)
        if self._broken:
            return
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        if not self._writing.locked() and not self._backlog:
            try:
                data = data[os.write(self.fd, data) :]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                self._break(exc)
                return
        if data:
            self._backlog.append(data)
            if self._flushing is None:
                self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def flush(self) -> None:
        """Wait until what write_now left is written."""
        if self._flushing is not None:
            await self._flushing

    async def _flush(self) -> None:
        try:
            async with self._writing:
                await self._drain()
        finally:
            self._flushing = None

    async def _drain(self) -> None:
        while self._backlog and not self._broken:
            await self._put(self._backlog.popleft())

    async def _put(self, data: bytes) -> None:
        try:
            await write_all(self.fd, data)
        except OSError as exc:
            self._break(exc)

    def _break(self, exc: OSError) -> None:
        """The client stopped reading (EPIPE): answers are dropped until it hangs up."""
        if not self._broken:
            self._broken = True
            self._backlog.clear()
            log.warning("stdout failed (%s): answers are dropped until stdin closes", exc)


async def _write(outgoing: MemoryObjectReceiveStream[SessionMessage], out: Stdout, done: anyio.Event) -> None:
    try:
        async with outgoing:
            async for message in outgoing:
                await out.write(message.message)
    finally:
        done.set()


@contextmanager
def _claimed(fd: int, mode: int) -> Iterator[int]:
    """A private copy of fd for the protocol, with fd itself pointed elsewhere while serving (stdin at the null
    device, stdout at stderr), as the SDK does: a step or library that touches fd 0 or 1 cannot read the protocol
    or write into it. Writes go non-blocking on a pipe or socket, so a client slow to read never stalls the loop."""
    try:
        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # no usable fd (closed by whoever started us): serve it in place, as far as it goes
        yield fd
        return
    diversion = os.open(os.devnull, os.O_RDONLY) if mode == os.O_RDONLY else os.dup(2)
    os.dup2(diversion, fd)
    os.close(diversion)
    nonblocking = mode == os.O_WRONLY and pollable(private) and os.get_blocking(private)
    if nonblocking:
        os.set_blocking(private, False)
    try:
        yield private
    finally:
        if nonblocking:
            with suppress(OSError):
                os.set_blocking(private, True)  # the description is shared with whoever started us
        os.dup2(private, fd)


def refusal(line: str) -> types.JSONRPCError | None:
    """The error answer to a line that is not a JSON-RPC message; None when it is one."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # exactly what the SDK's reader does
        return None
    except ValidationError as exc:
        return refusal_of(line, exc)


def refusal_of(line: str, exc: ValidationError) -> types.JSONRPCError:
    """The error answer to `line`, which failed to parse as a message with `exc`."""
    first = exc.errors(include_url=False)[0]
    if first["type"] == "json_invalid" and "recursion limit" not in first["msg"]:
        code, what = types.PARSE_ERROR, f"Parse error: the line is not JSON the server reads ({first['msg']})"
    elif first["type"] == "json_invalid":
        code, what = types.INVALID_REQUEST, "Invalid Request: the message nests deeper than the server reads"
    else:
        where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
        code, what = types.INVALID_REQUEST, f"Invalid Request: {where}: {first['msg']}"
    message = f"{what[:SHOWN_CHARS]}; send one JSON-RPC 2.0 object per line"
    return types.JSONRPCError(jsonrpc="2.0", id=request_id(line), error=types.ErrorData(code=code, message=message))


def request_id(line: str) -> int | str | None:
    """The top-level "id" of a line, read without parsing the rest (which may nest 100,000 deep or not parse at
    all); None when there is none to read."""
    value = _top_level_id(line)[1]
    return value if type(value) in (int, str) else None


_NESTED = object()  # an id that is an object or an array, left unread


def _top_level_id(line: str) -> tuple[bool, object]:
    """Whether a line has a top-level "id", and its value (_NESTED for an object or array)."""
    text = line.strip()
    try:
        if not text.startswith("{"):
            return False, None
        i = _space(text, 1)
        while text[i] != "}":
            key, i = _DECODER.raw_decode(text, i)
            i = _space(text, i)
            if text[i] != ":" or not isinstance(key, str):
                return False, None
            i = _space(text, i + 1)
            if key == "id":
                return True, _DECODER.raw_decode(text, i)[0] if text[i] not in "[{" else _NESTED
            i = _space(text, _skip(text, i))
            if text[i] == ",":
                i = _space(text, i + 1)
    except (ValueError, IndexError, RecursionError):
        return False, None
    return False, None


def _space(text: str, i: int) -> int:
    while text[i] in " \t\r\n":
        i += 1
    return i


def _skip(text: str, i: int) -> int:
    """The index after the JSON value at i; nested values are skipped by counting brackets, not by recursion."""
    if text[i] not in "[{":
        return _DECODER.raw_decode(text, i)[1]
    depth = 0
    while True:
        c = text[i]
        if c == '"':
            match = _STRING.match(text, i)
            if match is None:
                raise ValueError("unterminated string")
            i = match.end()
            continue
        depth += c in "[{"
        depth -= c in "]}"
        i += 1
        if depth == 0:
            return i
