"""The SQLite state file (WAL), shared safely by the server, the CLI and the hook: opening it, bringing an older
file up to date, and transactions. What lives in it: runs (store.py), each session's prerequisites
(sessions.py), and the sessions of calls a client's hook announced (claims.py).

Stdlib only and no dataclasses: the hook opens this file on every tool call.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
CREATE TABLE IF NOT EXISTS prereq_done (
    session_id TEXT NOT NULL REFERENCES prereq_sessions(session_id) ON DELETE CASCADE, workflow TEXT NOT NULL,
    step INTEGER NOT NULL, tool TEXT NOT NULL, result TEXT, at REAL NOT NULL,
    PRIMARY KEY (session_id, workflow, step)
);
CREATE TABLE IF NOT EXISTS call_claims (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, tool TEXT NOT NULL, args_hash TEXT NOT NULL,
    client_pid INTEGER, client_start INTEGER, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS call_claims_by_call ON call_claims(tool, args_hash, at);
"""
# Bumped with every schema change; older files are migrated forward when opened (5: call_claims, a new table).
SCHEMA_VERSION = 5
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


class Database:
    """One connection to the state file, with the schema in place."""

    def __init__(self, path: Path, accept_newer: bool = False):
        """`accept_newer`: read a file a newer version wrote as far as this one understands it (the hook, which a
        client may run from an older install than its server; versions only ever add tables and columns)."""
        self.accept_newer = accept_newer
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the runs and approvals: the user's alone
        self.path = path
        self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
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
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
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
            raise RuntimeError(
                f"{self.path} was written by a newer abilities-mcp (schema {version} > {SCHEMA_VERSION}); "
                "upgrade abilities-mcp or point --state-dir elsewhere"
            )
        if version == SCHEMA_VERSION:
            return
        with self.transaction() as db:
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
