"""The SQLite state file (WAL), shared safely by the server, the CLI and the hook: opening it, bringing an older
file up to date, and transactions. What lives in it: runs (store.py), each session's prerequisites
(sessions.py), the call approvals a person gives (prerequisites/approvals.py), and the sessions of calls a
client's hook announced and of sessions it observed (claims.py).

Stdlib only and no dataclasses: the hook opens this file on every tool call.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

D = TypeVar("D", bound="Database")
# How long a writer waits for another process's lock before giving up.
BUSY_TIMEOUT_MS = 10_000
# Pause between tries to switch a new file to WAL while another process holds it (see Database._enable_wal).
WAL_RETRY_SECONDS = 0.005

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, ability TEXT NOT NULL, session_id TEXT NOT NULL, status TEXT NOT NULL,
    enforcement TEXT NOT NULL, definition TEXT NOT NULL, source_path TEXT, inputs TEXT NOT NULL,
    parent_run TEXT, error TEXT, owner_pid INTEGER, owner_start INTEGER,
    started_at REAL NOT NULL, finished_at REAL, updated_at REAL NOT NULL,
    question TEXT, question_id TEXT, answer TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs(session_id, started_at);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, step_id TEXT NOT NULL,
    position INTEGER NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER, duration_ms INTEGER, output TEXT, stderr TEXT, output_bytes INTEGER, stderr_bytes INTEGER,
    instructions TEXT, prompt TEXT, error TEXT, pgid INTEGER,
    started_at REAL, finished_at REAL, child_run TEXT,
    PRIMARY KEY (run_id, step_id)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    step_id TEXT, event TEXT NOT NULL, detail TEXT, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_run ON events(run_id, id);
CREATE TABLE IF NOT EXISTS prereq_sessions (session_id TEXT PRIMARY KEY, started_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS prereq_records (
    session_id TEXT NOT NULL REFERENCES prereq_sessions(session_id) ON DELETE CASCADE, workflow TEXT NOT NULL,
    step INTEGER NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL, how TEXT NOT NULL, result TEXT,
    at REAL NOT NULL,
    PRIMARY KEY (session_id, workflow, step, server)
);
CREATE TABLE IF NOT EXISTS observed_sessions (session_id TEXT PRIMARY KEY, client TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS call_claims (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, tool TEXT NOT NULL, args_hash TEXT NOT NULL,
    client_pid INTEGER, client_start INTEGER, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS call_claims_by_call ON call_claims(tool, args_hash, at);
CREATE TABLE IF NOT EXISTS skill_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, session_id TEXT, run_id TEXT,
    detail TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS skill_events_by_kind ON skill_events(kind, id);
CREATE TABLE IF NOT EXISTS call_approvals (
    call_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, client TEXT NOT NULL, tool TEXT NOT NULL,
    digest TEXT NOT NULL, shown TEXT NOT NULL, workflows TEXT NOT NULL, prompt TEXT NOT NULL, status TEXT NOT NULL,
    lifetime REAL NOT NULL, requested_at REAL NOT NULL, expires_at REAL NOT NULL,
    answered_at REAL, answered_by TEXT, channel TEXT, origin TEXT, note TEXT, used_at REAL
);
CREATE INDEX IF NOT EXISTS call_approvals_by_call ON call_approvals(session_id, tool, digest);
"""
# Bumped with every schema change; older files are migrated forward when opened (6: skill_events, a new table;
# 7: prereq_records, a prerequisite's record per server with how it is known, replacing prereq_done, and
# observed_sessions, the sessions whose client runs the hooks; 8: call_approvals, a person's yes to one tool call).
SCHEMA_VERSION = 8
# Tables an older schema had and this one dropped, with the version that dropped them: their rows are not carried
# over (prereq_done's records expire 24 hours after their session started anyway; a session starts them again).
DROPPED_TABLES = [(7, "prereq_done")]
# Columns added after a table was first created: (table, column, type). Migration adds the missing ones.
ADDED_COLUMNS = [
    ("steps", "output_bytes", "INTEGER"),
    ("steps", "stderr_bytes", "INTEGER"),
    ("steps", "instructions", "TEXT"),
    ("steps", "prompt", "TEXT"),
    ("steps", "child_run", "TEXT"),
    ("runs", "question", "TEXT"),
    ("runs", "question_id", "TEXT"),
    ("runs", "answer", "TEXT"),
]


# What SQLite says about a file that is not a sound database (garbage, cut short, damaged pages).
_CORRUPT_WORDS = ("not a database", "malformed", "corrupt", "no such column", "has no column")
# What it says when the file or its folder cannot be written by this user.
_UNWRITABLE_WORDS = ("unable to open", "readonly", "read-only")


class StateFileError(RuntimeError):
    """The state file cannot be used as it is; the message names the file and the fix."""


class StateCorrupt(StateFileError):
    """The state file is not a sound abilities-mcp database: garbage, cut short, damaged, or another schema."""

    def __init__(self, path: Path, reason: str):
        self.path, self.reason = path, reason
        super().__init__(
            f"the state file {str(path)!r} is damaged or not an abilities-mcp state file ({reason}); "
            "`abilities-mcp status` moves it aside (nothing is deleted) and starts a fresh one"
        )


class Database:
    """One connection to the state file, with the schema in place."""

    def __init__(self, path: Path, accept_newer: bool = False, busy_ms: int = BUSY_TIMEOUT_MS):
        """`accept_newer`: read a file a newer version wrote as far as this one understands it (the hook, which a
        client may run from an older install than its server; versions only ever add tables and columns).
        `busy_ms`: how long to wait for another process's write (the hook waits no longer than its budget).

        Raises StateCorrupt for a damaged file and StateFileError for one that cannot be opened (a folder, a folder
        this user cannot write); never moves anything (see `open_state`)."""
        self.accept_newer = accept_newer
        self.path = path
        self.busy_ms = busy_ms
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the runs and approvals: the user's alone
        except OSError as exc:
            raise _unwritable(path, exc) from exc
        if path.is_dir():
            raise StateFileError(
                f"the state file {str(path)!r} is a folder, not a file; move the folder away, or point --state-dir "
                "(or $ABILITIES_STATE_DIR) at another folder"
            )
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if (db := getattr(self, "db", None)) is not None:
                db.close()
            problem = _classified(path, exc)
            if problem is exc:
                raise
            raise problem from exc

    def _open(self) -> None:
        self.db = sqlite3.connect(self.path, timeout=self.busy_ms / 1000, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute(f"PRAGMA busy_timeout={int(self.busy_ms)}")
        self._enable_wal()
        # NORMAL in WAL mode survives a process crash; only a power loss can drop the last commits.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        if self._version() != SCHEMA_VERSION:  # a current file has every table: skip the script (the hook opens it
            self.db.executescript(_SCHEMA)  # on every tool call); idempotent; busy_timeout queues concurrent creators
            self._migrate()

    def _enable_wal(self) -> None:
        """WAL mode, waiting for another process that is creating the same file: SQLite answers this pragma with
        "database is locked" at once, without its busy handler, while two processes open a new file together."""
        deadline = time.monotonic() + self.busy_ms / 1000
        while True:
            try:
                self.db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(WAL_RETRY_SECONDS)

    def _migrate(self) -> None:
        """Bring a state file written by an older version up to this schema; newer files are refused."""
        version = self._version()
        if version > SCHEMA_VERSION and self.accept_newer:
            return
        if version > SCHEMA_VERSION:
            raise StateFileError(
                f"{self.path} was written by a newer abilities-mcp (schema {version} > {SCHEMA_VERSION}); "
                "upgrade abilities-mcp or point --state-dir elsewhere"
            )
        if version == SCHEMA_VERSION:
            return
        with self.transaction() as db:
            for dropped_in, table in DROPPED_TABLES:
                if version < dropped_in:
                    db.execute(f"DROP TABLE IF EXISTS {table}")
            for table, column, kind in ADDED_COLUMNS:
                present = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
                if column not in present:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write, taken with the write lock up front so concurrent writers queue instead of failing."""
        if self.db.in_transaction:
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            self.db.execute("COMMIT")


def _expected_columns() -> dict[str, set[str]]:
    """Each table of this version's schema and its columns, as SQLite reads _SCHEMA."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(_SCHEMA)
        tables = [row[0] for row in scratch.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: {row[1] for row in scratch.execute(f"PRAGMA table_info({t})")} for t in tables if t[:7] != "sqlite_"}
    finally:
        scratch.close()


def _classified(path: Path, exc: sqlite3.DatabaseError) -> Exception:
    text = str(exc).lower()
    if any(word in text for word in _UNWRITABLE_WORDS):
        return _unwritable(path, exc)
    if any(word in text for word in _CORRUPT_WORDS) or not isinstance(exc, sqlite3.OperationalError):
        return StateCorrupt(path, str(exc))
    return exc


def _unwritable(path: Path, exc: Exception) -> StateFileError:
    return StateFileError(
        f"the state file {str(path)!r} cannot be opened for writing ({exc}); the file and its folder "
        f"{str(path.parent)!r} must be writable by this user: fix their permissions (chmod u+rwx), or point "
        "--state-dir (or $ABILITIES_STATE_DIR) at a folder that is"
    )


def open_state(path: Path, factory: Callable[[Path], D]) -> tuple[D, str | None]:
    """Open the state file for the server or the CLI: a damaged one is moved aside, with its -wal and -shm, and a
    fresh one started; returns the database and, when that happened, the notice to show. Nothing is deleted, and
    a damaged file is judged before a byte of it changes. StateFileError (a folder, no write permission) is left
    to the caller: those a person fixes."""
    reason = _damage(path)
    if reason is None:
        try:
            return _private(factory(path), path), None
        except StateCorrupt as exc:  # damage the read-only look could not see
            reason = exc.reason
    import shlex  # here, not at the top: the hook imports this module on every tool call

    try:
        aside = _move_aside(path)
    except OSError as exc:
        raise StateFileError(
            f"the state file {str(path)!r} is damaged or not an abilities-mcp state file ({reason}) and could not be "
            f"moved aside ({exc}); move it (and its -wal and -shm files) out of the way yourself, then start again"
        ) from exc
    return _private(factory(path), path), (
        f"abilities-mcp: the state file {str(path)!r} was damaged or not an abilities-mcp state file ({reason}). It "
        f"was moved aside to {str(aside)!r} (with its -wal and -shm files; nothing was deleted) and a fresh state "
        "file was started. Lost from view: the runs, their history and approvals, and the workflow prerequisites "
        f"recorded in it (read what survives with `sqlite3 {shlex.quote(str(aside))} .recover`). Kept: the "
        "project's abilities, skills and workflows.json, which live in the project."
    )


def _private(db: D, path: Path) -> D:
    """The state folder closed to other users once the file is open (state/privacy.py): said, not fatal."""
    import logging  # here, as privacy: the hook imports this module on every tool call and never tightens

    from .privacy import keep_private

    for problem in keep_private(path.parent):
        logging.getLogger(__name__).warning("%s", problem)
    return db


def _damage(path: Path) -> str | None:
    """Why the file is not a sound state file, found read-only (every page read, every known table's columns);
    None when it is sound, empty or absent. A folder or an unwritable file raises StateFileError."""
    if path.is_dir():
        Database(path)  # raises the folder's StateFileError
    if not path.is_file() or path.stat().st_size == 0:
        return None
    conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)
    try:
        found = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if found != ["ok"]:
            return "; ".join(found[:3])
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        added = {(t, c) for t, c, _ in ADDED_COLUMNS} if version < SCHEMA_VERSION else set()  # migration adds them
        for table, columns in _expected_columns().items():
            present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            missing = sorted(c for c in columns - present if (table, c) not in added)
            if present and missing:  # an absent table is created on opening; a table without its columns is not ours
                return f"its {table!r} table has no {', '.join(missing)} column"
    except sqlite3.DatabaseError as exc:
        problem = _classified(path, exc)
        if isinstance(problem, StateCorrupt):
            return problem.reason
        raise problem from exc
    finally:
        conn.close()
    return None


def _move_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():  # a second damaged file within the same second
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    path.rename(aside)
    for suffix in ("-wal", "-shm", "-journal"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(aside.with_name(aside.name + suffix))
    return aside
