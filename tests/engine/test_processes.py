"""A step's processes, background grandchildren included, never outlive its timeout or its cancel; retries."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import raw_server, sleeping, stored_run, until

# Longer than the kill grace (2 s): a group that ignores SIGTERM still has to be gone by then.
GONE_WITHIN_SECONDS = 5.0
# Runs of the spawn-race test: the race is usually hit on the first, rarely missed three times.
RACE_ROUNDS = 3
LIVE_STATES = {"pending", "running", "awaiting_agent", "awaiting_approval", "awaiting_decision"}
# Step commands that start a background grandchild and a foreground sleep. In the second, every process ignores
# SIGTERM (an ignored disposition is inherited), so only the SIGKILL after the grace can end them.
STUBBORNNESS = {
    "obeys-sigterm": "sleep {bg} & sleep {fg}",
    "ignores-sigterm": "trap '' TERM; sleep {bg} & sleep {fg}",
}


async def finished(client: Client, run_id: str) -> dict[str, Any]:
    """Wait (bounded) for a run to leave the live states; return it."""
    with anyio.fail_after(30):
        while True:
            result = await client.call_tool("ability_status", {"run_id": run_id, "wait_seconds": 10})
            assert not result.is_error, result.content
            if result.structured_content["status"] not in LIVE_STATES:
                return result.structured_content


def slow_ability(write, command: str, **step: str) -> None:
    """abilities/slow.yaml: one script step running `command`, with extra step fields."""
    extra = "".join(f"\n    {key}: {value}" for key, value in step.items())
    write("slow", f"description: sleeps\nsteps:\n  - id: wait\n    type: script\n    run: {command}{extra}\n")


@pytest.mark.parametrize("command", STUBBORNNESS.values(), ids=STUBBORNNESS.keys())
async def test_a_step_that_times_out_fails_and_leaves_no_process_behind(
    client: Client, write, sleep_seconds, command: str
) -> None:
    bg, fg = sleep_seconds(), sleep_seconds()
    slow_ability(write, f'"{command.format(bg=bg, fg=fg)}"', timeout="1s")

    started = await client.call_tool("ability_run", {"name": "slow", "wait_seconds": 0})
    await until(lambda: len(sleeping(bg, fg)) == 2)
    run = await finished(client, started.structured_content["run_id"])

    assert run["status"] == "failed"
    assert run["steps"][0]["status"] == "failed"
    assert "timed out after 1s" in run["steps"][0]["error"]
    await until(lambda: not sleeping(bg, fg), timeout=GONE_WITHIN_SECONDS)


@pytest.mark.parametrize("command", STUBBORNNESS.values(), ids=STUBBORNNESS.keys())
async def test_cancelling_a_run_kills_its_step_processes_before_cancel_returns(
    client: Client, write, sleep_seconds, root: Path, command: str
) -> None:
    bg, fg = sleep_seconds(), sleep_seconds()
    slow_ability(write, f'"{command.format(bg=bg, fg=fg)}"')

    started = await client.call_tool("ability_run", {"name": "slow", "wait_seconds": 0})
    run_id = started.structured_content["run_id"]
    await until(lambda: len(sleeping(bg, fg)) == 2)
    await until(lambda: stored_run(root, run_id).steps[0].pgid)  # the server has taken charge of the group
    with anyio.fail_after(GONE_WITHIN_SECONDS + 10):
        cancelled = await client.call_tool("ability_cancel", {"run_id": run_id})

    assert not cancelled.is_error, cancelled.content
    assert cancelled.structured_content["status"] == "cancelled"
    assert cancelled.structured_content["steps"][0]["status"] == "cancelled"
    assert sleeping(bg, fg) == []


async def test_a_cancel_that_arrives_while_the_step_is_still_being_spawned_leaves_no_process_behind(
    client: Client, write, sleep_seconds
) -> None:
    # The cancel lands as soon as the step's processes exist, which is usually before the server has finished
    # starting them (the window is milliseconds wide, so a few runs make sure it is hit).
    leftovers = []
    for _ in range(RACE_ROUNDS):
        bg, fg = sleep_seconds(), sleep_seconds()
        slow_ability(write, f'"sleep {bg} & sleep {fg}"')
        started = await client.call_tool("ability_run", {"name": "slow", "wait_seconds": 0})
        await until(lambda bg=bg, fg=fg: len(sleeping(bg, fg)) == 2)
        cancelled = await client.call_tool("ability_cancel", {"run_id": started.structured_content["run_id"]})
        assert cancelled.structured_content["status"] == "cancelled", cancelled.content
        leftovers += sleeping(bg, fg)
    assert leftovers == []


# --- retries ----------------------------------------------------------------------------------------------------

# Fails until its {succeed_on}th attempt; each attempt appends its start time to the file `attempts`.
COUNTING_STEP = """
    run: |
      date +%s.%N >> attempts
      [ "$(wc -l < attempts)" -ge {succeed_on} ]
    on_failure: retry
    max_retries: 2
"""


@pytest.fixture
async def slow_retry_client(project: Project) -> AsyncIterator[Client]:
    """A server whose retry pauses are long enough to measure: 0.3 s, then 0.6 s."""
    async with Client(create_server(project, retry_base=0.3)) as c:
        yield c


async def test_a_failing_step_is_retried_after_a_growing_pause_until_it_succeeds(
    slow_retry_client: Client, write, root: Path
) -> None:
    write(
        "flaky",
        "description: fails twice\nsteps:\n  - id: flaky\n    type: script" + COUNTING_STEP.format(succeed_on=3),
    )

    result = await slow_retry_client.call_tool("ability_run", {"name": "flaky", "wait_seconds": 30})

    run = result.structured_content
    assert run["status"] == "completed", run
    assert run["steps"][0]["status"] == "completed"
    assert run["steps"][0]["attempts"] == 3
    first, second, third = (float(t) for t in (root / "attempts").read_text().split())
    assert 0.3 <= second - first < 0.6, "the first pause is the base"
    assert third - second >= 0.6, "the second pause is twice the base"


async def test_a_step_that_keeps_failing_stops_after_max_retries_and_fails_the_run(
    client: Client, write, root: Path
) -> None:
    write(
        "broken",
        "description: never works\nsteps:\n  - id: broken\n    type: script" + COUNTING_STEP.format(succeed_on=99),
    )

    result = await client.call_tool("ability_run", {"name": "broken", "wait_seconds": 30})

    run = result.structured_content
    assert run["status"] == "failed"
    assert run["steps"][0]["status"] == "failed"
    assert run["steps"][0]["attempts"] == 3
    assert len((root / "attempts").read_text().split()) == 3


# Ways a step's process leaves the step's process group (issue 16): each used to outlive the step. {inner} writes
# its pid to escaped.pid, then becomes `sleep N`.
ESCAPES = {
    "setsid-in-the-background": "setsid {inner} < /dev/null > /dev/null 2>&1 &",
    "setsid-fork": "setsid -f {inner} < /dev/null > /dev/null 2>&1",
    "double-fork-daemon": "(setsid {inner} < /dev/null > /dev/null 2>&1 &)",
    "a-daemon-with-a-child": "setsid sh -c '{inner} & wait' < /dev/null > /dev/null 2>&1 &",
}


@pytest.mark.parametrize("escape", ESCAPES.values(), ids=ESCAPES.keys())
@pytest.mark.parametrize("ending", ["exit", "timeout"])
async def test_a_process_that_left_the_steps_group_does_not_outlive_the_step(
    client: Client, write, root: Path, sleep_seconds, escape: str, ending: str
) -> None:
    bg, fg = sleep_seconds(), sleep_seconds()
    inner = f'sh -c \\"echo \\\\$\\\\$ > escaped.pid; exec sleep {bg}\\"'
    waits = "until [ -s escaped.pid ]; do sleep 0.01; done"  # the step goes on only once the escape is under way
    tail = "echo done" if ending == "exit" else f"sleep {fg}"
    slow_ability(write, f'"{escape.format(inner=inner)}\\n{waits}\\n{tail}"', timeout="2s")

    started = await client.call_tool("ability_run", {"name": "slow", "wait_seconds": 0})
    run = await finished(client, started.structured_content["run_id"])

    assert run["status"] == ("completed" if ending == "exit" else "failed"), run
    assert (root / "escaped.pid").read_text().strip().isdigit()  # it did escape
    await until(lambda: not sleeping(bg, fg), timeout=GONE_WITHIN_SECONDS)


# Step commands whose escaped descendants exit on their own: adopted by the server (its child subreaper), each
# becomes the server's zombie unless the server reaps it.
SELF_ENDING_ESCAPES = {
    "setsid-in-the-background": "setsid sh -c 'exit 0' &",
    "setsid-fork": "setsid -f sh -c 'exit 0'",
    "double-fork": "(setsid sh -c 'exit 0' &)",
}


def _zombies(pid: int) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.status() == psutil.STATUS_ZOMBIE:
                found.append(child)
    return found


@pytest.mark.parametrize("escape", SELF_ENDING_ESCAPES.values(), ids=SELF_ENDING_ESCAPES.keys())
async def test_escaped_processes_that_exit_on_their_own_leave_no_zombie_of_the_server(
    write, root: Path, tmp_path: Path, escape: str
) -> None:
    write("escapes", f'description: d\nsteps:\n  - {{id: a, type: script, run: "{escape}"}}\n')

    async with raw_server(root, tmp_path / "server.log") as server:
        run = await server.call_tool("ability_run", {"name": "escapes", "wait_seconds": 30})
        assert run["status"] == "completed", run
        pid = server.process.pid

        await until(lambda: not _zombies(pid), timeout=GONE_WITHIN_SECONDS)
