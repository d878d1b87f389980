"""Script steps: `ability_run` of an ability with 100 sequential steps that each print a line, over stdio as a
client that shows progress calls it, timed from request to response, against the same 100 commands spawned with
subprocess.run in this process (the floor: the processes alone, with none of the engine's bookkeeping).

What a user's ability costs, not the best case: a real step prints something (its output is captured and kept,
and spooled for `logs --follow` while it runs), and a client that shows progress sends a progress token, for which
the server sends progress notifications as the run changes. Issue 35 measured 3.2x with a client and an ability of
its own against 1.8x here, when this measured silent `true` steps called without a token: on the engine of then,
the token added about 0.4 to the ratio and the printing about 0.5 (the spool file each step made and removed),
which is the gap; a project of 200 abilities, or a floor spawned from a shell loop, changed nothing.

    .venv/bin/python benchmarks/script_steps.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from _harness import StdioClient, abilities_argv, final_line, isolated_env, log, spread

STEPS = 100
# Each repetition is well under a second: enough of them to make the median steady on a shared machine.
REPEATS, QUICK_REPEATS = 11, 2
# The run must finish inside one call; the call's own timeout leaves the server room to answer.
WAIT_SECONDS = 120
REPLY_TIMEOUT_S = WAIT_SECONDS + 30
# The engine (state writes, process groups, output capture) may add at most half again to the bare spawns.
GOAL_RATIO = 1.5


def step_command(i: int) -> str:
    """What step i runs: one short line of output, as most real steps print."""
    return f"echo step {i} done"


def chain_ability(steps: int) -> str:
    """steps s001..sNNN, each printing a line, each needing the one before."""
    lines = ["description: A chain of short script steps, each needing the one before", "steps:"]
    for i in range(1, steps + 1):
        needs = f", needs: [s{i - 1:03d}]" if i > 1 else ""
        lines.append(f'  - {{id: s{i:03d}, type: script, run: "{step_command(i)}"{needs}}}')
    return "\n".join(lines) + "\n"


def time_run(server: StdioClient) -> float:
    """One ability_run with a progress token, request to response; the run must have completed every step."""
    arguments = {"name": "chain", "wait_seconds": WAIT_SECONDS}
    started = time.perf_counter()
    result = server.request(
        "tools/call",
        {"name": "ability_run", "arguments": arguments, "_meta": {"progressToken": "chain"}},
        timeout=REPLY_TIMEOUT_S,
    )
    elapsed = time.perf_counter() - started
    if result.get("isError"):
        raise RuntimeError(f"ability_run returned an error: {result.get('content')}")
    run = result["structuredContent"]
    if run["status"] != "completed" or run["progress"]["done"] != STEPS:
        raise RuntimeError(f"run did not complete: {run['status']} {run['progress']} {run.get('error')}")
    return elapsed


def time_spawns(cwd: Path, session: bool = False) -> float:
    """The floor: the same `sh -c` commands, output captured as the server captures it; with `session`, each in a
    session of its own, as every step's shell is (it keeps the terminal from steps). On a loaded Linux machine with
    the scheduler's autogroups on, a new session is a new group whose exec waits behind the load: the detail line
    shows how much of the ratio that is."""
    started = time.perf_counter()
    for i in range(1, STEPS + 1):
        sh = ["sh", "-c", step_command(i)]
        subprocess.run(
            sh, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, check=True, start_new_session=session
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REPEATS} repetitions instead of {REPEATS}")
    args = parser.parse_args()
    repeats = QUICK_REPEATS if args.quick else REPEATS

    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
        tmp_path = Path(tmp)
        root = tmp_path / "project"
        (root / "abilities").mkdir(parents=True)
        (root / "abilities" / "chain.yaml").write_text(chain_ability(STEPS))
        server = StdioClient(
            abilities_argv(root, tmp_path / "state"),
            env=isolated_env(tmp_path / "home"),
            cwd=root,
            stderr_path=tmp_path / "server.stderr",
        )
        try:
            server.initialize()
            time_run(server)  # warm-up: catalog load, the step watchdog, the first spawns
            time_spawns(root)
            runs: list[float] = []
            spawns: list[float] = []
            sessions: list[float] = []
            for i in range(repeats):
                if i % 2 == 0:  # alternate which goes first
                    runs.append(time_run(server))
                    spawns.append(time_spawns(root))
                    sessions.append(time_spawns(root, session=True))
                else:
                    sessions.append(time_spawns(root, session=True))
                    spawns.append(time_spawns(root))
                    runs.append(time_run(server))
        finally:
            server.close()

    log(f"script_steps: {STEPS} sequential steps printing a line, progress token, {repeats} interleaved repetitions")
    log(f"  ability_run  {spread(runs)}")
    log(f"  sh -c        {spread(spawns)}")
    log(f"  sh -c, own session {spread(sessions)}")
    log(f"  detail: {final_line('against a floor in sessions of its own', runs, sessions, None, 'runs')}")
    print(final_line("script_steps", runs, spawns, GOAL_RATIO, "runs"), flush=True)


if __name__ == "__main__":
    main()
