"""The real stdio server on a PostgreSQL state: a run through a client, seen from the CLI of another process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
from mcp import Client

from support import stdio_params

TWO_STEPS = """
description: build then test
steps:
  - {id: build, type: script, run: echo built}
  - {id: test, type: script, run: echo "tested 100%", needs: [build]}
"""


async def test_a_run_through_the_stdio_server_lands_in_postgresql_and_status_shows_it(
    root: Path, postgres_url: str
) -> None:
    (root / "abilities" / "check.yaml").write_text(textwrap.dedent(TWO_STEPS))
    async with Client(stdio_params(root, "--state", postgres_url), mode="legacy") as client:
        result = await client.call_tool("ability_run", {"name": "check", "wait_seconds": 60})
    assert not result.is_error, result.content
    run = result.structured_content
    assert run["status"] == "completed" and run["steps"][1]["output"].strip() == "tested 100%"

    command = [sys.executable, "-m", "abilities_mcp", "--root", str(root), "status", "--state", postgres_url]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert run["run_id"] in shown.stdout and "completed" in shown.stdout
    with psycopg.connect(postgres_url) as conn:  # the run is in the database, not in a SQLite file
        assert conn.execute("SELECT status FROM runs").fetchall() == [("completed",)]
    assert not list(Path(root.parent / "home").rglob("state.db"))
