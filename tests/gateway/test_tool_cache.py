"""The tool cache (.opencode/agent-skill-tools.json, the seed's format): `abilities-mcp tools refresh` writes it from
the real upstreams (mcp-server-sqlite, server-everything) with categories from the rules; tool_search routes over it
without starting an upstream; a stale one is used and refreshed in the background; a missing, malformed or
outdated one means live discovery, never an error."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.gateway import cache
from abilities_mcp.gateway.config import GatewayConfig, Upstream
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import CLI, until
from upstream_servers import everything_server, sqlite_server

CLI_TIMEOUT_SECONDS = 120


def cache_file(root: Path) -> Path:
    return root / ".opencode" / "agent-skill-tools.json"


def write_gateway(root: Path, **extra: Any) -> None:
    servers = {
        "sqlite": {"command": str(sqlite_server()), "args": ["--db-path", str(root / "shop.db")]},
        "everything": {"command": str(everything_server()), "args": ["stdio"]},
    }
    (root / "gateway.json").write_text(json.dumps({"mcpServers": servers, **extra}))


def refresh(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "--root", str(root), "tools", "refresh"], capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS
    )


def probe_gateway(root: Path, marker: Path) -> None:
    """An upstream whose start leaves a marker file: any connection to it shows."""
    probe = {"command": "sh", "args": ["-c", f"touch {marker}; cat"]}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"probe": probe}}))


def seed_cache(refreshed_at: datetime, servers: list[str], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A cache as the seed's skill-manager writes it (no input schemas)."""
    return {
        "version": "4.0.0",
        "refreshed_at": refreshed_at.isoformat().replace("+00:00", "Z"),
        "mcp_servers": servers,
        "tool_count": len(tools),
        "categories": {"database": {"description": "Databases", "keywords": ["sql"], "tools": tools}},
        "uncategorized": [],
        "workflows": {"kept": {"description": "x", "triggers": {"tools": ["a"]}, "prerequisites": []}},
    }


def test_tools_refresh_writes_the_seeds_format_with_categories_and_keeps_the_files_other_keys(
    project: Project,
) -> None:
    write_gateway(project.root, categories={"talk": {"description": "Say things", "tools": ["echo"]}})
    path = cache_file(project.root)
    path.parent.mkdir()
    path.write_text(json.dumps({"workflows": {"mine": {"keep": True}}, "version": "old"}, indent=4))

    done = refresh(project.root)

    assert done.returncode == 0, done.stderr
    assert f"Wrote {path}: 19 tools from 2 servers" in done.stdout  # 6 sqlite + 13 everything
    cache = json.loads(path.read_text())
    assert list(cache)[:6] == ["version", "refreshed_at", "mcp_servers", "tool_count", "categories", "uncategorized"]
    assert cache["workflows"] == {"mine": {"keep": True}}  # not the cache's own: kept
    assert path.read_text().startswith('{\n    "version"')  # its indentation kept
    assert datetime.fromisoformat(cache["refreshed_at"].replace("Z", "+00:00")) > datetime.now(UTC) - timedelta(
        minutes=5
    )
    assert cache["mcp_servers"] == ["sqlite", "everything"] and cache["tool_count"] == 19
    database = cache["categories"]["database"]
    assert {t["id"] for t in database["tools"]} == {
        "read_query",
        "write_query",
        "create_table",
        "list_tables",
        "describe_table",
        "append_insight",
    }  # the server's name is *sqlite*
    read_query = next(t for t in database["tools"] if t["id"] == "read_query")
    assert read_query["prefix"] == "sqlite__" and read_query["description"].startswith("Execute a SELECT query")
    assert "sql" in database["keywords"]
    assert [t["id"] for t in cache["categories"]["talk"]["tools"]] == ["echo"]  # the project's own rule
    assert "get-sum" in {t["id"] for t in cache["uncategorized"]}


def test_tools_refresh_names_a_server_that_fails_and_exits_1(project: Project) -> None:
    write_gateway(project.root)
    config = json.loads((project.root / "gateway.json").read_text())
    config["mcpServers"]["nowhere"] = {"command": "/nonexistent/server"}
    (project.root / "gateway.json").write_text(json.dumps(config))

    done = refresh(project.root)

    assert done.returncode == 1
    assert "Upstream server 'nowhere' failed to start" in done.stderr and "Traceback" not in done.stderr
    # The cache lists every server or none: one without 'nowhere' would take its tools out of their categories.
    assert "Nothing written: 1 of 3 servers could not be listed" in done.stderr
    assert not cache_file(project.root).exists()


def test_tools_refresh_without_gateway_json_says_how_to_make_one(project: Project) -> None:
    done = refresh(project.root)

    assert done.returncode == 1
    assert "No gateway.json in" in done.stderr and "abilities-mcp gateway add" in done.stderr
    assert not cache_file(project.root).exists()


async def test_tool_search_routes_over_the_cache_without_starting_any_upstream(
    project: Project, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    probe_gateway(project.root, marker)
    config = json.loads((project.root / "gateway.json").read_text())
    config["mcpServers"]["broken"] = {"url": "ftp://example.org"}  # left out, and named in the warnings
    (project.root / "gateway.json").write_text(json.dumps(config))
    tools = [{"id": "run_sql", "description": "Run a SQL query on the warehouse", "prefix": "probe__"}]
    path = cache_file(project.root)
    path.parent.mkdir()
    path.write_text(json.dumps(seed_cache(datetime.now(UTC), ["probe"], tools)))

    async with Client(create_server(project)) as client:
        found = await client.call_tool("tool_search", {"task": "run a sql query"})

    assert not found.is_error, found
    result = found.structured_content
    top = result["tools"][0]
    assert (top["tool"], top["server"], top["category"]) == ("probe__run_sql", "probe", "database")
    assert top["input_schema"] == {}  # the seed's cache holds none; tool_call checks the live one
    assert result["cache"]["stale"] is False
    assert len(result["warnings"]) == 1 and "mcpServers.broken.url" in result["warnings"][0]
    assert not marker.exists()  # nothing was started


async def test_a_stale_cache_is_used_and_refreshed_in_the_background(project: Project) -> None:
    write_gateway(project.root)
    old = datetime.now(UTC) - timedelta(days=2)
    tools = [{"id": "old_query", "description": "An old query tool that is gone now", "prefix": "sqlite__"}]
    path = cache_file(project.root)
    path.parent.mkdir()
    path.write_text(json.dumps(seed_cache(old, ["sqlite", "everything"], tools)))

    async with Client(create_server(project)) as client:
        first = await client.call_tool("tool_search", {"task": "an old query tool"})
        assert first.structured_content["cache"]["stale"] is True
        assert first.structured_content["tools"][0]["tool"] == "sqlite__old_query"  # answered from the cache
        await until(
            lambda: json.loads(path.read_text())["refreshed_at"] != seed_cache(old, [], [])["refreshed_at"], timeout=60
        )
        again = await client.call_tool("tool_search", {"task": "echo back a message"})

    cache = json.loads(path.read_text())
    assert cache["tool_count"] == 19
    assert cache["workflows"] == seed_cache(old, [], [])["workflows"]  # kept through the refresh
    assert again.structured_content["cache"]["stale"] is False
    assert again.structured_content["tools"][0]["tool"] == "everything__echo"
    assert "sqlite__old_query" not in [t["tool"] for t in again.structured_content["tools"]]


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps({"version": "1", "categories": {}}),  # no refreshed_at, tool_count, mcp_servers
        json.dumps(seed_cache(datetime.now(UTC), ["some-other-server"], [])),  # not this gateway.json's servers
    ],
    ids=["not-json", "missing-fields", "other-servers"],
)
async def test_a_malformed_or_outdated_cache_means_live_discovery_not_an_error(project: Project, text: str) -> None:
    write_gateway(project.root)
    path = cache_file(project.root)
    path.parent.mkdir()
    path.write_text(text)

    async with Client(create_server(project)) as client:
        found = await client.call_tool("tool_search", {"task": "echo back my message"})

    assert not found.is_error, found
    assert found.structured_content["tools"][0]["tool"] == "everything__echo"
    assert found.structured_content["cache"]["stale"] is False
    assert path.read_text() == text  # left as it was


def test_a_bad_category_rule_is_reported_by_validate_with_its_field(project: Project) -> None:
    write_gateway(project.root, categories={"talk": {"tool": ["echo"]}})

    done = subprocess.run(
        [*CLI, "--root", str(project.root), "validate"], capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS
    )

    assert done.returncode == 1
    assert "categories.talk.tool: unknown key 'tool'; did you mean 'tools'?" in done.stdout


async def test_the_caches_categories_trigger_workflows_on_proxied_calls(project: Project) -> None:
    write_gateway(project.root)
    assert refresh(project.root).returncode == 0
    workflows = {
        "tables-first": {
            "description": "List the tables before any database tool",
            "triggers": {"category": "database"},
            "prerequisites": [{"step": 1, "tool": "list_tables", "description": "Which tables exist"}],
            "mode": "enforce",
        }
    }
    (project.root / "workflows.json").write_text(json.dumps(workflows))

    async with Client(create_server(project)) as client:
        query = await client.call_tool(
            "tool_call",
            {"tool": "sqlite__read_query", "arguments": {"query": "SELECT 1 AS one"}},
            meta={"sessionID": "s"},
        )
        echo = await client.call_tool(
            "tool_call", {"tool": "everything__echo", "arguments": {"message": "hi"}}, meta={"sessionID": "s"}
        )

    assert not query.is_error, query
    gate = query.structured_content["gate"]
    assert (gate["verdict"], [r["tool"] for r in gate["ran_prerequisites"]]) == ("deny", ["sqlite__list_tables"])
    assert echo.structured_content["gate"]["verdict"] == "allow"  # not a database tool


def test_the_cache_read_again_unchanged_is_the_same_listing_and_an_edit_is_read_at_once(tmp_path: Path) -> None:
    """tool_search finds its router by the listing's identity: an unchanged cache file gives the same listing (not
    an equal new one), while an edit, a replaced file or other upstreams in gateway.json are read at once."""
    servers = {name: Upstream(name, "true", (), {}, None, None, {}, 5.0) for name in ("sqlite", "everything")}
    config = GatewayConfig(servers, [])
    path = tmp_path / "agent-skill-tools.json"
    now = datetime.now(UTC)
    query = {"id": "run_sql", "description": "Run a SQL query", "prefix": "sqlite__"}
    path.write_text(json.dumps(seed_cache(now, ["sqlite", "everything"], [query])))

    first = cache.read(path, config)
    again = cache.read(path, config)
    assert first is not None and again is not None
    assert again.listing is first.listing and again.categories is first.categories
    later = cache.read(path, config, now=(now + timedelta(days=2)).timestamp())
    assert later is not None and later.stale and not first.stale  # staleness is judged at each read
    assert later.listing is first.listing

    query["id"] = "run_sql_query"  # edited in place
    path.write_text(json.dumps(seed_cache(now, ["sqlite", "everything"], [query])))
    edited = cache.read(path, config)
    assert edited is not None and [e.qualified for e in edited.listing.entries] == ["sqlite__run_sql_query"]
    assert cache.read(path, config).listing is edited.listing  # type: ignore[union-attr]

    query["id"] = "run_sql"  # replaced, as `tools refresh` writes it
    replacement = tmp_path / "new.json"
    replacement.write_text(json.dumps(seed_cache(now, ["sqlite", "everything"], [query])))
    replacement.replace(path)
    replaced = cache.read(path, config)
    assert replaced is not None and [e.qualified for e in replaced.listing.entries] == ["sqlite__run_sql"]

    assert cache.read(path, config._replace(upstreams={"sqlite": servers["sqlite"]})) is None  # other servers now
    assert cache.read(path, config) is not None
    path.unlink()
    assert cache.read(path, config) is None
