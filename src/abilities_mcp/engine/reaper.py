"""A watchdog process that kills step process groups when the server dies, however it dies.

The server keeps a pipe to a tiny Python process and tells it which process groups are live. When the pipe closes
(the server exited, crashed or was SIGKILLed: the kernel closes it in every case), the watchdog kills every group
it still knows. It is started on the first step, not at start-up, so serving a client costs nothing extra.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from .process import spawned

log = logging.getLogger(__name__)

# Runs with `python -I -S`: no site-packages, nothing to import but os, signal, sys, time.
_WATCHDOG = r"""
import os, signal, sys, time
live = set()
for line in sys.stdin:
    op, _, pgid = line.strip().partition(" ")
    if pgid.isdigit():
        (live.add if op == "+" else live.discard)(int(pgid))
def send(sig):
    alive = set()
    for pgid in live:
        try:
            os.killpg(pgid, sig)
            alive.add(pgid)
        except OSError:
            pass
    return alive
live = send(signal.SIGTERM)
deadline = time.monotonic() + %(grace)s
while live and time.monotonic() < deadline:
    time.sleep(0.05)
    live = send(0)
send(signal.SIGKILL)
"""


class Reaper:
    """Tells a watchdog process which step groups are live, so they die with the server."""

    def __init__(self, grace_seconds: float):
        self.grace = grace_seconds
        self._proc: subprocess.Popen | None = None
        self._watched: set[int] = set()  # told again to a watchdog started anew

    def watch(self, pgid: int) -> None:
        self._watched.add(pgid)
        self._send(f"+ {pgid}\n")

    def release(self, pgid: int) -> None:
        self._watched.discard(pgid)
        self._send(f"- {pgid}\n")

    def close(self) -> None:
        """Stop the watchdog (after the server has killed its groups itself)."""
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=self.grace + 5)
            self._proc = None

    def _send(self, line: str) -> None:
        try:
            proc = self._ensure()
            assert proc.stdin is not None
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (OSError, ValueError) as exc:  # the guarantee degrades to recovery at the next start; say so
            log.warning("step watchdog unavailable (%s); leftovers are killed at the next server start", exc)

    def _ensure(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            known = "".join(f"+ {pgid}\n" for pgid in self._watched)
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG % {"grace": self.grace}],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
                env={"PATH": os.environ.get("PATH", "")},
            )
            spawned(self._proc.pid)
            if known and self._proc.stdin is not None:
                self._proc.stdin.write(known.encode())
        return self._proc
