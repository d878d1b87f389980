"""A scripted model on 127.0.0.1 that speaks OpenAI's chat completions API, for driving a real client (OpenCode).

The script is a list of turns; each is a reply, or a function of the request (the messages so far, including `role: tool`
results) that returns tool calls or final text. Every request is recorded, so a test can assert what the client
sent back. Requests that are not part of the conversation (OpenCode's title generator) are answered harmlessly
without using a turn.

    model = ScriptedOpenAI([
        lambda request: calls(("bash", {"command": "touch pwned"})),
        lambda request: say("done: " + request.last_tool_result()),
    ])
    with model:
        ...  # point the client at model.base_url
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any, NamedTuple

MODEL_ID = "m"
# What the script answers once its turns are used up: the client ends its loop, and the test sees `overrun`.
EXHAUSTED = "(the scripted model has no more turns)"


class Reply(NamedTuple):
    """One assistant message: tool calls (name, arguments) or text."""

    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def say(text: str) -> Reply:
    return Reply(text=text)


def calls(*tool_calls: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=tuple(tool_calls))


class Request:
    """One chat completions request the client sent."""

    def __init__(self, path: str, body: dict[str, Any]):
        self.path = path
        self.body = body

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.body.get("tools") or []]

    def text_of(self, message: dict[str, Any]) -> str:
        content = message.get("content")
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content if isinstance(content, str) else ""

    def tool_results(self) -> list[str]:
        """The text of every `role: tool` message, oldest first."""
        return [self.text_of(m) for m in self.messages if m.get("role") == "tool"]

    def last_tool_result(self) -> str:
        results = self.tool_results()
        return results[-1] if results else ""

    def system(self) -> str:
        return "\n".join(self.text_of(m) for m in self.messages if m.get("role") == "system")

    def first_user_text(self) -> str:
        return next((self.text_of(m) for m in self.messages if m.get("role") == "user"), "")


Turn = Callable[[Request], Reply] | Reply  # a fixed reply needs no function


class ScriptedServer:
    """What every scripted model shares: an HTTP server on 127.0.0.1 that replays the turns in order, records each
    request, and answers side requests (a title, a summary) without using a turn. Subclasses speak the wire format
    (`_handler`), say which requests are side ones (`side_reply`), and where the API lives (`PATH`)."""

    PATH = "/v1"

    def __init__(self, turns: list[Turn]):
        self.turns = list(turns)
        self.requests: list[Any] = []  # the conversation's requests, one per turn used
        self.side_requests: list[Any] = []  # answered without a turn (titles, unknown paths)
        self.errors: list[str] = []  # turns that raised: the test should fail on them
        self.overrun = False
        self._lock = threading.Lock()
        self._ids = count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.PATH}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def side_reply(self, request: Any) -> Any | None:
        """The reply to a request that is not the conversation, or None for one that is."""
        return None

    def answer(self, request: Any) -> Any:
        """The next turn's reply (a side request gets its own)."""
        side = self.side_reply(request)
        if side is not None:
            self.side_requests.append(request)
            return side
        with self._lock:
            self.requests.append(request)
            if not self.turns:
                self.overrun = True
                return say(EXHAUSTED)
            turn = self.turns.pop(0)
        try:
            return turn(request) if callable(turn) else turn
        except Exception as exc:  # noqa: BLE001 - reported to the test, and the client is told to stop
            self.errors.append(f"turn {len(self.requests)}: {type(exc).__name__}: {exc}")
            return say(f"(scripted turn failed: {exc})")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError


class ScriptedOpenAI(ScriptedServer):
    """The model server: `base_url` for the client's provider config, `requests` for assertions."""

    def side_reply(self, request: Request) -> Reply | None:
        return say("Scripted session") if _is_title_request(request) else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:  # quiet: stderr belongs to the test run
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "t"}]})
                else:
                    model.side_requests.append(Request(self.path, {}))
                    self._json(404, {"error": {"message": f"no {self.path} here"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    model.side_requests.append(Request(self.path, body))
                    self._json(404, {"error": {"message": f"no {self.path} here"}})
                    return
                reply = model.answer(Request(self.path, body))
                completion_id = f"chatcmpl-{next(model._ids)}"
                if body.get("stream"):
                    self._stream(completion_id, reply)
                else:
                    self._json(200, _completion(completion_id, reply, model._call_ids()))

            def _json(self, status: int, data: dict[str, Any]) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, completion_id: str, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in _chunks(completion_id, reply, model._call_ids()):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler

    def _call_ids(self) -> Iterator[str]:
        while True:
            yield f"call_{next(self._ids)}"


def _is_title_request(request: Request) -> bool:
    return not request.body.get("tools") and "title generator" in request.system()


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _base(completion_id: str) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": MODEL_ID}


def _chunks(completion_id: str, reply: Reply, ids: Iterator[str]) -> Iterator[dict[str, Any]]:
    """SSE chunks as OpenAI streams them: role, then text or one delta per tool call, then the finish."""
    yield {**_base(completion_id), "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    if reply.text:
        delta = {"content": reply.text}
        yield {**_base(completion_id), "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    for index, (name, arguments) in enumerate(reply.tool_calls):
        call = {
            "index": index,
            "id": next(ids),
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        yield {
            **_base(completion_id),
            "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}],
        }
    finish = "tool_calls" if reply.tool_calls else "stop"
    yield {**_base(completion_id), "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": USAGE}


def _completion(completion_id: str, reply: Reply, ids: Iterator[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": next(ids), "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for name, arguments in reply.tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": USAGE,
    }
