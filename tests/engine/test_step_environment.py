"""A script step's environment beyond the server's: `ABILITIES_PYTHON`, the Python running abilities-mcp, so a step
runs the venv's interpreter whatever `python3` PATH finds; and the shipped test-suite ability, which relies on it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from support import REPO


async def run(client: Client, name: str, inputs: dict[str, Any] | None = None) -> dict:
    result = await client.call_tool("ability_run", {"name": name, "inputs": inputs or {}, "wait_seconds": 60})
    assert not result.is_error, result.content[0].text
    return result.structured_content


def outputs(view: dict) -> dict[str, str | None]:
    return {s["id"]: s["output"] for s in view["steps"]}


PRINTS_IT = """
description: which Python a step gets
steps:
  - {id: given, type: script, run: 'echo "$ABILITIES_PYTHON"'}
  - {id: own, type: script, run: 'echo "$ABILITIES_PYTHON"', env: {ABILITIES_PYTHON: /opt/python/bin/python3}}
"""


async def test_a_step_gets_the_python_running_the_server_and_its_own_env_wins(client, write) -> None:
    write("which", PRINTS_IT)

    view = await run(client, "which")

    assert view["status"] == "completed", view
    assert outputs(view) == {"given": sys.executable, "own": "/opt/python/bin/python3"}


async def test_the_servers_own_abilities_python_wins_over_its_interpreter(
    client, write, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ABILITIES_PYTHON", "/usr/local/bin/python3.13")
    write("which", PRINTS_IT)

    view = await run(client, "which")

    assert outputs(view)["given"] == "/usr/local/bin/python3.13"


def path_without_the_venv(folder: Path) -> str:
    """A PATH whose python3 lacks every package the venv has (this Python without its site-packages)."""
    folder.mkdir()
    python3 = folder / "python3"
    python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
    python3.chmod(0o755)
    return f"{folder}{os.pathsep}/usr/bin{os.pathsep}/bin"


async def test_the_shipped_test_suite_runs_the_tests_with_the_servers_python_not_paths(
    client, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "abilities" / "test-suite.yaml").write_text((REPO / "abilities" / "test-suite.yaml").read_text())
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print(1)\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text(
        textwrap.dedent("""\
            import mcp


            def test_the_project_can_import_what_its_venv_has():
                assert mcp.Client
            """)
    )
    monkeypatch.setenv("PATH", path_without_the_venv(tmp_path / "bin"))
    bare = subprocess.run(["python3", "-c", "import mcp"], capture_output=True, text=True, timeout=60)
    assert "No module named 'mcp'" in bare.stderr  # the README's setup: PATH's python3 is not the venv's

    view = await run(client, "test-suite", {"full": True})

    assert view["status"] == "completed", view
    assert "1 passed" in (outputs(view)["pytest"] or ""), view
    assert outputs(view)["report"] == "checked 1 files; syntax completed, pytest completed"
