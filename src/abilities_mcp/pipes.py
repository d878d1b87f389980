"""Newline-delimited messages over pipes, sockets and terminals: the event loop waits on the descriptor itself (no
worker thread), lines are bounded, and writes to a full pipe wait for room instead of blocking the loop."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator

import anyio

log = logging.getLogger(__name__)
# Bytes read at a time.
READ_CHUNK = 256 * 1024
# A line longer than this is not kept (its head is, to find its id): a peer that never sends a newline must not grow
# its reader without bound. Far above any real message (images travel base64 inside them).
MAX_LINE_BYTES = 64 * 1024 * 1024
# Of a line too long, this much is kept: enough to read an id that comes first.
HEAD_OF_LONG_LINE = 64 * 1024


async def lines(fd: int) -> AsyncIterator[tuple[bytes, bool]]:
    """The lines of fd as they arrive, without their newline (the last one even without one), each with whether it
    is whole: a line past MAX_LINE_BYTES comes out once as its head (to find its id), the rest dropped unread."""
    waits = pollable(fd) or os.isatty(fd)
    pending = bytearray()
    scanned = 0  # pending[:scanned] holds no newline: a long line is searched once, not once per chunk
    skipping = False  # inside a line too long to keep: drop it up to its newline
    while chunk := await read_some(fd, waits):
        pending += chunk
        while (end := pending.find(b"\n", scanned)) >= 0:
            line = bytes(pending[:end])
            del pending[: end + 1]
            scanned = 0
            if skipping:
                skipping = False
                continue
            yield line, True
        scanned = len(pending)
        if len(pending) > MAX_LINE_BYTES:
            if not skipping:
                yield bytes(pending[:HEAD_OF_LONG_LINE]), False
            skipping = True
            pending.clear()
            scanned = 0
    if pending and not skipping:
        yield bytes(pending), True


async def read_some(fd: int, waits: bool) -> bytes:
    """What fd has to read (b"" at end of file, or when the descriptor fails). When fd `waits` (a pipe, socket or
    terminal), the loop waits for it to be readable; anything else (a file, /dev/null) is read at once: epoll cannot
    wait on it, and reading it does not block."""
    while True:
        if waits:
            await anyio.wait_readable(fd)
        try:
            return os.read(fd, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError as exc:  # the descriptor went bad under us: the same as the peer hanging up
            log.warning("reading descriptor %d failed (%s): treated as its end", fd, exc)
            return b""


async def write_all(fd: int, data: bytes) -> None:
    """All of data to fd; on a full pipe or socket the loop waits for room. Raises OSError (EPIPE: the reader is
    gone)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except (BlockingIOError, InterruptedError):
            await anyio.wait_writable(fd)


def pollable(fd: int) -> bool:
    """Whether the loop can wait on fd (a pipe or a socket)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
