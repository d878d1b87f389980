"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, so the real Claude Code runs headless in tests.

The script is a list of turns. Each request of the main conversation consumes the next turn: a function of that
request (the conversation so far, the `tool_result` blocks the client sent back included) returning what the
"model" says: text, tool calls, or both. A subagent's requests (tools, but another system prompt) consume turns of
their own script; other requests (a title or quota call with no tools, a subagent with no script left) get a canned
text answer and consume nothing. Every request is recorded, so a test asserts on what the client really sent.

What Claude Code 2.1.330 sends (found by logging it): `POST /v1/messages?beta=true` with `stream: true`, the
system prompt as blocks (the first a billing header), the tools (MCP tools deferred: listed by name in a system
message, loaded with `ToolSearch`), and the session id in the `X-Claude-Code-Session-Id` header.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What a side request (not the main conversation) is answered.
SIDE_TEXT = "OK"
# What the "model" says once the script has no turns left (the test then fails: see `check`).
EXHAUSTED_TEXT = "The script has no more turns."
# A body larger than this is not read (Claude Code's are tens of KB).
MAX_BODY_BYTES = 64 * 1024 * 1024
# The first system block Claude Code sends is a billing header that varies; the rest identifies the conversation.
BILLING_PREFIX = "x-anthropic-billing-header"


@dataclass
class ToolUse:
    """One tool call the model makes."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""


@dataclass
class Reply:
    """What the model says in one turn: text, then tool calls (none: the turn ends)."""

    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)


@dataclass
class ToolResult:
    """A `tool_result` block the client sent back, with the call it answers."""

    tool_use_id: str
    name: str
    input: dict[str, Any]
    text: str
    is_error: bool


@dataclass
class Request:
    """One HTTP request the client made."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None
    conversation: str = "side"  # main | subagent | side (set when answered)

    @property
    def main(self) -> bool:
        return self.conversation == "main"

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools", []) if isinstance(self.body, dict) else []
        return [t.get("name", "") for t in tools if isinstance(t, dict)]

    @property
    def system_text(self) -> str:
        system = self.body.get("system") if isinstance(self.body, dict) else None
        if isinstance(system, str):
            return system
        return "\n".join(b.get("text", "") for b in system or () if isinstance(b, dict))

    def text(self) -> str:
        """Every text the request carries (system, messages, tool results), for searching."""
        parts = [self.system_text]
        for message in self.messages:
            parts += _texts(message.get("content"))
        return "\n".join(parts)

    def since_model_spoke(self) -> str:
        """The texts the client added after the model's last message (a hook's answer, a tool's result)."""
        roles = [m.get("role") for m in self.messages]
        first = max((i for i, role in enumerate(roles) if role == "assistant"), default=-1) + 1
        return "\n".join(text for m in self.messages[first:] for text in _texts(m.get("content")))

    def tool_results(self) -> list[ToolResult]:
        """Every tool result in the conversation so far, in order, each with the call it answers."""
        calls = {}
        results = []
        for message in self.messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    calls[block.get("id")] = block
                elif block.get("type") == "tool_result":
                    call = calls.get(block.get("tool_use_id"), {})
                    results.append(
                        ToolResult(
                            tool_use_id=str(block.get("tool_use_id")),
                            name=str(call.get("name", "")),
                            input=call.get("input") or {},
                            text="\n".join(_texts(block.get("content"))),
                            is_error=bool(block.get("is_error")),
                        )
                    )
        return results

    def result(self, tool_use_id: str) -> ToolResult:
        """The result of one call the script made."""
        found = [r for r in self.tool_results() if r.tool_use_id == tool_use_id]
        assert found, f"no tool_result for {tool_use_id} in the conversation; results: {self.tool_results()}"
        return found[-1]

    def last_results(self) -> list[ToolResult]:
        """The tool results of the last user message (what the previous turn's calls returned)."""
        if not self.messages or self.messages[-1].get("role") != "user":
            return []
        ids = {
            b.get("tool_use_id")
            for b in self.messages[-1].get("content") or ()
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        return [r for r in self.tool_results() if r.tool_use_id in ids]


Turn = Callable[[Request], Reply]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        if isinstance(block.get("tool_name"), str):  # ToolSearch answers with tool_reference blocks
            texts.append(block["tool_name"])
        if "content" in block:
            texts += _texts(block["content"])
    return texts


def say(text: str) -> Turn:
    """A turn that ends with this text."""
    return lambda _request: Reply(text=text)


def call(*uses: ToolUse, text: str = "") -> Turn:
    """A turn that makes these tool calls whatever came before."""
    return lambda _request: Reply(text=text, tool_uses=list(uses))


class ScriptedAnthropic:
    """The Messages API on 127.0.0.1:PORT answering from a script; use as a context manager."""

    def __init__(self, turns: Sequence[Turn], subagent_turns: Sequence[Turn] = (), side_text: str = SIDE_TEXT):
        """`turns` answer the main conversation; `subagent_turns` the requests of subagents (tools, another system
        prompt) while they last, then those get `side_text` like every other side request."""
        self.scripts = {"main": list(turns), "subagent": list(subagent_turns)}
        self.used = {"main": 0, "subagent": 0}
        self.side_text = side_text
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._main_system: str | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-anthropic", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ScriptedAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    @property
    def main(self) -> list[Request]:
        """The main conversation's requests, in order: one per turn."""
        return [r for r in self.requests if r.conversation == "main"]

    @property
    def subagent(self) -> list[Request]:
        """Subagents' requests, in order."""
        return [r for r in self.requests if r.conversation == "subagent"]

    @property
    def turns_used(self) -> int:
        return self.used["main"]

    def check(self) -> None:
        """Fail when a turn raised or the client asked for more turns than the script has."""
        assert not self.errors, "the scripted model failed:\n" + "\n".join(self.errors)

    def env(self) -> dict[str, str]:
        """Claude Code's environment for this server: no other network, no telemetry, no updates."""
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }

    # --- answering -------------------------------------------------------------------------------------------

    def reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            request.conversation = self._conversation(request)
            script = self.scripts.get(request.conversation, [])
            index = self.used.get(request.conversation, 0)
            if request.conversation == "main" and index >= len(script):
                self.errors.append(f"request {len(self.main)} of the main conversation: the script has no turn left")
                return Reply(text=EXHAUSTED_TEXT)
            if index >= len(script):
                return Reply(text=self.side_text)
            self.used[request.conversation] = index + 1
        try:
            reply = script[index](request)
        except Exception as exc:  # noqa: BLE001 - reported by check(); the client is told to stop
            self.errors.append(f"{request.conversation} turn {index + 1}: {type(exc).__name__}: {exc}")
            return Reply(text=f"The script failed: {exc}")
        for use in reply.tool_uses:
            use.id = use.id or f"toolu_{next(self._ids):04d}"
        return reply

    def _conversation(self, request: Request) -> str:
        """main: the first request with tools sets the main system prompt; subagent: tools, another system prompt;
        side: anything else (no tools: a title, a quota check; count_tokens)."""
        if request.method != "POST" or "count_tokens" in request.path or not request.tool_names:
            return "side"
        system = "\n".join(line for line in request.system_text.splitlines() if not line.startswith(BILLING_PREFIX))
        if self._main_system is None:
            self._main_system = system
        return "main" if system == self._main_system else "subagent"


_MESSAGE_IDS = itertools.count(1)


def _message(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text or not reply.tool_uses:
        content.append({"type": "text", "text": reply.text})
    content += [{"type": "tool_use", "id": u.id, "name": u.name, "input": u.input} for u in reply.tool_uses]
    return {
        "id": f"msg_scripted_{next(_MESSAGE_IDS):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_uses else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The message as the streaming API sends it."""
    start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {**block, "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {**block, "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 10},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _handler(server: ScriptedAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self) -> Request:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if 0 < length <= MAX_BODY_BYTES else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            return Request(self.command, self.path, dict(self.headers), body)

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_HEAD(self) -> None:
            with server._lock:
                server.requests.append(self._record())
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            with server._lock:
                server.requests.append(self._record())
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not scripted"}})

        def do_POST(self) -> None:
            request = self._record()
            path = self.path.split("?", 1)[0]
            if path.endswith("/count_tokens"):
                with server._lock:
                    server.requests.append(request)
                self._json(200, {"input_tokens": 10})
                return
            if not path.endswith("/v1/messages") or not isinstance(request.body, dict):
                with server._lock:
                    server.requests.append(request)
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not scripted"}})
                return
            model = str(request.body.get("model") or "claude-scripted")
            message = _message(server.reply(request), model)
            if not request.body.get("stream"):
                self._json(200, message)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for event, data in _events(message):
                self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler
