"""Approvals only a person gives: `abilities-mcp approve|decide` refuses every way an agent's tools have of making
a terminal for it (script, a Python pty, a detached session, a pipe), and records where a real answer came from."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.cli import person
from support import GATED, Terminal, cli, stored_run

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
    (shim / "sitecustomize.py").write_text(
        "import os, sys\n"
        "os.isatty = lambda fd: True\n"
        "for stream in (sys.stdin, sys.stdout):\n"
        "    stream.isatty = lambda: True\n"
    )

    result = _route(_approve(root, run_id), {**_clean_env(), "PYTHONPATH": str(shim)})

    assert "refused: stdin is not a terminal" in result.stderr, result.stdout + result.stderr
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
    assert f"python ({os.getpid()})" in answers[0]["answer"]  # this test made the terminal: it is in the record
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
