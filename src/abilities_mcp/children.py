"""The child processes this process started and reaps itself, through their Popen: the reaping of adopted orphans
(engine/process.py `reap_adopted`, in a process that is a subreaper) leaves their exits to them.

Every layer that starts a long-lived child registers it here (a step's shell and the watchdog in engine/, an
upstream MCP server in gateway/): an exit reaped by anyone but its Popen reads as code 0 there, and the pid may then
be reused by a process the Popen's owner would go on to signal.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from collections.abc import Collection

_STARTED: set[int] = set()


def spawned(pid: int) -> None:
    """A child this process started and reaps itself (through its Popen): `reap_adopted` leaves it alone."""
    _STARTED.add(pid)


def forget(pid: int) -> None:
    """A child this process started is reaped: its pid may be reused, by an escaped process too."""
    _STARTED.discard(pid)


def started_here(pid: int) -> bool:
    """Whether `pid` is a child registered by `spawned` and not yet forgotten."""
    return pid in _STARTED


def keep_only(children: Collection[int]) -> None:
    """Forget every registered pid that is no longer among this process's `children` (its Popen reaped it)."""
    _STARTED.intersection_update(children)
