"""A proxied `tool_call` round trip over stdio against calling the same upstream tool directly over stdio.

Two upstreams, each once behind abilities-mcp's gateway (gateway.json) and once started on its own:
- the floor server of _harness.py (a one-tool MCPServer, `echo`): a tool that does no work, so the ratio is the
  gateway's cost at its most visible;
- the issue's own upstream, the real mcp-server-sqlite from PyPI, `read_query` on a 100-row table, when the test
  suite has installed it in its cache (tests/upstream_servers.py; `.ci/run` runs the tests first).
`tool_call` goes client → abilities-mcp → the gates (a workflows.json with a workflow that does not match, so they are
checked) → the upstream and back. Each pair stays up; its calls alternate.

Beside the echo pair runs the floor of any proxy, in the same rounds: a pass-through process made of the SDK's pieces
(each line parsed as its stdio reader parses one and written as its writer writes one, each way), with no gates. Its
ratio, on a detail line, is what one more process hop costs on this machine: the part of the gateway's that is not
its own work.

    .venv/bin/python benchmarks/gateway_roundtrip.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import StdioClient, abilities_argv, final_line, isolated_env, log, ms, spread, write_floor_server
from roundtrip import measure

CALLS, QUICK_CALLS = 300, 30
# The goal: the gateway adds at most 30% to a call of the upstream's tool.
GOAL = 1.3
# Checked on every proxied call, never matching the benchmark's tools.
WORKFLOWS = {
    "schema-first": {
        "description": "Look at the tables before writing to them",
        "triggers": {"tools": ["write_query"]},
        "prerequisites": [{"step": 1, "tool": "list_tables", "description": "Which tables exist"}],
        "mode": "enforce",
    }
}
# Where the test suite keeps mcp-server-sqlite (tests/upstream_servers.py: SQLITE, in real_clients.CACHE).
SQLITE_SERVER = (
    Path(os.environ.get("ABILITIES_TEST_CACHE") or Path("~/.cache/abilities-mcp-tests").expanduser())
    / "pypi"
    / "mcp-server-sqlite@2025.4.25"
    / "bin"
    / "mcp-server-sqlite"
)
QUERY = {"query": "SELECT * FROM orders WHERE qty > 90"}
# The floor of any proxy: one more process between client and upstream, doing only what the SDK's stdio transport does
# with each line (parse it as a JSON-RPC message, write it back out), each way, on an event loop watching both pipes.
PASS_THROUGH = """\
import asyncio, os, subprocess, sys

import mcp_types as types

upstream = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
loop = asyncio.new_event_loop()
done = loop.create_future()


def relay(source, target):
    pending = bytearray()

    def readable():
        chunk = os.read(source, 1 << 18)
        if not chunk:
            if not done.done():
                done.set_result(None)
            return
        pending.extend(chunk)
        while (end := pending.find(b"\\n")) >= 0:
            line = bytes(pending[:end])
            del pending[: end + 1]
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\\n"
            while data:
                data = data[os.write(target, data) :]

    loop.add_reader(source, readable)


relay(0, upstream.stdin.fileno())
relay(upstream.stdout.fileno(), 1)
loop.run_until_complete(done)
upstream.stdin.close()
upstream.wait(5)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CALLS} calls instead of {CALLS}")
    args = parser.parse_args()
    calls = QUICK_CALLS if args.quick else CALLS

    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        tmp_path = Path(tmp)
        echo = write_floor_server(tmp_path)
        (tmp_path / "pass_through.py").write_text(PASS_THROUGH)
        through = [sys.executable, str(tmp_path / "pass_through.py"), *echo]
        pairs = [("gateway tool_call", "echo", echo, "echo", {"text": "hello"}, False, through)]
        if SQLITE_SERVER.exists():
            command = [str(SQLITE_SERVER), "--db-path", str(_database(tmp_path / "shop.db"))]
            pairs.append(("gateway tool_call sqlite", "read_query", command, "read_query", QUERY, False, None))
            # The same with the client on the 2026-07-28 protocol, as Claude Code 2.1 speaks to the gateway.
            pairs.append(("gateway tool_call sqlite 2026", "read_query", command, "read_query", QUERY, True, None))
        else:
            log(f"(no mcp-server-sqlite at {SQLITE_SERVER}: run the tests once to install it; its line is skipped)")
        results = [_compare(tmp_path / str(i), calls, *pair) for i, pair in enumerate(pairs)]

    log(f"gateway round trip: {calls} calls each, alternating")
    for label, samples in results:
        for name, times in samples.items():
            log(f"  {name:28} {spread(times)}")
        proxied, direct, *floor = samples.values()
        added = statistics.median(proxied) - statistics.median(direct)
        log(f"  {label}: the gateway adds {ms(added)} ms a call (medians)")
        for passed in floor:  # not a result line: run_all.py collects those by ": ratio "
            hop = statistics.median(passed) - statistics.median(direct)
            log(
                f"  the floor of any proxy (a pass-through of the SDK's pieces, same rounds): "
                f"{statistics.median(passed) / statistics.median(direct):.2f}x, one more hop adds {ms(hop)} ms a call"
            )
    for label, samples in results:
        proxied, direct, *_ = samples.values()
        print(final_line(label, proxied, direct, GOAL, "calls"), flush=True)


def _compare(
    folder: Path,
    calls: int,
    label: str,
    tool: str,
    upstream: list[str],
    direct_tool: str,
    arguments: dict[str, Any],
    modern: bool,
    pass_through: list[str] | None,
) -> tuple[str, dict[str, list[float]]]:
    """The same tool through the gateway (its client on the 2026 protocol when `modern`) and directly, alternating;
    with `pass_through`, also through that do-nothing proxy, in the same rounds."""
    root = folder / "project"
    root.mkdir(parents=True)
    (root / "gateway.json").write_text(
        json.dumps({"mcpServers": {"up": {"command": upstream[0], "args": upstream[1:]}}})
    )
    (root / "workflows.json").write_text(json.dumps(WORKFLOWS))
    env = isolated_env(folder / "home")
    server = StdioClient(
        abilities_argv(root, folder / "state"), env=env, cwd=root, stderr_path=folder / "server.stderr"
    )
    direct = StdioClient(upstream, env=env, cwd=root, stderr_path=folder / "upstream.stderr")
    clients = [server, direct]
    if pass_through is not None:
        clients.append(StdioClient(pass_through, env=env, cwd=root, stderr_path=folder / "pass_through.stderr"))
    try:
        server.discover() if modern else server.initialize()
        for client in clients[1:]:
            client.initialize()  # upstreams on mcp<2 speak only the handshake era
        proxied_call = {"tool": f"up__{tool}", "arguments": arguments}
        answer = server.call_tool("tool_call", proxied_call)  # starts the upstream, lists its tools
        assert answer["content"][0]["text"] == direct.call_tool(direct_tool, arguments)["content"][0]["text"], answer
        contenders: dict[str, Callable[[], object]] = {
            f"tool_call up__{tool}": lambda: server.call_tool("tool_call", proxied_call),
            f"direct {direct_tool}": lambda: direct.call_tool(direct_tool, arguments),
        }
        if pass_through is not None:
            proxy = clients[2]
            contenders[f"pass-through {direct_tool}"] = lambda: proxy.call_tool(direct_tool, arguments)
        return label, measure(contenders, calls)
    finally:
        for client in clients:
            client.close()


def _database(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER)")
        db.executemany("INSERT INTO orders (item, qty) VALUES (?, ?)", [(f"item{i}", i) for i in range(100)])
    return path


if __name__ == "__main__":
    main()
