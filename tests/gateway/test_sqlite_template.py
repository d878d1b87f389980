"""The database template with the documented sqlite upstream (the real mcp-server-sqlite): `workflows add --template
database` after `tools refresh` fits the template to the tools the server has (list_tables, describe_table), and a
gated query can then be met by following the refusal's legal next calls; a workflow that names a tool no upstream
has is never named as a call to make, but as a workflow to fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mcp import Client

from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import CLI
from upstream_servers import write_project

CLI_TIMEOUT_SECONDS = 120


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "--root", str(root), *args], capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS
    )


async def tool_call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return await client.call_tool("tool_call", {"tool": tool, "arguments": arguments}, meta={"sessionID": "s1"})


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def workflow(root: Path) -> dict[str, Any]:
    return json.loads((root / "workflows.json").read_text())["database-safe-query"]


async def test_the_database_template_fits_the_sqlite_upstream_and_its_refusal_can_be_followed(
    project: Project,
) -> None:
    write_project(project.root, {})
    assert cli(project.root, "tools", "refresh").returncode == 0

    added = cli(project.root, "workflows", "add", "--template", "database")

    assert added.returncode == 0, added.stderr
    steps = [(p["step"], p["tool"], p["required"]) for p in workflow(project.root)["prerequisites"]]
    assert steps == [(1, "list_tables", True), (2, "describe_table", True)]  # no list_databases, no inspect_table
    async with Client(create_server(project)) as client:
        refused = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users"})
        assert refused.is_error
        assert "list_databases" not in text(refused) and "inspect_table" not in text(refused)
        # The legal next calls, in order: what the gateway could not fill (describe_table's table_name) the caller
        # makes, and the earlier step with it, so that the steps are recorded in order.
        assert text(refused).endswith(
            "Legal next call(s): tool_call(tool='sqlite__list_tables', arguments={}); "
            "tool_call(tool='sqlite__describe_table', arguments={}); "
            "tool_call(tool='sqlite__read_query', arguments={'query': 'SELECT name FROM users'})."
        )
        await tool_call(client, "sqlite__list_tables")
        await tool_call(client, "sqlite__describe_table", {"table_name": "users"})
        answered = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users"})

    assert not answered.is_error, text(answered)
    assert "'name': 'ada'" in text(answered)


async def test_a_workflow_naming_a_tool_no_upstream_has_is_said_to_need_fixing_not_to_be_called(
    project: Project,
) -> None:
    as_written = {k: v for k, v in TEMPLATES["database"].items() if k != "name"}
    write_project(project.root, {"database-safe-query": as_written})
    assert cli(project.root, "tools", "refresh").returncode == 0  # its category now holds sqlite's tools

    async with Client(create_server(project)) as client:
        refused = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users"})
        check = await client.call_tool("workflow_check", {"tool": "sqlite__read_query"}, meta={"sessionID": "s1"})

    said = text(refused)
    assert refused.is_error
    assert "no upstream server offers 'list_databases'" in said and "names a tool no upstream has" in said
    assert "fix it in workflows.json" in said
    assert said.endswith("Legal next call(s): workflow_list().")  # never tool_call(tool='list_databases', ...)
    calls = [c["tool"] for c in check.structured_content["next_calls"]]
    assert calls == ["list_tables"]  # the one step sqlite has
    assert "No call can meet 'inspect_table', 'list_databases' on 'sqlite'" in check.structured_content["message"]
