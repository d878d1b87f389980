"""Replicas on one PostgreSQL, as real `serve_http` processes: a replica killed with SIGKILL (or cut from the database)
mid-run, and its runs go on in another, nothing lost and no script step running twice at once; calls that reach a
replica other than the run's owner (hand-back, cancel, status) reach the run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.state.project import Project
from abilities_mcp.state.replicas import lock_space
from abilities_mcp.state.store import RunRecord, Store
from abilities_mcp.ui.answers import answer_run
from replica_support import Replica
from support import until
from team_support import free_port, team_client

pytestmark = pytest.mark.anyio

# Each run of the step writes a line per tenth of a second, `tick PID TIME`: two runs of it at once would interleave.
TICKING = """\
description: A script step that takes a while, then a person's yes, then the end
steps:
  - id: work
    type: script
    run: 'for i in $(seq 25); do echo "tick $$ $(date +%s.%N)" >> {ticks}; sleep 0.1; done'
  - id: go
    type: approval
    prompt: Go on?
    needs: [work]
  - id: end
    type: script
    run: echo finished
    needs: [go]
"""
HANDBACK = """\
description: Two agent steps
steps:
  - id: first
    type: agent
    prompt: Say DONE
    validation: {output_contains: DONE}
  - id: second
    type: agent
    prompt: Anything
    needs: [first]
"""
# A replica takes over within a watch (0.5 s) and the old step's processes die at once here: a bound with room.
TAKEOVER_SECONDS = 20


@pytest.fixture
def replicas(root: Path, postgres_url: str, tmp_path: Path) -> Iterator[Callable[[], Replica]]:
    """start() a replica of the project on the test's schema, answering; all are stopped at the end."""
    started: list[Replica] = []

    def start() -> Replica:
        replica = Replica(root, postgres_url, free_port(), tmp_path / f"replica-{len(started)}.log")
        started.append(replica)
        replica.ready()
        return replica

    yield start
    for replica in started:
        replica.stop()


def stored(root: Path, url: str, run_id: str) -> RunRecord:
    store = Store.open(Project.resolve(root, state=url))
    try:
        record = store.get_run(run_id)
        assert record is not None
        return record
    finally:
        store.close()


def events(root: Path, url: str, run_id: str) -> list[dict]:
    store = Store.open(Project.resolve(root, state=url))
    try:
        return store.events(run_id)
    finally:
        store.close()


def owner(replicas: list[Replica], record: RunRecord) -> Replica:
    return next(r for r in replicas if r.pid == record.owner_pid)


def runs_of_the_step(ticks: Path) -> list[tuple[float, float]]:
    """Each run of the ticking step as (first tick, last tick), in the order they started."""
    spans: dict[str, list[float]] = {}
    for line in ticks.read_text().splitlines():
        _, pid, at = line.split()
        spans.setdefault(pid, []).append(float(at))
    return sorted((min(t), max(t)) for t in spans.values())


async def start_run(replica: Replica, name: str) -> str:
    async with team_client(replica.origin, "ada") as agent:
        started = await agent.call_tool("ability_run", {"name": name, "wait_seconds": 0.3})
    assert not started.is_error, started.content[0].text
    return started.structured_content["run_id"]


async def test_a_replica_killed_mid_script_and_mid_approval_hands_its_run_on_and_no_step_runs_twice_at_once(
    replicas, root, write, postgres_url, tmp_path
):
    ticks = tmp_path / "ticks"
    write("ticking", TICKING.format(ticks=ticks))
    first, second = replicas(), replicas()
    run_id = await start_run(first, "ticking")
    await until(lambda: ticks.exists() and ticks.read_text().count("\n") >= 3)
    first.kill()  # mid-script: the other replica takes the run over and runs the step again from its start

    record = await until(
        lambda: (r := stored(root, postgres_url, run_id)).status == "awaiting_approval" and r, TAKEOVER_SECONDS
    )
    assert record.owner_pid == second.pid
    before, after = runs_of_the_step(ticks)
    assert before[1] < after[0], f"two runs of the step overlapped: {before} and {after}"
    assert after[1] - after[0] > 2.0  # the second run went to its end: 25 ticks
    said = [e["detail"] for e in events(root, postgres_url, run_id) if e["step_id"] == "work"]
    assert any("runs again from its start" in (d or "") for d in said), said

    asked = record.question_id
    third = replicas()
    second.kill()  # mid-approval: the question survives the move, with its id
    moved = await until(
        lambda: (
            (r := stored(root, postgres_url, run_id)).owner_pid == third.pid and r.status == "awaiting_approval" and r
        ),
        TAKEOVER_SECONDS,
    )
    assert moved.question_id == asked
    project = Project.resolve(root, state=postgres_url)
    store = Store.open(project)
    try:
        answer_run(store, Catalog(project), run_id, {"answer": "approve", "step": "go"}, origin="test page")
    finally:
        store.close()
    done = await until(lambda: (r := stored(root, postgres_url, run_id)).status == "completed" and r, TAKEOVER_SECONDS)
    assert [s.status for s in done.steps] == ["completed", "completed", "completed"]
    assert done.step("end").output == "finished" and len(runs_of_the_step(ticks)) == 2


async def test_a_hand_back_a_status_and_a_cancel_sent_to_the_replica_that_does_not_own_the_run_reach_it(
    replicas, root, write, postgres_url
):
    write("handback", HANDBACK)
    driving, other = replicas(), replicas()
    run_id = await start_run(driving, "handback")
    async with team_client(other.origin, "ada") as agent:
        refused = await agent.call_tool(
            "ability_step_complete", {"run_id": run_id, "step_id": "first", "output": "nope", "wait_seconds": 5}
        )
        assert refused.is_error and "does not contain 'DONE'" in refused.content[0].text, refused.content[0].text
        assert "attempt (1 of 3)" in refused.content[0].text

        taken = await agent.call_tool(
            "ability_step_complete", {"run_id": run_id, "step_id": "first", "output": "DONE", "wait_seconds": 10}
        )
        assert not taken.is_error, taken.content[0].text
        view = taken.structured_content
        assert view["status"] == "awaiting_agent" and view["current_step"]["id"] == "second"

        cancelled = await agent.call_tool("ability_cancel", {"run_id": run_id})
        assert not cancelled.is_error, cancelled.content[0].text
        assert cancelled.structured_content["status"] == "cancelled"
    record = stored(root, postgres_url, run_id)
    assert record.owner_pid == driving.pid and record.status == "cancelled"
    [handed_back] = [
        e for e in events(root, postgres_url, run_id) if (e["step_id"], e["event"]) == ("first", "succeed")
    ]
    assert "ada" in (handed_back["actor"] or "")  # written by the owner, for the caller the other replica served


async def test_a_replica_cut_from_the_database_stops_driving_and_another_takes_its_run(
    replicas, root, write, postgres_url, tmp_path
):
    ticks = tmp_path / "ticks"
    write("ticking", TICKING.format(ticks=ticks))
    cut, other = replicas(), replicas()
    run_id = await start_run(cut, "ticking")
    await until(lambda: ticks.exists() and ticks.read_text().count("\n") >= 3)
    record = stored(root, postgres_url, run_id)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        schema = admin.execute("SELECT current_schema()").fetchone()[0]
        [(backend,)] = admin.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND objsubid = 2",
            (lock_space(admin.info.dbname, schema), record.owner_replica),
        ).fetchall()
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))

    moved = await until(
        lambda: (
            (r := stored(root, postgres_url, run_id)).owner_pid == other.pid and r.status == "awaiting_approval" and r
        ),
        TAKEOVER_SECONDS,
    )
    assert cut.proc.poll() is None  # it lives on, under a new lock, and serves calls
    before, after = runs_of_the_step(ticks)
    assert before[1] < after[0], f"two runs of the step overlapped: {before} and {after}"
    assert "lost its lock" in cut.log.read_text()
    taken_over = [e for e in events(root, postgres_url, run_id) if e["event"] == "adopted"]
    assert len(taken_over) == 1 and str(moved.owner_replica) in taken_over[0]["detail"]
    async with team_client(cut.origin, "ada") as agent:  # now a replica that does not own it: status reads it
        status = await agent.call_tool("ability_status", {"run_id": run_id})
    assert status.structured_content["status"] == "awaiting_approval"
