"""Helpers shared by the tests: real processes and terminals, the state file, and the repository's own files."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import pty
import select
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import psutil
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, types
from pydantic import TypeAdapter

from abilities_mcp.server.skill_extension import GetSkillParams, ReadDirectoryParams
from abilities_mcp.state.project import Project
from abilities_mcp.state.store import RunRecord, Store

# The repository's root: its abilities/, skills/, workflows.json and benchmarks/.
REPO = Path(__file__).resolve().parents[1]
# Retry pauses shrink to this in tests (the real base is 0.5 s): the behaviour is the same, the suite is faster.
TEST_RETRY_BASE = 0.01


async def until(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll `condition` until it is truthy (and return it), failing after `timeout` seconds."""
    with anyio.fail_after(timeout):
        while not (value := condition()):
            await anyio.sleep(0.05)
    return value


def sleeping(*seconds: int) -> list[psutil.Process]:
    """Live (not zombie) `sleep N` processes for the given durations, whoever their parent is."""
    wanted = {str(s) for s in seconds}
    found = []
    # Tests poll this every 50 ms: the name and status come from one read of each process's stat, and only a `sleep`
    # has its command line read too (reading every process's took twice the CPU, ~25 ms a call at 200 processes).
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info["name"] != "sleep" or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue  # gone since
        if len(cmd) == 2 and cmd[0].endswith("sleep") and cmd[1] in wanted:
            found.append(proc)
    return found


def state_db(root: Path) -> Path:
    """The project's state file where the server, the CLI and the hook find it by default (DESIGN §2)."""
    return Project.resolve(root).state_db


def stored_run(root: Path, run_id: str, state_file: Path | None = None) -> RunRecord:
    """The run as the state file holds it (the project's by default), read without starting a server (which would
    recover runs)."""
    store = Store(state_file or state_db(root))
    try:
        record = store.get_run(run_id)
    finally:
        store.close()
    assert record is not None, f"run {run_id} is not in the state file"
    return record


def stdio_params(root: Path, *extra: str, env: dict[str, str] | None = None):
    """Parameters to start the real server as a subprocess on a project."""
    from mcp import StdioServerParameters

    full_env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "TMPDIR", "XDG_STATE_HOME", "ABILITIES_BUILTIN_SKILLS")
    }
    full_env.update(env or {})
    return StdioServerParameters(
        command=sys.executable, args=["-m", "abilities_mcp", "--root", str(root), *extra], env=full_env
    )


# --- an ability with an approval step -----------------------------------------------------------------------

# A build, a person's approval, then the deploy it guards.
GATED = """
description: gated deploy
inputs:
  version: {type: string, default: v1.0.0}
steps:
  - {id: build, type: script, run: echo built}
  - id: approve
    type: approval
    prompt: "Deploy {{inputs.version}}?"
    needs: [build]
  - {id: deploy, type: script, run: touch deployed, needs: [approve]}
"""


# --- the real server in raw JSON-RPC ------------------------------------------------------------------------

# Longest JSON-RPC line the raw client accepts (a Run with 4 KiB step tails is far smaller).
MAX_LINE_BYTES = 16 * 1024 * 1024
# How long a raw request may take before the test fails instead of hanging.
REQUEST_TIMEOUT_SECONDS = 30


class RawServer:
    """The real server spoken to in raw JSON-RPC lines, so the test holds its pid and its stdin."""

    def __init__(self, process: Process, envelope: dict[str, Any] | None = None):
        self.process = process
        assert process.stdout is not None and process.stdin is not None
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.ids = itertools.count(1)
        self.last_id = 0
        self.seen: list[dict[str, Any]] = []  # every message the server wrote, notifications too, in order
        self.envelope = envelope  # a 2026-07-28 connection: every request carries it in its _meta

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def read(self) -> dict[str, Any]:
        """The server's next message (kept in `seen`)."""
        message = json.loads(await self.stdout.receive_until(b"\n", MAX_LINE_BYTES))
        self.seen.append(message)
        return message

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.last_id = request_id = next(self.ids)
        if self.envelope is not None:
            params = {**params, "_meta": {**self.envelope, **params.get("_meta", {})}}
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
            while (message := await self.read()).get("id") != request_id:
                pass
        assert "result" in message, message
        return message["result"]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        assert not result.get("isError"), result
        return result["structuredContent"]


# The per-request envelope of a 2026-07-28 client (Claude Code 2.1 speaks it): no handshake, this on every request.
MODERN_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@asynccontextmanager
async def raw_server(root: Path, stderr_file: Path, *extra: str, modern: bool = False) -> AsyncIterator[RawServer]:
    """Start `python -m abilities_mcp --root ROOT [EXTRA...]` and complete the initialize handshake, or (`modern`)
    open a 2026-07-28 connection with server/discover."""
    params = stdio_params(root, *extra)
    with stderr_file.open("wb") as stderr:
        process = await anyio.open_process([params.command, *params.args], env=params.env, stderr=stderr)
    try:
        server = RawServer(process, MODERN_ENVELOPE if modern else None)
        if modern:
            await server.request("server/discover", {})
        else:
            await server.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "0"},
                },
            )
            await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()


# --- a person's terminal -----------------------------------------------------------------------------------

CLI = [sys.executable, "-m", "abilities_mcp"]


def _controlling_terminal() -> None:
    """In the child: a session of its own whose controlling terminal is the pty on stdin."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A command running under a pseudo-terminal, as a person's shell runs it: the terminal is its controlling
    terminal (so Ctrl-C typed there is a SIGINT), read what it prints, type into it."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None):
        master, slave = pty.openpty()
        self.master, self.text = master, ""
        self.proc = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            close_fds=True,
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)

    def expect(self, needle: str, timeout: float = 20.0) -> str:
        """Read until `needle` appears (bounded); returns everything read so far."""
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(needle)
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the command exited and closed the terminal
                    chunk = b""
                if not chunk:
                    self._fail(needle)
                self.text += chunk.decode(errors="replace").replace("\r\n", "\n")
        return self.text

    def _fail(self, needle: str) -> None:
        self.proc.kill()  # never leave a command waiting for an answer behind a failed test
        self.proc.wait()
        raise AssertionError(f"{needle!r} never appeared; the terminal showed:\n{self.text}")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def wait(self, timeout: float = 20.0) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.proc.kill()
            os.close(self.master)


# A sitecustomize.py that makes a pipe look like a person's terminal: isatty() says yes, and the terminal is one no
# process holds (so no agent is found on its other end).
FAKE_TERMINAL = (
    "import os, sys\n"
    "os.isatty = lambda fd: True\n"
    "os.ttyname = lambda fd: '/dev/pts/4242'\n"
    "for stream in (sys.stdin, sys.stdout):\n"
    "    stream.isatty = lambda: True\n"
)


def cli(root: Path, *args: str) -> list[str]:
    return [*CLI, *args, "--root", str(root)]


# --- another, unprivileged user -------------------------------------------------------------------------------------

NOBODY = 65534
# What a Python run as nobody imports to run abilities-mcp (the server and the CLI).
NOBODY_IMPORTS = "import abilities_mcp.cli.main, abilities_mcp.server.app, mcp, yaml, pydantic, anyio"
_nobody: dict[str, Any] = {}


def as_nobody() -> tuple[list[str], dict[str, str]]:
    """A command prefix that runs this project's Python as an unprivileged user (root ignores file modes), and the
    environment it needs (PATH, PYTHONPATH; add HOME), or a skip saying why. Where that user cannot read the clone
    (a clone in a 0700 home or under `mktemp -d`) or the venv, the package and its dependencies are copied once to
    a folder it can read; the interpreter must be runnable by it (a system Python is, a Python under /root is not)."""
    if "found" not in _nobody:
        _nobody["found"] = _find_nobody()
    found = _nobody["found"]
    if isinstance(found, str):
        import pytest

        pytest.skip(found)
    prefix, pythonpath = found
    return prefix, {"PATH": os.environ["PATH"], "PYTHONPATH": pythonpath}


def _find_nobody() -> tuple[list[str], str] | str:
    import shutil
    import site

    if os.geteuid() != 0:
        return [sys.executable], os.pathsep.join([str(REPO / "src"), *site.getsitepackages()])  # modes apply already
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return "running as root without setpriv(1): file modes cannot be made to hold"
    drop = [
        setpriv,
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]
    pythons = [p for p in (sys.executable, f"/usr/bin/python3.{sys.version_info.minor}") if os.path.exists(p)]
    spawns = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', 'pass']).returncode)"
    runnable = [p for p in pythons if _runs([*drop, p, "-c", spawns], {})]  # a venv's link may run, not respawn
    if not runnable:
        return f"no Python of version 3.{sys.version_info.minor} this machine's unprivileged user may run"
    here = os.pathsep.join([str(REPO / "src"), *site.getsitepackages()])
    for python in runnable:
        if _runs([*drop, python, "-c", NOBODY_IMPORTS], {"PYTHONPATH": here}):
            return [*drop, python], here
    copied = _readable_copy()
    for python in runnable:
        if _runs([*drop, python, "-c", NOBODY_IMPORTS], {"PYTHONPATH": copied}):
            return [*drop, python], copied
    return "the unprivileged user cannot import abilities-mcp even from a readable copy"


def _runs(command: list[str], env: dict[str, str]) -> bool:
    done = subprocess.run(command, capture_output=True, env={"PATH": os.environ["PATH"], **env}, cwd="/", timeout=60)
    return done.returncode == 0


def _readable_copy() -> str:
    """The package and the venv's site-packages copied under the temp folder, readable by every user; removed at
    exit. A clone other users cannot enter is the ordinary case: a private home, `mktemp -d`."""
    import atexit
    import shutil
    import site
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="abilities-nobody-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    paths = []
    for i, source in enumerate([REPO / "src", *map(Path, site.getsitepackages())]):
        target = base / f"path{i}"
        shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        paths.append(str(target))
    for folder in [base, *base.rglob("*")]:
        if not folder.is_symlink():
            folder.chmod(0o755 if folder.is_dir() else 0o644)
    return os.pathsep.join(paths)


# --- the hook command as a client runs it ----------------------------------------------------------------------

# One hook process: it starts, reads the state file and answers well within this, or something hangs.
HOOK_TIMEOUT_SECONDS = 60


def run_hook(
    root: Path, client: str, event: str, payload: dict[str, Any], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real command as the client would: JSON on stdin, the project in the payload's cwd."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ABILITIES_"))}
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "hook", client, event],
        input=json.dumps({"cwd": str(root), **payload}),
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=HOOK_TIMEOUT_SECONDS,
    )


# --- skills on disk ---------------------------------------------------------------------------------------------


def write_skill(
    root: Path, name: str, frontmatter: str, body: str = "Do the thing.\n", files: dict[str, str | bytes] | None = None
) -> Path:
    """skills/<name>/SKILL.md with that frontmatter (YAML text) and body, plus any other files, under a project."""
    folder = root / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{textwrap.dedent(frontmatter).strip()}\n---\n\n{body}")
    for rel, data in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data) if isinstance(data, bytes) else (folder / rel).write_text(data)
    return folder


# --- the skills extension (SEP-2640) through the SDK client -------------------------------------------------------


class ListSkills(types.Request[types.PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: types.PaginatedRequestParams


class GetSkill(types.Request[GetSkillParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"
    params: GetSkillParams


class ReadDirectory(types.Request[ReadDirectoryParams, Literal["resources/directory/read"]]):
    method: Literal["resources/directory/read"] = "resources/directory/read"
    params: ReadDirectoryParams


ANY = TypeAdapter(dict[str, Any])


async def list_skills(client: Client, cursor: str | None = None) -> dict[str, Any]:
    return await client.session.send_request(ListSkills(params=types.PaginatedRequestParams(cursor=cursor)), ANY)


async def get_skill(client: Client, uri: str) -> dict[str, Any]:
    return await client.session.send_request(GetSkill(params=GetSkillParams(uri=uri)), ANY)


async def read_directory(client: Client, uri: str, cursor: str | None = None) -> dict[str, Any]:
    return await client.session.send_request(ReadDirectory(params=ReadDirectoryParams(uri=uri, cursor=cursor)), ANY)


# --- trust --------------------------------------------------------------------------------------------------------


def trust_project(project: Project) -> list[str]:
    """Record every gate-defining file as trusted as it is now, as a person's `abilities-mcp trust` would (the test's
    author is the person); returns the files trusted."""
    from abilities_mcp.cli.trust import changes, trust_all

    found = changes(project)
    trust_all(project, found, "test", "the test's author")
    return [c.key for c in found]


def run_record(run_id: str, step: str = "build", *, step_status: str = "pending", **fields: Any) -> RunRecord:
    """A strict run of `deploy` with one script step, started now by nobody in particular; `fields` set the rest."""
    from abilities_mcp.state.store import StepRecord

    now = time.time()
    values: dict[str, Any] = {
        "run_id": run_id,
        "ability": "deploy",
        "session_id": "s1",
        "status": "running",
        "enforcement": "strict",
        "definition": {"description": "deploy", "steps": [{"id": step, "type": "script", "run": "true"}]},
        "source_path": None,
        "inputs": {},
        "parent_run": None,
        "error": None,
        "owner_pid": None,
        "owner_start": None,
        "started_at": now,
        "finished_at": None,
        "updated_at": now,
        "steps": [StepRecord(step, 0, "script", status=step_status)],
    }
    return RunRecord(**{**values, **fields})


def write_run(state: Path | str, record: RunRecord) -> None:
    """Write `record` straight into the state at `state` (a SQLite file or a postgresql:// URL)."""
    store = Store(state)
    try:
        store.create_run(record)
    finally:
        store.close()


def start_strict_run(state_db: Path, *, session: str, run_id: str) -> None:
    """A strict run owned by this (live) test process, its script step running: a hook's step gate refuses the
    session's other calls."""
    from abilities_mcp.state.owners import process_start

    owner = {"owner_pid": os.getpid(), "owner_start": process_start(os.getpid())}
    write_run(state_db, run_record(run_id, session_id=session, step_status="running", **owner))
