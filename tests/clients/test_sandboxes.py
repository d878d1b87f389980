"""`abilities-mcp init CLIENT --sandbox` with the real clients (pinned, headless, a scripted model): the settings it
writes are the ones the client takes, and its sandbox is on, so the agent's shell writes the project and nothing
outside it (the state folder included), however the model asks. Then `doctor` says the setup holds.

Each scenario is one headless run of the client on a project set up by `init CLIENT --sandbox`, whose model makes
the shell calls below; the write outside the project goes to a folder in the scenario's home, beside the state
folder. Nothing else is configured: the sandbox seen here is the one init turned on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_claude_code import bash, client_env, run_claude, sandbox_or_skip
from test_codex import run_codex
from test_gemini import run_gemini

import scripted_anthropic as anthropic
import scripted_gemini as gemini_model
import scripted_responses as responses
from client_scenarios import ABILITIES_MCP, INIT_TIMEOUT_SECONDS
from real_clients import CACHE, CLAUDE_CODE, CODEX, GEMINI_CLI, installed

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH: the clients come from npm")

# What the shell says when a sandbox's read-only mount refuses a write.
READ_ONLY = ("Read-only file system", "Permission denied")


@pytest.fixture(scope="module")
def outside_tmp() -> Iterator[Path]:
    """A scenario folder outside /tmp, removed after: Gemini CLI's sandbox gives the shell a /tmp of its own (a
    folder under the real one is not there at all, rather than read-only), and Codex will not put the helper its
    Linux sandbox runs under a temporary folder ("Refusing to create helper binaries under temporary dir")."""
    base = CACHE / "scratch" / f"sandboxes-{os.getpid()}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def init_sandbox(client: str, root: Path, env: dict[str, str]) -> str:
    """`abilities-mcp init CLIENT --sandbox`, as a person types it in the project; returns what it printed."""
    root.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(ABILITIES_MCP), "--root", str(root), "init", client, "--sandbox", "--command", str(ABILITIES_MCP)],
        capture_output=True,
        text=True,
        timeout=INIT_TIMEOUT_SECONDS,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def doctor(root: Path, env: dict[str, str], *client_bin: Path) -> subprocess.CompletedProcess:
    """`abilities-mcp doctor` in the project, the client's command on PATH (so its version is checked too)."""
    path = os.pathsep.join([*(str(b.parent) for b in client_bin), env["PATH"]])
    return subprocess.run(
        [str(ABILITIES_MCP), "--root", str(root), "doctor"],
        capture_output=True,
        text=True,
        timeout=INIT_TIMEOUT_SECONDS,
        env={**env, "PATH": path},
    )


def touch(path: Path) -> str:
    return f"touch {path}; echo rc=$?"


# --- Claude Code --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory):
    """A Claude Code session whose Bash calls write inside the project, outside it, outside it with
    dangerouslyDisableSandbox, and into the state folder found without naming it (so the hook's guards do not
    see it and only the sandbox can refuse)."""
    sandbox_or_skip()
    base = tmp_path_factory.mktemp("claude-sandbox-init")
    root, env = base / "project", {**os.environ, **client_env(base)}
    printed = init_sandbox("claude", root, env)
    outside = base / "home" / "elsewhere"
    outside.mkdir(parents=True)
    state_home = Path(env["XDG_STATE_HOME"]) / "abilities-mcp"
    state_home.mkdir(parents=True, exist_ok=True)
    find_state = "d=$HOME/.local/st; d=${d}ate/abilit; d=${d}ies-mcp; touch $d/forged; echo rc=$?"
    turns = [
        anthropic.call(bash(touch(root / "inside.txt"), "toolu_inside")),
        anthropic.call(bash(touch(outside / "out.txt"), "toolu_outside")),
        anthropic.call(bash(touch(outside / "unsandboxed.txt"), "toolu_unsandboxed", dangerouslyDisableSandbox=True)),
        anthropic.call(bash(find_state, "toolu_state")),
        anthropic.say("Done."),
    ]
    session = run_claude(base, root, "Write some files.", turns)
    return session, printed, outside, state_home, doctor(root, env, installed(CLAUDE_CODE))


def test_init_claude_sandbox_writes_the_sandbox_claude_code_takes(claude) -> None:
    session, printed, *_ = claude
    settings = json.loads((session.root / ".claude" / "settings.json").read_text())
    assert settings["sandbox"] == {
        "enabled": True,
        "autoAllowBashIfSandboxed": True,
        "allowUnsandboxedCommands": False,
        "failIfUnavailable": True,  # a sandbox Claude Code could not start would have stopped the run
    }
    assert "allowUnsandboxedCommands is false" in printed
    inside = session.result("toolu_inside")
    assert not inside.is_error and "rc=0" in inside.text and (session.root / "inside.txt").exists()


@pytest.mark.parametrize("tool_use_id", ["toolu_outside", "toolu_unsandboxed", "toolu_state"])
def test_with_the_sandbox_init_wrote_bash_writes_nothing_outside_the_project(claude, tool_use_id: str) -> None:
    session, _, outside, state_home, _ = claude
    result = session.result(tool_use_id)
    assert "rc=1" in result.text and any(said in result.text for said in READ_ONLY), result.text
    assert not result.text.startswith("PreToolUse:"), "the hook stopped it: the sandbox was not what was tested"
    assert list(outside.iterdir()) == [] and not (state_home / "forged").exists()


def test_doctor_says_the_claude_code_setup_holds_with_the_real_client(claude) -> None:
    *_, report = claude
    assert report.returncode == 0, report.stdout + report.stderr
    assert "ok    Claude Code: sandbox on, as verified" in report.stdout
    assert f"ok    Claude Code: {CLAUDE_CODE.version}, verified in CI" in report.stdout  # its real --version


# --- Gemini CLI ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemini(outside_tmp: Path):
    """A Gemini CLI session (--yolo) whose shell writes inside the project, outside it, outside it asking for
    `additional_permissions`, and whose write_file aims outside it."""
    sandbox_or_skip()  # bubblewrap, as Gemini CLI's tool sandbox uses it on Linux
    base = outside_tmp / "gemini"
    root, home = base / "project", base / "home"
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    printed = init_sandbox("gemini", root, env)
    outside = home / "elsewhere"
    outside.mkdir(parents=True)
    more = {"additional_permissions": {"fileSystem": {"write": [str(outside)]}}}
    turns = [
        gemini_model.calls(("run_shell_command", {"command": touch(root / "inside.txt")})),
        gemini_model.calls(("run_shell_command", {"command": touch(outside / "out.txt")})),
        gemini_model.calls(("run_shell_command", {"command": touch(outside / "asked.txt"), **more})),
        gemini_model.calls(("write_file", {"file_path": str(outside / "written.txt"), "content": "x"})),
        gemini_model.say("Done."),
    ]
    session = run_gemini(base, root, "Write some files.", turns)
    return session, printed, outside, doctor(root, env, installed(GEMINI_CLI))


def test_init_gemini_sandbox_turns_on_gemini_clis_tool_sandbox(gemini) -> None:
    session, printed, *_ = gemini
    assert json.loads((session.root / ".gemini" / "settings.json").read_text())["security"] == {"toolSandboxing": True}
    assert "security.toolSandboxing" in printed
    inside = session.results()[0]
    assert "rc=0" in inside and (session.root / "inside.txt").exists(), inside


def test_with_gemini_clis_tool_sandbox_nothing_is_written_outside_the_project(gemini) -> None:
    session, _, outside, _ = gemini
    _, plain, asked, written = session.results()
    assert "rc=1" in plain and "Read-only file system" in plain, plain
    assert "requires user confirmation" in asked, asked  # more room needs a person's yes, even under --yolo
    assert "resolves outside the allowed workspace directories" in written, written
    assert list(outside.iterdir()) == []


def test_doctor_says_the_gemini_cli_setup_holds_with_the_real_client(gemini) -> None:
    *_, report = gemini
    assert report.returncode == 0, report.stdout + report.stderr
    assert "ok    Gemini CLI: sandbox on, as verified" in report.stdout
    assert "ok    Gemini CLI: 0.61.0, verified in CI" in report.stdout


# --- Codex --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex(outside_tmp: Path):
    """A Codex session whose user config says danger-full-access (as test_codex.py's does) and approval "never":
    the project's sandbox_mode from init wins, and a command that asks to leave the sandbox is refused."""
    base = outside_tmp / "codex"
    root, home = base / "project", base / "home"
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    env["CODEX_HOME"] = str(home / ".codex")
    printed = init_sandbox("codex", root, env)
    outside = home / "elsewhere"
    outside.mkdir(parents=True)
    escalated = {"sandbox_permissions": "require_escalated", "justification": "write a file"}
    turns = [
        responses.calls(("exec_command", {"cmd": touch(root / "inside.txt")})),
        responses.calls(("exec_command", {"cmd": touch(outside / "out.txt")})),
        responses.calls(("exec_command", {"cmd": touch(outside / "escalated.txt"), **escalated})),
        responses.say("Done."),
    ]
    session = run_codex(base, root, "Write some files.", turns)
    return session, printed, outside, doctor(root, env, installed(CODEX))


def test_init_codex_sandbox_puts_workspace_write_in_the_projects_config(codex) -> None:
    session, printed, *_ = codex
    config = (session.root / ".codex" / "config.toml").read_text()
    assert config.startswith('sandbox_mode = "workspace-write"\n')
    assert "Codex reads .codex/config.toml only once you trust this project" in printed
    inside = session.results()[0]
    assert "rc=0" in inside and (session.root / "inside.txt").exists(), inside


def test_with_the_projects_workspace_write_codex_writes_nothing_outside_it(codex) -> None:
    session, _, outside, _ = codex
    _, plain, escalated = session.results()
    assert "rc=1" in plain and "Read-only file system" in plain, plain  # over the user's danger-full-access
    assert "approval policy is Never" in escalated, escalated
    assert list(outside.iterdir()) == []


def test_doctor_says_the_codex_setup_holds_with_the_real_client(codex) -> None:
    *_, report = codex
    assert report.returncode == 0, report.stdout + report.stderr
    assert "ok    Codex: sandbox_mode workspace-write (.codex/config.toml)" in report.stdout
    assert "ok    Codex: 0.169.0, verified in CI" in report.stdout
