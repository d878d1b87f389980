"""`expose: "all"` in gateway.json: the real mcp-server-sqlite's tools listed directly as `sqlite__read_query` and
the rest, called through the same gates as tool_call (an enforce workflow's prerequisites run first, a refusal sends
nothing), and `notifications/tools/list_changed` when gateway.json changes what is exposed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from test_sqlite_gates import SAFE_QUERY, recorded, text, write_project

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import until
from upstream_servers import everything_server


def expose(root: Path, value: str) -> None:
    config = json.loads((root / "gateway.json").read_text())
    config["mcpServers"]["sqlite"]["expose"] = value
    (root / "gateway.json").write_text(json.dumps(config))


@pytest.fixture
def notices() -> list[Any]:
    return []


@pytest.fixture
async def client(project: Project, notices: list[Any]) -> AsyncIterator[Client]:
    write_project(project.root, {"safe-query": SAFE_QUERY})
    expose(project.root, "all")

    async def on_message(message: Any) -> None:
        notices.append(message)

    # A handshake-era client (OpenCode, Cursor): a 2026-07-28 client (Claude Code 2.1) gets list_changed only on a
    # subscriptions/listen stream (tests/server/test_lane.py).
    async with Client(create_server(project), mode="legacy", message_handler=on_message) as c:
        yield c


async def listed(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_exposed_tools_are_listed_as_server__tool_with_their_schema_and_read_only_hint(client: Client) -> None:
    tools = await listed(client)

    assert {"sqlite__read_query", "sqlite__write_query", "sqlite__list_tables", "sqlite__describe_table"} <= set(tools)
    read = tools["sqlite__read_query"]
    assert read.input_schema["required"] == ["query"]
    assert "Execute a SELECT query" in read.description and "sqlite" in read.description
    assert "tool_call" in tools and "ability_run" in tools  # this server's own tools are still there
    assert client.server_capabilities.tools.list_changed is True


async def test_calling_an_exposed_gated_tool_runs_the_prerequisites_first_like_tool_call(client: Client) -> None:
    result = await client.call_tool(
        "sqlite__read_query",
        {"query": "SELECT name FROM users ORDER BY id", "table": "users"},
        meta={"sessionID": "s1"},
    )

    assert not result.is_error, text(result)
    assert "ada" in text(result) and "grace" in text(result)
    assert "[gateway] ran first: sqlite__list_tables" in text(result)
    assert "[gateway] ran first: sqlite__describe_table" in text(result)
    assert [r["tool"] for r in (await recorded(client))["safe-query"]] == ["list_tables", "describe_table"]


async def test_an_exposed_call_whose_prerequisites_cannot_be_filled_is_refused_and_sends_nothing(
    client: Client,
) -> None:
    result = await client.call_tool("sqlite__read_query", {"query": "SELECT name FROM users"}, meta={"sessionID": "s1"})

    assert result.is_error
    assert "describe_table" in text(result)
    assert (await recorded(client)) == {}


async def test_an_exposed_call_with_arguments_that_break_the_schema_is_refused(client: Client) -> None:
    result = await client.call_tool("sqlite__read_query", {"query": 5}, meta={"sessionID": "s1"})

    assert result.is_error and "query" in text(result)


async def test_expose_none_lists_nothing_extra_and_leaves_the_name_unknown(project: Project) -> None:
    write_project(project.root, {"safe-query": SAFE_QUERY})
    async with Client(create_server(project)) as c:
        tools = await listed(c)
        called = await c.call_tool("sqlite__list_tables", {})

    assert not any(name.startswith("sqlite__") for name in tools)
    assert called.is_error and "Unknown tool" in text(called)


async def test_the_client_is_told_when_gateway_json_stops_exposing_a_server(
    client: Client, project: Project, notices: list[Any]
) -> None:
    await listed(client)
    expose(project.root, "none")

    await client.call_tool("workflow_status", {}, meta={"sessionID": "s1"})  # any request after the change
    changed = await until(lambda: [n for n in notices if isinstance(n, types.ToolListChangedNotification)])
    tools = await listed(client)

    assert len(changed) == 1
    assert not any(name.startswith("sqlite__") for name in tools)


async def test_an_exposed_tools_progress_reaches_its_caller(project: Project) -> None:
    server = {"command": str(everything_server()), "args": ["stdio"], "expose": "all"}
    (project.root / "gateway.json").write_text(json.dumps({"mcpServers": {"everything": server}}))
    seen: list[tuple[float, float | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))

    async with Client(create_server(project), mode="legacy") as c:
        result = await c.call_tool(
            "everything__trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=progress
        )

    assert not result.is_error, text(result)
    assert seen == [(1, 3), (2, 3), (3, 3)]
