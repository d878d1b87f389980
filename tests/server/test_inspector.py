"""The MCP Inspector's CLI, a third-party client, lists and calls the server's tools over stdio."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO
from upstream_servers import sqlite_server

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
# The first run downloads the Inspector through npx; later runs take a couple of seconds.
INSPECTOR_TIMEOUT_SECONDS = 300
# The Inspector's own bound on the server's start is 15 s; a cold interpreter importing the server on a loaded shared
# machine took longer, failing the test for nothing. A bound only: the Inspector goes on as soon as it is connected.
CONNECT = ("--connect-timeout", "120000")
ABILITY_TOOLS = {
    "ability_list",
    "ability_validate",
    "ability_run",
    "ability_status",
    "ability_cancel",
    "ability_resume",
    "ability_history",
    "ability_step_complete",
    "ability_approve",
    "ability_decide",
    "ability_match",
}
READ_ONLY_TOOLS = {"ability_list", "ability_validate", "ability_status", "ability_history", "ability_match"}
# Captured at import, before the tests point HOME at a scratch folder: npx keeps its downloads in the real cache.
NPM_CACHE = Path(os.environ.get("npm_config_cache") or Path(os.environ.get("HOME", "~")).expanduser() / ".npm")


@pytest.fixture(scope="module")
def npx() -> str:
    found = shutil.which("npx")
    if found is None:
        if os.environ.get("ABILITIES_REQUIRE_INSPECTOR"):
            pytest.fail("ABILITIES_REQUIRE_INSPECTOR is set but npx is not on PATH; install Node.js")
        pytest.skip("npx is not installed (set ABILITIES_REQUIRE_INSPECTOR=1 to make this a failure)")
    return found


def inspect(npx: str, root: Path, *args: str, server_env: dict[str, str] | None = None) -> dict:
    """Run the Inspector CLI against `python -m abilities_mcp --root ROOT`; return its JSON result."""
    env_args = [arg for key, value in (server_env or {}).items() for arg in ("-e", f"{key}={value}")]
    result = subprocess.run(
        [npx, "-y", INSPECTOR, "--cli", *CONNECT, *env_args, sys.executable, "-m", "abilities_mcp", "--root", str(root)]
        + [*args, "--format", "json", "-q"],
        capture_output=True,
        text=True,
        timeout=INSPECTOR_TIMEOUT_SECONDS,
        env={**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["result"]


def test_the_inspector_lists_the_ability_tools_with_read_only_hints(npx: str, root: Path, write) -> None:
    write("hello", "description: says hello\nsteps:\n  - {id: greet, type: script, run: echo hello}\n")

    tools = {t["name"]: t for t in inspect(npx, root, "--method", "tools/list")["tools"]}

    assert ABILITY_TOOLS <= tools.keys()
    for name in ABILITY_TOOLS:
        read_only = (tools[name].get("annotations") or {}).get("readOnlyHint", False)
        assert read_only == (name in READ_ONLY_TOOLS), name


def test_the_inspector_calls_ability_list_and_gets_structured_content(npx: str, root: Path, write) -> None:
    write("hello", "description: says hello\nsteps:\n  - {id: greet, type: script, run: echo hello}\n")

    result = inspect(npx, root, "--method", "tools/call", "--tool-name", "ability_list")

    assert result["isError"] is False
    [ability] = result["structuredContent"]["abilities"]
    assert (ability["name"], ability["description"], ability["valid"]) == ("hello", "says hello", True)
    assert [s["id"] for s in ability["steps"]] == ["greet"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_an_approval_waits_for_a_person_when_the_client_shows_no_forms(npx: str, root: Path, write, era) -> None:
    """The Inspector CLI declares no elicitation: it is never sent a form, and the run says how a person answers."""
    write("gated", "description: gated\nsteps:\n  - {id: ok, type: approval, prompt: Ship it?}\n")

    result = inspect(
        npx, root, "--protocol-era", era, "--method", "tools/call", "--tool-name", "ability_run",
        "--tool-arg", "name=gated", "--tool-arg", "wait_seconds=5",
    )  # fmt: skip

    assert result["isError"] is False
    run = result["structuredContent"]
    assert run["status"] == "awaiting_approval" and run["current_step"]["prompt"] == "Ship it?"
    assert f"abilities-mcp approve {run['run_id']}" in run["current_step"]["instructions"]


def test_the_inspector_records_prerequisites_that_a_later_server_process_of_the_session_sees(
    npx: str, root: Path
) -> None:
    shutil.copy(REPO / "workflows.json", root / "workflows.json")
    session = {"CLAUDE_CODE_SESSION_ID": "inspector-1"}

    def call(name: str, /, **arguments: str) -> dict:
        args = [arg for key, value in arguments.items() for arg in ("--tool-arg", f"{key}={value}")]
        return inspect(npx, root, "--method", "tools/call", "--tool-name", name, *args, server_env=session)

    assert call("workflow_check", tool="mcp__pg__execute_query")["structuredContent"]["verdict"] == "deny"
    for tool in ("list_databases", "list_tables", "inspect_table"):
        recorded = call("workflow_record", tool=f"mcp__pg__{tool}", result="ok")
        assert recorded["isError"] is False and recorded["structuredContent"]["session_id"] == "inspector-1"
    after = call("workflow_check", tool="mcp__pg__execute_query")["structuredContent"]
    database = next(m for m in after["matched"] if m["workflow"] == "database-safe-query")
    assert (database["verdict"], after["verdict"]) == ("allow", "suggest")


def test_the_inspector_lists_the_projects_skills_through_the_skills_extension(npx: str, root: Path) -> None:
    folder = root / "skills" / "release-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: release-notes\ndescription: Draft release notes.\n---\n\nSteps.\n")

    # The Inspector starts the server with its own environment: say again that built-in skills stay out.
    result = inspect(npx, root, "--method", "skills/list", server_env={"ABILITIES_BUILTIN_SKILLS": "0"})

    [entry] = result["skills"]
    assert entry["uri"] == "skill://release-notes/SKILL.md"
    assert entry["frontmatter"] == {"name": "release-notes", "description": "Draft release notes."}
    [manifest] = entry["resources"]
    assert manifest["size"] == (folder / "SKILL.md").stat().st_size


def test_the_inspector_s_strict_schema_check_finds_nothing_to_warn_about(npx: str, root: Path, write) -> None:
    write("hello", "description: says hello\nsteps:\n  - {id: greet, type: script, run: echo hello}\n")
    result = subprocess.run(
        [npx, "-y", INSPECTOR, "--cli", *CONNECT, sys.executable, "-m", "abilities_mcp", "--root", str(root)]
        + ["--method", "tools/list", "--strict", "--format", "json", "-q"],
        capture_output=True,
        text=True,
        timeout=INSPECTOR_TIMEOUT_SECONDS,
        env={**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"},
    )
    assert result.returncode == 0, result.stderr
    assert "Warning: tool" not in result.stderr, result.stderr


def test_the_inspector_lists_and_calls_an_exposed_upstream_tool_through_the_gates(npx: str, root: Path) -> None:
    """gateway.json `expose: all` over stdio: the real mcp-server-sqlite's tools in tools/list, and a gated one
    called directly, its prerequisite run by the gateway first."""
    database = root / "shop.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users (name) VALUES ('ada')")
    upstream = {"command": str(sqlite_server()), "args": ["--db-path", str(database)], "expose": "all"}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"sqlite": upstream}}))
    gate = {
        "description": "tables first",
        "triggers": {"tools": ["read_query"]},
        "mode": "enforce",
        "prerequisites": [{"step": 1, "tool": "list_tables", "description": "which tables exist"}],
    }
    (root / "workflows.json").write_text(json.dumps({"tables-first": gate}))

    tools = {t["name"] for t in inspect(npx, root, "--method", "tools/list")["tools"]}
    called = inspect(
        npx,
        root,
        "--method",
        "tools/call",
        "--tool-name",
        "sqlite__read_query",
        "--tool-arg",
        "query=SELECT name FROM users",
    )

    assert {"sqlite__read_query", "sqlite__list_tables", "tool_call"} <= tools
    assert called["isError"] is False, called
    texts = " ".join(block.get("text", "") for block in called["content"])
    assert "ada" in texts and "[gateway] ran first: sqlite__list_tables" in texts
