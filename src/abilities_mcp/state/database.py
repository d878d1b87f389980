"""The state database, shared safely by the server, the CLI and the hook: opening it, bringing an older one up to
date, and transactions. What lives in it: runs (store.py), each session's prerequisites (sessions.py), the call
approvals a person gives (prerequisites/approvals.py), and the sessions of calls a client's hook announced and of
sessions it observed (claims.py).

Two engines behind one interface: the embedded SQLite file (WAL) by default, or a PostgreSQL database for a team
(`--state postgresql://…`, postgres.py). The modules above write SQLite's dialect through `Database.db`; on
PostgreSQL the connection translates it. One schema (_SCHEMA) and one migration path (SCHEMA_VERSION,
ADDED_COLUMNS) serve both.

Stdlib only and no dataclasses: the hook opens this file on every tool call (psycopg is imported only when a
postgresql:// location is opened).
"""

from __future__ import annotations

import os
import sqlite3
import time

from .owners import Owner, owner_alive, this_owner
from .schema import _SCHEMA, ADDED_COLUMNS, DROPPED_TABLES, SCHEMA_VERSION, StateFileError

TYPE_CHECKING = False  # typing's, without importing typing: the hook opens the state through this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from pathlib import Path
    from typing import Any, TypeVar

    from .trust import TrustStore

    D = TypeVar("D", bound="Database")
# What a state location may be besides a SQLite file's path: a PostgreSQL connection URL (postgres.py).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# How long a writer waits for another process's lock before giving up.
BUSY_TIMEOUT_MS = 10_000
# Pause between tries to switch a new file to WAL while another process holds it (see Database._enable_wal).
WAL_RETRY_SECONDS = 0.005

# What SQLite says about a file that is not a sound database (garbage, cut short, damaged pages).
_CORRUPT_WORDS = ("not a database", "malformed", "corrupt", "no such column", "has no column")
# What it says when the file or its folder cannot be written by this user.
_UNWRITABLE_WORDS = ("unable to open", "readonly", "read-only")


class StateCorrupt(StateFileError):
    """The state file is not a sound abilities-mcp database: garbage, cut short, damaged, or another schema."""

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = path, reason
        super().__init__(
            f"the state file {str(path)!r} is damaged or not an abilities-mcp state file ({reason}); "
            "`abilities-mcp status` moves it aside (nothing is deleted) and starts a fresh one"
        )


class Database:
    """One connection to the state database, with the schema in place: the SQLite file at a path, or PostgreSQL."""

    def __init__(
        self,
        location: str | Path,
        accept_newer: bool = False,
        busy_ms: int = BUSY_TIMEOUT_MS,
        folder: str | Path | None = None,
        *,
        url: bool | None = None,
    ):
        """`location`: the SQLite file's path, or a postgresql:// URL (a `str`, unless `url` is False: anything but
        a PostgreSQL URL in a `str` is refused). `url`: False for a SQLite path given as text (Database.open: the
        hook imports no pathlib), True for a URL; by default a `str` is a URL and a Path the file.
        `folder`: the local folder for what stays on this machine's disk whatever the engine (the running steps'
        spools, state/spool.py): by default the SQLite file's folder; Database.open gives the project's state folder.
        `accept_newer`: read a database a newer version wrote as far as this one understands it (the hook, which a
        client may run from an older install than its server; versions only ever add tables and columns).
        `busy_ms`: how long to wait for another process's write (the hook waits no longer than its budget).

        Raises StateCorrupt for a damaged file and StateFileError for one that cannot be opened (a folder, a folder
        this user cannot write, a database that cannot be reached); never moves anything (see `open_state`)."""
        self.accept_newer = accept_newer
        self.busy_ms = busy_ms
        self._folder = folder
        self._ownership: Any = None  # on PostgreSQL, this replica's lock once `owner` took it (replicas.py)
        self.postgres = isinstance(location, str) if url is None else url
        if self.postgres:
            self.path, self.location = None, check_location(str(location))
            self._open_postgres()
            return
        path = self.location = self.path = location
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)  # the runs and approvals: the user's alone
        except OSError as exc:
            raise _unwritable(path, exc) from exc
        if os.path.isdir(path):
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

    @classmethod
    def open(cls: type[D], project: Any, **options: Any) -> D:
        """The project's state database, wherever it lives (Project.state_location): what every caller opens."""
        url = project.state_url
        return cls(url or project.state_file, folder=project.state_folder, url=bool(url), **options)

    @property
    def folder(self) -> Path:
        """The local folder beside the state (spools): given, else the SQLite file's folder."""
        from .project import as_path

        if self._folder is not None:
            return as_path(self._folder)
        if self.path is None:
            raise StateFileError(
                f"no local folder was given for the state at {self.where} (open it with Database.open)"
            )
        return as_path(os.path.dirname(self.path))

    @property
    def where(self) -> str:
        """The location for a message: the file's path, or the URL without its password."""
        if self.postgres:
            from .postgres import shown

            return shown(self.location)
        return str(self.path)

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

    def _open_postgres(self) -> None:
        """Connect, and create or migrate the tables in the URL's schema under the write lock (replicas starting
        together queue there, as SQLite's creators queue on its busy timeout)."""
        from .postgres import connect

        self.db = connect(self.location, self.busy_ms)
        try:
            if self._version() != SCHEMA_VERSION:
                with self.transaction():
                    self.db.executescript(_SCHEMA)
                    self._migrate()
        except BaseException:
            self.db.close()
            raise

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
        """Bring a state database written by an older version up to this schema; newer ones are refused."""
        version = self._version()
        if version > SCHEMA_VERSION and self.accept_newer:
            return
        if version > SCHEMA_VERSION:
            flag = "--state" if self.postgres else "--state-dir"
            raise StateFileError(
                f"{self.where} was written by a newer abilities-mcp (schema {version} > {SCHEMA_VERSION}); "
                f"upgrade abilities-mcp or point {flag} elsewhere"
            )
        if version == SCHEMA_VERSION:
            return
        with self.transaction() as db:
            for dropped_in, table in DROPPED_TABLES:
                if version < dropped_in:
                    db.execute(f"DROP TABLE IF EXISTS {table}")
            for table, column, kind in ADDED_COLUMNS:
                if column not in self._columns(table):
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            self._set_version(SCHEMA_VERSION)

    def _version(self) -> int:
        if self.postgres:
            return self.db.schema_version()
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    def _set_version(self, version: int) -> None:
        if self.postgres:
            self.db.set_schema_version(version)
        else:
            self.db.execute(f"PRAGMA user_version={int(version)}")

    def _columns(self, table: str) -> set[str]:
        if self.postgres:
            return self.db.columns(table)
        return {row["name"] for row in self.db.execute(f"PRAGMA table_info({table})")}

    def data_version(self) -> int | None:
        """A number that changes when another connection commits (SQLite's data_version), for a cheap "anything
        new?"; None on PostgreSQL, where other servers write too and there is no such counter: look every time."""
        if self.postgres:
            return None
        return self.db.execute("PRAGMA data_version").fetchone()[0]

    # --- who owns the runs (owners.py; replicas.py on PostgreSQL) ------------------------------------------

    @property
    def replicated(self) -> bool:
        """Whether several server processes, maybe on several hosts, share this state as replicas (PostgreSQL): a
        dead replica's runs go on in another, and a call may reach a replica other than its run's owner."""
        return self.postgres

    def owner(self) -> Owner:
        """This process as the owner of the runs it drives: on PostgreSQL its replica's advisory lock, taken on the
        first call and held until `close` (replicas.py); on SQLite the process itself."""
        if not self.postgres:
            return this_owner()
        if self._ownership is None:
            from .replicas import Ownership

            self._ownership = Ownership(self.location, self.db.database, self.db.schema)
            self.db.fence = self._ownership.fence
        return self._ownership.owner

    def owner_held(self) -> bool:
        """Whether this process still owns what it drives: on PostgreSQL, whether its lock's connection answers
        (it may block for the keepalive's bound when the network is gone: ask from a thread); else True."""
        return self._ownership is None or self._ownership.held()

    def renew_owner(self) -> Owner:
        """After a lost lock, once everything driven under it stopped: a new replica id and lock."""
        if self._ownership is not None:
            self._ownership.close()
            self._ownership = None
            self.db.fence = None
        return self.owner()

    def owners_alive(self, owners: list[Owner]) -> list[bool]:
        """Whether each owner still lives: its replica's lock held (one read of pg_locks for all), or for a row
        no replica owns, its process on this machine."""
        alive: set[int] | None = None
        found = []
        for owner in owners:
            if self.postgres and owner.replica is not None:
                if alive is None:
                    from .replicas import alive_replicas, lock_space

                    alive = alive_replicas(self.db, lock_space(self.db.database, self.db.schema))
                found.append(owner.replica in alive)
            else:
                found.append(owner_alive(owner.pid, owner.start))
        return found

    def owner_alive(self, owner: Owner) -> bool:
        return self.owners_alive([owner])[0]

    def close(self) -> None:
        if self._ownership is not None:
            self._ownership.close()
        self.db.close()

    def transaction(self) -> AbstractContextManager[Any]:
        """One atomic write, taken with the write lock up front so concurrent writers queue instead of failing:
        SQLite's BEGIN IMMEDIATE, or on PostgreSQL an advisory lock per schema held to the commit (postgres.py).
        Inside one already open, the block is part of it. `with database.transaction() as db:`."""
        return _Transaction(self, write=True)

    def _snapshot(self) -> AbstractContextManager[None]:
        """Reads that see one moment: a deferred SQLite transaction, a REPEATABLE READ READ ONLY one on PostgreSQL."""
        return _Transaction(self, write=False)


class _Transaction:
    """Database.transaction (`write`: rolled back when its block fails, else committed) and Database._snapshot
    (ended either way); within a transaction already open, part of it. A plain class, not contextlib's
    contextmanager: the hook opens the state through this module, and contextlib would cost it a millisecond."""

    __slots__ = ("database", "write", "outer")

    def __init__(self, database: Database, write: bool):
        self.database, self.write, self.outer = database, write, False

    def __enter__(self) -> Any:
        database = self.database
        db = database.db
        self.outer = not db.in_transaction
        if self.outer and database.postgres:
            (db.begin_write if self.write else db.begin_snapshot)()
        elif self.outer:
            db.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")
        return db if self.write else None

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        if self.outer:
            self.database.db.execute("ROLLBACK" if self.write and kind is not None else "COMMIT")


def check_location(location: str) -> str:
    """A state location given as text must be a PostgreSQL URL; the error names the accepted forms."""
    if location.startswith(POSTGRES_SCHEMES):
        return location
    raise StateFileError(
        f"the state location {location.split('@')[-1]!r} is not one abilities-mcp knows: give --state (or "
        "$ABILITIES_STATE) a PostgreSQL URL, postgresql://USER@HOST:PORT/DATABASE (postgres:// too; "
        "?options=-csearch_path%3DSCHEMA for a schema of its own), or leave it unset and use --state-dir FOLDER for "
        "the SQLite file"
    )


def _expected_columns() -> dict[str, set[str]]:
    """Each table of this version's schema and its columns, as SQLite reads _SCHEMA."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(_SCHEMA)
        tables = [row[0] for row in scratch.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: {row[1] for row in scratch.execute(f"PRAGMA table_info({t})")} for t in tables if t[:7] != "sqlite_"}
    finally:
        scratch.close()


def _classified(path: str | Path, exc: sqlite3.DatabaseError) -> Exception:
    text = str(exc).lower()
    if any(word in text for word in _UNWRITABLE_WORDS):
        return _unwritable(path, exc)
    if any(word in text for word in _CORRUPT_WORDS) or not isinstance(exc, sqlite3.OperationalError):
        return StateCorrupt(path, str(exc))
    return exc


def _unwritable(path: str | Path, exc: Exception) -> StateFileError:
    return StateFileError(
        f"the state file {str(path)!r} cannot be opened for writing ({exc}); the file and its folder "
        f"{os.path.dirname(path)!r} must be writable by this user: fix their permissions (chmod u+rwx), or point "
        "--state-dir (or $ABILITIES_STATE_DIR) at a folder that is"
    )


def open_state(path: str | Path, factory: Callable[[Any], D]) -> tuple[D, str | None]:
    """Open the state file for the server or the CLI: a damaged one is moved aside, with its -wal and -shm, and a
    fresh one started; returns the database and, when that happened, the notice to show. Nothing is deleted, and
    a damaged file is judged before a byte of it changes. StateFileError (a folder, no write permission, a
    PostgreSQL database that cannot be reached) is left to the caller: those a person fixes. A PostgreSQL location
    is opened as it is: nothing there is this program's to move aside."""
    if isinstance(path, str):
        return factory(path), None
    from .project import as_path

    path = as_path(path)
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


def trust_store(project: Any, database: Database | None = None) -> TrustStore:
    """The project's trust records (state/trust.py): in the state folder, or on a team server's PostgreSQL in the
    database (`database`: one already open on it, else one opened when first read)."""
    from .trust import DatabaseTrust, TrustStore

    if project.state_url:
        return DatabaseTrust(project, (lambda: database) if database is not None else (lambda: Database.open(project)))
    return TrustStore(project.state_folder, project.root_dir)
