"""Approvals only a person gives: `abilities-mcp approve|decide` and `run`'s inline prompt refuse every way an
agent's tools have of making a terminal for them (script, a Python pty, a detached session, a pipe, a shim), check
again when the answer comes, and record where a real answer came from."""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from abilities_mcp.cli import person
from support import FAKE_TERMINAL, GATED, Terminal, cli, stored_run

# A command that ends by itself: refused at once, or waiting at the [y/N] prompt for the "y" it was sent.
ROUTE_TIMEOUT_SECONDS = 30


async def _waiting_run(client, write) -> str:
    write("gated", GATED)
    run = (await client.call_tool("ability_run", {"name": "gated", "wait_seconds": 10})).structured_content
    assert run["status"] == "awaiting_approval", run
    return run["run_id"]


def _agent_client(tmp_path: Path) -> Path:
    """A shell that carries an agent client's program name, as Claude Code's Bash tool's parent does."""
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir(exist_ok=True)
    claude.symlink_to("/bin/sh")
    return claude


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in person.AGENT_ENV}


def _route(command: str, env: dict[str, str] | None = None, shell: str = "/bin/sh") -> subprocess.CompletedProcess:
    """Run `command` as an agent's shell tool would: a pipe for stdin that says yes, no terminal of its own."""
    return subprocess.run(
        [shell, "-c", command],
        input="y\n",
        capture_output=True,
        text=True,
        timeout=ROUTE_TIMEOUT_SECONDS,
        env=env if env is not None else _clean_env(),
    )


def _approve(root: Path, run_id: str) -> str:
    return shlex.join(cli(root, "approve", run_id))


def _pty_spawn(argv: str) -> str:
    return shlex.join([sys.executable, "-c", f"import pty, shlex; pty.spawn(shlex.split({argv!r}))"])


ROUTES = {
    "script-inside-the-agent": lambda approve, claude: (f"script -qec {shlex.quote(approve)} /dev/null", claude, {}),
    "python-pty-inside-the-agent": lambda approve, claude: (_pty_spawn(approve), claude, {}),
    "nohup-script-inside-the-agent": lambda approve, claude: (
        f"nohup script -qec {shlex.quote(approve)} /dev/null",
        claude,
        {},
    ),
    "setsid-detached-with-the-agents-environment": lambda approve, claude: (
        f"setsid -w script -qec {shlex.quote(approve)} /dev/null",
        "/bin/sh",
        {"CLAUDECODE": "1"},
    ),
    "setsid-detached-and-the-command-scrubbed": lambda approve, claude: (
        f"setsid -w script -qec {shlex.quote('env -u CLAUDECODE ' + approve)} /dev/null",
        "/bin/sh",
        {"CLAUDECODE": "1"},
    ),
    "a-pipe": lambda approve, claude: (f"echo y | {approve}", claude, {}),
}


@pytest.mark.parametrize("route", list(ROUTES), ids=list(ROUTES))
async def test_an_agents_route_to_a_terminal_is_refused_and_nothing_is_recorded(
    client, write, root: Path, tmp_path: Path, route: str
) -> None:
    run_id = await _waiting_run(client, write)
    command, shell, extra_env = ROUTES[route](_approve(root, run_id), str(_agent_client(tmp_path)))

    result = _route(command, {**_clean_env(), **extra_env}, shell)

    said = result.stdout + result.stderr
    assert "refused" in said and "Recorded" not in said, said
    assert stored_run(root, run_id).status == "awaiting_approval"
    assert not (root / "deployed").exists()


async def test_a_pythonpath_shim_that_makes_isatty_say_yes_does_not_run_in_the_command(
    client, write, root: Path, tmp_path: Path
) -> None:
    run_id = await _waiting_run(client, write)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(FAKE_TERMINAL)

    result = _route(_approve(root, run_id), {**_clean_env(), "PYTHONPATH": str(shim)})

    assert "refused: stdin is not a terminal" in result.stderr, result.stdout + result.stderr
    assert stored_run(root, run_id).status == "awaiting_approval"


def _read_until(process: subprocess.Popen, needle: str) -> str:
    """What a piped command printed, up to `needle` (bounded: the test fails if it never comes)."""
    text, fd = "", process.stdout.fileno()
    deadline = time.monotonic() + ROUTE_TIMEOUT_SECONDS
    while needle not in text:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            process.kill()
            raise AssertionError(f"{needle!r} never came; the command said:\n{text}")
        text += chunk.decode(errors="replace")
    return text


def test_run_under_a_pythonpath_shim_that_fakes_a_terminal_takes_no_answer_from_its_pipe(
    root: Path, tmp_path: Path
) -> None:
    (root / "abilities" / "gated.yaml").write_text(GATED)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(FAKE_TERMINAL)
    env = {**_clean_env(), "PYTHONPATH": str(shim)}

    with subprocess.Popen(
        cli(root, "run", "gated"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    ) as runner:
        runner.stdin.write(b"y\n")  # the agent's yes, through the pipe the shim dresses as a terminal
        runner.stdin.flush()
        said = _read_until(runner, "The run waits for it.")
        run_id = said.split("run ", 1)[1].split(":", 1)[0]
        waiting = stored_run(root, run_id)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(ROUTE_TIMEOUT_SECONDS) == 3  # cancelled, never approved

    assert "The answer cannot come from here (stdin is not a terminal)" in said, said
    assert f"abilities-mcp approve {run_id}" in said
    assert waiting.status == "awaiting_approval" and waiting.answers == []
    assert not (root / "deployed").exists()


@contextmanager
def _agent_holding(master: int, tmp_path: Path) -> Iterator[None]:
    """A process of an agent client takes hold of a person's terminal (its master side) while a command waits."""
    agent = [str(_agent_client(tmp_path)), "-c", "read line"]  # waits, holding the terminal, until it is killed
    with subprocess.Popen(agent, stdin=subprocess.PIPE, pass_fds=[master]) as holder:
        try:
            yield
        finally:
            holder.kill()


def test_run_checks_for_a_person_when_the_answer_comes_not_only_when_it_asks(root: Path, tmp_path: Path) -> None:
    (root / "abilities" / "gated.yaml").write_text(GATED)
    term = Terminal(cli(root, "run", "gated"), root)
    run_id = term.expect("[y/N]").split("run ", 1)[1].split(":", 1)[0]

    with _agent_holding(term.master, tmp_path):
        term.type("y")
        said = term.expect("The run waits for it.")
        waiting = stored_run(root, run_id)
    term.proc.send_signal(signal.SIGTERM)

    assert "its terminal was made by claude (" in said and "nothing was recorded" in said, said
    assert f"abilities-mcp approve {run_id}" in said
    assert waiting.status == "awaiting_approval" and waiting.answers == []
    assert term.wait() == 3 and not (root / "deployed").exists()


async def test_approve_checks_for_a_person_again_when_the_confirmation_comes(client, write, root, tmp_path) -> None:
    run_id = await _waiting_run(client, write)
    term = Terminal(cli(root, "approve", run_id), root)
    term.expect("[y/N]")

    with _agent_holding(term.master, tmp_path):
        term.type("y")
        said = term.expect("own terminal")
        code = term.wait()

    assert "refused: its terminal was made by claude (" in said and "nothing was recorded" in said, said
    assert code == 2 and "Recorded" not in said
    assert stored_run(root, run_id).status == "awaiting_approval"


# A library the dynamic loader puts into a command (LD_PRELOAD) that makes any descriptor a terminal, as the
# PYTHONPATH shim does one level down.
FAKE_TERMINAL_C = """
#include <string.h>
int isatty(int fd) { return 1; }
int ttyname_r(int fd, char *buf, size_t len) { strncpy(buf, "/dev/pts/4242", len); return 0; }
char *ttyname(int fd) { static char name[] = "/dev/pts/4242"; return name; }
"""


def _fake_terminal_library(tmp_path: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or sys.platform != "linux":
        pytest.skip("no C compiler to build an LD_PRELOAD library with (or not Linux)")
    source, library = tmp_path / "fake.c", tmp_path / "fake.so"
    source.write_text(FAKE_TERMINAL_C)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, timeout=60)
    return library


def test_run_under_an_ld_preload_library_that_fakes_a_terminal_takes_no_answer_from_its_pipe(
    root: Path, tmp_path: Path
) -> None:
    (root / "abilities" / "gated.yaml").write_text(GATED)
    env = {**_clean_env(), "LD_PRELOAD": str(_fake_terminal_library(tmp_path))}

    with subprocess.Popen(
        cli(root, "run", "gated"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    ) as runner:
        runner.stdin.write(b"y\n")
        runner.stdin.flush()
        said = _read_until(runner, "The run waits for it.")
        run_id = said.split("run ", 1)[1].split(":", 1)[0]
        waiting = stored_run(root, run_id)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(ROUTE_TIMEOUT_SECONDS) == 3

    assert "The answer cannot come from here (stdin is not a terminal)" in said, said
    assert waiting.status == "awaiting_approval" and waiting.answers == []
    assert not (root / "deployed").exists()


@pytest.mark.parametrize("isolated", [False, True], ids=["as-typed", "already-in-isolated-mode"])
async def test_approve_under_an_ld_preload_library_that_fakes_a_terminal_is_refused(
    client, write, root: Path, tmp_path: Path, isolated: bool
) -> None:
    run_id = await _waiting_run(client, write)
    library = _fake_terminal_library(tmp_path)
    command = cli(root, "approve", run_id)
    if isolated:  # started in isolated mode, it does not re-run itself: the variable is still there when it checks
        command = [command[0], "-I", *command[1:]]

    result = _route(shlex.join(command), {**_clean_env(), "LD_PRELOAD": str(library)})

    said = result.stdout + result.stderr
    why = "it runs with LD_PRELOAD set" if isolated else "stdin is not a terminal"
    assert f"refused: {why}" in said and "Recorded" not in said, said
    assert stored_run(root, run_id).status == "awaiting_approval"


async def test_the_refusal_names_the_agent_client_and_the_process_chain(client, write, root, tmp_path) -> None:
    run_id = await _waiting_run(client, write)
    claude = _agent_client(tmp_path)
    term = Terminal([str(claude), "-c", _approve(root, run_id)], root)

    said = term.expect("own terminal")

    assert "it runs inside claude (" in said and "an agent client" in said
    assert term.wait() == 2


async def test_a_person_s_answer_records_the_terminal_and_the_process_chain_and_status_shows_it(
    client, write, root
) -> None:
    run_id = await _waiting_run(client, write)
    term = Terminal(cli(root, "approve", run_id), root)
    term.expect("[y/N]")
    term.type("y")
    term.expect("Recorded")
    assert term.wait() == 0

    status = subprocess.run(cli(root, "status", run_id, "--json"), capture_output=True, text=True, timeout=30)
    answers = json.loads(status.stdout)["answers"]
    assert [a["step"] for a in answers] == ["approve"]
    assert answers[0]["answer"].startswith("approved by terminal (/dev/pts/")
    assert person.ancestry(os.getpid())[0].label() in answers[0]["answer"]  # this test made the terminal
    history = subprocess.run(cli(root, "history"), capture_output=True, text=True, timeout=30).stdout
    assert "answered approve: approved by terminal (/dev/pts/" in history


async def test_a_form_answer_records_the_client_that_showed_it(project, write) -> None:
    from mcp import Client
    from mcp.types import ElicitResult

    from abilities_mcp.server import create_server
    from support import TEST_RETRY_BASE

    async def accept(ctx, params) -> ElicitResult:
        return ElicitResult(action="accept", content={"approve": True})

    write("gated", GATED)
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server, mode="legacy", elicitation_callback=accept) as c:
        run = (await c.call_tool("ability_run", {"name": "gated", "wait_seconds": 10})).structured_content
    assert run["status"] == "completed", run
    assert run["answers"][0]["answer"].startswith("approved by elicitation (form shown by ")


def test_ancestry_reads_program_names_with_spaces_and_parentheses(tmp_path: Path) -> None:
    for pid, ppid, comm, argv in [(30, 20, "node", ["node", "/x/claude-code/cli.js"]), (20, 1, "a (b) c", ["sh"])]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} 30 30 0 -1\n")
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    chain = person.ancestry(30, tmp_path)

    assert [(p.pid, p.name) for p in chain] == [(30, "node"), (20, "a (b) c")]
    assert person._agent_in(chain, tmp_path) == "node (30)"


async def test_what_an_agent_chose_reaches_the_persons_terminal_inert(client, write, root: Path) -> None:
    write("gated", GATED)
    hostile = "v9\x1b[2K\r\x1b[32mstaging (docs only)\u202e"
    run = await client.call_tool("ability_run", {"name": "gated", "inputs": {"version": hostile}, "wait_seconds": 10})
    run_id = run.structured_content["run_id"]

    term = Terminal(cli(root, "approve", run_id), root)
    shown = term.expect("[y/N]")
    term.type("n")
    term.wait()

    assert "\x1b" not in shown and "\r" not in shown.replace("\r\n", "\n") and "\u202e" not in shown
    assert "v9\\x1b[2K\\x0d\\x1b[32mstaging (docs only)\\u202e" in shown  # shown, as the text it is
