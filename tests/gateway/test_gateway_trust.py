"""gateway.json under trust: an edit that re-points or moves an upstream (the gates that name it would then guard
another server) waits for a person's `abilities-mcp trust`; the gateway keeps calling the server a person trusted."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.gateway.config import Gateway, lowerings, parse_gateway
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import trust_project
from upstream_servers import SAFE_QUERY, write_project

DB = {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "shop.db"], "env": {"MODE": "ro"}}
TRUSTED = {"mcpServers": {"db": DB, "web": {"url": "https://example.com/mcp", "headers": {"X": "1"}}}}


def config(data: dict[str, Any], root: Path = Path("/p")):
    return parse_gateway(root / "gateway.json", (json.dumps(data).encode(), []), root, environ={})


def edited(**servers: Any) -> dict[str, Any]:
    return {"mcpServers": {**TRUSTED["mcpServers"], **servers}}


LOWERING = [
    ("command", edited(db={**DB, "command": "./fake-db"}), "upstream 'db' re-pointed"),
    ("arguments", edited(db={**DB, "args": ["mcp-server-sqlite", "--db-path", "scratch.db"]}), "'db' re-pointed"),
    ("environment", edited(db={**DB, "env": {}}), "'db' re-pointed"),
    ("url", edited(web={"url": "https://evil.example/mcp", "headers": {"X": "1"}}), "'web' re-pointed"),
    ("headers", edited(web={"url": "https://example.com/mcp"}), "'web' re-pointed"),
    ("moved", {"mcpServers": {"scratch": DB, "web": TRUSTED["mcpServers"]["web"]}}, "'db' moved to 'scratch'"),
]
UNLOWERED = [
    ("new-upstream", edited(other={"command": "other-server"})),
    ("removed", {"mcpServers": {"web": TRUSTED["mcpServers"]["web"]}}),
    ("timeout-and-expose", edited(db={**DB, "timeout": "5m", "expose": "all"})),
]


@pytest.mark.parametrize(("data", "reason"), [(d, r) for _, d, r in LOWERING], ids=[i for i, _, _ in LOWERING])
def test_an_edit_that_re_points_or_moves_an_upstream_is_named(data, reason: str) -> None:
    found = lowerings(config(TRUSTED), config(data))
    assert any(reason in why for why in found), found


@pytest.mark.parametrize("data", [d for _, d in UNLOWERED], ids=[i for i, _ in UNLOWERED])
def test_an_edit_that_adds_removes_or_tunes_an_upstream_lowers_no_gate(data) -> None:
    assert lowerings(config(TRUSTED), config(data)) == []


def test_until_trusted_the_gateway_starts_the_upstream_a_person_trusted(root: Path, project: Project) -> None:
    (root / "gateway.json").write_text(json.dumps(TRUSTED))
    trust_project(project)
    (root / "gateway.json").write_text(json.dumps(edited(db={**DB, "command": "./fake-db"})))
    gateway = Gateway(project)
    assert gateway.current().upstreams["db"].command == "uvx"
    assert "gateway.json has edits that would lower a gate" in gateway.current().pending[0]
    trust_project(project)
    assert gateway.current().upstreams["db"].command == "./fake-db"


async def test_a_query_after_the_agent_re_points_the_database_still_reaches_the_trusted_one(
    root: Path, project: Project
) -> None:
    write_project(root, {"safe-query": SAFE_QUERY})
    trust_project(project)
    scratch = root / "scratch.db"
    with sqlite3.connect(scratch) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        db.execute("INSERT INTO users (name) VALUES ('mallory')")
    data = json.loads((root / "gateway.json").read_text())
    data["mcpServers"]["sqlite"]["args"] = ["--db-path", str(scratch)]  # the agent's edit
    (root / "gateway.json").write_text(json.dumps(data))

    async with Client(create_server(project)) as client:
        arguments = {"query": "SELECT name FROM users", "table": "users"}
        result = await client.call_tool("tool_call", {"tool": "sqlite__read_query", "arguments": arguments})

    assert not result.is_error
    assert "ada" in result.content[0].text and "mallory" not in result.content[0].text
    warnings = result.structured_content["gate"]["warnings"]
    assert any("upstream 'sqlite' re-pointed" in w and "abilities-mcp trust" in w for w in warnings)
