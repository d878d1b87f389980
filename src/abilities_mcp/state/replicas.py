"""Replicas on one PostgreSQL database: which server process owns a run, by PostgreSQL's own locks.

Each server process that drives runs on a PostgreSQL state (a replica) holds, for its life, a session-level
advisory lock `pg_advisory_lock(space, key)` on a connection of its own: `space` names the schema (every replica of
one project shares it), `key` is the replica's random id, written on each run it owns (runs.owner_replica). A
replica is alive exactly while its lock is held, which anyone reads in `pg_locks` without taking anything. When
the process dies (SIGKILL, a crash, its host gone) PostgreSQL ends its session and releases the lock at once (a
host that vanished without closing its connection: once the TCP keepalives set below give up, seconds later):
there is no lease to renew and no timeout to tune.

A replica that loses its lock (the connection cut: a network fault, pg_terminate_backend, a database restart)
must stop driving at once, because another replica may already have taken its runs: every write transaction of
its store checks, under the schema's write lock, that the lock is still its own (`Fence`), and is refused
otherwise (NotOwner); the engine, hearing of the loss from `Ownership.held`, stops its runs and kills their step
processes (engine/replicas.py).

Imported only for a postgresql:// state (psycopg).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from typing import Any, NamedTuple

import psycopg

from .owners import Owner, process_start, this_host
from .schema import StateFileError

# How long connecting the lock's connection may take before the replica gives up starting.
CONNECT_TIMEOUT_SECONDS = 10
# TCP keepalives and the unacknowledged-send limit, on both ends of the lock's connection: a replica whose host
# vanishes loses its lock after about idle + interval * count seconds (PostgreSQL's default is two hours), and a
# replica cut off from the database hears its connection is gone within the same bound. (A Unix socket ignores them.)
KEEPALIVE_IDLE_SECONDS, KEEPALIVE_INTERVAL_SECONDS, KEEPALIVE_COUNT = 5, 2, 3
USER_TIMEOUT_MS = 10_000
# The advisory lock's second key is a positive int4 (pg_locks shows it as objid, an oid): ids below this.
KEY_LIMIT = 2**31 - 1
_ALIVE = (
    "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = ? AND objsubid = 2 AND granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


class NotOwner(StateFileError):
    """A write by a replica that no longer holds its lock: another replica may own its runs now."""


class Fence(NamedTuple):
    """What a replica's write transactions check: its lock (space, key), held by the backend `pid`."""

    space: int
    key: int
    pid: int

    def check(self, conn: Any) -> None:
        """Refuse the transaction unless the lock is still held by the lock's own connection (read in pg_locks)."""
        found = conn.execute(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND objsubid = 2 "
            "AND pid = %s AND granted",
            (self.space, self.key, self.pid),
        ).fetchone()
        if found is None:
            raise NotOwner(
                f"this replica (id {self.key}) lost its lock on the state database: another replica may own its runs "
                "now, so it writes nothing more for them"
            )


def lock_space(database: str, schema: str) -> int:
    """The first key of every replica's lock for one schema: 31 bits of a digest of the database and the schema."""
    digest = hashlib.blake2b(f"abilities-mcp owners\0{database}\0{schema}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


class Ownership:
    """This replica's lock, held on a connection of its own for as long as the process (or `close`)."""

    def __init__(self, url: str, database: str, schema: str):
        self.space = lock_space(database, schema)
        self.key = secrets.randbelow(KEY_LIMIT - 1) + 1
        try:
            self._conn = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                keepalives=1,
                keepalives_idle=KEEPALIVE_IDLE_SECONDS,
                keepalives_interval=KEEPALIVE_INTERVAL_SECONDS,
                keepalives_count=KEEPALIVE_COUNT,
                tcp_user_timeout=USER_TIMEOUT_MS,
            )
            for name, value in (
                ("tcp_keepalives_idle", KEEPALIVE_IDLE_SECONDS),
                ("tcp_keepalives_interval", KEEPALIVE_INTERVAL_SECONDS),
                ("tcp_keepalives_count", KEEPALIVE_COUNT),
                ("tcp_user_timeout", USER_TIMEOUT_MS),
            ):
                self._conn.execute(f"SET {name} = {int(value)}")
            self._conn.execute("SELECT pg_advisory_lock(%s, %s)", (self.space, self.key))
        except psycopg.Error as exc:
            raise StateFileError(f"this replica could not take its lock on the state database ({exc})") from None
        self.fence = Fence(self.space, self.key, self._conn.info.backend_pid)
        pid = os.getpid()
        self.owner = Owner(pid, process_start(pid), self.key, this_host())

    def held(self) -> bool:
        """Whether the lock's connection still answers (while it does, the lock is held: only its end drops it)."""
        if self._conn.closed:
            return False
        try:
            self._conn.execute("SELECT 1")
        except psycopg.Error:
            self._conn.close()
            return False
        return True

    def close(self) -> None:
        """Release the lock (ending the connection): the runs left live here are any replica's to take."""
        self._conn.close()


def alive_replicas(db: Any, space: int) -> set[int]:
    """The replicas of the schema whose locks are held now (read on the store's connection: no side effects)."""
    return {row[0] for row in db.execute(_ALIVE, (space,)).fetchall()}
