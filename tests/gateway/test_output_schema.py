"""An upstream tool's output schema holds on every proxied call, as the SDK's client holds it: a result whose
structured content does not fit is a failed call, whichever way the call goes (down the stdio lane at once, or in a
task, or in memory), on the first call and on every one after it; a schema the validator refuses is never
vouched for."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import raw_server

# An upstream in plain JSON-RPC whose tools give back `n` as their structured content, each under its own output
# schema: a plain one, one with a keyword the quick check does not know, one the validator refuses (draft-03, whose
# `required` is a boolean).
UPSTREAM = r"""
import json, sys

N = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
SCHEMAS = {
    "count": N,
    "positive": {**N, "properties": {"n": {"type": "integer", "minimum": 0}}},
    "legacy": {"$schema": "http://json-schema.org/draft-03/schema#", **N},
}
ANYTHING = {"type": "object", "properties": {"n": {}}, "required": ["n"]}
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if "id" not in message:
        continue
    if method == "initialize":
        info = {"name": "counter", "version": "1"}
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        tools = [{"name": name, "inputSchema": ANYTHING, "outputSchema": schema} for name, schema in SCHEMAS.items()]
        result = {"tools": tools}
    elif method == "tools/call":
        n = message["params"]["arguments"]["n"]
        result = {"content": [{"type": "text", "text": json.dumps(n)}], "structuredContent": {"n": n}}
    else:
        error = {"code": -32601, "message": "Method not found"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""

# (tool, n, what the call gives: the number's text, or words of its failure), in order, in one session.
CALLS: list[tuple[str, Any, str]] = [
    ("count", 1, "1"),  # the first: the SDK's client compiles the schema's validator
    ("count", 2, "2"),
    ("count", 3.0, "3.0"),  # an integer to JSON Schema, not to the quick check: the validator passes it
    ("count", "three", "Invalid structured content returned by tool count"),
    ("count", 4, "4"),  # after the failure the upstream was started again
    ("positive", 5, "5"),
    ("positive", 6, "6"),
    ("positive", -1, "Invalid structured content returned by tool positive"),
    ("legacy", 7, "Invalid schema for tool legacy"),
    ("legacy", 8, "Invalid schema for tool legacy"),  # every time: a schema that failed to compile is not kept
]


def project_with_upstream(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "counter.py").write_text(UPSTREAM)
    entry = {"command": sys.executable, "args": [str(root / "counter.py")]}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"up": entry}}))


def said(answer: dict[str, Any]) -> str:
    return answer["content"][0]["text"]


@pytest.mark.parametrize("way", ["stdio lane", "in memory"])
async def test_a_result_that_does_not_fit_its_output_schema_fails_on_every_call(tmp_path: Path, way: str) -> None:
    root = tmp_path / "p"
    project_with_upstream(root)
    answers = []
    if way == "stdio lane":
        async with raw_server(root, tmp_path / "stderr.txt", "--log-level", "debug") as server:
            for tool, n, _ in CALLS:
                params = {"name": "tool_call", "arguments": {"tool": f"up__{tool}", "arguments": {"n": n}}}
                answers.append(await server.request("tools/call", params))
        log = (tmp_path / "stderr.txt").read_text()
        assert "(id 3) started at once by the gateway lane" in log  # ("count", 2): the quick check's way
    else:
        async with Client(create_server(Project(root, tmp_path / "state"))) as client:
            for tool, n, _ in CALLS:
                result = await client.call_tool("tool_call", {"tool": f"up__{tool}", "arguments": {"n": n}})
                answers.append(result.model_dump(by_alias=True, mode="json", exclude_none=True))

    for (tool, n, expected), answer in zip(CALLS, answers, strict=True):
        failed = expected.startswith(("Invalid", "Error"))
        assert bool(answer.get("isError")) is failed, (tool, n, answer)
        if failed:
            assert expected in said(answer) and "nothing was sent" not in said(answer), (tool, n, answer)
        else:
            assert said(answer) == expected
            assert answer["structuredContent"]["structured_content"] == {"n": n}
