"""Regenerate tools.json: the tool lists (name, description, input schema) of real MCP servers, installed pinned from
npm and PyPI and asked for `tools/list` over stdio, as the gateway would.

    .venv/bin/python benchmarks/tool_eval/list_tools.py

Servers that want an API key to start get a placeholder: only their tool list is read, nothing is called.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "tools.json"
CACHE = Path(os.environ.get("ABILITIES_TEST_CACHE") or Path("~/.cache/abilities-mcp-tests").expanduser()) / "tool-eval"
PLACEHOLDER = "placeholder-tools-list-only"
# What a server needs beside itself: mcp-server-sqlite's release predates the mcp 2 SDK.
ALSO = {"mcp-server-sqlite": ["mcp<2"]}
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "list_tools", "version": "1"}}
# (server name in the eval, registry, package, version, arguments, variables it wants set)
SERVERS: list[tuple[str, str, str, str, list[str], list[str]]] = [
    ("everything", "npm", "@modelcontextprotocol/server-everything", "2026.8.31", [], []),
    ("fs", "npm", "@modelcontextprotocol/server-filesystem", "2026.8.31", ["{scratch}"], []),
    ("memory", "npm", "@modelcontextprotocol/server-memory", "2026.8.31", [], []),
    ("thinking", "npm", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31", [], []),
    ("github", "npm", "@modelcontextprotocol/server-github", "2025.4.8", [], []),
    ("gitlab", "npm", "@modelcontextprotocol/server-gitlab", "2025.4.25", [], ["GITLAB_PERSONAL_ACCESS_TOKEN"]),
    ("slack", "npm", "@modelcontextprotocol/server-slack", "2025.4.25", [], ["SLACK_BOT_TOKEN", "SLACK_TEAM_ID"]),
    ("postgres", "npm", "@modelcontextprotocol/server-postgres", "0.6.2", ["postgresql://localhost/unused"], []),
    ("puppeteer", "npm", "@modelcontextprotocol/server-puppeteer", "2025.5.12", [], []),
    ("brave", "npm", "@modelcontextprotocol/server-brave-search", "0.6.2", [], ["BRAVE_API_KEY"]),
    ("maps", "npm", "@modelcontextprotocol/server-google-maps", "0.6.2", [], ["GOOGLE_MAPS_API_KEY"]),
    ("sqlite", "pypi", "mcp-server-sqlite", "2025.4.25", ["--db-path", "{scratch}/eval.db"], []),
    ("git", "pypi", "mcp-server-git", "2026.10.19", [], []),
    ("fetch", "pypi", "mcp-server-fetch", "2026.10.24", [], []),
    ("time", "pypi", "mcp-server-time", "2026.10.19", ["--local-timezone", "UTC"], []),
]


def install(registry: str, package: str, version: str) -> Path:
    """The server's executable, installed into the cache on first use."""
    prefix = CACHE / registry / f"{package.replace('/', '+')}@{version}"
    if registry == "pypi":
        executable = prefix / "bin" / package
        if not executable.exists():
            subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
            pip = [str(prefix / "bin" / "pip"), "install", "-q", f"{package}=={version}", *ALSO.get(package, [])]
            subprocess.run(pip, check=True, stderr=subprocess.DEVNULL)
        return executable
    manifest = prefix / "node_modules" / package / "package.json"
    if not manifest.exists():
        npm = shutil.which("npm") or sys.exit("npm is not on PATH: install Node.js 20")
        environment = {**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1", "npm_config_update_notifier": "false"}
        command = [npm, "install", "--prefix", str(prefix), "--no-save", "--no-audit", "--no-fund"]
        subprocess.run([*command, f"{package}@{version}"], check=True, env=environment)
    bins = json.loads(manifest.read_text())["bin"]
    binary = next(iter(bins)) if isinstance(bins, dict) else package.split("/")[-1]
    return prefix / "node_modules" / ".bin" / binary


def tools(executable: Path, args: list[str], env: list[str]) -> list[dict[str, Any]]:
    """The server's tools as its tools/list answers, read as raw JSON-RPC: the SDK's client refuses some real
    servers' lists (gitlab's schemas have no "type"), and the eval wants them as they are."""
    environment = {**os.environ, **dict.fromkeys(env, PLACEHOLDER)}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    with subprocess.Popen(
        [str(executable), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment,
        text=True,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        try:
            for message in messages:
                server.stdin.write(json.dumps(message) + "\n")
                server.stdin.flush()
            for line in server.stdout:
                answer = json.loads(line) if line.startswith("{") else {}
                if answer.get("id") == 2:
                    return [
                        {"name": t["name"], "description": t.get("description", ""), "inputSchema": t["inputSchema"]}
                        for t in answer["result"]["tools"]
                    ]
            raise SystemExit(f"{executable} ended without listing its tools")
        finally:
            server.kill()


def main() -> None:
    servers = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, registry, package, version, args, env in SERVERS:
            executable = install(registry, package, version)
            listed = tools(executable, [a.format(scratch=scratch) for a in args], env)
            print(f"{name:10} {package}@{version}: {len(listed)} tools", flush=True)
            servers.append({"server": name, "package": f"{registry}:{package}@{version}", "tools": listed})
    OUT.write_text(json.dumps(servers, indent=1, ensure_ascii=False) + "\n")
    print(f"{sum(len(s['tools']) for s in servers)} tools of {len(servers)} servers -> {OUT}")


if __name__ == "__main__":
    main()
