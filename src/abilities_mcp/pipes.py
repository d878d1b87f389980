"""Newline-delimited messages over pipes, sockets and terminals: the event loop waits on the descriptor itself (no
worker thread), lines are bounded, and writes to a full pipe wait for room instead of blocking the loop."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

import anyio

log = logging.getLogger(__name__)
# Bytes read at a time.
READ_CHUNK = 256 * 1024
# A line longer than this is not kept (its head is, to find its id): a peer that never sends a newline must not grow
# its reader without bound. Far above any real message (images travel base64 inside them).
MAX_LINE_BYTES = 64 * 1024 * 1024
# Of a line too long, this much is kept: enough to read an id that comes first.
HEAD_OF_LONG_LINE = 64 * 1024

T = TypeVar("T")


class Splitter:
    """Bytes as they arrive, cut into lines without their newline, each with whether it is whole: a line past
    MAX_LINE_BYTES comes out once as its head (to find its id), the rest dropped unread."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._scanned = 0  # pending[:scanned] holds no newline: a long line is searched once, not once per chunk
        self._skipping = False  # inside a line too long to keep: drop it up to its newline

    def feed(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        pending, out = self._pending, []
        pending += chunk
        while (end := pending.find(b"\n", self._scanned)) >= 0:
            line = bytes(pending[:end])
            del pending[: end + 1]
            self._scanned = 0
            if self._skipping:
                self._skipping = False
                continue
            out.append((line, True))
        self._scanned = len(pending)
        if len(pending) > MAX_LINE_BYTES:
            if not self._skipping:
                out.append((bytes(pending[:HEAD_OF_LONG_LINE]), False))
            self._skipping = True
            pending.clear()
            self._scanned = 0
        return out

    def end(self) -> list[tuple[bytes, bool]]:
        """The last line, even without its newline."""
        last = [(bytes(self._pending), True)] if self._pending and not self._skipping else []
        self._pending.clear()
        return last


async def lines(fd: int) -> AsyncIterator[tuple[bytes, bool]]:
    """The lines of fd as they arrive (Splitter's), read by the task that iterates them."""
    waits = pollable(fd) or os.isatty(fd)
    splitter = Splitter()
    while chunk := await read_some(fd, waits):
        for item in splitter.feed(chunk):
            yield item
    for item in splitter.end():
        yield item


_END = object()


class Inbox(Generic[T]):
    """The lines of a descriptor, read by the event loop's own callback as they arrive: one reader registered while
    reading, no task woken per line. Each line is `parse`d there; while nothing read before it waits or is being
    handled, `quick` may take the item on the spot (it returns whether it did: the hot path of a proxy, which must
    not wait for a task). Every other item waits, in order, for `items()`. Reading pauses while items wait, so a
    slow consumer holds at most one read's worth. A descriptor the loop cannot wait on (a file) is read by the
    consumer itself, everything through `items()`."""

    def __init__(self, fd: int, parse: Callable[[bytes, bool], T], quick: Callable[[T], bool] | None = None):
        self._fd, self._parse, self._quick = fd, parse, quick
        self._splitter = Splitter()
        self._queue: deque[tuple[T, bool] | object] = deque()
        self._busy = True  # the consumer is handling an item (or not yet iterating): quick must not overtake it
        self._reading = self._ended = False
        self._wakeup: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def items(self) -> AsyncIterator[tuple[T, bool]]:
        """Each item `quick` did not take, in order, with whether `quick` was offered it; ends at end of file."""
        if not (pollable(self._fd) or os.isatty(self._fd)):
            async for line, whole in lines(self._fd):
                yield self._parse(line, whole), False
            return
        self._loop = asyncio.get_running_loop()
        try:
            while True:
                if not self._queue:
                    self._busy = False
                    self._resume()
                    self._wakeup = self._loop.create_future()
                    try:
                        await self._wakeup
                    finally:
                        self._wakeup = None
                    continue
                entry = self._queue.popleft()
                if entry is _END:
                    return
                self._busy = True
                yield entry  # type: ignore[misc]
        finally:
            self._ended = True
            self._pause()

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # the descriptor went bad under us: the same as the peer hanging up
            log.warning("reading descriptor %d failed (%s): treated as its end", self._fd, exc)
            chunk = b""
        for line, whole in self._splitter.feed(chunk) if chunk else self._splitter.end():
            self._arrived(self._parse(line, whole))
        if not chunk:
            self._queue.append(_END)
            self._ended = True
        if self._queue:
            self._pause()
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)

    def _arrived(self, item: T) -> None:
        offered = self._quick is not None and not self._queue and not self._busy
        if offered:
            try:
                if self._quick(item):  # type: ignore[misc]
                    return
            except Exception:  # a bug of ours: the line still reaches the consumer, the cause the log
                log.exception("handling a line on arrival failed")
        self._queue.append((item, offered))

    def _resume(self) -> None:
        if not self._reading and not self._ended and self._loop is not None:
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def _pause(self) -> None:
        if self._reading and self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._reading = False


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
