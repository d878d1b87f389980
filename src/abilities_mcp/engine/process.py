"""Running one shell command as a step: own process group, bounded capture, and nothing left behind.

Whatever ends the step (its exit, its timeout, a cancel, the server stopping), the whole process group is sent
SIGTERM, then SIGKILL after a grace, so a background grandchild cannot outlive it. A descendant that left the
group (`setsid`, a double-forked daemon) is found too: this process is a child subreaper (Linux), so such a
process, once its parent is gone, becomes our child, and the step's marker in its environment says whose it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from ..children import forget, keep_only, spawned, started_here

# Grace between SIGTERM and SIGKILL for a step's process group.
KILL_GRACE_SECONDS = 2.0
# Bytes kept of each stream: the head and the tail (DESIGN §3 hands out up to 40,000 characters per step).
HEAD_BYTES = 24 * 1024
TAIL_BYTES = 24 * 1024
# How long to wait for the pipes to close once the group is dead (a process that escaped the group may hold them).
DRAIN_SECONDS = 2.0
# Bytes read from a pipe at a time.
READ_CHUNK = 64 * 1024
# Where there is no pidfd, a step's exit is polled for: first after this long, the pause doubling up to the most.
POLL_FIRST_SECONDS, POLL_MAX_SECONDS = 0.005, 0.1
# A step is shown (its start recorded, its output spooled for `logs --follow`) once it has run this long or printed
# this much: most steps end sooner, and then their start and end are one write. Nothing reported is lost if the
# server dies before: the watchdog knows the group at once, recovery finds the processes by their marker.
SHOW_AFTER_SECONDS = 0.05
SHOW_AFTER_BYTES = 64 * 1024
# Marks every step process's environment, so recovery can tell our leftovers from strangers with a reused pgid.
MARKER_VAR = "ABILITIES_MCP_STEP"
# prctl(2) option: orphaned descendants are re-parented to this process instead of init.
PR_SET_CHILD_SUBREAPER = 36
# Rounds of looking for escaped processes: killing a daemon orphans its own children, adopted in turn.
ESCAPE_ROUNDS = 5
# How long a killed escaped process gets to die before we stop waiting to reap it.
REAP_SECONDS = 1.0
# After a SIGCHLD, how long before adopted orphans are reaped (one reap for every child that exits meanwhile).
REAP_AFTER_SECONDS = 0.05
# Pids this process started itself (step shells, the watchdog, the gateway's upstreams) are registered in
# children.py and reaped by their own Popen. Any other child is a step's escaped descendant the subreaper adopted,
# which nobody else would reap: `reap_adopted` does.


# The captures of the steps running in this process, by process group: `run` shows a step's last line as it runs.
RUNNING: dict[int, tuple[Capture, Capture]] = {}


def last_line(pgid: int) -> str:
    """The last line a running step (by its process group) printed to stdout or stderr, "" when none or gone."""
    found = RUNNING.get(pgid)
    if found is None:
        return ""
    for capture in found:
        tail = bytes(capture.tail[-2048:] or capture.head[-2048:]).decode("utf-8", "replace")
        lines = [line for line in tail.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""


class Capture:
    """A stream's first and last bytes and its total size, in bounded memory whatever the volume."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES, needles: tuple[str, ...] = ()):
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        # Texts searched in the whole stream as it passes (validation must not miss what the middle held).
        self.needles = {n: n.encode() for n in needles if n}
        self.found: set[str] = set()
        self._overlap = b""

    def feed(self, chunk: bytes) -> None:
        if self.needles:
            self._search(chunk)
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_limit:  # trim in batches, not per chunk
                del self.tail[: len(self.tail) - self.tail_limit]

    def _search(self, chunk: bytes) -> None:
        window = self._overlap + chunk
        for text, needle in self.needles.items():
            if text not in self.found and needle in window:
                self.found.add(text)
        keep = max(len(n) for n in self.needles.values()) - 1
        self._overlap = window[-keep:] if keep else b""

    def text(self) -> str:
        """Head and tail, with the size of what was left out in between."""
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail else b""
        dropped = self.total - len(self.head) - len(tail)
        if dropped <= 0:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        head = bytes(self.head).decode("utf-8", "replace")
        return f"{head}\n[{dropped} bytes truncated of {self.total}]\n{tail.decode('utf-8', 'replace')}"


@dataclass
class ScriptResult:
    """What one attempt of a script step produced."""

    pgid: int
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    duration_ms: int
    timed_out: bool
    found: set[str]  # the searched texts that appeared in stdout or stderr (keys "stdout:…" / "stderr:…")


async def run_script(
    command: str,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    on_start: Callable[[int], None] = lambda pgid: None,
    on_end: Callable[[int], None] = lambda pgid: None,
    on_show: Callable[[int], None] = lambda pgid: None,
    show_after: float = 0.0,
    stdout_needles: tuple[str, ...] = (),
    stderr_needles: tuple[str, ...] = (),
    spool: Callable[[bytes], None] = lambda chunk: None,
) -> ScriptResult:
    """Run `sh -c command` in its own process group; cancellation kills the group before it propagates.

    `on_start(pgid)` runs once the group exists and `on_end(pgid)` once it is dead, whatever ended the step;
    `on_show(pgid)` once the step has run `show_after` seconds (or printed SHOW_AFTER_BYTES), never for one that
    ended sooner; `spool` gets both streams' chunks as they arrive (the live view `logs --follow` reads), from
    when the step is shown, starting with what it printed before.
    """
    started = time.monotonic()
    try:
        process = _spawn(command, cwd, env)
    except (OSError, ValueError) as exc:
        raise SpawnError(_spawn_problem(exc, env)) from exc
    pgid = process.pid  # its own session makes the shell its group's leader
    out, err = Capture(needles=stdout_needles), Capture(needles=stderr_needles)
    RUNNING[pgid] = (out, err)
    shown = _Shown(pgid, on_show, spool)
    watch: _Watch | None = None
    ended = timed_out = False
    try:
        on_start(pgid)
        if show_after <= 0:
            shown.show()
        watch = _Watch(process, out, err, shown.write)
        deadline = time.monotonic() + timeout
        if not shown.shown and not await watch.exited(min(show_after, timeout)):
            shown.show()
        timed_out = not await watch.exited(deadline - time.monotonic())
        ended = True
    finally:
        try:
            if not _all_gone(pgid, process, watch, env.get(MARKER_VAR)):
                with anyio.CancelScope(shield=True):
                    await _wind_down(pgid, process, watch, env.get(MARKER_VAR), drain=ended)
        finally:
            if watch is not None:
                watch.close()
            else:
                _close_pipes(process)
            RUNNING.pop(pgid, None)
            if process.returncode is not None:
                forget(process.pid)
            on_end(pgid)
    return ScriptResult(
        pgid=pgid,
        exit_code=process.returncode,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        duration_ms=round((time.monotonic() - started) * 1000),
        timed_out=timed_out,
        found={f"stdout:{n}" for n in out.found} | {f"stderr:{n}" for n in err.found},
    )


def _all_gone(pgid: int, process: subprocess.Popen | Spawned, watch: _Watch | None, marker: str | None) -> bool:
    """Whether the step ended cleanly, the usual case, with nothing to wait for: the shell reaped, both pipes at
    their end, no process left in its group, none escaped from it."""
    return (
        watch is not None
        and watch.drained_now()
        and process.returncode is not None
        and not _signal_group(pgid, 0)  # the group is empty
        and not (marker and escaped(marker))
    )


async def _wind_down(
    pgid: int, process: subprocess.Popen | Spawned, watch: _Watch | None, marker: str | None, *, drain: bool
) -> None:
    """Kill the group (and reap the shell), read the pipes to their end when the step ended by itself or its
    timeout (a process that escaped the group may hold them: at most DRAIN_SECONDS), kill escaped processes."""
    await kill_group(pgid, process)
    if drain and watch is not None:
        await watch.drained(DRAIN_SECONDS)
    if marker:
        await kill_escaped(marker)


def _close_pipes(process: subprocess.Popen | Spawned) -> None:
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


class _Watch:
    """A step's two pipes and its exit (a pidfd), watched by the event loop's own callbacks: the step waits on one
    future, with no task per pipe, no cancel scope per wait, and no thread (asyncio's child watcher starts one per
    process). `close` releases everything (the pipes, the pidfd, the loop's readers)."""

    def __init__(self, process: subprocess.Popen | Spawned, out: Capture, err: Capture, write: Callable[[bytes], None]):
        self.loop = asyncio.get_running_loop()
        self.process, self.write = process, write
        self.open: dict[int, Capture] = {}  # the pipes not at their end yet, by descriptor
        self.pidfd: int | None = None
        self._exit_watched = False  # the pidfd is registered with the loop
        self.failure: BaseException | None = None  # what a callback raised (a write to the state), raised here
        self._waiter: asyncio.Future[None] | None = None
        self._done: Callable[[], bool] = lambda: True
        self._poller: asyncio.TimerHandle | None = None
        self._pause = POLL_FIRST_SECONDS
        try:
            for pipe, capture in ((process.stdout, out), (process.stderr, err)):
                assert pipe is not None
                fd = pipe.fileno()
                os.set_blocking(fd, False)
                self.loop.add_reader(fd, self._readable, fd)
                self.open[fd] = capture
            self._watch_exit()
        except BaseException:
            self.close()
            raise

    def _watch_exit(self) -> None:
        """A pidfd the loop waits on where the kernel has one; elsewhere polling with a growing pause."""
        try:
            self.pidfd = os.pidfd_open(self.process.pid)
        except (AttributeError, OSError):
            self._poll_later()
            return
        self.loop.add_reader(self.pidfd, self._exit_seen)
        self._exit_watched = True

    async def exited(self, seconds: float) -> bool:
        """Wait at most `seconds` for the shell to exit (it is reaped then); whether it has."""
        return await self._until(lambda: self.process.returncode is not None, seconds)

    async def drained(self, seconds: float) -> bool:
        """Wait at most `seconds` for both pipes to reach their end; whether they have."""
        return await self._until(self.drained_now, seconds)

    def drained_now(self) -> bool:
        return not self.open and self.failure is None

    async def _until(self, done: Callable[[], bool], seconds: float) -> bool:
        if self.failure is None and not done() and seconds > 0:
            self._waiter, self._done = self.loop.create_future(), done
            timer = self.loop.call_later(seconds, self._wake)
            try:
                await self._waiter
            finally:
                timer.cancel()
                self._waiter = None
        if self.failure is not None:
            raise self.failure
        return done()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _check(self) -> None:
        if self._waiter is not None and (self.failure is not None or self._done()):
            self._wake()

    def _readable(self, fd: int) -> None:
        try:
            chunk = _read(fd)
            if chunk:
                self._take(fd, chunk)
                # Short: the pipe is empty, and a shell that printed and exited has its end there too: read it now,
                # not on the loop's next turn.
                if len(chunk) < READ_CHUNK and fd in self.open and (more := _read(fd)) is not None:
                    self._take(fd, more)
            elif chunk is not None:
                self._take(fd, chunk)
        except Exception as exc:  # noqa: BLE001 -- the step's own failure: raised where it waits, not in the loop
            self._fail(exc)
        self._check()

    def _take(self, fd: int, chunk: bytes) -> None:
        if not chunk:  # its end
            self.loop.remove_reader(fd)
            del self.open[fd]
            if not self.open:  # the shell closes its pipes as it exits: it is often reapable already
                self.process.poll()
            return
        self.open[fd].feed(chunk)
        self.write(chunk)

    def _exit_seen(self) -> None:
        assert self.pidfd is not None
        self.loop.remove_reader(self.pidfd)
        self._exit_watched = False
        if self.process.poll() is None:  # woken yet not reapable (never expected): poll from here on
            self._poll_later()
        self._check()

    def _poll_later(self) -> None:
        self._poller = self.loop.call_later(self._pause, self._poll)
        self._pause = min(self._pause * 2, POLL_MAX_SECONDS)

    def _poll(self) -> None:
        self._poller = None
        if self.process.poll() is None:
            self._poll_later()
        self._check()

    def _fail(self, exc: BaseException) -> None:
        self.failure = exc
        for fd in list(self.open):
            self.loop.remove_reader(fd)
        self.open.clear()

    def close(self) -> None:
        """Stop watching and close the pipes and the pidfd: once, whatever ended the step."""
        for fd in self.open:
            self.loop.remove_reader(fd)
        self.open.clear()
        if self.pidfd is not None:
            if self._exit_watched:
                self.loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
        _close_pipes(self.process)


def _read(fd: int) -> bytes | None:
    """What the pipe holds (b"" at its end, or when it failed), None when nothing yet."""
    try:
        return os.read(fd, READ_CHUNK)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


class _Shown:
    """Whether a step is shown yet, and the output it printed before, held back from the spool until it is."""

    def __init__(self, pgid: int, on_show: Callable[[int], None], spool: Callable[[bytes], None]):
        self.pgid, self.on_show, self.spool = pgid, on_show, spool
        self.shown = False
        self.held: list[bytes] = []
        self.size = 0

    def show(self) -> None:
        if self.shown:
            return
        self.shown = True
        self.on_show(self.pgid)
        for chunk in self.held:
            self.spool(chunk)
        self.held.clear()

    def write(self, chunk: bytes) -> None:
        if self.shown:
            self.spool(chunk)
            return
        self.held.append(chunk)
        self.size += len(chunk)
        if self.size >= SHOW_AFTER_BYTES:  # a flood is worth watching live, however young
            self.show()


class SpawnError(Exception):
    """The command could not be started at all (the step fails with this message)."""


def _spawn(command: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen | Spawned:
    _become_subreaper()
    argv = ["sh", "-c", command]
    if sys.platform == "linux" and str(cwd) == os.getcwd():
        process: subprocess.Popen | Spawned = _posix_spawn(argv, env)
    else:  # posix_spawn cannot change directory (Python 3.11): Popen, whose setup costs twice as much
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    spawned(process.pid)
    return process


class Spawned:
    """A step shell started by posix_spawn: what run_script uses of a Popen (pid, pipes, poll, returncode)."""

    def __init__(self, pid: int, stdout: int, stderr: int):
        self.pid = pid
        self.stdout, self.stderr = _Pipe(stdout), _Pipe(stderr)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its code is lost, as Popen says too
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class _Pipe:
    """A pipe's reading end as a bare descriptor (read with os.read): what a file object would add, unused."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


def _posix_spawn(argv: list[str], env: dict[str, str]) -> Spawned:
    """`sh -c` in its own session and group, stdin from /dev/null, stdout and stderr to pipes, as Popen would start
    it; posix_spawn shares the server's memory until the exec (no page tables copied), and does in C what Popen's
    setup does in Python. Only stdin, stdout and stderr are inherited, as with Popen's close_fds."""
    program = _program(argv[0], env.get("PATH", os.defpath))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),  # as Popen's DEVNULL
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds()),
    ]
    try:
        pid = os.posix_spawn(program, argv, env, file_actions=actions, setsid=True, setsigdef=_RESTORED_SIGNALS)
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return Spawned(pid, out_r, err_r)


# What Python ignores and Popen sets back to default for a child (restore_signals): `yes | head -1` must end `yes`.
_RESTORED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))


@functools.lru_cache(maxsize=8)
def _program(name: str, path: str) -> str:
    """Where PATH (the step's) finds the program, as Popen looks it up; the name itself when nowhere."""
    return shutil.which(name, path=path) or name


def _inheritable_fds() -> list[int]:
    """This process's descriptors past stderr that a child would inherit (Python makes its own non-inheritable; one
    a library or the parent left open would reach the step)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:  # the listing's own descriptor, closed by now
                pass
    return found


def reap_adopted() -> int:
    """Reap every exited child this process did not start (orphans the subreaper adopted); returns how many."""
    reaped = 0
    while (exited := _exited_child()) is not None and not started_here(exited):
        with contextlib.suppress(ChildProcessError):  # an orphan's exit, the usual case: no /proc walk
            reaped += bool(os.waitpid(exited, os.WNOHANG)[0])
    if exited is None:  # no child has exited that nobody reaped (a step's shell is, by its Popen, as it ends)
        return reaped
    children = _children()  # one of ours waits for its Popen: look at each of the others
    for pid in children:
        if started_here(pid) or not _zombie(pid):
            continue
        with contextlib.suppress(ChildProcessError):
            reaped += bool(os.waitpid(pid, os.WNOHANG)[0])
    keep_only(children)  # forget our own once their Popen has reaped them
    return reaped


def _exited_child() -> int | None:
    """The pid of a child that has exited and is not reaped yet (left unreaped), or None when there is none."""
    try:
        found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    return found.si_pid if found is not None and found.si_pid else None


async def reap_adopted_forever() -> None:
    """For a process that runs steps and owns all its children (`serve`, `run`): reap adopted orphans as they exit
    (SIGCHLD), so a step's `setsid sh -c 'exit 0' &` leaves no zombie behind. Not in a process whose other code
    starts children of its own (a test runner), whose exits this would take from their Popen.

    A SIGCHLD schedules one reap REAP_AFTER_SECONDS later, not one each: every step's shell sends one as it ends
    (and is reaped by its step), so a run of short steps costs a reap per burst, not a task woken per step."""
    if sys.platform != "linux":
        return
    loop = asyncio.get_running_loop()
    pending: asyncio.TimerHandle | None = None

    def reap() -> None:
        nonlocal pending
        pending = None
        reap_adopted()

    def child_exited() -> None:
        nonlocal pending
        if pending is None:
            pending = loop.call_later(REAP_AFTER_SECONDS, reap)

    loop.add_signal_handler(signal.SIGCHLD, child_exited)
    try:
        reap_adopted()  # anything adopted before the handler was in place
        await anyio.sleep_forever()
    finally:
        loop.remove_signal_handler(signal.SIGCHLD)
        if pending is not None:
            pending.cancel()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _spawn_problem(exc: Exception, env: dict[str, str]) -> str:
    if getattr(exc, "errno", None) == errno.E2BIG:
        name, value = max(env.items(), key=lambda kv: len(kv[1]))
        return (
            f"could not start: the command and its values are too large for the OS (the largest, {name}, is "
            f"{len(value)} bytes); pass a file path instead of the content"
        )
    return f"could not start the command: {exc}"


async def wait_exit(process: subprocess.Popen | Spawned) -> None:
    """Wait for the process to exit (and reap it) without a thread: a pidfd where the kernel has one."""
    if process.poll() is not None:
        return
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        if pidfd is not None:
            await anyio.wait_readable(pidfd)
        pause = 0.005
        while process.poll() is None:  # without a pidfd (or on a spurious wake-up), poll with a growing pause
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.1)
    finally:
        if pidfd is not None:
            anyio.notify_closing(pidfd)
            os.close(pidfd)


async def kill_group(pgid: int, process: subprocess.Popen | Spawned | None = None) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after the grace; reap our own child."""
    if _signal_group(pgid, signal.SIGTERM):
        with anyio.move_on_after(KILL_GRACE_SECONDS) as grace:
            while group_alive(pgid):
                await anyio.sleep(0.01)
        if grace.cancelled_caught:
            _signal_group(pgid, signal.SIGKILL)
    if process is not None:
        await wait_exit(process)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still exists (zombies of other parents count as gone)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return any(_in_group(pid, pgid) for pid in _pids()) if os.path.isdir("/proc") else True


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _in_group(pid: int, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != b"Z" and int(fields[2]) == pgid


@functools.cache
def _become_subreaper() -> None:
    """Once per process: adopt orphaned descendants, so a step's escaped processes can be found and killed."""
    if sys.platform != "linux":
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: escaped processes go to init, as before
        pass


async def kill_escaped(marker: str) -> None:
    """Kill (and reap) the step's processes that left its group and, orphaned, were adopted by this process."""
    for _ in range(ESCAPE_ROUNDS):
        found = escaped(marker)
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in found:
            await _reap(pid)


def escaped(marker: str) -> list[int]:
    """The step's processes that left its group and, orphaned, were adopted by this process."""
    # Our own children (step shells, the watchdog) never escaped: their environments need no reading.
    return [pid for pid in _adopted() if not started_here(pid) and _has_marker(pid, marker)]


def _adopted() -> list[int]:
    """The children orphans are adopted as: the kernel hands an orphan to the subreaper's first live thread, the
    main one while this process runs (one file to read, not every thread's); every thread's if that one is gone."""
    try:
        fd = os.open(f"/proc/self/task/{os.getpid()}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return _children()
    try:
        return [int(p) for p in os.read(fd, 1 << 16).split()]
    except OSError:
        return _children()
    finally:
        os.close(fd)


def _children() -> list[int]:
    """This process's children, from every thread's /proc children list (a thread's children are listed there)."""
    pids: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as fh:
                pids += [int(p) for p in fh.read().split()]
    except OSError:
        return []
    return pids


async def _reap(pid: int) -> None:
    with anyio.move_on_after(REAP_SECONDS):
        while True:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            await anyio.sleep(0.01)


def kill_leftovers(pgid: int, marker: str) -> bool:
    """Kill a dead server's step processes, in the step's group or escaped from it, only if they carry the step's
    marker; True if any were killed."""
    return _kill_marked(lambda value: value == marker)


def kill_run_leftovers(run_id: str) -> bool:
    """kill_leftovers for every step of a run, recorded as started or not (a step is recorded once shown)."""
    prefix = f"{run_id}:"
    return _kill_marked(lambda value: value.startswith(prefix))


def _kill_marked(wanted: Callable[[str], bool]) -> bool:
    killed = False
    for pid in _pids():
        value = _marker(pid)
        if value is not None and wanted(value):
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except ProcessLookupError:
                pass
    return killed


def _has_marker(pid: int, marker: str) -> bool:
    return _marker(pid) == marker


def _marker(pid: int) -> str | None:
    """The step marker in a process's environment, None when it has none (or is gone, or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read()
    except OSError:
        return None
    key = f"{MARKER_VAR}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key) :].decode("utf-8", "replace")
    return None
