"""The first ten minutes at the command line: --version, a server started by hand says what it is, a failed step
shows why and where its output is, `logs` prints it all, exit codes mean something, messages speak CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support import CLI, Terminal, cli

CHECKS = """
description: three checks, every one reported
settings: {on_failure: continue}
steps:
  - {id: ok, type: script, run: "echo fine"}
  - id: broken
    type: script
    run: "for i in $(seq 1 40); do echo line-$i; done; echo boom >&2; exit 3"
  - {id: after, type: script, run: "echo still ran"}
"""


def run(root: Path, *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(root, *args), capture_output=True, text=True, timeout=120, **kwargs)


@pytest.fixture
def project(root: Path) -> Path:
    (root / "abilities" / "checks.yaml").write_text(textwrap.dedent(CHECKS))
    (root / "abilities" / "needs.yaml").write_text(
        textwrap.dedent(
            r"""
            description: needs a version
            inputs:
              version: {type: string, required: true, pattern: '^v\d+\.\d+$'}
            steps:
              - {id: a, type: script, run: "true"}
            """
        )
    )
    return root


def test_version() -> None:
    done = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("abilities-mcp 0.")


def test_a_failed_step_under_continue_fails_the_command_and_shows_its_output_tail(project: Path) -> None:
    done = run(project, "run", "checks")
    assert done.returncode == 1, done.stderr
    assert "--- broken failed: exit code 3, expected 0" in done.stderr
    assert "    | line-40" in done.stderr and "    | line-10" not in done.stderr  # the last 20 lines
    assert "    | boom" in done.stderr
    run_id = done.stdout.split()[1].rstrip(":")
    assert f"all of it: abilities-mcp logs {run_id} broken" in done.stderr

    logs = run(project, "logs", run_id, "broken")
    assert logs.returncode == 0
    assert "=== broken (script, failed, exit 3)" in logs.stdout
    assert "line-1\n" in logs.stdout and "line-40" in logs.stdout and "boom" in logs.stdout
    every = run(project, "logs", run_id)
    assert "=== ok" in every.stdout and "still ran" in every.stdout
    missing = run(project, "logs", run_id, "nope")
    assert missing.returncode == 2 and "its steps: ok, broken, after" in missing.stderr


def test_a_run_that_passes_exits_0_and_one_cancelled_exits_3(project: Path) -> None:
    (project / "abilities" / "fine.yaml").write_text(
        "description: fine\nsteps:\n  - {id: a, type: script, run: 'true'}\n"
    )
    assert run(project, "run", "fine").returncode == 0
    (project / "abilities" / "slow.yaml").write_text(
        "description: slow\nsteps:\n  - {id: a, type: script, run: 'echo started; sleep 600'}\n"
    )
    with subprocess.Popen(
        cli(project, "run", "slow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout.readline().startswith("run run_")
        assert "[>] a" in proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 3


def test_cli_messages_use_cli_words(project: Path) -> None:
    unknown = run(project, "run", "nope")
    assert unknown.returncode == 2 and "Run `abilities-mcp list` to see what exists." in unknown.stderr
    missing = run(project, "run", "needs")
    assert "pass it with -i version=VALUE" in missing.stderr
    bad = run(project, "run", "needs", "-i", "version=x")
    assert r"does not match the pattern '^v\d+\.\d+$'" in bad.stderr  # as written, not doubled


def test_json_modes_print_json_and_empty_listings_say_so(project: Path) -> None:
    status = run(project, "status", "--json")
    assert (status.returncode, json.loads(status.stdout)) == (0, None)
    history = run(project, "history")
    assert history.returncode == 0 and history.stdout.startswith("No runs yet.")
    listed = run(project, "list")
    assert "(default false)" in listed.stdout or "default" not in listed.stdout


def test_run_help_explains_its_arguments_and_exit_codes() -> None:
    done = subprocess.run([*CLI, "run", "--help"], capture_output=True, text=True, timeout=60)
    assert "the ability, as `abilities-mcp list` shows it" in done.stdout
    assert "an input; repeat for several" in done.stdout
    assert "Exit 0 when every step passed, 1 when a step failed" in " ".join(done.stdout.split())


def test_a_server_started_by_hand_at_a_terminal_says_what_it_is_and_answers_a_typed_line(root: Path) -> None:
    term = Terminal([sys.executable, "-m", "abilities_mcp", "--root", str(root)], cwd=root, env=dict(os.environ))
    try:
        term.expect("an MCP server on stdio")
        term.expect("Ctrl-C")
        os.write(term.master, b"hello\n")
        term.expect('"code":-32700')  # a typed line that is not JSON-RPC is answered, not swallowed
    finally:
        term.proc.kill()
        term.proc.wait(timeout=30)


def test_workflows_list_of_a_file_whose_every_entry_is_broken_says_so_and_fails(root: Path) -> None:
    (root / "workflows.json").write_text('{"a": {"triggers": 5}, "b": {"mode": "x"}}')
    done = run(root, "workflows", "list")
    assert done.returncode == 1
    assert "can be applied: every entry has a problem" in done.stdout and "a.triggers" in done.stderr


SLOW = "description: slow\nsteps:\n  - {id: build, type: script, run: 'echo compiling module-7; sleep 600'}\n"


def test_at_a_terminal_the_step_in_flight_shows_its_elapsed_time_and_last_line(root: Path) -> None:
    (root / "abilities" / "slow.yaml").write_text(SLOW)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    term = Terminal(cli(root, "run", "slow"), root, env=env)
    try:
        shown = term.expect("compiling module-7")  # captured, not printed: only the progress line shows it
        assert "[>] build  " in shown
        term.type("\x03")
        term.expect("cancelled")
        assert term.wait() == 3
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


def test_piped_or_under_ci_progress_comes_as_plain_lines(root: Path) -> None:
    (root / "abilities" / "slow.yaml").write_text(SLOW)
    env = {**os.environ, "CI": "true", "ABILITIES_PROGRESS_EVERY": "1"}
    with subprocess.Popen(
        cli(root, "run", "slow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert "compiling module-7  (still running)" in lines[-1] and "\x1b" not in "".join(lines)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


@pytest.mark.parametrize("command", [["list"], ["serve"], ["status"]])
def test_a_missing_root_is_an_error_naming_it_and_nothing_is_created(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "${workspaceFolder}"  # a client config whose variable the client did not expand
    done = subprocess.run(
        [*CLI, "--root", str(missing), *command], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2
    assert f"the project root {str(missing)!r} does not exist" in done.stderr and "${...}" in done.stderr
    assert not missing.exists() and done.stdout == ""
