"""Round trip of a cheap read tool over stdio: `ability_history {"limit": 1}` (and `ability_list`, reported on its
own line) against the `echo` tool of a one-tool MCPServer. Both servers stay up; their calls alternate.

    .venv/bin/python benchmarks/roundtrip.py [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _harness import (
    StdioClient,
    abilities_argv,
    final_line,
    isolated_env,
    log,
    spread,
    write_floor_server,
    write_project,
)

# A typical project for ability_list, which re-scans the folders on every call.
ABILITIES, SKILLS = 20, 20
CALLS, QUICK_CALLS = 300, 30
WARMUP_CALLS = 20
# A read tool may cost at most 30% more than the SDK's own dispatch of a trivial tool.
HISTORY_GOAL = 1.3
# A short run recorded before measuring, so ability_history returns a real run with steps.
SEED_ABILITY = """\
description: Say hello twice, so the history has a finished run with steps
steps:
  - {id: first, type: script, run: echo hello}
  - {id: second, type: script, run: echo again, needs: [first]}
"""


def time_call(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CALLS} calls instead of {CALLS}")
    args = parser.parse_args()
    calls = QUICK_CALLS if args.quick else CALLS

    with tempfile.TemporaryDirectory(prefix="bench-roundtrip-") as tmp:
        tmp_path = Path(tmp)
        root = write_project(tmp_path / "project", ABILITIES, SKILLS)
        (root / "abilities" / "hello.yaml").write_text(SEED_ABILITY)
        env = isolated_env(tmp_path / "home")
        server = StdioClient(
            abilities_argv(root, tmp_path / "state"), env=env, cwd=root, stderr_path=tmp_path / "server.stderr"
        )
        floor = StdioClient(write_floor_server(tmp_path), env=env, cwd=root, stderr_path=tmp_path / "floor.stderr")
        try:
            for client in (server, floor):
                client.initialize()
            server.call_tool("ability_run", {"name": "hello", "wait_seconds": 30})
            contenders: dict[str, Callable[[], object]] = {
                "ability_history": lambda: server.call_tool("ability_history", {"limit": 1}),
                "ability_list": lambda: server.call_tool("ability_list", {}),
                "echo": lambda: floor.call_tool("echo", {"text": "hello"}),
            }
            samples = measure(contenders, calls)
        finally:
            for client in (server, floor):
                client.close()

    log(f"roundtrip: {calls} calls each, alternating; ability_list over {ABILITIES + 1} abilities, {SKILLS} skills")
    for name, times in samples.items():
        log(f"  {name:16} {spread(times)}")
    print(final_line("roundtrip ability_history", samples["ability_history"], samples["echo"], HISTORY_GOAL, "calls"))
    print(final_line("roundtrip ability_list", samples["ability_list"], samples["echo"], None, "calls"), flush=True)


def measure(contenders: dict[str, Callable[[], object]], calls: int) -> dict[str, list[float]]:
    """Per-call latencies; each round calls every contender once, the order rotating so none always goes first."""
    names = list(contenders)
    for _ in range(WARMUP_CALLS):
        for name in names:
            contenders[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(calls):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(time_call(contenders[name]))
    return samples


if __name__ == "__main__":
    main()
