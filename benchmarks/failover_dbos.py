"""The alternative measured: DBOS (durable workflows on PostgreSQL) doing what benchmarks/failover.py measures. A
workflow of three steps (quick, a long one standing for a script step, quick) starts on executor A, A is killed with
SIGKILL in the long step, and the time until the long step starts again is measured, two ways:

- another live executor, B, told at once that A is dead, recovers A's workflows (`DBOS._recover_pending_workflows`,
  what DBOS's Conductor calls when its heartbeats say an executor died; without Conductor nothing in DBOS notices);
- A started again under the same executor id, whose launch recovers its own pending workflows (what DBOS does alone).

And a step's latency: a workflow of 100 steps that do nothing, per step (DBOS writes a checkpoint per step).

Not a dependency of abilities-mcp and not in run_all.py: run it with a Python that has dbos and pytest (for the tests'
throwaway PostgreSQL), e.g. a throwaway venv:

    python3 -m venv /tmp/dbos && /tmp/dbos/bin/pip install dbos 'psycopg[binary]' pytest
    /tmp/dbos/bin/python benchmarks/failover_dbos.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KILLS, QUICK_KILLS = 5, 2
STEPS = 100
GIVE_UP_SECONDS = 120.0
POLL_SECONDS = 0.005

WORKER = r"""
import os, sys, time
from dbos import DBOS
url, executor, ticks, mode = sys.argv[1:5]
DBOS(config={"name": "failover-bench", "system_database_url": url, "executor_id": executor,
             "application_version": "bench-1", "log_level": "ERROR"})

@DBOS.step()
def quick(i):
    return i

@DBOS.step()
def slow():
    with open(ticks, "a") as fh:
        fh.write(f"start {os.getpid()} {time.time()}\n")
    time.sleep(3600)

@DBOS.workflow()
def three():
    quick(1)
    slow()
    quick(2)

@DBOS.workflow()
def many(n):
    for i in range(n):
        quick(i)

DBOS.launch()
print("ready", flush=True)
if mode == "start":
    DBOS.start_workflow(three)
elif mode == "latency":
    for _ in range(int(sys.argv[5])):
        began = time.perf_counter()
        many(int(sys.argv[6]))
        print(f"took {time.perf_counter() - began}", flush=True)
    sys.exit(0)
for line in sys.stdin:
    if line.startswith("recover "):
        DBOS._recover_pending_workflows([line.split()[1]])
"""


def worker(url: str, executor: str, ticks: Path, mode: str, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, url, executor, str(ticks), mode, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def starts(ticks: Path) -> list[tuple[int, float]]:
    if not ticks.exists():
        return []
    return [(int(pid), float(at)) for _, pid, at in (line.split() for line in ticks.read_text().splitlines())]


def wait_for_start(ticks: Path, pid: int) -> float:
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not any(p == pid for p, _ in starts(ticks)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no start of the long step by pid {pid} within {GIVE_UP_SECONDS} s")
        time.sleep(POLL_SECONDS)
    return next(at for p, at in starts(ticks) if p == pid)


def one_kill(url: str, folder: Path, i: int, restart: bool) -> float:
    """Seconds from A's SIGKILL to the long step starting again (in B, or in A started again)."""
    ticks = folder / f"ticks-{i}-{restart}"
    executor = f"A{i}{'r' if restart else 'b'}"
    standby = None if restart else worker(url, f"B{i}", ticks, "standby")
    first = worker(url, executor, ticks, "start")
    wait_for_start(ticks, first.pid)
    killed = time.time()
    first.kill()
    first.wait()
    if restart:
        again = worker(url, executor, ticks, "standby")
        took = wait_for_start(ticks, again.pid) - killed
        again.kill()
        again.wait()
        return took
    assert standby is not None and standby.stdin is not None
    standby.stdin.write(f"recover {executor}\n")
    standby.stdin.flush()
    took = wait_for_start(ticks, standby.pid) - killed
    standby.kill()
    standby.wait()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_KILLS} kills each way instead of {KILLS}")
    parser.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway cluster)")
    args = parser.parse_args()
    kills = QUICK_KILLS if args.quick else KILLS
    cluster = None
    if args.url:
        url = args.url
    else:
        sys.path.insert(0, str(REPO / "tests"))
        from postgres_support import start_cluster

        cluster = start_cluster()
        url = cluster.fresh_database()
    url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        with tempfile.TemporaryDirectory(prefix="failover-dbos-") as tmp:
            folder = Path(tmp)
            told = [one_kill(url, folder, i, restart=False) for i in range(kills)]
            print(f"recovered by another executor told at once: {', '.join(f'{t * 1000:.0f}' for t in told)} ms")
            alone = [one_kill(url, folder, i, restart=True) for i in range(kills)]
            print(f"recovered by the executor started again: {', '.join(f'{t * 1000:.0f}' for t in alone)} ms")
            latency = subprocess.run(
                [sys.executable, "-c", WORKER, url, "L", str(folder / "none"), "latency", str(kills * 2), str(STEPS)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ},
            )
            runs = [float(line.split()[1]) for line in latency.stdout.splitlines() if line.startswith("took ")]
            per_step = statistics.median(runs) / STEPS
            print(
                f"dbos failover: median {statistics.median(told) * 1000:.0f} ms (another executor told at once, "
                f"detection not included), {statistics.median(alone) * 1000:.0f} ms (restarted, process start "
                f"included); a step {per_step * 1000:.2f} ms",
                flush=True,
            )
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
