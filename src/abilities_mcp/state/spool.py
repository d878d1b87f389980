"""A running script step's output as it arrives, in a bounded file beside the state file that another process
(`abilities-mcp logs --follow`) can read while the step runs.

The store keeps a step's head and tail once it ends; until then its output lives in the memory of the process that
runs it. The spool is the live view: stdout and stderr as they come, interleaved. It never grows past
`LIVE_BYTES`: at that size a fresh file replaces it, starting with a line that says output was skipped, so a flood
costs the disk at most that much; a reader finishes the file it has open, then moves to the new one. It is made on
the first byte (a silent step costs nothing), and removed with the rest of its run's spools when the run ends; a
reader that has it open reads on to its end.
"""

from __future__ import annotations

import os
from pathlib import Path

# The most a spool holds: past it, it starts again from empty.
LIVE_BYTES = 1024 * 1024
FOLDER = "live"
# The first line of a spool that started again: what was dropped, and where the whole head and tail will be.
RESTARTED = b"[... earlier output skipped: the live view keeps the last %d MiB; the step's head and tail are kept]\n"


def spool_path(state_dir: Path, run_id: str, step_id: str) -> Path:
    return state_dir / FOLDER / f"{run_id}.{step_id}.log"


class Spool:
    """The writing end: `write` each chunk as it arrives, `close` when the step ends."""

    def __init__(self, path: Path, limit: int = LIVE_BYTES):
        self.path, self.limit = path, limit
        self._fd: int | None = None
        self._size = 0
        self._failed = False

    def write(self, chunk: bytes) -> None:
        """Append a chunk; a spool that cannot be written (a full disk) is given up on, never the step."""
        if self._failed or not chunk:
            return
        try:
            if self._fd is None:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._fd = self._open(self.path)
            elif self._size + len(chunk) > self.limit:
                self._replace()
                chunk = chunk[-(self.limit - self._size) :]
            self._size += os.write(self._fd, chunk)
        except OSError:
            self._failed = True
            self.close()

    def _replace(self) -> None:
        """A fresh file in the spool's place, opening with the skipped marker (a rename: readers see a new file)."""
        fresh = self.path.with_suffix(".next")
        fd = self._open(fresh)
        self._size = os.write(fd, RESTARTED % (self.limit // (1024 * 1024) or 1))
        os.rename(fresh, self.path)
        self.close()
        self._fd = fd

    @staticmethod
    def _open(path: Path) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def remove_spools(state_dir: Path, run_id: str) -> None:
    """The spools of a run that has ended (its steps' head and tail are in the store)."""
    folder = state_dir / FOLDER
    if not folder.is_dir():
        return
    for path in folder.glob(f"{run_id}.*.log"):
        path.unlink(missing_ok=True)


class Follower:
    """The reading end: what was added to a spool since the last `read`, across its restarts."""

    def __init__(self, path: Path):
        self.path = path
        self._file = None
        self._offset = 0

    def read(self) -> bytes:
        """New bytes (b"" when none yet, or no spool yet). The file open is read to its end even once removed or
        replaced; then the one now in its place, from its start."""
        data = b""
        while True:
            if self._file is None:
                try:
                    self._file = self.path.open("rb")
                except OSError:
                    return data
                self._offset = 0
            self._file.seek(self._offset)
            more = self._file.read()
            self._offset += len(more)
            data += more
            if not self._replaced():
                return data
            self._file.close()
            self._file = None

    def _replaced(self) -> bool:
        assert self._file is not None
        try:
            return os.stat(self.path).st_ino != os.fstat(self._file.fileno()).st_ino
        except OSError:  # removed: the run ended, nothing replaces it
            return False

    @property
    def opened(self) -> bool:
        return self._file is not None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
