"""Lines read by the event loop's own callback (pipes.Inbox): what is taken on arrival never overtakes a line read
before it, the last line needs no newline, and a file is read by the consumer itself."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from abilities_mcp.pipes import Inbox


def taking(prefix: bytes, taken: list[bytes]):
    def quick(line: bytes) -> bool:
        if line.startswith(prefix):
            taken.append(line)
            return True
        return False

    return quick


async def settle() -> None:
    """Let the loop read what is in the pipe and run its callbacks (no wall-clock wait)."""
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


async def test_a_line_taken_on_arrival_never_overtakes_one_read_before_it() -> None:
    r, w = os.pipe()
    os.set_blocking(r, False)
    taken: list[bytes] = []
    inbox = Inbox(r, lambda line, whole: line, taking(b"quick", taken))
    consumed: list[tuple[bytes, bool]] = []
    handling = anyio.Event()
    go_on = anyio.Event()

    async def consume() -> None:
        async for item in inbox.items():
            consumed.append(item)
            if item[0] == b"slow2":
                handling.set()
                await go_on.wait()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(consume)
        os.write(w, b"slow1\nquick1\n")  # one read: quick1 must wait behind slow1
        await settle()
        os.write(w, b"quick2\n")  # nothing waits: taken on arrival
        await settle()
        os.write(w, b"slow2\n")
        await handling.wait()
        os.write(w, b"quick3\n")  # the consumer is still handling slow2: quick3 waits for it
        await settle()
        assert taken == [b"quick2"]
        go_on.set()
        await settle()
        os.write(w, b"tail")
        os.close(w)

    assert consumed == [(b"slow1", True), (b"quick1", False), (b"slow2", True), (b"tail", True)]
    assert taken == [b"quick2", b"quick3"]


async def test_a_taker_that_fails_leaves_the_line_to_the_consumer(caplog: pytest.LogCaptureFixture) -> None:
    r, w = os.pipe()
    os.set_blocking(r, False)

    def broken(line: bytes) -> bool:
        raise RuntimeError("a bug")

    os.write(w, b"one\ntwo\n")
    os.close(w)
    items = [item async for item in Inbox(r, lambda line, whole: line, broken).items()]

    assert items == [(b"one", True), (b"two", False)]
    assert "handling a line on arrival failed" in caplog.text


async def test_a_file_is_read_by_the_consumer_with_nothing_taken_on_arrival(tmp_path: Path) -> None:
    path = tmp_path / "lines"
    path.write_bytes(b"quick1\nslow\nlast")
    taken: list[bytes] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        items = [item async for item in Inbox(fd, lambda line, whole: (line, whole), taking(b"q", taken)).items()]
    finally:
        os.close(fd)

    assert items == [((b"quick1", True), False), ((b"slow", True), False), ((b"last", True), False)]
    assert taken == []
