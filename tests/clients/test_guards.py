"""The guards: in every session, with or without a live run, no agent tool runs a person's approval command,
touches the state file, or changes the files that decide what gates the agent (hooks, plugins, settings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abilities_mcp.clients.guards import refusal
from abilities_mcp.state.project import default_state_dir
from support import run_hook

ROOT = Path("/work/project")
HOME = Path("/home/me")
# The project's state folder by default: in the user's state home, outside the tree the agent's sandbox may write.
STATE = default_state_dir(ROOT, HOME / ".local" / "state")

REFUSED = [
    ("Bash", {"command": "abilities-mcp approve run_1"}),
    ("Bash", {"command": "echo y | script -qec 'abilities-mcp approve run_1' /dev/null"}),
    ("Bash", {"command": "/home/me/.venv/bin/abilities-mcp decide run_1 continue"}),
    ("Bash", {"command": "python3 -m abilities_mcp --root . approve run_1"}),
    ("bash", {"command": "sqlite3 .abilities/state.db \"UPDATE runs SET answer='x'\""}),
    ("Bash", {"command": f"python3 -c 'import sqlite3; sqlite3.connect(\"{STATE}/state.db\")'"}),
    ("Bash", {"command": f"sqlite3 ~/.local/state/abilities-mcp/projects/{STATE.name}/state.db .dump"}),
    ("Bash", {"command": f'sqlite3 "$HOME/.local/state/abilities-mcp/projects/{STATE.name}/state.db"'}),
    ("Bash", {"command": f"cd /tmp && sqlite3 {STATE.name}/state.db"}),
    ("Bash", {"command": "cd ~/.local/state && sqlite3 abilities-mcp/projects/other-0badc0de/state.db"}),
    ("Bash", {"command": 'sqlite3 "$XDG_STATE_HOME/abilities-mcp/projects/x/state.db"'}),
    ("Write", {"file_path": f"{STATE}/state.db", "content": ""}),
    ("Write", {"file_path": "~/.local/state/abilities-mcp/projects/other-0badc0de/state.db", "content": ""}),
    ("Bash", {"command": "cat > .claude/settings.local.json <<'EOF'\n{}\nEOF"}),
    ("Bash", {"command": "cp evil.js .opencode/plugins/"}),
    ("Bash", {"command": "echo '{}' > ~/.claude/settings.json"}),
    ("Write", {"file_path": ".claude/settings.local.json", "content": "{}"}),
    ("Write", {"file_path": str(ROOT / ".mcp.json"), "content": "{}"}),
    ("Edit", {"file_path": "opencode.json", "old_string": "a", "new_string": "b"}),
    ("write", {"filePath": ".opencode/plugins/x.js", "content": ""}),
    ("Write", {"file_path": "~/.claude/settings.json", "content": "{}"}),
    ("Write", {"file_path": "sub/../.abilities/state.db", "content": ""}),
    ("Edit", {"file_path": ".cursor/hooks.json", "old_string": "a", "new_string": "b"}),
    ("Bash", {"command": "abilities-mcp trust --yes"}),
    ("Bash", {"command": "echo y | script -qec 'python3 -m abilities_mcp trust' /dev/null"}),
    ("Bash", {"command": "abilities-mcp init claude --force"}),
    ("Bash", {"command": "claude mcp add abilities -- ./fake-server"}),
    ("Bash", {"command": "claude mcp remove abilities"}),
    ("Bash", {"command": "codex mcp add db -- ./db"}),
    ("Write", {"file_path": "~/.claude.json", "content": "{}"}),
    ("Bash", {"command": 'python3 -c \'open("/home/me/.claude.json", "w")\''}),
]
ALLOWED = [
    ("Bash", {"command": "pytest -q"}),
    ("Bash", {"command": "tail ~/.local/state/other-tool/log"}),
    ("Write", {"file_path": "~/.local/state/other-tool/log", "content": ""}),
    ("Bash", {"command": "abilities-mcp status run_1"}),
    ("Bash", {"command": "abilities-mcp validate"}),
    ("Bash", {"command": "claude mcp list"}),
    ("Bash", {"command": "cat abilities/deploy.yaml"}),
    ("Write", {"file_path": "src/app.py", "content": ""}),
    ("Write", {"file_path": ".claude/agents/reviewer.md", "content": ""}),
    ("Read", {"file_path": ".claude/settings.json"}),
    ("Grep", {"pattern": "abilities-mcp approve"}),
    ("mcp__db__execute_query", {"command": "abilities-mcp approve"}),  # another server's tool: not a shell
]


@pytest.fixture
def _home(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's `~` and state home: /home/me, its XDG_STATE_HOME the default."""
    monkeypatch.setenv("HOME", str(HOME))
    monkeypatch.delenv("XDG_STATE_HOME")


@pytest.mark.usefixtures("_home")
@pytest.mark.parametrize(("tool", "arguments"), REFUSED, ids=[f"{t}:{json.dumps(a)[:60]}" for t, a in REFUSED])
def test_a_call_that_would_answer_for_a_person_or_change_the_gates_is_refused(tool: str, arguments: dict) -> None:
    why = refusal(tool, arguments, ROOT, STATE)
    assert why is not None and why.startswith(f"abilities-mcp: {tool} refused:")
    assert "only a person" in why or "a person's answer" in why


@pytest.mark.usefixtures("_home")
@pytest.mark.parametrize(("tool", "arguments"), ALLOWED, ids=[f"{t}:{json.dumps(a)[:60]}" for t, a in ALLOWED])
def test_everyday_calls_pass_the_guards(tool: str, arguments: dict) -> None:
    assert refusal(tool, arguments, ROOT, STATE) is None


def test_a_link_into_a_protected_folder_is_that_folder(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / "innocent").symlink_to(tmp_path / ".claude")
    assert refusal("Write", {"file_path": "innocent/settings.local.json"}, tmp_path, tmp_path / ".abilities")


def test_claude_code_s_pretooluse_denies_an_approval_command_with_no_run_live(root: Path) -> None:
    payload = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "echo y | script -qec 'abilities-mcp approve run_x' /dev/null"},
    }
    done = run_hook(root, "claude", "PreToolUse", payload)
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert done.returncode == 0, done.stderr
    assert answer["permissionDecision"] == "deny"
    assert "a person's answer" in answer["permissionDecisionReason"]


def test_claude_code_s_pretooluse_denies_writing_an_elicitation_hook_into_settings(root: Path) -> None:
    payload = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(root / ".claude" / "settings.local.json"), "content": "{}"},
    }
    answer = json.loads(run_hook(root, "claude", "PreToolUse", payload).stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "settings.local.json" in answer["permissionDecisionReason"]


def test_opencode_s_tool_before_blocks_writing_the_state_file(root: Path) -> None:
    payload = {"tool": "bash", "sessionID": "ses_1", "callID": "c1", "args": {"command": "rm -rf .abilities"}}
    done = run_hook(root, "opencode", "tool-before", payload)
    assert done.returncode == 2
    assert ".abilities" in done.stderr and "only a person" in done.stderr
