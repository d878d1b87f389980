"""A proxied `tool_call` round trip over stdio against calling the same upstream tool directly over stdio.

The upstream is the floor server of _harness.py (a one-tool MCPServer, `echo`): once behind abilities-mcp's gateway
(gateway.json), once started on its own. `tool_call {"tool": "floor__echo"}` goes client → abilities-mcp → the gates
(a workflows.json with a workflow that does not match, so they are checked) → the upstream and back; the floor is
`echo` called directly. Both stay up; their calls alternate.

    .venv/bin/python benchmarks/gateway_roundtrip.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from _harness import StdioClient, abilities_argv, final_line, isolated_env, log, ms, spread, write_floor_server
from roundtrip import measure

CALLS, QUICK_CALLS = 300, 30
# The goal: the gateway adds at most 30% to a call of the upstream's tool.
GOAL = 1.3
# Checked on every proxied call, never matching the benchmark's tool.
WORKFLOWS = {
    "schema-first": {
        "description": "Look at the tables before querying them",
        "triggers": {"tools": ["read_query"]},
        "prerequisites": [{"step": 1, "tool": "list_tables", "description": "Which tables exist"}],
        "mode": "enforce",
    }
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CALLS} calls instead of {CALLS}")
    args = parser.parse_args()
    calls = QUICK_CALLS if args.quick else CALLS

    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        tmp_path = Path(tmp)
        root = tmp_path / "project"
        root.mkdir()
        upstream = write_floor_server(tmp_path)
        gateway = {"mcpServers": {"floor": {"command": upstream[0], "args": upstream[1:]}}}
        (root / "gateway.json").write_text(json.dumps(gateway))
        (root / "workflows.json").write_text(json.dumps(WORKFLOWS))
        env = isolated_env(tmp_path / "home")
        server = StdioClient(
            abilities_argv(root, tmp_path / "state"), env=env, cwd=root, stderr_path=tmp_path / "server.stderr"
        )
        direct = StdioClient(upstream, env=env, cwd=root, stderr_path=tmp_path / "floor.stderr")
        try:
            for client in (server, direct):
                client.initialize()
            proxied_call = {"tool": "floor__echo", "arguments": {"text": "hello"}}
            answer = server.call_tool("tool_call", proxied_call)  # starts the upstream, lists its tools
            assert answer["content"][0]["text"] == "hello", answer
            contenders: dict[str, Callable[[], object]] = {
                "tool_call": lambda: server.call_tool("tool_call", proxied_call),
                "direct echo": lambda: direct.call_tool("echo", {"text": "hello"}),
            }
            samples = measure(contenders, calls)
        finally:
            for client in (server, direct):
                client.close()

    log(f"gateway round trip: {calls} calls each, alternating; upstream: a one-tool MCPServer over stdio")
    for name, times in samples.items():
        log(f"  {name:16} {spread(times)}")
    added = statistics.median(samples["tool_call"]) - statistics.median(samples["direct echo"])
    log(f"  the gateway adds {ms(added)} ms a call (medians): a second stdio hop, through the SDK's client")
    print(final_line("gateway tool_call", samples["tool_call"], samples["direct echo"], GOAL, "calls"), flush=True)


if __name__ == "__main__":
    main()
