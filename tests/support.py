"""Helpers for tests that watch real processes and the state file."""

from __future__ import annotations

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
