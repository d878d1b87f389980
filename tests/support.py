"""Helpers for tests that watch real processes and the state file."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psutil

from abilities_mcp.store import RunRecord, Store


async def until(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll `condition` until it is truthy (and return it), failing after `timeout` seconds."""
    with anyio.fail_after(timeout):
        while not (value := condition()):
            await anyio.sleep(0.05)
    return value


def sleeping(*seconds: int) -> list[psutil.Process]:
    """Live (not zombie) `sleep N` processes for the given durations, whoever their parent is."""
    wanted = {str(s) for s in seconds}
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and len(cmd) == 2 and cmd[0].endswith("sleep"):
            if cmd[1] in wanted:
                found.append(proc)
    return found


def stored_run(root: Path, run_id: str) -> RunRecord:
    """The run as the state file holds it, read without starting a server (which would recover runs)."""
    store = Store(root / ".abilities" / "state.db")
    try:
        record = store.get_run(run_id)
    finally:
        store.close()
    assert record is not None, f"run {run_id} is not in the state file"
    return record


def stdio_params(root: Path, *extra: str, env: dict[str, str] | None = None):
    """Parameters to start the real server as a subprocess on a project."""
    from mcp import StdioServerParameters

    full_env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    full_env.update(env or {})
    return StdioServerParameters(
        command=sys.executable, args=["-m", "abilities_mcp", "--root", str(root), *extra], env=full_env
    )
