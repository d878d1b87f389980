"""Shared fixtures: a throwaway project folder and an in-memory client for it."""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from mcp import Client

import long_first
from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from postgres_support import Cluster, start_cluster
from provider_support import OidcProvider, start_provider
from quick_subset import mark_slow
from support import TEST_RETRY_BASE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` what the quick subset, `pytest -m "not slow"`, leaves out (tests/quick_subset.py says which)."""
    mark_slow(items)


# Workers per core for `-n auto`: most tests wait on processes they started (clients, servers, the CLI), so a core
# carries two; more only queue for the CPU. Capped: each worker starts its own PostgreSQL and OpenID provider.
WORKERS_PER_CORE, MAX_WORKERS = 2, 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (README's test command): two workers per core this process may use, at most MAX_WORKERS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(MAX_WORKERS, WORKERS_PER_CORE * cores))


def pytest_configure(config: pytest.Config) -> None:
    """A suite started as a background job (`pytest &`, nohup, some CI runners) inherits SIGINT ignored, and so would
    every command it starts: a test of what Ctrl-C does to a command would fail there. A person's foreground command
    has SIGINT at its default, so the suite starts its commands with it there, however it was started itself."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The known-long tests first, shared out over xdist's workers (tests/long_first.py).
    config.pluginmanager.register(long_first, "long_first")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """User-scope folders point into the test's tmp dir, never at the developer's real ~/.config."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    # The default, spelled out: a subprocess given only HOME (support.stdio_params) finds the same state file.
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    # The package's built-in skills would join every test project's skills; tests/skills/test_builtin.py turns them on.
    monkeypatch.setenv("ABILITIES_BUILTIN_SKILLS", "0")
    for var in (
        "ABILITIES_ROOT",
        "CLAUDE_PROJECT_DIR",
        "ABILITIES_STATE_DIR",
        "ABILITIES_STATE",
        "CLAUDE_CODE_SESSION_ID",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / "abilities").mkdir(parents=True)
    return path


@pytest.fixture
def write(root: Path) -> Callable[[str, str], Path]:
    """write("name", yaml) puts abilities/name.yaml in the project (dedented)."""

    def _write(name: str, text: str) -> Path:
        path = root / "abilities" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture
def project(root: Path) -> Project:
    """The project as the server and the CLI resolve it: its state file where a subprocess on --root finds it."""
    return Project.resolve(root)


@pytest.fixture
async def client(project: Project) -> AsyncIterator[Client]:
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as c:
        yield c


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL server for the whole session, started when a test first asks (postgres_support.py)."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    """A postgresql:// state location of this test's own: a fresh schema, created when first opened."""
    return postgres_cluster.fresh_schema()


@pytest.fixture(params=["sqlite", "postgres"])
def state_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """The state at each engine in turn: a SQLite file in the test's folder, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return tmp_path / "s.db"
    return request.getfixturevalue("postgres_url")


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    """One real OpenID Connect provider for the whole session, started when a test first asks (provider_support.py)."""
    with start_provider(tmp_path_factory.mktemp("oidc-provider")) as provider:
        yield provider


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sleep_seconds():
    """Sleep durations unique to this test, so its processes can be found; whatever is left is killed after."""
    import random
    from contextlib import suppress

    import psutil

    from support import sleeping

    chosen: list[int] = []

    def pick() -> int:
        chosen.append(random.randrange(1_000_000, 9_999_999))
        return chosen[-1]

    yield pick
    for proc in sleeping(*chosen):
        with suppress(psutil.Error):
            proc.kill()
