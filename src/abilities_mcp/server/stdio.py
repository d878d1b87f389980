"""The stdio transport as we run it: the SDK's, with every line checked before the SDK reads it.

The SDK's stdio reader drops a line that is not a JSON-RPC message (not JSON, `"jsonrpc": "1.0"`, params that are
not an object, nesting past its parser's depth, a lone surrogate): no answer, so a caller waits forever for its
request (docs/upstream/mcp-sdk-malformed-messages.md). Here each such line is answered as JSON-RPC 2.0 says:
-32700 when it does not parse, -32600 when it parses but is not a valid message, with the request's id whenever
one can be read (null otherwise), and the server goes on serving.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger(__name__)
# Answers to refused lines waiting to be written; past this, reading stdin waits for the writer.
PENDING_ANSWERS = 16
# Characters of a refused line shown in the log and of the reason sent back.
SHOWN_CHARS = 200
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_DECODER = json.JSONDecoder()


async def run_stdio(server: MCPServer) -> None:
    """MCPServer.run_stdio_async, answering every line the SDK would drop unanswered."""
    answers, pending = anyio.create_memory_object_stream[SessionMessage](PENDING_ANSWERS)
    with _claimed_stdin() as stdin:
        async with stdio_server(stdin=_checked(stdin, answers)) as (read_stream, write_stream):  # type: ignore[arg-type]
            async with anyio.create_task_group() as tg:
                tg.start_soon(_forward, pending, write_stream)
                lowlevel = server._lowlevel_server  # what run_stdio_async runs; the SDK offers no public handle
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
                tg.cancel_scope.cancel()


async def _checked(lines: AsyncIterable[str], answers: MemoryObjectSendStream[SessionMessage]) -> AsyncIterator[str]:
    async for line in lines:
        if not line.strip():
            continue
        answer = refusal(line)
        if answer is None:
            yield line
            continue
        log.warning("refused a protocol line (%s): %.*s", answer.error.message, SHOWN_CHARS, line.strip())
        await answers.send(SessionMessage(answer))


async def _forward(pending: AsyncIterable[SessionMessage], write_stream: Any) -> None:
    async for message in pending:
        await write_stream.send(message)


def refusal(line: str) -> types.JSONRPCError | None:
    """The error answer to a line the SDK cannot take as a JSON-RPC message; None when it can."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # exactly what the SDK's reader does
        return None
    except ValidationError as exc:
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
    text = line.strip()
    try:
        if not text.startswith("{"):
            return None
        i = _space(text, 1)
        while text[i] != "}":
            key, i = _DECODER.raw_decode(text, i)
            i = _space(text, i)
            if text[i] != ":" or not isinstance(key, str):
                return None
            i = _space(text, i + 1)
            if key == "id":
                value = _DECODER.raw_decode(text, i)[0] if text[i] not in "[{" else None
                return value if type(value) in (int, str) else None
            i = _space(text, _skip(text, i))
            if text[i] == ",":
                i = _space(text, i + 1)
    except (ValueError, IndexError, RecursionError):
        return None
    return None


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


@contextmanager
def _claimed_stdin() -> Iterator[Any]:
    """Read the protocol from a private copy of fd 0, and point fd 0 at the null device while serving, as the SDK
    does for the stdin it opens itself (it skips that for a stdin it is given): nothing else reads the protocol."""
    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # no usable fd 0: read what sys.stdin has
        yield anyio.wrap_file(TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8", errors="replace"))
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # closefd=False: the SDK's reader thread may still block on it after we return.
        wire = os.fdopen(private, "rb", closefd=False)
        yield anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8", errors="replace"))
    finally:
        os.dup2(private, 0)
