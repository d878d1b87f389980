"""The state database on PostgreSQL (team mode): a connection that answers the part of sqlite3's interface the state
modules use, their SQLite dialect translated to PostgreSQL's in one place (`translate`).

Imported only when a postgresql:// location is opened (database.py), so the stdio server and the hook never load
psycopg otherwise. The tables live in the schema the URL selects: `public` by default, or the first of its
search_path (`?options=-csearch_path%3Dteam_a`), created when missing. One database serves several projects that
way, one schema each: each has its own tables, its own schema version (the `abilities_schema` table) and its own
write lock, so one project's writers never wait for another's.

Writers serialize as under SQLite's BEGIN IMMEDIATE, which the modules' read-then-write compare-and-sets rely on:
every write transaction starts with `pg_advisory_xact_lock(key)`, the key derived from the database and the
schema, held to its commit, so several server processes (replicas) on one database queue there; a single write
statement outside a transaction takes it too. Reads that must see one moment (`Database._snapshot`) are a
REPEATABLE READ READ ONLY transaction.

What the translation does: `?` → `%s` (and a literal `%` doubled); `x IS ?` → `x IS NOT DISTINCT FROM %s`;
`INSERT OR IGNORE` → `ON CONFLICT DO NOTHING`; `INSERT OR REPLACE` → `ON CONFLICT (primary key) DO UPDATE` of
the other columns it names; `rowid` → `ctid` (only ever a tie-breaker after a timestamp in ORDER BY); and in
DDL, `INTEGER PRIMARY KEY AUTOINCREMENT` → an identity column, `INTEGER` → `BIGINT` (process start times and
byte counts outgrow 32 bits), `REAL` → `DOUBLE PRECISION` (PostgreSQL's REAL is 4 bytes: timestamps would lose
their seconds). Statements that cannot be read both ways mechanically are written portably where they are.
Parameters are bound client-side (psycopg's ClientCursor): values arrive as literals, untyped as in SQLite, so
`? IS NULL` works with a None.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.pq import TransactionStatus

from .schema import _SCHEMA, StateFileError

# How long a connection attempt waits for the server before the state is reported unreachable.
CONNECT_TIMEOUT_SECONDS = 10
# Where each schema keeps its version (SQLite keeps it in the file's user_version).
VERSION_TABLE = "abilities_schema"
# SQLSTATE classes that mean the server is unreachable or the connection is gone, not a bug in a statement:
# 08 connection exceptions, 57P admin shutdown / cannot connect now, 53 insufficient resources.
_UNAVAILABLE_STATES = ("08", "57P", "53")
_IN_TRANSACTION = (TransactionStatus.INTRANS, TransactionStatus.INERROR, TransactionStatus.ACTIVE)


class Unavailable(StateFileError):
    """The PostgreSQL server cannot be reached or dropped the connection; the message names the location and the fix."""


def shown(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def connect(url: str, busy_ms: int) -> Connection:
    """A connection to the state database at `url`, or Unavailable saying why and what to do."""
    return Connection(url, busy_ms)


class Row:
    """One result row, read by index or by column name, and `dict(row)`, like sqlite3.Row."""

    __slots__ = ("_values", "_names", "_index")

    def __init__(self, values: Sequence[Any], names: tuple[str, ...], index: dict[str, int]):
        self._values, self._names, self._index = tuple(values), names, index

    def __getitem__(self, key: int | str | slice) -> Any:
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._names)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and (self._values, self._names) == (other._values, other._names)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Row({self._values!r})"


def _row_factory(cursor: Any) -> Any:
    names = tuple(column.name for column in cursor.description or ())
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)  # the first of two same-named columns, as sqlite3.Row finds it
    return lambda values: Row(values, names, index)


class Cursor:
    """What a statement returned: fetchone, fetchall, iteration and rowcount, as sqlite3's cursor offers them."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Row], rowcount: int):
        self._rows, self.rowcount = iter(rows), rowcount

    def fetchone(self) -> Row | None:
        return next(self._rows, None)

    def fetchall(self) -> list[Row]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return self._rows


class Connection:
    """One PostgreSQL connection in autocommit mode, transactions begun and ended by the statements Database sends,
    answering the SQLite dialect the state modules write."""

    def __init__(self, url: str, busy_ms: int):
        self.url, self.busy_ms = url, busy_ms
        self._conn = self._connect()
        self.schema = self._schema()
        self.database = self._conn.info.dbname
        self.lock_key = _lock_key(self.database, self.schema)
        # A replica's write transactions check its ownership lock is still held (replicas.py `Fence`); None: a
        # process that drives no runs (the CLI, the hook).
        self.fence: Any = None

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                cursor_factory=psycopg.ClientCursor,
                row_factory=_row_factory,
            )
        except psycopg.Error as exc:
            raise self._unavailable(exc) from None
        # A writer waits this long for the write lock (another process's transaction), as SQLite's busy timeout.
        conn.execute(f"SET lock_timeout = {max(1, int(self.busy_ms))}")
        return conn

    def _unavailable(self, exc: Exception) -> Unavailable:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return Unavailable(
            f"the state database {shown(self.url)!r} cannot be reached ({reason}); start the PostgreSQL server or fix "
            "--state (or $ABILITIES_STATE): postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE, the user able to "
            "connect and to create tables in the schema"
        )

    def _schema(self) -> str:
        """The schema the tables live in: the search_path's first, created when it does not exist yet."""
        current = self._conn.execute("SELECT current_schema()").fetchone()[0]
        if current is not None:
            return current
        wanted = self._conn.execute("SHOW search_path").fetchone()[0].split(",")[0].strip()
        name = wanted[1:-1].replace('""', '"') if wanted.startswith('"') else wanted
        if not name or name == "$user":
            raise StateFileError(
                f"the state database {shown(self.url)!r} selects no schema that exists (search_path {wanted!r}); name "
                "one in the URL, ?options=-csearch_path%3DSCHEMA, or create it"
            )
        try:
            self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{name.replace(chr(34), chr(34) * 2)}"')
        except psycopg.errors.UniqueViolation:
            pass  # another process created it at the same moment
        return self._conn.execute("SELECT current_schema()").fetchone()[0] or name

    @property
    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status in _IN_TRANSACTION

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        """Run one statement of the SQLite dialect; a write outside a transaction takes the write lock itself."""
        query = translate(sql)
        if not self.in_transaction and _writes(query):
            self.begin_write()
            try:
                found = self._run(query, params)
            except BaseException:
                self._run("ROLLBACK", None)
                raise
            self._run("COMMIT", None)
            return found
        return self._run(query, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor:
        query, total = translate(sql), 0
        for row in rows:
            total += self._run(query, row).rowcount
        return Cursor([], total)

    def executescript(self, script: str) -> None:
        """The statements of a script, one by one (no literal in _SCHEMA holds a `;`)."""
        for statement in script.split(";"):
            if statement.strip():
                self.execute(statement)

    def begin_write(self) -> None:
        """BEGIN, then the schema's write lock: other writers of this schema wait for the commit; then, for a
        replica, the check that it still owns what it drives (after the lock: a replica that takes its runs over
        writes after this transaction, replicas.py)."""
        self._run("BEGIN", None)
        try:
            self._run(f"SELECT pg_advisory_xact_lock({self.lock_key})", None)
            if self.fence is not None:
                self.fence.check(self._conn)
        except BaseException:
            self._run("ROLLBACK", None)
            raise

    def begin_snapshot(self) -> None:
        self._run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None)

    def schema_version(self) -> int:
        found = self._run(f"SELECT to_regclass('{VERSION_TABLE}')", None).fetchone()
        if found is None or found[0] is None:
            return 0
        row = self._run(f"SELECT max(version) FROM {VERSION_TABLE}", None).fetchone()
        return row[0] or 0

    def set_schema_version(self, version: int) -> None:
        self._run(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)", None)
        self._run(f"DELETE FROM {VERSION_TABLE}", None)
        self._run(f"INSERT INTO {VERSION_TABLE} (version) VALUES ({int(version)})", None)

    def columns(self, table: str) -> set[str]:
        rows = self._run(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s",
            (table,),
        )
        return {row[0] for row in rows}

    def commit(self) -> None:
        """As sqlite3's: end the open transaction, if there is one."""
        if self.in_transaction:
            self._run("COMMIT", None)

    def close(self) -> None:
        self._conn.close()

    def __del__(self) -> None:
        # Closed when dropped, as a sqlite3 connection is, not left to psycopg's ResourceWarning.
        conn = getattr(self, "_conn", None)
        if conn is not None and not conn.closed:
            conn.close()

    def _run(self, query: str, params: Sequence[Any] | dict[str, Any] | None) -> Cursor:
        """One statement. Outside a transaction (a read, or the BEGIN of a write) a connection found dead is opened
        again and the statement sent once more: nothing of it had happened. Inside one, the transaction is lost and
        the caller hears so (Unavailable)."""
        standalone = not self.in_transaction
        if standalone and self._conn.closed:
            self._conn = self._connect()
        try:
            return self._send(query, params)
        except psycopg.OperationalError as exc:
            if not self._conn.closed and not (exc.sqlstate or "").startswith(_UNAVAILABLE_STATES):
                raise  # the statement's own failure (a lock wait past lock_timeout, …)
            if not standalone or not self._conn.closed:
                raise self._unavailable(exc) from exc
        self._conn = self._connect()
        try:
            return self._send(query, params)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from exc

    def _send(self, query: str, params: Sequence[Any] | dict[str, Any] | None) -> Cursor:
        cur = self._conn.execute(query, params)  # type: ignore[arg-type]
        return Cursor(cur.fetchall() if cur.description else [], cur.rowcount)


def _lock_key(database: str, schema: str) -> int:
    """The advisory lock one schema's writers share: 64 bits of a digest of the database and the schema."""
    digest = hashlib.blake2b(f"abilities-mcp\0{database}\0{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _writes(query: str) -> bool:
    return not query.lstrip().upper().startswith(_READS)


# Statements that need no write lock of their own (no WITH … DELETE is written anywhere).
_READS = ("SELECT", "WITH", "SHOW", "SET", "BEGIN", "COMMIT", "ROLLBACK")


# A quoted literal or identifier, which the translation leaves alone (but for doubling `%`).
_QUOTED = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")")
_IS_PARAM = re.compile(r"\bIS\s+(NOT\s+)?\?", re.IGNORECASE)
_ROWID = re.compile(r"\browid\b", re.IGNORECASE)
_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE)
_DDL = re.compile(r"^\s*(CREATE|ALTER)\s+TABLE\b", re.IGNORECASE)
_DDL_TYPES = [
    (
        re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.IGNORECASE),
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    ),
    (re.compile(r"\bINTEGER\b", re.IGNORECASE), "BIGINT"),
    (re.compile(r"\bREAL\b", re.IGNORECASE), "DOUBLE PRECISION"),
]


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """One statement of the SQLite dialect the state modules write, as PostgreSQL reads it (see the module)."""
    pieces = _QUOTED.split(sql)
    for i, piece in enumerate(pieces):
        piece = piece.replace("%", "%%")
        if i % 2 == 0:  # outside quotes
            piece = _IS_PARAM.sub(lambda m: "IS DISTINCT FROM %s" if m.group(1) else "IS NOT DISTINCT FROM %s", piece)
            piece = _ROWID.sub("ctid", piece.replace("?", "%s"))
            if _DDL.match(sql):
                for pattern, replacement in _DDL_TYPES:
                    piece = pattern.sub(replacement, piece)
        pieces[i] = piece
    query = "".join(pieces)
    if found := _INSERT_OR.match(query):
        how, table, columns = found.group(1).upper(), found.group(2), found.group(3)
        query = _INSERT_OR.sub(lambda m: f"INSERT INTO {table} ({columns})", query, count=1)
        query += " ON CONFLICT DO NOTHING" if how == "IGNORE" else _replacing(table, columns)
    return query


def _replacing(table: str, columns: str) -> str:
    keys = primary_keys()[table]
    others = [c.strip() for c in columns.split(",") if c.strip() not in keys]
    update = ", ".join(f"{c} = EXCLUDED.{c}" for c in others)
    return f" ON CONFLICT ({', '.join(keys)}) " + (f"DO UPDATE SET {update}" if update else "DO NOTHING")


@lru_cache(maxsize=1)
def primary_keys() -> dict[str, tuple[str, ...]]:
    """Each table of _SCHEMA and its primary key's columns, what INSERT OR REPLACE conflicts on."""
    keys: dict[str, tuple[str, ...]] = {}
    for table, body in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\);", _SCHEMA, re.DOTALL):
        if composite := re.search(r"PRIMARY KEY \(([^)]*)\)", body):
            keys[table] = tuple(c.strip() for c in composite.group(1).split(","))
        elif single := re.search(r"(\w+) \w+ PRIMARY KEY", body):
            keys[table] = (single.group(1),)
    return keys
