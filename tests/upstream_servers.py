"""Real upstream MCP servers from the package registries, pinned and installed once into the shared test cache.

`REQUIRE_ENV` set (as `.ci/run` sets it): a server that cannot be installed fails the test instead of skipping it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from real_clients import CACHE, installed

# mcp-server-sqlite needs the mcp 1.x SDK (as many upstream servers will): its own virtual environment.
SQLITE = ("mcp-server-sqlite", "2025.4.25", "mcp<2")
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
FILESYSTEM = ("@modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem")
REQUIRE_ENV = "ABILITIES_REQUIRE_UPSTREAMS"
# A first install downloads the SDK and its dependencies; later runs find the environment in CACHE at once.
INSTALL_TIMEOUT_SECONDS = 600


def sqlite_server() -> Path:
    """The mcp-server-sqlite executable in its own cached virtual environment, built on first use."""
    package, version, sdk = SQLITE
    prefix = CACHE / "pypi" / f"{package}@{version}"
    executable = prefix / "bin" / package
    if executable.exists():
        return executable
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with (prefix.parent / f"{package}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes building at once would corrupt the environment
        if not executable.exists():
            shutil.rmtree(prefix, ignore_errors=True)
            steps = [
                [sys.executable, "-m", "venv", str(prefix)],
                [str(prefix / "bin" / "pip"), "install", "-q", f"{package}=={version}", sdk],
            ]
            for step in steps:
                result = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
                if result.returncode != 0:
                    _unavailable(f"{' '.join(step[:3])} ... failed: {result.stderr[-2000:]}")
            if not executable.exists():
                _unavailable(f"pip installed {package}=={version} but {executable} is missing")
    return executable


# An enforce workflow over mcp-server-sqlite: look at the tables, then the queried one's columns, before a query.
SAFE_QUERY = {
    "description": "Inspect the tables before querying them",
    "triggers": {"tools": ["read_query"]},
    "prerequisites": [
        {"step": 1, "tool": "list_tables", "description": "Which tables exist"},
        {
            "step": 2,
            "tool": "describe_table",
            "description": "The columns of the table queried",
            "arguments": {"table_name": "$args.table"},
        },
    ],
    "mode": "enforce",
}


def write_project(root: Path, workflows: dict[str, Any], database: Path | None = None, **entry: Any) -> Path:
    """A project with a small database (users: ada, grace) behind the sqlite upstream in gateway.json (its entry
    given `entry`'s extra fields, e.g. expose), and the given workflows; returns the database."""
    if database is None:
        database = root / "shop.db"
        with sqlite3.connect(database) as db:
            db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            db.executemany("INSERT INTO users (name) VALUES (?)", [("ada",), ("grace",)])
    server = {"command": str(sqlite_server()), "args": ["--db-path", str(database)], "timeout": "30s", **entry}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"sqlite": server}}))
    (root / "workflows.json").write_text(json.dumps(workflows))
    return database


def everything_server() -> Path:
    """The reference server with every MCP feature, from npm (pinned)."""
    return installed(EVERYTHING)


def filesystem_server() -> Path:
    """The reference filesystem server, from npm (pinned): it serves the folders named on its command line."""
    return installed(FILESYSTEM)


def _unavailable(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but {why}")
    pytest.skip(f"{why} (set {REQUIRE_ENV}=1 to make this a failure)")
