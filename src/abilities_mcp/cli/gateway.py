"""`abilities-mcp gateway list | add NAME -- COMMAND ARGS... | remove NAME`: the project's gateway.json, listed with
what is wrong with each server, and edited safely (gateway/edits.py); `abilities-mcp tools refresh`: the tool cache
written from every upstream's tools (gateway/cache.py)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from ..errors import AbilitiesError
from ..state.project import Project


def run(project: Project, args: argparse.Namespace) -> int:
    from ..gateway import edits

    path = project.root / edits.FILE_NAME
    try:
        if args.action == "add":
            edits.add(path, args.name, _entry(args))
            print(f"Added server {args.name!r} to {path}.")
        elif args.action == "remove":
            edits.remove(path, args.name)
            print(f"Removed server {args.name!r} from {path}.")
        else:
            return _list(path, args.json)
    except AbilitiesError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _entry(args: argparse.Namespace) -> dict[str, Any]:
    """The server entry the options describe, in the `mcpServers` shape."""
    from ..gateway.edits import GatewayFileError

    if bool(args.url) == bool(args.server_command):
        raise GatewayFileError(
            "Give the server either a command, after --: abilities-mcp gateway add NAME -- COMMAND ARGS... , or "
            "--url URL for a streamable HTTP server. Nothing was changed."
        )
    entry: dict[str, Any] = (
        {"url": args.url} if args.url else {"command": args.server_command[0], "args": args.server_command[1:]}
    )
    for option, key, values in (("--env", "env", args.env), ("--header", "headers", args.header)):
        pairs = {}
        for value in values:
            k, sep, v = value.partition("=")
            if not sep or not k:
                raise GatewayFileError(f"{option} {value!r}: write KEY=VALUE. Nothing was changed.")
            pairs[k] = v
        if pairs:
            entry[key] = pairs
    if args.timeout:
        entry["timeout"] = args.timeout
    return entry


def _list(path, as_json: bool) -> int:
    from ..gateway import edits
    from ..gateway.config import check_file

    found = edits.servers(path)
    problems = check_file(path)
    if as_json:
        report = {
            "file": str(path),
            "servers": [{"name": name, "entry": entry} for name, entry in found.items()],
            "problems": [str(p) for p in problems],
        }
        print(json.dumps(report, indent=2))
        return 0
    for name, entry in found.items():
        if isinstance(entry, dict) and "url" in entry:
            what = str(entry["url"])
        elif isinstance(entry, dict):
            what = shlex.join([str(entry.get("command", "")), *map(str, entry.get("args", []))])
        else:
            what = json.dumps(entry)
        timeout = entry.get("timeout", "60s") if isinstance(entry, dict) else ""
        print(f"  {name:20} {timeout:>6}  {what}")
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    if not found:
        print(f"No servers in {path}. Add one: abilities-mcp gateway add NAME -- COMMAND ARGS...")
    return 0


def refresh_tools(project: Project) -> int:
    """Start every upstream, list its tools, write the cache; 1 when gateway.json is missing or a server failed."""
    import anyio

    from ..gateway import cache
    from ..gateway.config import FILE_NAME, read_gateway
    from ..gateway.upstreams import upstreams

    config_path = project.root / FILE_NAME
    if not config_path.exists():
        print(
            f"No {FILE_NAME} in {project.root}: the cache lists the tools of its servers. Add one: "
            "abilities-mcp gateway add NAME -- COMMAND ARGS...",
            file=sys.stderr,
        )
        return 1
    config = read_gateway(config_path, project.root)
    path = cache.cache_path(project.root)

    async def run() -> tuple[int, list[str]]:
        async with upstreams() as connections:
            return await cache.refresh(path, config, connections)

    count, problems = anyio.run(run)
    written = json.loads(path.read_text(encoding="utf-8"))
    groups = ", ".join(f"{name} {len(c['tools'])}" for name, c in written["categories"].items())
    print(
        f"Wrote {path}: {count} tools from {len(written['mcp_servers'])} servers "
        f"(categories: {groups or 'none'}; uncategorized {len(written['uncategorized'])})."
    )
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0
