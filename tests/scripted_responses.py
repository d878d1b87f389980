"""A scripted model on 127.0.0.1 that speaks OpenAI's Responses API (`POST /v1/responses`, streamed), for driving
the real Codex CLI (its `wire_api = "responses"` provider).

The script is a list of turns, as in scripted_openai.py: each a Reply, or a function of the request (the input
items so far, including `function_call_output` results) returning tool calls or final text. Requests that are not
the conversation (no tools offered: a title or a summary) are answered with text without using a turn.

    model = ScriptedResponses([
        lambda request: calls(("shell", {"command": ["touch", "pwned"]})),
        lambda request: say("done: " + request.last_tool_result()),
    ])
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from itertools import count
from typing import Any

from scripted_openai import EXHAUSTED, MODEL_ID, Reply, ScriptedServer, calls, say

__all__ = ["EXHAUSTED", "MODEL_ID", "Reply", "ScriptedResponses", "calls", "say"]


class Request:
    """One Responses API request the client sent."""

    def __init__(self, path: str, body: dict[str, Any]):
        self.path = path
        self.body = body

    @property
    def items(self) -> list[dict[str, Any]]:
        value = self.body.get("input")
        return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []

    @property
    def tool_names(self) -> list[str]:
        """Every function the client offers, a namespace's functions as NAMESPACE__NAME (Codex's MCP servers are
        namespaces named mcp__SERVER, so an MCP tool reads mcp__SERVER__TOOL)."""
        names = []
        for tool in self.body.get("tools") or []:
            if tool.get("type") == "namespace":
                names += [f"{tool.get('name', '')}__{t.get('name', '')}" for t in tool.get("tools") or []]
            elif tool.get("name"):
                names.append(tool["name"])
        return names

    def namespace_of(self, name: str) -> tuple[str | None, str]:
        """(namespace, function name) for a name tool_names listed."""
        for tool in self.body.get("tools") or []:
            if tool.get("type") == "namespace":
                for t in tool.get("tools") or []:
                    if f"{tool.get('name', '')}__{t.get('name', '')}" == name:
                        return tool["name"], t["name"]
        return None, name

    def tool_results(self) -> list[str]:
        """The text of every function_call_output, oldest first."""
        return [_text(i.get("output")) for i in self.items if i.get("type") == "function_call_output"]

    def last_tool_result(self) -> str:
        results = self.tool_results()
        return results[-1] if results else ""

    def instructions(self) -> str:
        return str(self.body.get("instructions") or "")

    def user_texts(self) -> list[str]:
        return [_text(i.get("content")) for i in self.items if i.get("role") == "user"]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value if isinstance(p, dict))
    if isinstance(value, dict):
        return str(value.get("content") or value.get("text") or json.dumps(value))
    return ""


class ScriptedResponses(ScriptedServer):
    """The model server: `base_url` for the client's provider config, `requests` for assertions."""

    def side_reply(self, request: Request) -> Reply | None:
        return None if request.body.get("tools") else say("Scripted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.split("?")[0].rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}], "models": []})
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
                if not self.path.rstrip("/").endswith("/responses"):
                    model.side_requests.append(Request(self.path, body))
                    self._json(404, {"error": {"message": f"no {self.path} here"}})
                    return
                request = Request(self.path, body)
                reply = model.answer(request)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in _events(f"resp_{next(model._ids)}", request, reply, model._ids):
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            def _json(self, status: int, data: dict[str, Any]) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}


def _events(response_id: str, request: Request, reply: Reply, ids: count) -> Iterator[dict[str, Any]]:
    """The stream as the Responses API sends it: created, each output item added and done, completed."""
    response = {"id": response_id, "object": "response", "status": "in_progress", "model": MODEL_ID, "output": []}
    yield {"type": "response.created", "response": response}
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{next(ids)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for name, arguments in reply.tool_calls:
        namespace, function = request.namespace_of(name)
        item = {
            "type": "function_call",
            "id": f"fc_{next(ids)}",
            "call_id": f"call_{next(ids)}",
            "name": function,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        items.append(item)
    for index, item in enumerate(items):
        yield {"type": "response.output_item.added", "output_index": index, "item": item}
        if item["type"] == "message":
            yield {
                "type": "response.output_text.delta",
                "output_index": index,
                "content_index": 0,
                "item_id": item["id"],
                "delta": reply.text,
            }
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    done = {**response, "status": "completed", "output": items, "usage": USAGE}
    yield {"type": "response.completed", "response": done}
