"""`abilities-mcp gateway list | add NAME -- COMMAND ARGS... | remove NAME`: the project's gateway.json, listed with
what is wrong with each server, and edited safely (gateway/edits.py)."""

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
