"""Failover between replicas: two team servers (`serve_http`, what `serve --http` runs) on one PostgreSQL, a run in
an agent step or a script step on one of them, that replica killed with SIGKILL; the time from the kill until the
other replica has taken the run over and moved it on (the agent step handed out again, the script step started
again), read from the database every few milliseconds. The floor is the replica's watch period (engine/replicas.py
WATCH_SECONDS), the detection time a poller of that period is designed to: the ratio says what the take-over adds.

Detail lines give a hand-back's latency (`ability_step_complete` through the owner and through the other replica,
which reaches the owner through the state), a step's record in the state (one `update_step`, fenced by the replica's
lock as every write of a replica is; a script step makes two) and the lock's release (kill → pg_locks shows it no
more). benchmarks/failover_dbos.py measures the same with DBOS (docs/team.md, Replicas).

Needs PostgreSQL's binaries (as the tests do), not the OpenID provider: the replicas take the tests' fake tokens.

    .venv/bin/python benchmarks/failover.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psycopg

from _harness import log

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the tests' throwaway PostgreSQL and replica processes

from abilities_mcp.engine.replicas import WATCH_SECONDS  # noqa: E402
from abilities_mcp.state.replicas import lock_space  # noqa: E402
from abilities_mcp.state.store import Store  # noqa: E402
from postgres_support import start_cluster  # noqa: E402
from replica_support import Replica  # noqa: E402
from team_support import free_port, team_client  # noqa: E402

KILLS, QUICK_KILLS = 7, 2  # per kind of step
HANDBACKS, QUICK_HANDBACKS = 30, 5
WRITES = 200
# How often the clock reads the database while waiting for the take-over.
POLL_SECONDS = 0.005
# A take-over slower than this is a failure, not a number.
GIVE_UP_SECONDS = 30.0
# The run's ability on a take-over: it is both.
ABILITIES = {
    "agent": "description: One agent step\nsteps:\n  - {id: work, type: agent, prompt: Do it}\n",
    "script": "description: One long script step\nsteps:\n  - {id: work, type: script, run: 'sleep 60'}\n",
}
GOAL_RATIO = 2.0


def read_run(conn: psycopg.Connection, run_id: str) -> tuple[int, str, str, int]:
    """(owner replica, run status, the step's status, the step's attempts started)."""
    return conn.execute(
        "SELECT r.owner_replica, r.status, s.status, "
        "(SELECT count(*) FROM events e WHERE e.run_id = r.run_id AND e.step_id = 'work' AND e.event IN "
        "('start', 'await')) FROM runs r JOIN steps s ON s.run_id = r.run_id AND s.step_id = 'work' "
        "WHERE r.run_id = %s",
        (run_id,),
    ).fetchone()


async def start_run(replica: Replica, name: str) -> str:
    async with team_client(replica.origin, "ada") as agent:
        started = await agent.call_tool("ability_run", {"name": name, "wait_seconds": 2})
    if started.is_error:
        raise RuntimeError(started.content[0].text)
    return started.structured_content["run_id"]


def wait_for(condition, what: str) -> float:
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {GIVE_UP_SECONDS} s")
        time.sleep(POLL_SECONDS)
    return time.monotonic()


def one_kill(conn, replicas: list[Replica], kind: str, space: int) -> tuple[float, float]:
    """Kill the owner of a fresh run in its step; returns (take-over seconds, lock release seconds)."""
    run_id = anyio.run(start_run, replicas[0], kind)
    wanted = "awaiting" if kind == "agent" else "running"
    wait_for(lambda: read_run(conn, run_id)[2] == wanted, f"{kind} step")
    dead, _, _, attempts = read_run(conn, run_id)
    killed = time.monotonic()
    replicas[0].kill()
    released = wait_for(
        lambda: (
            not conn.execute(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND objsubid = 2",
                (space, dead),
            ).fetchone()
        ),
        "lock release",
    )

    def moved_on() -> bool:
        owner, _, step, started = read_run(conn, run_id)
        return owner != dead and step == wanted and started > attempts

    taken = wait_for(moved_on, "take-over")
    return taken - killed, released - killed


async def handbacks(through: Replica, owner: Replica, count: int) -> list[float]:
    """Seconds per `ability_step_complete` of a one-agent-step run started on `owner`, sent to `through`."""
    took = []
    async with team_client(owner.origin, "ada") as starter, team_client(through.origin, "ada") as agent:
        for _ in range(count):
            started = await starter.call_tool("ability_run", {"name": "agent", "wait_seconds": 5})
            run_id = started.structured_content["run_id"]
            began = time.perf_counter()
            done = await agent.call_tool(
                "ability_step_complete", {"run_id": run_id, "step_id": "work", "output": "ok", "wait_seconds": 5}
            )
            took.append(time.perf_counter() - began)
            if done.is_error or done.structured_content["status"] != "completed":
                raise RuntimeError(f"hand-back failed: {done.content[0].text}")
    return took


def step_writes(url: str, root: Path) -> float:
    """Seconds per step record written by a replica's store (its fence checked in each write transaction)."""
    store = Store(url, folder=root)
    try:
        run_id = store.runs(limit=1)[0].run_id
        store.owner()
        took = []
        for i in range(WRITES):
            began = time.perf_counter()
            store.update_step(run_id, "work", "bench", status="completed", output=str(i))
            took.append(time.perf_counter() - began)
        return statistics.median(took)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_KILLS} kills per kind instead of {KILLS}")
    args = parser.parse_args()
    kills, count = (QUICK_KILLS, QUICK_HANDBACKS) if args.quick else (KILLS, HANDBACKS)
    cluster = start_cluster()
    replicas: list[Replica] = []
    try:
        with tempfile.TemporaryDirectory(prefix="failover-") as tmp:
            root = Path(tmp) / "project"
            (root / "abilities").mkdir(parents=True)
            for name, text in ABILITIES.items():
                (root / "abilities" / f"{name}.yaml").write_text(text)
            url = cluster.fresh_schema()

            def start() -> Replica:
                replica = Replica(root, url, free_port(), Path(tmp) / f"replica-{len(replicas)}.log")
                replicas.append(replica)
                replica.ready()
                return replica

            live = [start(), start()]
            with psycopg.connect(url, autocommit=True) as conn:
                schema = conn.execute("SELECT current_schema()").fetchone()[0]
                space = lock_space(conn.info.dbname, schema)
                direct = anyio.run(handbacks, live[0], live[0], count)
                routed = anyio.run(handbacks, live[1], live[0], count)
                log(
                    f"hand-back: median {statistics.median(direct) * 1000:.0f} ms to the owner, "
                    f"{statistics.median(routed) * 1000:.0f} ms through the other replica (over {count} each)"
                )
                write = step_writes(url, Path(tmp))
                log(f"a step's record: median {write * 1000:.2f} ms per write on PostgreSQL (fenced)")
                times: dict[str, list[float]] = {kind: [] for kind in ABILITIES}
                releases = []
                for i in range(kills * len(ABILITIES)):
                    kind = list(ABILITIES)[i % len(ABILITIES)]
                    took, released = one_kill(conn, live, kind, space)
                    times[kind].append(took)
                    releases.append(released)
                    log(f"  {kind:6} taken over and moved on {took * 1000:.0f} ms after the kill")
                    live = [live[1], start()]  # the survivor drives the next run; a fresh replica joins
            for kind, samples in times.items():
                log(f"{kind} step: median {statistics.median(samples) * 1000:.0f} ms over {len(samples)} kills")
            log(f"lock released: median {statistics.median(releases) * 1000:.1f} ms after the kill")
            every = [t for samples in times.values() for t in samples]
            median = statistics.median(every)
            ratio = median / WATCH_SECONDS
            print(
                f"failover: ratio {ratio:.2f} (goal <= {GOAL_RATIO:g}) median {median * 1000:.0f} ms vs watch "
                f"{WATCH_SECONDS * 1000:.0f} ms over {len(every)} kills",
                flush=True,
            )
    finally:
        for replica in replicas:
            replica.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
