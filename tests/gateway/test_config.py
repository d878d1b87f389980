"""gateway.json: the `mcpServers` shape of .mcp.json, strict, with ${VAR} expansion; checked by validate (kind
`gateway`) with the field and the fix; its JSON Schema for editors; no file, no gateway tools."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.gateway.config import check_file, json_schema, read_gateway
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import cli


def write(root: Path, data: Any) -> Path:
    path = root / "gateway.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_stdio_and_an_http_server_are_read_with_variables_expanded(root: Path) -> None:
    path = write(
        root,
        {
            "mcpServers": {
                "db": {
                    "command": "${TOOLS}/mcp-db",
                    "args": ["--token", "${TOKEN}", "--mode", "${MODE:-read}"],
                    "env": {"DB_URL": "${DB_URL:-sqlite:///x.db}"},
                    "cwd": "data",
                    "timeout": "1m30s",
                },
                "web": {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            }
        },
    )

    config = read_gateway(path, root, {"TOOLS": "/opt/tools", "TOKEN": "s3cret", "HOST": "example.org"})

    assert config.problems == []
    db, web = config.upstreams["db"], config.upstreams["web"]
    assert db.command == "/opt/tools/mcp-db"
    assert db.args == ("--token", "s3cret", "--mode", "read")
    assert db.env == {"DB_URL": "sqlite:///x.db"}
    assert db.cwd == root / "data"
    assert db.timeout == 90.0
    assert (web.url, web.headers) == ("https://example.org/mcp", {"Authorization": "Bearer s3cret"})
    assert web.timeout == 60.0  # the default


@pytest.mark.parametrize(
    ("servers", "path", "said"),
    [
        ({"db": {"command": "x", "timout": "3s"}}, "mcpServers.db.timout", "did you mean 'timeout'?"),
        ({"db": {"args": ["x"]}}, "mcpServers.db", "either `command` (stdio) or `url` (streamable HTTP)"),
        ({"db": {"command": "x", "timeout": "soon"}}, "mcpServers.db.timeout", "write a duration like 500ms"),
        ({"db": {"url": "ftp://x"}}, "mcpServers.db.url", "String should match pattern '^https?://'"),
        ({"db": {"url": "http://x", "command": "y"}}, "mcpServers.db.command", "unknown key 'command'"),
        ({"db": {"command": "x", "expose": "some"}}, "mcpServers.db.expose", "use 'none' or 'all'"),
        ({"db": {"command": "x", "args": "--flag"}}, "mcpServers.db.args", "valid list"),
        ({"a__b": {"command": "x"}}, "mcpServers.a__b", "separates server and tool in tool names; rename it"),
    ],
    ids=["typo", "neither-kind", "bad-duration", "not-http", "mixed-kinds", "expose-unknown", "args-string", "sep"],
)
def test_a_broken_server_is_named_with_its_field_and_fix_and_left_out(
    root: Path, servers: dict[str, Any], path: str, said: str
) -> None:
    file = write(root, {"mcpServers": {**servers, "good": {"command": "ok"}}})

    config = read_gateway(file, root, {})

    assert [(d.path, said in d.message) for d in config.problems] == [(path, True)], config.problems
    assert list(config.upstreams) == ["good"]
    assert check_file(file) == config.problems


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"servers": {}}', "unknown key 'servers'; did you mean 'mcpServers'?"),
        ('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', "appears twice"),
    ],
    ids=["syntax", "not-an-object", "top-level-typo", "duplicate-server"],
)
def test_a_broken_file_is_a_diagnostic_never_a_crash(root: Path, text: str, said: str) -> None:
    config = read_gateway(write(root, text), root, {})

    assert any(said in d.message for d in config.problems), config.problems


def test_no_file_means_no_upstreams(root: Path) -> None:
    config = read_gateway(root / "gateway.json", root, {})

    assert (config.upstreams, config.problems) == ({}, [])


def test_the_json_schema_describes_both_kinds_of_server() -> None:
    schema = json_schema()

    assert schema["title"] == "abilities-mcp gateway.json"
    assert {"StdioUpstream", "HttpUpstream"} <= set(schema["$defs"])
    assert "$schema" in schema["properties"] and "mcpServers" in schema["properties"]
    assert schema["$defs"]["StdioUpstream"]["additionalProperties"] is False


async def test_validate_lists_gateway_json_with_its_errors(project: Project) -> None:
    write(project.root, {"mcpServers": {"db": {"command": "x", "timout": "3s"}}})

    async with Client(create_server(project)) as client:
        report = (await client.call_tool("ability_validate", {})).structured_content

    gateway = next(f for f in report["files"] if f["kind"] == "gateway")
    assert report["valid"] is False
    assert gateway["path"] == str(project.root / "gateway.json")
    assert gateway["errors"] == [
        {"path": "mcpServers.db.timout", "message": "unknown key 'timout'; did you mean 'timeout'?"}
    ]


def test_the_validate_command_fails_on_a_broken_gateway_json(root: Path) -> None:
    write(root, {"mcpServers": {"db": {"args": []}}})

    done = subprocess.run(cli(root, "validate"), capture_output=True, text=True, timeout=60)

    assert done.returncode == 1
    assert "ERROR gateway   gateway.json" in done.stdout
    assert "mcpServers.db: a server needs either `command` (stdio) or `url` (streamable HTTP); add one" in done.stdout


async def test_a_project_without_gateway_json_has_no_gateway_tools(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}

    assert "workflow_check" in names
    assert not {"tool_search", "tool_call", "tool_batch", "tool_chain"} & names


async def test_a_project_with_gateway_json_has_them_and_starts_no_upstream(project: Project, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    write(project.root, {"mcpServers": {"probe": {"command": "sh", "args": ["-c", f"touch {marker}; cat"]}}})

    async with Client(create_server(project)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("workflow_list", {})

    assert {"tool_search", "tool_call", "tool_batch", "tool_chain"} <= names
    assert not marker.exists()  # nothing connects until a call needs it


def test_a_variable_that_is_not_set_and_has_no_default_leaves_its_server_out_saying_how_to_fix_it(
    root: Path,
) -> None:
    path = write(
        root,
        {
            "mcpServers": {
                "db": {"command": "mcp-db", "env": {"TOKEN": "${DB_TOKEN}"}},
                "ok": {"command": "mcp-ok", "args": ["${EMPTY}", "${UNSET:-fallback}"]},
            }
        },
    )

    config = read_gateway(path, root, {"EMPTY": ""})

    assert [(d.path, d.message) for d in config.problems] == [
        (
            "mcpServers.db",
            "${DB_TOKEN} is not set; set it where the server starts, or give a default: ${DB_TOKEN:-value}",
        )
    ]
    assert list(config.upstreams) == ["ok"]
    assert config.upstreams["ok"].args == ("", "fallback")


async def test_tool_search_names_a_broken_server_and_tool_call_of_it_says_why(project: Project) -> None:
    write(project.root, {"mcpServers": {"db": {"command": "x", "timout": "3s"}}})

    async with Client(create_server(project)) as client:
        search = (await client.call_tool("tool_search", {"task": "query the database"})).structured_content
        call = await client.call_tool("tool_call", {"tool": "db__query", "arguments": {}})

    assert search["tools"] == []
    assert "mcpServers.db.timout: unknown key 'timout'; did you mean 'timeout'?" in search["warnings"][0]
    assert call.is_error
    assert "Unknown tool 'db__query'" in call.content[0].text
    assert "mcpServers.db.timout" in call.content[0].text


def test_the_schema_command_prints_gateway_json_s_schema(root: Path) -> None:
    done = subprocess.run(cli(root, "schema", "gateway"), capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json_schema()
