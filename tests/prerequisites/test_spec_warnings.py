"""What validate says of a workflows.json that works but names a server the way it no longer runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcp import Client

WORKFLOWS = {
    "db-first": {
        "description": "Look before querying",
        "triggers": {"tools": ["mcp__db__read_query", "mcp__web__fetch"]},
        "prerequisites": [
            {"step": 1, "tool": "mcp__db__list_tables", "description": "the tables"},
            {"step": 2, "tool": "db__describe_table", "description": "the columns", "required": False},
        ],
    }
}


def project_with_db_behind_the_gateway(root: Path) -> None:
    (root / "workflows.json").write_text(json.dumps(WORKFLOWS))
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"db": {"command": "db-mcp"}}}))


async def test_validate_warns_when_a_workflow_names_a_server_as_the_client_called_it_that_the_gateway_now_runs(
    client: Client, root: Path
) -> None:
    project_with_db_behind_the_gateway(root)

    report = (await client.call_tool("ability_validate", {})).structured_content

    [workflows] = [f for f in report["files"] if f["name"] == "workflows.json"]
    assert workflows["valid"] is True and report["valid"] is True
    assert [w["path"] for w in workflows["warnings"]] == [
        "db-first.triggers.tools[0]",
        "db-first.prerequisites[0].tool",
    ]
    message = workflows["warnings"][0]["message"]
    assert "'mcp__db__read_query' names server 'db'" in message and "behind this server's gateway" in message
    assert "Write 'db__read_query'" in message


def test_the_validate_command_prints_the_warning_and_still_passes(root: Path) -> None:
    project_with_db_behind_the_gateway(root)

    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "validate"], capture_output=True, text=True
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "warn  db-first.triggers.tools[0]: 'mcp__db__read_query' names server 'db'" in done.stdout
