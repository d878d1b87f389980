"""`abilities-mcp logs RUN [STEP] --follow` from a second terminal: a running step's output as it is printed, by a
run in another process, until the step ends; bounded on disk whatever the step prints."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from abilities_mcp.state.project import Project
from abilities_mcp.state.spool import LIVE_BYTES, Follower, Spool, spool_path
from abilities_mcp.state.store import Store
from support import cli, raw_server

# How long any one thing the test waits for may take before the test fails instead of hanging.
WAIT_SECONDS = 60

TALKER = """
description: prints a line, waits for the test, prints more and fails
steps:
  - id: talk
    type: script
    run: |
      echo first line
      while [ ! -e {gate} ]; do sleep 0.05; done
      echo second line
      echo oops >&2
      exit 1
"""

FLOOD = """
description: floods, then waits for the test
steps:
  - id: flood
    type: script
    run: |
      yes flooding-the-live-view | head -c 30000000
      echo flood done
      while [ ! -e {gate} ]; do sleep 0.05; done
"""


class Lines:
    """A process's stdout read line by line, each wait bounded."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc, self.seen, self._buffer = proc, [], b""

    def until(self, wanted: str) -> list[str]:
        deadline = time.monotonic() + WAIT_SECONDS
        while not any(wanted in line for line in self.seen):
            assert time.monotonic() < deadline, f"no {wanted!r} in {self.seen}"
            assert self.proc.stdout is not None
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk or self.proc.poll() is None or wanted in self._buffer.decode(), f"ended: {self.seen}"
                self._buffer += chunk
                *lines, rest = self._buffer.split(b"\n")
                self.seen += [line.decode() for line in lines]
                self._buffer = rest
        return self.seen


@contextmanager
def started(root: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(cli(root, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def live_run(project: Project, step: str) -> str:
    """The run whose step is running (started by another process), waited for with a bound."""
    deadline = time.monotonic() + WAIT_SECONDS
    store = Store(project.state_db)
    try:
        while True:
            for record in store.runs(limit=10):
                if any(s.step_id == step and s.status == "running" for s in record.steps):
                    return record.run_id
            assert time.monotonic() < deadline, "the run never started its step"
            time.sleep(0.05)
    finally:
        store.close()


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    return tmp_path / "go"


@pytest.fixture
def talker(write: Callable[[str, str], Path], gate: Path) -> str:
    write("talker", TALKER.format(gate=gate))
    return "talker"


def test_follow_prints_a_running_steps_lines_as_they_come_and_exits_1_when_it_fails(
    root: Path, project: Project, talker: str, gate: Path
) -> None:
    with started(root, "run", talker) as runner:
        run_id = live_run(project, "talk")
        with started(root, "logs", run_id, "talk", "--follow") as follower:
            lines = Lines(follower)
            lines.until("first line")  # printed while the step still waits on the gate
            assert runner.poll() is None and not gate.exists()
            gate.touch()
            lines.until("--- talk failed, exit 1")
            assert follower.wait(WAIT_SECONDS) == 1
        runner.wait(WAIT_SECONDS)

    assert lines.seen == ["=== talk (script, running)", "first line", "second line", "oops", "--- talk failed, exit 1"]
    assert not list((project.state_dir / "live").glob(f"{run_id}.*")), "the run ended: its live view is removed"


def test_follow_without_a_step_follows_the_run_to_its_end(
    root: Path, project: Project, talker: str, gate: Path
) -> None:
    with started(root, "run", talker) as runner:
        run_id = live_run(project, "talk")
        with started(root, "logs", run_id, "--follow") as follower:
            lines = Lines(follower)
            lines.until("first line")
            gate.touch()
            lines.until("--- talk failed")
            assert follower.wait(WAIT_SECONDS) == 1
        runner.wait(WAIT_SECONDS)


def test_follow_on_a_finished_step_prints_what_was_kept_and_exits_at_once(
    root: Path, project: Project, talker: str, gate: Path
) -> None:
    gate.touch()
    subprocess.run(cli(root, "run", talker), capture_output=True, timeout=WAIT_SECONDS)
    run_id = Store(project.state_db).runs(limit=1)[0].run_id

    done = subprocess.run(cli(root, "logs", run_id, "talk", "--follow"), capture_output=True, text=True, timeout=60)

    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "=== talk (script, failed)",
        "first line",
        "second line",
        "oops",
        "--- talk failed, exit 1",
    ]


def test_ctrl_c_stops_following_quietly_with_130(root: Path, project: Project, talker: str, gate: Path) -> None:
    with started(root, "run", talker):
        run_id = live_run(project, "talk")
        with started(root, "logs", run_id, "talk", "--follow") as follower:
            Lines(follower).until("first line")
            follower.send_signal(signal.SIGINT)
            assert follower.wait(WAIT_SECONDS) == 130
            assert follower.stderr is not None and b"Traceback" not in follower.stderr.read()
        gate.touch()


def test_a_flooding_step_keeps_its_live_view_under_the_bound_and_the_follower_sees_the_latest(
    root: Path, project: Project, write: Callable[[str, str], Path], gate: Path
) -> None:
    write("flood", FLOOD.format(gate=gate))
    with started(root, "run", "flood") as runner:
        run_id = live_run(project, "flood")
        spool = spool_path(project.state_dir, run_id, "flood")
        deadline = time.monotonic() + WAIT_SECONDS
        while b"flood done" not in (spool.read_bytes() if spool.exists() else b""):
            assert time.monotonic() < deadline, "the flood never finished"
            time.sleep(0.05)
        size = spool.stat().st_size
        with started(root, "logs", run_id, "flood", "--follow") as follower:
            lines = Lines(follower)
            lines.until("flood done")
            gate.touch()
            assert follower.wait(WAIT_SECONDS) == 0
        runner.wait(WAIT_SECONDS)

    assert size <= LIVE_BYTES, f"30 MB printed, {size} bytes on disk"
    assert lines.seen[1].startswith("[... earlier output skipped")


def test_a_reader_sees_a_restarted_spool_from_its_start_and_reads_on_after_it_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "live" / "run.step.log"
    spool, reader = Spool(path, limit=1000), Follower(path)
    assert reader.read() == b""  # not made yet: a silent step has none
    spool.write(b"a" * 600)
    assert reader.read() == b"a" * 600
    spool.write(b"b" * 600)  # past the limit: starts again with the marker
    again = reader.read()
    assert again.startswith(b"[... earlier output skipped") and again.endswith(b"b" * 600)
    spool.write(b"c\n")
    path.unlink()  # the run ended
    assert reader.read() == b"c\n"
    spool.close()
    reader.close()


async def test_follow_shows_a_step_the_mcp_server_runs(
    root: Path, project: Project, talker: str, gate: Path, tmp_path: Path
) -> None:
    async with raw_server(root, tmp_path / "server.log") as server:
        run = await server.call_tool("ability_run", {"name": talker, "wait_seconds": 0})
        with started(root, "logs", run["run_id"], "talk", "--follow") as follower:
            lines = Lines(follower)
            await anyio.to_thread.run_sync(lines.until, "first line")
            gate.touch()
            await anyio.to_thread.run_sync(lines.until, "--- talk failed, exit 1")
            assert await anyio.to_thread.run_sync(follower.wait, WAIT_SECONDS) == 1
