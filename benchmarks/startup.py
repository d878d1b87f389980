"""Start-up: from spawn until `tools/list` is answered, on a project with 500 abilities and 2,000 skills, against a
one-tool MCPServer (the floor: same interpreter, same SDK, same transport, nothing of ours).

    .venv/bin/python benchmarks/startup.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    FLOOR_SERVER,
    StdioClient,
    abilities_argv,
    final_line,
    isolated_env,
    log,
    spread,
    write_floor_server,
    write_project,
)

ABILITIES = 500
SKILLS = 2000
RUNS, QUICK_RUNS = 15, 3
# Our start-up may cost at most 10% more than the bare SDK's: importing the engine is allowed, scanning is not.
GOAL_RATIO = 1.10


def write_quiet_floor(folder: Path) -> list[str]:
    """The floor with the collector off while it starts, as `serve` starts (cli/main.py): a detail line, so what our
    own code adds shows apart from what that gives the SDK's import too."""
    path = folder / "floor_quiet_gc.py"
    start = 'server.run("stdio")'
    if FLOOR_SERVER.count(start) != 1:  # the floor server changed: this line would measure the plain floor again
        raise RuntimeError(f"_harness.FLOOR_SERVER no longer starts with {start!r} once; update write_quiet_floor")
    text = FLOOR_SERVER.replace(start, f"gc.freeze()\n    gc.enable()\n    {start}")
    path.write_text("import gc\n\ngc.disable()\n" + text)
    return [sys.executable, str(path)]


def time_startup(argv: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> tuple[float, float]:
    """(seconds to the initialize reply, seconds to the tools/list reply), both from spawn."""
    started = time.perf_counter()
    client = StdioClient(argv, env=env, cwd=cwd, stderr_path=stderr)
    try:
        client.initialize()
        initialized = time.perf_counter() - started
        tools = client.request("tools/list")["tools"]
        listed = time.perf_counter() - started
    finally:
        client.close()
    if not tools:
        raise RuntimeError(f"{argv} listed no tools")
    return initialized, listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs instead of {RUNS}")
    args = parser.parse_args()
    runs = QUICK_RUNS if args.quick else RUNS

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        tmp_path = Path(tmp)
        root = write_project(tmp_path / "project", ABILITIES, SKILLS)
        env = isolated_env(tmp_path / "home")
        contenders = {
            "server": abilities_argv(root, tmp_path / "state"),
            "floor": write_floor_server(tmp_path),
            "floor gc-off": write_quiet_floor(tmp_path),
        }
        log(f"startup: {ABILITIES} abilities, {SKILLS} skills under {root}; {runs} interleaved runs each")
        for name, argv in contenders.items():  # warm-up: page cache, .pyc files, the state database
            time_startup(argv, env, root, tmp_path / f"{name}.stderr")

        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
        for i in range(runs):
            order = list(contenders) if i % 2 == 0 else list(reversed(contenders))  # neither always goes first
            for name in order:
                samples[name].append(time_startup(contenders[name], env, root, tmp_path / f"{name}.stderr"))

    for name, pairs in samples.items():
        init = statistics.median(p[0] for p in pairs) * 1000
        log(f"  {name:12} initialize reply: median {init:.0f} ms; tools/list reply: {spread([p[1] for p in pairs])}")
    server, floor, quiet = ([listed for _, listed in samples[name]] for name in samples)
    log(f"  server vs the floor with the collector off too: {statistics.median(server) / statistics.median(quiet):.2f}")
    print(final_line("startup", server, floor, GOAL_RATIO, "runs"), flush=True)


if __name__ == "__main__":
    main()
