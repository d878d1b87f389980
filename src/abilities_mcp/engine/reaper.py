"""A watchdog process that kills step process groups when the server dies, however it dies.

The server keeps a pipe to a tiny Python process and writes into it which process groups are live. The watchdog
does not read as they come (a reader blocked on the pipe is woken by every write, twice per step): it waits on a
pidfd of the server and drains the pipe now and then, and once the server is gone (exited, crashed or SIGKILLed)
it reads what is left in the pipe, which the kernel keeps, and kills every group it still knows. Where there is no
pidfd it reads line by line until the pipe closes. It is started on the first step, not at start-up, so serving a
client costs nothing extra.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys

from ..children import forget, spawned

log = logging.getLogger(__name__)
# What the pipe holds between two drains (the most an unprivileged process may ask, by default): a write never
# waits for the watchdog unless it holds more than this.
PIPE_BYTES = 1024 * 1024

# Runs with `python -I -S`: no site-packages, nothing to import but os, select, signal, sys, time. Between drains
# it sleeps longer while nothing comes (at most 2 s), so an idle server's watchdog costs nothing.
_WATCHDOG = r"""
import os, select, signal, sys, time
server, pipe, live = %(server)d, sys.stdin.fileno(), set()
def take(data):
    for line in data.decode().splitlines():
        op, _, pgid = line.strip().partition(" ")
        if pgid.isdigit():
            (live.add if op == "+" else live.discard)(int(pgid))
def drain():
    data = b""
    while True:
        try:
            chunk = os.read(pipe, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            take(data)
            return True
        data += chunk
    take(data)
    return False
try:
    pidfd = os.pidfd_open(server)
except (AttributeError, OSError):
    pidfd = None
if pidfd is not None and os.getppid() == server:
    os.set_blocking(pipe, False)
    waiting, pause = select.poll(), 0.1
    waiting.register(pidfd, select.POLLIN)
    while True:
        dead = bool(waiting.poll(pause * 1000))
        if drain() or dead:
            drain()
            break
        pause = min(pause * 2, 2.0)
elif pidfd is None:
    for line in sys.stdin:
        take(line.encode())
else:  # the server died before we could watch it: what it wrote is all there is
    os.set_blocking(pipe, False)
    drain()
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
        self._fd = -1  # the pipe's writing end
        self._watched: set[int] = set()  # told again to a watchdog started anew

    def watch(self, pgid: int) -> None:
        self._watched.add(pgid)
        self._send(f"+ {pgid}\n")

    def release(self, pgid: int) -> None:
        self._watched.discard(pgid)
        self._send(f"- {pgid}\n")

    def close(self) -> None:
        """Stop the watchdog (after the server has killed its groups itself)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.stdin is None:
            return
        proc.stdin.close()
        if not self._watched:  # nothing left for it to kill: it need not wait for its next look at the pipe
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=self.grace + 5)
        forget(proc.pid)

    def _send(self, line: str) -> None:
        try:
            if self._proc is not None:
                try:
                    os.write(self._fd, line.encode())  # one small write: atomic, and it wakes nobody
                    return
                except BrokenPipeError:  # the watchdog died: a new one is told every live group
                    self._forget()
            self._start()
        except (OSError, ValueError) as exc:  # the guarantee degrades to recovery at the next start; say so
            log.warning("step watchdog unavailable (%s); leftovers are killed at the next server start", exc)

    def _forget(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            if proc.poll() is not None:  # reaped, not left a zombie; its pid is anyone's now
                forget(proc.pid)

    def _start(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG % {"grace": self.grace, "server": os.getpid()}],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env={"PATH": os.environ.get("PATH", "")},
        )
        spawned(proc.pid)
        assert proc.stdin is not None
        self._proc, self._fd = proc, proc.stdin.fileno()
        with contextlib.suppress(OSError, AttributeError):  # a larger pipe where the kernel allows it
            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        if known := "".join(f"+ {pgid}\n" for pgid in self._watched):
            os.write(self._fd, known.encode())
