"""A throwaway PostgreSQL cluster for the tests of the state on PostgreSQL: one per test session, started on first
use, and a fresh schema (or database) for each test.

The cluster is Debian's `postgresql` (PostgreSQL 15; .ci/run installs it): initdb into a temporary folder, a unix
socket in that folder and no TCP port, trust authentication, fsync off, stopped when the session ends. PostgreSQL
refuses to run as root, so as root (CI) the cluster runs as the `postgres` OS user. Without PostgreSQL (or psycopg)
the tests that need it skip, saying so, unless $ABILITIES_REQUIRE_POSTGRES=1, where they fail.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest

REQUIRE_ENV = "ABILITIES_REQUIRE_POSTGRES"
# The cluster's superuser, whatever OS user runs it (tests connect as it, by trust, over the socket).
SUPERUSER = "abilities"
# pg_ctl's own bound on starting and stopping the server (it polls for readiness itself).
START_SECONDS = 60
# The OS user the server runs as when the tests run as root.
SERVICE_USER = "postgres"


def binaries() -> Path | None:
    """The folder with initdb and pg_ctl: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    if found := shutil.which("initdb"):
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def unavailable() -> str | None:
    """Why these tests cannot run here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[test]')"
    if binaries() is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to start PostgreSQL as another user"
    return None


class Cluster:
    """One running PostgreSQL server in a temporary folder."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="abilities-pg-"))
        self.data, self.socket = self.folder / "data", self.folder
        self.as_root = os.geteuid() == 0
        if self.as_root:
            os.chmod(self.folder, 0o755)
            shutil.chown(self.folder, SERVICE_USER, SERVICE_USER)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8")
        options = f"-k {self.socket} -c listen_addresses='' -c fsync=off -c synchronous_commit=off"
        options += " -c full_page_writes=off -c max_connections=200"
        self._pg_ctl("start", "-o", options, "-l", str(self.folder / "server.log"))

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", SERVICE_USER, "--"] if self.as_root else []
        done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=START_SECONDS * 2)
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(
                f"{command[0]} failed: {done.stderr or done.stdout}{log.read_text() if log.exists() else ''}"
            )

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", str(START_SECONDS), *args)

    def url(self, database: str = "postgres", schema: str | None = None) -> str:
        """A URL for `database` over the cluster's socket, optionally with its own schema first on the search path."""
        url = f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket), safe='')}"
        return url + (f"&options={quote(f'-csearch_path={schema}', safe='')}" if schema else "")

    def fresh_schema(self) -> str:
        """A URL whose tables go into a new, empty schema of the `postgres` database (created when first opened)."""
        return self.url(schema=f"t_{secrets.token_hex(6)}")

    def fresh_database(self) -> str:
        """A URL of a new, empty database: its tables go into `public`."""
        import psycopg

        name = f"db_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._pg_ctl("stop", "-m", "immediate")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster() -> Cluster:
    """The session's cluster, or a skip (a failure under $ABILITIES_REQUIRE_POSTGRES=1) saying why there is none."""
    reason = unavailable()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    return Cluster()


def wait_for_backend_exit(url: str, pid: int, timeout: float = 10.0) -> None:
    """Wait until backend `pid` has left: a closed connection's backend lets go of its locks as it exits, a moment
    after its client has hung up (and after pg_terminate_backend has returned)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as admin:
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} still running {timeout} s after its client left"
            admin.execute("SELECT pg_sleep(0.01)")
