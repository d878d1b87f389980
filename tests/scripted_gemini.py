"""A scripted model on 127.0.0.1 that speaks the Gemini API (`models/M:streamGenerateContent?alt=sse`,
`:generateContent`, `:countTokens`), for driving the real Gemini CLI through `GOOGLE_GEMINI_BASE_URL`
(gemini-cli packages/core/src/core/contentGenerator.ts: the env var sets the @google/genai client's baseUrl).

The script is a list of turns, as in scripted_openai.py: each a Reply, or a function of the request (the contents so
far, including `functionResponse` parts) returning function calls or final text. Requests that offer no tools (the
CLI's own checks: next speaker, routing, summaries) are answered without using a turn: JSON ones with a JSON object
that leaves the choice to the user, others with text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from scripted_openai import EXHAUSTED, Reply, ScriptedServer, calls, say

__all__ = ["EXHAUSTED", "Reply", "Request", "ScriptedGemini", "calls", "say"]

# What the CLI's JSON side requests get: the user speaks next, the default model stays.
SIDE_JSON = {"next_speaker": "user", "reasoning": "scripted", "model_choice": "flash", "complexity": "simple"}


class Request:
    """One generateContent request the client sent."""

    def __init__(self, path: str, body: dict[str, Any]):
        self.path = path
        self.body = body

    @property
    def contents(self) -> list[dict[str, Any]]:
        return [c for c in self.body.get("contents") or [] if isinstance(c, dict)]

    @property
    def tool_names(self) -> list[str]:
        return [
            d.get("name", "") for tool in self.body.get("tools") or [] for d in (tool.get("functionDeclarations") or [])
        ]

    def tool_results(self) -> list[str]:
        """Every functionResponse's response as JSON text, oldest first."""
        out = []
        for content in self.contents:
            for part in content.get("parts") or []:
                if "functionResponse" in part:
                    out.append(json.dumps(part["functionResponse"].get("response"), ensure_ascii=False))
        return out

    def last_tool_result(self) -> str:
        results = self.tool_results()
        return results[-1] if results else ""

    def texts(self) -> list[str]:
        """Every text part of the user's turns, oldest first."""
        return [
            part["text"]
            for content in self.contents
            if content.get("role") == "user"
            for part in content.get("parts") or []
            if isinstance(part.get("text"), str)
        ]


class ScriptedGemini(ScriptedServer):
    """The model server: `base_url` for GOOGLE_GEMINI_BASE_URL, `requests` for assertions."""

    PATH = ""

    def side_reply(self, request: Request) -> Reply | dict[str, Any] | None:
        if request.tool_names:
            return None
        config = request.body.get("generationConfig") or {}
        return SIDE_JSON if config.get("responseMimeType") == "application/json" else say("Scripted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                model.side_requests.append(Request(self.path, {}))
                self._json(404, {"error": {"code": 404, "message": f"no {self.path} here", "status": "NOT_FOUND"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path.endswith(":countTokens"):
                    self._json(200, {"totalTokens": 10})
                    return
                if not path.endswith((":generateContent", ":streamGenerateContent")):
                    model.side_requests.append(Request(self.path, body))
                    self._json(404, {"error": {"code": 404, "message": f"no {self.path} here", "status": "NOT_FOUND"}})
                    return
                reply = model.answer(Request(self.path, body))
                response = _response(reply)
                if path.endswith(":generateContent"):
                    self._json(200, response)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in _chunks(response):
                    self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
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


USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def _response(reply: Reply | dict[str, Any]) -> dict[str, Any]:
    if isinstance(reply, dict):  # a JSON side answer
        parts: list[dict[str, Any]] = [{"text": json.dumps(reply)}]
    else:
        parts = [{"text": reply.text}] if reply.text else []
        parts += [{"functionCall": {"name": name, "args": arguments}} for name, arguments in reply.tool_calls]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "usageMetadata": USAGE, "modelVersion": "scripted"}


def _chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One chunk: the whole reply with its finish reason (the CLI joins chunks; one is a valid stream)."""
    yield response
