"""`abilities-mcp gateway list | add NAME -- COMMAND ARGS... | remove NAME`: the project's gateway.json, listed with
what is wrong with each server, and edited safely (gateway/edits.py); `abilities-mcp tools refresh`: the tool cache
written from every upstream's tools (gateway/cache.py), or left as it was when one cannot be listed."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from ..errors import AbilitiesError
from ..state.project import Project

# An edit that cannot be made (a name that exists, one that does not, an entry the gateway could not use, a file
# that does not parse): a command that cannot do what was asked exits 2, as docs/cli.md says.
CANNOT = 2


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
        return CANNOT
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
        pairs = dict(_pair(option, value) for value in values)
        if pairs:
            entry[key] = pairs
    if args.timeout:
        entry["timeout"] = args.timeout
    return entry


def _pair(option: str, value: str) -> tuple[str, str]:
    """KEY=VALUE; for --env a bare NAME passes NAME on from this server's environment (`${NAME:-}`), since an
    upstream starts with a bare environment (no SSL_CERT_FILE, no HTTPS_PROXY)."""
    from ..gateway.config import ENV_NAME, passed_on
    from ..gateway.edits import GatewayFileError

    k, sep, v = value.partition("=")
    if option == "--env" and not sep and ENV_NAME.match(k):
        return k, passed_on(k)
    if not sep or not k:
        form = "NAME=VALUE, or a bare NAME to pass this server's NAME on" if option == "--env" else "KEY=VALUE"
        raise GatewayFileError(f"{option} {value!r}: write {form}. Nothing was changed.")
    return k, v


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

    async def run() -> cache.Refreshed:
        async with upstreams() as connections:
            return await cache.refresh(path, config, connections)

    found = anyio.run(run)
    for problem in found.problems:
        print(f"problem: {problem}", file=sys.stderr)
    if not found.written:
        kept = f"{path} is left as it was" if path.exists() else f"no {path} was written"
        failed = len(config.upstreams) - found.servers
        print(
            f"Nothing written: {failed} of {len(config.upstreams)} servers could not be listed (above), and the cache "
            f"lists every server or none; {kept}. Fix that server (its entry: abilities-mcp gateway list) or remove "
            "it (abilities-mcp gateway remove NAME), then run abilities-mcp tools refresh again.",
            file=sys.stderr,
        )
        return 1
    written = json.loads(path.read_text(encoding="utf-8"))
    groups = ", ".join(f"{name} {len(c['tools'])}" for name, c in written["categories"].items())
    print(
        f"Wrote {path}: {found.tools} tools from {found.servers} servers "
        f"(categories: {groups or 'none'}; uncategorized {len(written['uncategorized'])})."
    )
    return 1 if found.problems else 0
