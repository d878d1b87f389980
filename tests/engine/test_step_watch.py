"""How run_script watches a step on the event loop's own callbacks: every descriptor it opened (the pipes, the pidfd)
is closed whatever ended the step, a failure raised inside a callback reaches the step, a shell whose background
child keeps its pipes open still ends, and an exit is found without a pidfd too."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from abilities_mcp.engine import process
from abilities_mcp.engine.process import MARKER_VAR, SpawnError, group_alive, run_script
from support import sleeping, until

# Bound on waiting for a killed group to be gone (the kill grace is 2 s).
GONE_WITHIN_SECONDS = 5.0


def descriptors() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, MARKER_VAR: f"run_watch:{tmp_path.name}"}


class Broken(Exception):
    """What a callback of the step raises (as a failed write to the state would)."""


async def test_a_step_that_exits_leaves_no_descriptor_open(tmp_path: Path) -> None:
    before = descriptors()
    result = await run_script("echo out; echo err >&2; exit 4", cwd=tmp_path, env=environment(tmp_path), timeout=30)
    assert (result.exit_code, result.stdout, result.stderr) == (4, "out\n", "err\n")
    assert descriptors() == before


async def test_a_step_that_times_out_leaves_no_descriptor_and_no_process(tmp_path: Path, sleep_seconds) -> None:
    seconds = sleep_seconds()
    before = descriptors()
    result = await run_script(f"echo started; sleep {seconds}", cwd=tmp_path, env=environment(tmp_path), timeout=0.5)
    assert result.timed_out and result.stdout == "started\n"
    assert not group_alive(result.pgid)
    assert descriptors() == before


async def test_a_cancelled_step_leaves_no_descriptor_and_no_process(tmp_path: Path, sleep_seconds) -> None:
    seconds = sleep_seconds()
    before = descriptors()
    groups: list[int] = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: run_script(
                    f"sleep {seconds}", cwd=tmp_path, env=environment(tmp_path), timeout=60, on_start=groups.append
                )
            )
            await until(lambda: sleeping(seconds))
            scope.cancel()
    assert groups and not group_alive(groups[0])
    assert descriptors() == before


async def test_a_failure_inside_a_callback_fails_the_step_and_kills_its_processes(
    tmp_path: Path, sleep_seconds
) -> None:
    seconds = sleep_seconds()
    before = descriptors()
    groups: list[int] = []

    def spool(chunk: bytes) -> None:
        raise Broken("the state could not be written")

    with pytest.raises(Broken):
        await run_script(
            f"echo hello; sleep {seconds}",
            cwd=tmp_path,
            env=environment(tmp_path),
            timeout=60,
            on_start=groups.append,
            spool=spool,  # shown at once (show_after 0): its output is spooled as it is read
        )
    assert not group_alive(groups[0])
    assert not sleeping(seconds)
    assert descriptors() == before


async def test_a_step_that_cannot_start_leaves_no_descriptor_open(tmp_path: Path) -> None:
    before = descriptors()
    with pytest.raises(SpawnError):
        await run_script("true", cwd=tmp_path / "missing", env=environment(tmp_path), timeout=30)
    assert descriptors() == before


async def test_a_shell_whose_background_child_holds_its_pipes_ends_with_its_output(
    tmp_path: Path, sleep_seconds
) -> None:
    seconds = sleep_seconds()
    before = descriptors()
    result = await run_script(f"sleep {seconds} & echo done", cwd=tmp_path, env=environment(tmp_path), timeout=60)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "done\n", False)
    await until(lambda: not sleeping(seconds), timeout=GONE_WITHIN_SECONDS)
    assert descriptors() == before


async def test_an_exit_is_found_by_polling_where_there_is_no_pidfd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError("no pidfd here")

    monkeypatch.setattr(process.os, "pidfd_open", no_pidfd)
    before = descriptors()
    result = await run_script("echo polled; exit 3", cwd=tmp_path, env=environment(tmp_path), timeout=30)
    assert (result.exit_code, result.stdout) == (3, "polled\n")
    assert descriptors() == before
