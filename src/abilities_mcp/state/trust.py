"""Trust records: the version of each gate-defining file a person trusted, kept in the state folder (DESIGN §10).

An edit that would lower a gate (each format says which do: abilities/lowering.py, prerequisites/lowering.py, …)
takes effect only after a person's `abilities-mcp trust`; until then the readers enforce the version recorded
here. The state folder lives outside the project, where an agent whose client sandboxes it to the project cannot
write, and the hook refuses shell commands and writes that name it (clients/guards.py).

    trust/index.json        {"files": {KEY: {"sha256", "at", "how", "origin"}}}: KEY is the file's path relative
                            to the project (absolute when outside it)
    trust/blobs/SHA256      the content trusted, by its hash
    trust/log.jsonl         every trust given, appended: what, when, by which command, from which terminal

On a team server's PostgreSQL (DatabaseTrust, made by database.py's `trust_store(project)`) the same records live
in the database, in `trust_files`, `trust_blobs` and `trust_log`: every replica enforces what a person trusted once,
on any of them.

Stdlib only and no hashlib on the reading side: the hook reads workflows.json's trusted version on every tool call,
and a byte comparison with the blob says what a hash would.
"""

from __future__ import annotations

import json
import os
import time

from ..files import inside
from ..records import Record as _Record

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call (pathlib too:
# paths here are text, joined with os.path).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

FOLDER = "trust"
# Blobs are what a person read and trusted; a file the loaders would refuse for its size is not kept either.
MAX_BLOB_BYTES = 4 * 1024 * 1024
TRUST_COMMAND = "abilities-mcp trust"


def waiting_note(what: str, reasons: list[str]) -> str:
    """What every answer enforcing a trusted version says: the file waiting, why, and the person's command."""
    return (
        f"{what} has edits that would lower a gate ({'; '.join(reasons)}): the version a person trusted is enforced "
        f"until they review the change and run `{TRUST_COMMAND}` in their own terminal"
    )


def new_note(what: str) -> str:
    """What a run of a file nobody trusted yet says."""
    return (
        f"{what} is new and nobody has trusted it yet: it runs at the strictest reading (enforcement: strict, "
        f"approvals by a person only) until a person reviews it and runs `{TRUST_COMMAND}` in their own terminal"
    )


class Record(_Record, fields="sha256 at how origin"):
    """One trusted file: the hash of the content trusted, when, by which command (trust, init), from where."""

    __slots__ = ()

    sha256: str
    at: float
    how: str
    origin: str


class TrustStore:
    """The trust records of one project, re-read when the index changes on disk."""

    __slots__ = ("root", "folder", "_stamp", "_records")

    def __init__(self, state_dir: str | Path, root: str | Path):
        self.root = os.fspath(root)
        self.folder = os.path.join(state_dir, FOLDER)
        self._stamp: tuple[int, ...] | None = None
        self._records: dict[str, Record] = {}

    def key(self, path: str | Path) -> str:
        """How the index names a file: relative to the project when inside it, else absolute (Path.relative_to's
        answer: by the names as written, no link followed)."""
        path = os.fspath(path)
        found = inside(path, self.root)
        return path if found is None else found

    def stamp(self) -> tuple[int, ...]:
        """Changes whenever trust is given (readers fold it into their caches' keys)."""
        try:
            st = os.stat(os.path.join(self.folder, "index.json"))
        except OSError:
            return (0,)
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def records(self) -> dict[str, Record]:
        """Every trusted file by its key; empty when nothing was ever trusted (or the index is unreadable)."""
        now = self.stamp()
        if now != self._stamp:
            self._records, self._stamp = _read_index(os.path.join(self.folder, "index.json")), now
        return self._records

    def record(self, path: str | Path) -> Record | None:
        """The trust given to this file, or None when no person ever trusted it."""
        return self.records().get(self.key(path))

    def trusted(self, path: str | Path) -> bytes | None:
        """The content a person trusted for this file; None when nobody did (or its blob is gone)."""
        found = self.record(path)
        return None if found is None else self.blob(found.sha256)

    def blob(self, sha256: str) -> bytes | None:
        if not sha256.isalnum():  # the index is ours, but a name is never a path
            return None
        try:
            with open(os.path.join(self.folder, "blobs", sha256), "rb") as f:
                return f.read(MAX_BLOB_BYTES + 1)
        except OSError:
            return None

    def trust(self, contents: dict[Path, bytes | None], how: str, origin: str) -> None:
        """Record these files as trusted as they are now (None: trusted as deleted, the record dropped)."""
        import hashlib  # only here: the hook never writes

        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        blobs = os.path.join(self.folder, "blobs")
        os.makedirs(blobs, mode=0o700, exist_ok=True)
        index = dict(_read_index(os.path.join(self.folder, "index.json")))
        now, log = time.time(), []
        for path, content in contents.items():
            key = self.key(path)
            if content is None:
                index.pop(key, None)
                log.append({"file": key, "sha256": None, "at": now, "how": how, "origin": origin})
                continue
            sha = hashlib.sha256(content).hexdigest()
            _write_atomic(os.path.join(blobs, sha), content)
            index[key] = Record(sha, now, how, origin)
            log.append({"file": key, "sha256": sha, "at": now, "how": how, "origin": origin})
        document = {"files": {k: r._asdict() for k, r in sorted(index.items())}}
        _write_atomic(os.path.join(self.folder, "index.json"), json.dumps(document, indent=1).encode())
        with open(os.path.join(self.folder, "log.jsonl"), "a", encoding="utf-8", opener=_private) as f:
            f.writelines(json.dumps(entry) + "\n" for entry in log)
        self._stamp = None


class DatabaseTrust(TrustStore):
    """The trust records in the state database, shared by every replica of a team server."""

    __slots__ = ("_open", "_db")

    def __init__(self, project: Any, open_database: Callable[[], Any]):
        """`open_database`: the state database, opened when first read (database.trust_store makes it; this module
        imports no database: the database's folder is tightened through privacy, which names the trust folder)."""
        super().__init__(project.state_folder, project.root_dir)
        self._open, self._db = open_database, None

    def _database(self) -> Any:  # a Database (not imported here: see __init__)
        if self._db is None:
            self._db = self._open()
        return self._db

    @property
    def db(self) -> Any:
        return self._database().db

    def stamp(self) -> tuple[int, ...]:
        """The newest log entry's id: every trust given appends one."""
        return (int(self.db.execute("SELECT coalesce(max(id), 0) FROM trust_log").fetchone()[0]),)

    def records(self) -> dict[str, Record]:
        now = self.stamp()
        if now != self._stamp:
            rows = self.db.execute("SELECT file, sha256, at, how, origin FROM trust_files").fetchall()
            self._records = {r[0]: Record(r[1], float(r[2]), r[3], r[4]) for r in rows}
            self._stamp = now
        return self._records

    def blob(self, sha256: str) -> bytes | None:
        import base64

        row = self.db.execute("SELECT content FROM trust_blobs WHERE sha256=?", (sha256,)).fetchone()
        return None if row is None else base64.b64decode(row[0])

    def trust(self, contents: dict[Path, bytes | None], how: str, origin: str) -> None:
        import base64
        import hashlib

        now = time.time()
        with self._database().transaction() as db:
            for path, content in contents.items():
                key = self.key(path)
                if content is None:
                    db.execute("DELETE FROM trust_files WHERE file=?", (key,))
                    db.execute(
                        "INSERT INTO trust_log (file, sha256, at, how, origin) VALUES (?,?,?,?,?)",
                        (key, None, now, how, origin),
                    )
                    continue
                sha = hashlib.sha256(content).hexdigest()
                db.execute(
                    "INSERT OR IGNORE INTO trust_blobs (sha256, content) VALUES (?,?)",
                    (sha, base64.b64encode(content).decode()),
                )
                db.execute(
                    "INSERT OR REPLACE INTO trust_files (file, sha256, at, how, origin) VALUES (?,?,?,?,?)",
                    (key, sha, now, how, origin),
                )
                db.execute(
                    "INSERT INTO trust_log (file, sha256, at, how, origin) VALUES (?,?,?,?,?)",
                    (key, sha, now, how, origin),
                )
        self._stamp = None


def _read_index(path: str) -> dict[str, Record]:
    try:
        with open(path, "rb") as f:
            document = json.loads(f.read())
        files = document["files"]
        return {
            str(k): Record(str(v["sha256"]), float(v["at"]), str(v["how"]), str(v["origin"])) for k, v in files.items()
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        # A damaged index is read as nothing trusted (new abilities run at the strictest reading); a person's
        # `abilities-mcp trust` writes it anew. Only this user can write the state folder, so this is an accident.
        return {}


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def _write_atomic(path: str, content: bytes) -> None:
    """Write whole or not at all: a reader sees the old file or the new one, never half of one."""
    folder, name = os.path.split(path)
    scratch = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    with open(scratch, "wb", opener=_private) as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(scratch, path)
