"""How a step's shell is started, either way (posix_spawn in the server's own directory, Popen elsewhere), and what
recovery kills: a short step's start is written with its end, so an orphaned run's processes are found by marker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from mcp import Client

from abilities_mcp.children import spawned, started_here
from abilities_mcp.engine import process
from abilities_mcp.engine.process import MARKER_VAR, kill_run_leftovers, reap_adopted, run_script
from abilities_mcp.state.project import Project
from abilities_mcp.state.store import Store
from support import until

# What the shell reports of itself: its pid, group and session, its cwd, what reading stdin gave, its descriptors.
REPORT = """
read pid comm state ppid pgrp session rest < /proc/$$/stat
echo "ids $pid $pgrp $session"
echo "cwd $(pwd)"
read line; echo "stdin $?"
echo "fds $(ls /proc/$$/fd | tr '\\n' ' ')"
echo "ignored $(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status)"
echo to-stderr >&2
exit 3
"""
# An inheritable descriptor the test leaves open in this process, numbered apart from any the shell opens itself.
LEAKED_FD = 57


@pytest.mark.skipif(sys.platform != "linux", reason="/proc and posix_spawn's fast path are Linux's")
@pytest.mark.parametrize("where", ["own-directory", "elsewhere"])
async def test_a_step_shell_is_started_alike_whichever_way_it_is_spawned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.chdir(tmp_path)
    cwd = tmp_path if where == "own-directory" else tmp_path / "sub"
    cwd.mkdir(exist_ok=True)
    spawns: list[str] = []
    real = process._posix_spawn
    monkeypatch.setattr(process, "_posix_spawn", lambda *a: spawns.append("posix_spawn") or real(*a))
    leaked_r, leaked_w = os.pipe()
    os.dup2(leaked_w, LEAKED_FD, inheritable=True)  # what a library or the server's parent may leave open
    try:
        result = await run_script(REPORT, cwd=cwd.resolve(), env=dict(os.environ), timeout=30)
    finally:
        for fd in (leaked_r, leaked_w, LEAKED_FD):
            os.close(fd)

    assert spawns == (["posix_spawn"] if where == "own-directory" else [])
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    pid, pgrp, session = lines["ids"].split()
    assert pid == pgrp == session == str(result.pgid)  # its own session and group, the shell leading both
    assert lines["cwd"] == str(cwd.resolve())
    assert lines["stdin"] == "1"  # /dev/null: end of file at once
    assert str(LEAKED_FD) not in lines["fds"].split(), lines["fds"]  # only stdin, stdout and stderr inherited
    assert int(lines["ignored"], 16) & 1 << (signal.SIGPIPE - 1) == 0  # as Popen leaves it: `yes | head` ends
    assert result.stderr == "to-stderr\n"
    assert result.exit_code == 3
    assert not started_here(result.pgid)  # reaped, its pid forgotten


@pytest.mark.skipif(sys.platform != "linux", reason="markers are read from /proc")
async def test_recovery_kills_every_process_marked_with_the_run_and_no_other() -> None:
    def marked(value: str) -> subprocess.Popen:
        return subprocess.Popen(["sleep", "60"], env={**os.environ, MARKER_VAR: value})

    ours, other_step, other_run = marked("run_a:build"), marked("run_a:test"), marked("run_ab:build")
    try:
        assert kill_run_leftovers("run_a")
        await until(lambda: ours.poll() is not None and other_step.poll() is not None, timeout=10)
        assert other_run.poll() is None  # a run whose id only starts the same is someone else's
    finally:
        for proc in (ours, other_step, other_run):
            proc.kill()
            proc.wait()


async def test_a_short_steps_start_is_written_with_its_end_and_keeps_its_own_time(
    client: Client, write, project: Project
) -> None:
    write("quick", "description: quick\nsteps:\n  - {id: only, type: script, run: echo done}\n")
    result = await client.call_tool("ability_run", {"name": "quick", "wait_seconds": 30})
    run = result.structured_content
    assert run["status"] == "completed", result.content

    store = Store.open(project)
    try:
        step = store.get_run(run["run_id"]).step("only")
        events = [e for e in store.events(run["run_id"]) if e["step_id"] == "only"]
    finally:
        store.close()
    assert [e["event"] for e in events] == ["start", "succeed"]
    assert events[0]["at"] == step.started_at <= events[1]["at"]
    assert step.pgid and step.attempts == 1 and step.status == "completed" and step.output == "done"


async def test_reaping_adopted_orphans_leaves_a_registered_childs_exit_to_its_popen() -> None:
    # A child registered in children.py (a step's shell, the watchdog, a gateway upstream) is reaped by its own Popen:
    # reaped by reap_adopted instead, its Popen would read exit code 0 and might signal a reused pid.
    child = subprocess.Popen(["sh", "-c", "exit 3"])
    spawned(child.pid)
    try:
        await until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE)
        reap_adopted()

        assert child.wait(timeout=10) == 3
    finally:
        child.poll()
