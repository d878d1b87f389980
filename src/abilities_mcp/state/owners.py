"""Which process owns a live run, and whether it still lives (a dead owner's runs are interrupted, or on PostgreSQL
taken over by another replica: replicas.py).

An owner is the process (pid and start time, on the host it runs on) and, on PostgreSQL, the replica: the key of
the advisory lock the process holds for its life (replicas.py), what says whether it lives wherever it runs."""

from __future__ import annotations

import os

from ..records import Record


class Owner(Record, fields="pid start replica host", defaults=(None, None)):
    """Who drives a run, as its row records it (runs.owner_pid, owner_start, owner_replica, owner_host)."""

    __slots__ = ()

    pid: int | None
    start: int | None
    replica: int | None  # = None; the replica's lock key on PostgreSQL; None on SQLite
    host: str | None  # = None; where `pid` means something (this_host); None on SQLite, one machine


def this_owner() -> Owner:
    """This process as a run's owner on the SQLite file (one machine: the pid says it all)."""
    pid = os.getpid()
    return Owner(pid, process_start(pid))


def this_host() -> str:
    """This machine and pid namespace, as boot id and namespace inode: two processes with the same one see each
    other's pids (and can kill each other's leftover steps); containers on one machine have different ones."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return f"{os.uname().nodename}:?"
    return f"{boot}:{namespace}"


def process_start(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux), to tell a live owner from a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return None if fields[0] == b"Z" else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def owner_alive(pid: int | None, start: int | None) -> bool:
    """Whether the process that owns a run still runs."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if start is None:
        return True
    now = process_start(pid)
    return now == start or (now is None and not os.path.exists(f"/proc/{pid}/stat"))  # a zombie is dead


# Processes that only start another one: the client is the first ancestor that is none of these. Claude Code runs
# a hook's command through `sh -c` and a server through `uvx` or the like; the two meet at the client itself.
LAUNCHERS = {"sh", "bash", "dash", "zsh", "fish", "env", "uv", "uvx", "pipx", "npx", "timeout", "nice", "nohup"}
# Ancestors looked at before giving up (a deeper chain is not a client we started from).
MAX_DEPTH = 8


def client_of(pid: int) -> tuple[int, int] | None:
    """The client process a process was started by, as (pid, start), past shells and launchers; None when the
    process tree cannot be read (not Linux) or the chain ends at init."""
    for _ in range(MAX_DEPTH):
        pid = _parent(pid)
        if pid is None or pid <= 1:
            return None
        if _command_name(pid) not in LAUNCHERS:
            start = process_start(pid)
            return None if start is None else (pid, start)
    return None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _command_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""
