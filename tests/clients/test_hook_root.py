"""The hook's project is the one init pins with `--root`, not the client's working directory: Codex sends its
exec_command's workdir as the payload's cwd, so a gated call run from a subfolder of the project (or /tmp) must
still meet the project's workflows.json. A hook an older init wrote, without `--root`, still answers as before."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from abilities_mcp.clients import configs
from abilities_mcp.state.project import Project
from support import HOOK_TIMEOUT_SECONDS, trust_project

PUSH = "git push --force origin main"
WORKFLOWS = {
    "force-push-needs-a-person": {
        "enabled": True,
        "mode": "enforce",
        "description": "A person approves every force push",
        "triggers": {"tools": ["Bash(git push --force:*)"]},
        "approval": {"expires": "10m"},
    }
}
SESSION = "hook-root-session"
# Each client with hooks: its hooks file, its before-tool event and a force push as its payload carries it.
CALLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "codex": (
        ".codex/hooks.json",
        "PreToolUse",
        {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": PUSH}},
    ),
    "claude": (
        ".claude/settings.json",
        "PreToolUse",
        {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": PUSH}},
    ),
    "gemini": (
        ".gemini/settings.json",
        "BeforeTool",
        {"session_id": SESSION, "tool_name": "run_shell_command", "tool_input": {"command": PUSH}},
    ),
    "cursor": (".cursor/hooks.json", "beforeShellExecution", {"conversation_id": SESSION, "command": PUSH}),
}
REFUSED = "needs a person's approval"


@pytest.fixture
def root(root: Path) -> Path:
    (root / "workflows.json").write_text(json.dumps(WORKFLOWS, indent=2))
    trust_project(Project.resolve(root))
    return root


def wire(root: Path, client: str) -> None:
    """`abilities-mcp init CLIENT`, with this Python as the command the client runs."""
    command = shlex.join([sys.executable, "-m", "abilities_mcp"])
    assert configs.init(root, client, dry_run=False, name="abilities", command=command, force=False) == 0


def command_of(root: Path, client: str, event: str) -> str:
    """The command line init wrote for the event, as the client reads it from its hooks file."""
    relpath, _, _ = CALLS[client]
    groups = json.loads((root / relpath).read_text())["hooks"][event]
    handlers = groups if client == "cursor" else [h for g in groups for h in g["hooks"]]
    [ours] = [h for h in handlers if configs.is_our_hook(h, event, client)]
    return ours["command"]


def unpinned(command: str) -> str:
    """The same command as an older init wrote it: without `--root ROOT`."""
    return shlex.join(configs.split_root(shlex.split(command))[0])


def run(command: str, payload: dict[str, Any], cwd: Path, env: dict[str, str] | None = None) -> str:
    """The command as the clients run a hook: a shell line, in `cwd`, JSON on stdin; what it said, either stream."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ABILITIES_", "GEMINI"))}
    done = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, **(env or {})},
        timeout=HOOK_TIMEOUT_SECONDS,
    )
    assert done.returncode in (0, 2), (done.returncode, done.stderr)
    return done.stdout + done.stderr


@pytest.mark.parametrize("where", ["subfolder", "tmp"])
@pytest.mark.parametrize("client", list(CALLS))
def test_a_gated_call_from_another_folder_is_still_gated_by_the_hook_init_wrote(
    root: Path, tmp_path: Path, client: str, where: str
) -> None:
    wire(root, client)
    _, event, payload = CALLS[client]
    command = command_of(root, client, event)
    assert shlex.split(command)[-2:] == ["--root", str(root)]
    elsewhere = root / "abilities" if where == "subfolder" else Path("/tmp")

    said = run(command, {**payload, "cwd": str(elsewhere)}, cwd=elsewhere)

    assert REFUSED in said, said


def test_codex_s_exec_command_with_a_workdir_in_the_project_cannot_step_around_the_gate(root: Path) -> None:
    """The security review's case, as Codex 0.169 sends it: the cwd is exec_command's workdir."""
    wire(root, "codex")
    command = command_of(root, "codex", "PreToolUse")
    payload = {**CALLS["codex"][2], "cwd": str(root / "abilities"), "tool_use_id": "call_1", "model": "gpt-5"}

    assert REFUSED in run(command, payload, cwd=root)
    # The same hook as an older init wrote it (doctor fails it): the workdir was taken for the project.
    assert REFUSED not in run(unpinned(command), payload, cwd=root)


def test_an_older_init_s_hook_without_root_still_answers_as_before(root: Path) -> None:
    wire(root, "codex")
    old = unpinned(command_of(root, "codex", "PreToolUse"))
    payload = CALLS["codex"][2]

    assert REFUSED in run(old, {**payload, "cwd": str(root)}, cwd=root)  # the payload's cwd
    assert REFUSED in run(old, {**payload, "cwd": "/tmp"}, cwd=Path("/tmp"), env={"ABILITIES_ROOT": str(root)})


def test_root_wins_over_the_environment_and_takes_either_spelling(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    payload = {**CALLS["claude"][2], "cwd": str(other)}
    hook = shlex.join([sys.executable, "-m", "abilities_mcp", "hook", "claude", "PreToolUse"])
    elsewhere = {"ABILITIES_ROOT": str(other), "CLAUDE_PROJECT_DIR": str(other)}

    assert REFUSED not in run(hook, payload, cwd=other, env=elsewhere)
    assert REFUSED in run(f"{hook} --root {shlex.quote(str(root))}", payload, cwd=other, env=elsewhere)
    assert REFUSED in run(f"{hook} {shlex.quote(f'--root={root}')}", payload, cwd=other, env=elsewhere)


def test_a_root_that_is_no_folder_refuses_a_tool_call_and_lets_the_rest_through(root: Path, tmp_path: Path) -> None:
    gone = tmp_path / "moved-away"
    base = [sys.executable, "-m", "abilities_mcp", "hook", "codex"]
    before = {**CALLS["codex"][2], "tool_input": {"command": "ls"}, "cwd": str(root)}

    refused = run(shlex.join([*base, "PreToolUse", "--root", str(gone)]), before, cwd=root)
    answer = json.loads(refused)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny" and "abilities-mcp init codex" in answer["permissionDecisionReason"]
    after = subprocess.run(
        [*base, "PostToolUse", "--root", str(gone)],
        input=json.dumps({**before, "hook_event_name": "PostToolUse", "tool_response": "ok"}),
        capture_output=True,
        text=True,
        timeout=HOOK_TIMEOUT_SECONDS,
    )
    assert after.returncode == 1 and after.stdout == "" and "is not a folder here" in after.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["hook", "codex", "PreToolUse", "--root"],  # no value
        ["hook", "codex", "PreToolUse", "--root", ""],
        ["hook", "codex", "PreToolUse", "--rot", "/x"],
        ["hook", "codex", "PreToolUse", "--url"],
        ["hook", "codex", "PreToolUse", "--url", "https://a", "--url", "https://b"],  # once each
    ],
)
def test_any_other_form_is_argparse_s_as_before(args: list[str]) -> None:
    from abilities_mcp.__main__ import _hook_args

    assert _hook_args(args[1:]) is None


def test_the_fast_path_reads_the_root_in_both_spellings() -> None:
    from abilities_mcp.__main__ import _hook_args

    assert _hook_args(["codex", "PreToolUse"]) == ("codex", "PreToolUse", {})
    assert _hook_args(["codex", "PreToolUse", "--root", "/p q"]) == ("codex", "PreToolUse", {"--root": "/p q"})
    assert _hook_args(["codex", "PreToolUse", "--root=/p q"]) == ("codex", "PreToolUse", {"--root": "/p q"})
