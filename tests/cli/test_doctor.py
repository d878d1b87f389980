"""`abilities-mcp doctor` against scratch projects that hold and break each check: the line it prints, the fix under
a red one, and the exit code (1 when a check fails)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.cli import doctor
from abilities_mcp.clients import configs
from abilities_mcp.clients.sandbox import Where
from abilities_mcp.clients.versions import VERIFIED
from abilities_mcp.state.project import Project
from support import REPO

# Generous: a cold interpreter imports the package.
CLI_TIMEOUT_SECONDS = 60


def stub(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A PATH folder with abilities-mcp, and stand-ins for what the sandboxes need (bubblewrap, socat)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    stub(folder / "abilities-mcp", f'exec "{sys.executable}" -m abilities_mcp "$@"')
    for name in ("bwrap", "socat"):
        stub(folder / name, "exit 0")
    return folder


def init(root: Path, client: str, tools: Path, sandbox: bool = True, **options) -> None:
    command = str(tools / "abilities-mcp")
    assert (
        configs.init(
            root, client, dry_run=False, name="abilities", command=command, force=False, sandbox=sandbox, **options
        )
        == 0
    )


def run_doctor(root: Path, tools: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    """`abilities-mcp doctor` as typed in the project, with PATH holding `tools` and the system's commands."""
    env = {**os.environ, "PATH": path or os.pathsep.join([str(tools), "/usr/bin", "/bin"])}
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "doctor", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        env=env,
    )


def lines(result: subprocess.CompletedProcess, status: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(f"{status:<5} ")]


def fix_under(result: subprocess.CompletedProcess, line_start: str) -> str:
    """The fix printed under the first line that starts so."""
    out = result.stdout.splitlines()
    index = next(i for i, line in enumerate(out) if line.startswith(line_start))
    assert out[index + 1].startswith("    fix: "), out[index : index + 2]
    return out[index + 1].removeprefix("    fix: ")


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def state_folder(root: Path, mode: int = 0o700) -> Path:
    """The project's state folder as the server makes it, holding a state file (SQLite creates it 0644)."""
    folder = Project.resolve(root).state_dir
    folder.mkdir(parents=True, mode=mode)
    folder.chmod(mode)
    (folder / "state.db").write_bytes(b"")
    (folder / "state.db").chmod(0o644)
    return folder


# --- a setup that holds -------------------------------------------------------------------------------------------


def test_a_project_set_up_by_init_claude_sandbox_holds_every_check(root: Path, tools: Path) -> None:
    env = {**os.environ, "PATH": os.pathsep.join([str(tools), "/usr/bin", "/bin"])}
    init_cli = [sys.executable, "-m", "abilities_mcp", "--root", str(root), "init", "claude", "--sandbox"]
    done = subprocess.run(init_cli, capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS, env=env)
    assert done.returncode == 0, done.stderr

    result = run_doctor(root, tools)

    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result, "fail") == [] and lines(result, "warn") == []
    ok = lines(result, "ok")
    assert "ok    Claude Code: server 'abilities' in .mcp.json runs " in "\n".join(ok)
    assert any(line.startswith("ok    Claude Code: hooks for PreToolUse, PostToolUse") for line in ok), ok
    assert any(line.startswith("ok    Claude Code: sandbox on, as verified") for line in ok), ok
    assert any(line.startswith("ok    state folder: ") and "outside the project" in line for line in ok), ok
    assert result.stdout.rstrip().endswith("No check failed.")


def test_the_report_is_json_with_json(root: Path, tools: Path) -> None:
    init(root, "claude", tools, sandbox=False)

    result = run_doctor(root, tools, "--json")

    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["ok"] is False
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    assert failing and all(set(c) == {"status", "subject", "text", "fix"} and c["fix"] for c in failing)


def test_at_a_terminal_each_line_carries_a_mark_instead_of_a_word() -> None:
    findings = [doctor.Finding("ok", "a", "fine"), doctor.Finding("fail", "b", "broken", "mend it")]

    assert doctor.render(findings, marks=True).splitlines() == [
        "[✓] a: fine",
        "[✗] b: broken",
        "    fix: mend it",
        "1 check failed: the fix is under each.",
    ]
    assert doctor.render(findings, marks=False).splitlines()[:2] == ["ok    a: fine", "fail  b: broken"]


# --- Claude Code: each check broken --------------------------------------------------------------------------------


def test_claude_code_without_its_sandbox_fails_and_says_init_sandbox(root: Path, tools: Path) -> None:
    init(root, "claude", tools, sandbox=False)

    result = run_doctor(root, tools)

    assert result.returncode == 1
    failing = "\n".join(lines(result, "fail"))
    assert "Claude Code: sandbox.enabled is false (Claude Code's default), so Bash runs unsandboxed" in failing
    assert "sandbox.allowUnsandboxedCommands is true (Claude Code's default)" in failing
    assert fix_under(result, "fail  Claude Code: sandbox.enabled") == "abilities-mcp init claude --sandbox"


def test_a_sandbox_value_the_project_sets_otherwise_names_the_key_to_set(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    settings = root / ".claude" / "settings.json"
    write_json(settings, {**read_json(settings), "sandbox": {**read_json(settings)["sandbox"], "enabled": False}})

    result = run_doctor(root, tools)

    line = "fail  Claude Code: sandbox.enabled is false (.claude/settings.json), so Bash runs unsandboxed"
    assert any(x.startswith(line) for x in lines(result, "fail")), result.stdout
    fix = "set sandbox.enabled to true in .claude/settings.json (or abilities-mcp init claude --sandbox --force)"
    assert fix_under(result, line) == fix


def test_allow_unsandboxed_commands_in_the_local_settings_fails_and_names_that_file(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    write_json(root / ".claude" / "settings.local.json", {"sandbox": {"allowUnsandboxedCommands": True}})

    result = run_doctor(root, tools)

    assert result.returncode == 1
    line = "fail  Claude Code: sandbox.allowUnsandboxedCommands is true (.claude/settings.local.json)"
    assert any(x.startswith(line) for x in lines(result, "fail")), result.stdout
    assert fix_under(result, line) == "remove it from .claude/settings.local.json"


def test_allow_unsandboxed_commands_false_in_the_users_settings_holds_whatever_the_project_says(
    root: Path, tools: Path
) -> None:
    init(root, "claude", tools)
    write_json(root / ".claude" / "settings.local.json", {"sandbox": {"allowUnsandboxedCommands": True}})
    write_json(Path(os.environ["HOME"]) / ".claude" / "settings.json", {"sandbox": {"allowUnsandboxedCommands": False}})

    result = run_doctor(root, tools)

    assert result.returncode == 0, result.stdout  # Claude Code's schema: a false there still applies


def test_missing_hooks_fail_and_name_the_events(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    settings = root / ".claude" / "settings.json"
    data = read_json(settings)
    del data["hooks"]["PreToolUse"], data["hooks"]["Stop"]
    write_json(settings, data)

    result = run_doctor(root, tools)

    assert result.returncode == 1
    line = "fail  Claude Code: no abilities-mcp hook for PreToolUse, Stop in .claude/settings.json: those gates are off"
    assert line in lines(result, "fail")
    assert fix_under(result, line) == "abilities-mcp init claude"


def test_hooks_whose_command_is_gone_fail_as_gates_that_fail_open(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    (tools / "abilities-mcp").unlink()

    result = run_doctor(root, tools)

    assert result.returncode == 1
    failing = "\n".join(lines(result, "fail"))
    assert f"hooks in .claude/settings.json run {str(tools / 'abilities-mcp')!r}, which is not found" in failing
    assert f"server 'abilities' in .mcp.json runs {str(tools / 'abilities-mcp')!r}, which is not found" in failing


def pinned(path: Path, root: str | None) -> None:
    """Our hooks in the file pinned to `root` instead (None: without --root, as an older init wrote them)."""
    text = path.read_text()
    for command in {h["command"] for g in read_json(path)["hooks"].values() for h in g[0]["hooks"]}:
        words, _ = configs.split_root(shlex.split(command))
        text = text.replace(json.dumps(command), json.dumps(shlex.join([*words, "--root", root] if root else words)))
    path.write_text(text)


def test_hooks_without_root_fail_since_a_call_run_elsewhere_would_step_around_them(root: Path, tools: Path) -> None:
    init(root, "codex", tools, sandbox=False)
    pinned(root / ".codex" / "hooks.json", None)

    result = run_doctor(root, tools)

    assert result.returncode == 1
    line = next(x for x in lines(result, "fail") if x.startswith("fail  Codex: the hooks for PreToolUse, PostToolUse"))
    assert "in .codex/hooks.json have no --root" in line and "subfolder or /tmp is not gated" in line, line
    assert fix_under(result, line).startswith("abilities-mcp init codex again")

    init(root, "codex", tools, sandbox=False)  # pins them (no --force needed)
    assert not any("--root" in x for x in lines(run_doctor(root, tools), "fail"))


def test_hooks_pinned_to_another_folder_fail(root: Path, tools: Path, tmp_path: Path) -> None:
    init(root, "claude", tools)
    pinned(root / ".claude" / "settings.json", str(tmp_path / "old-place"))

    result = run_doctor(root, tools)

    line = next(x for x in lines(result, "fail") if x.startswith("fail  Claude Code: the hooks in"))
    assert f"pinned to {str(tmp_path / 'old-place')!r} (--root), not this project" in line, line


def test_hooks_disabled_in_any_settings_file_fail(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    write_json(root / ".claude" / "settings.local.json", {"disableAllHooks": True})

    result = run_doctor(root, tools)

    assert "fail  Claude Code: disableAllHooks is true in .claude/settings.local.json: no hook runs" in result.stdout


def test_a_client_config_without_the_server_entry_fails(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    write_json(root / ".mcp.json", {"mcpServers": {"other": {"command": "other-server"}}})

    result = run_doctor(root, tools)

    line = "fail  Claude Code: no server entry starts abilities-mcp, so the agent has none of its tools"
    assert line in lines(result, "fail")
    assert fix_under(result, line) == "abilities-mcp init claude"


def test_a_client_config_that_does_not_parse_fails_naming_it(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    (root / ".mcp.json").write_text('{"mcpServers": {')

    result = run_doctor(root, tools)

    line = "fail  Claude Code: .mcp.json does not parse, so Claude Code reads no server from it"
    assert line in lines(result, "fail"), result.stdout
    assert fix_under(result, line) == "fix its syntax; `abilities-mcp init claude --dry-run` names the problem"


def test_claude_codes_sandbox_fails_where_bubblewrap_and_socat_are_missing(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    (tools / "bwrap").unlink()
    (tools / "socat").unlink()

    result = run_doctor(root, tools, path=str(tools))

    line = "fail  Claude Code: its sandbox cannot start here: bubblewrap socat not found"
    assert line in lines(result, "fail"), result.stdout
    assert fix_under(result, line) == "install bubblewrap socat (apt-get install bubblewrap socat)"


# --- the state folder ---------------------------------------------------------------------------------------------


def test_a_state_folder_other_users_can_read_fails_with_the_chmod_that_closes_it(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    folder = state_folder(root, 0o755)

    result = run_doctor(root, tools)

    line = f"fail  state folder: {folder} has mode 0755: other users can read it (or write it)"
    assert line in lines(result, "fail")
    assert fix_under(result, line) == f"chmod 700 {folder} and chmod 600 {folder / 'state.db'}"


def test_a_0700_state_folder_is_ok_whatever_sqlite_made_its_files(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    state_folder(root, 0o700)  # its file 0644: unreachable through the folder

    result = run_doctor(root, tools)

    assert "ok    state folder: mode 0700: yours alone" in result.stdout and result.returncode == 0


def test_a_state_folder_inside_the_project_fails(root: Path, tools: Path) -> None:
    init(root, "claude", tools, state_dir=Path("/elsewhere"))

    result = run_doctor(root, tools, "--state-dir", str(root / ".state"))

    assert result.returncode == 1
    assert f"fail  state folder: {root / '.state'} is inside the project" in result.stdout


def test_a_state_folder_the_clients_sandbox_may_write_fails_naming_the_setting(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    state = Path(os.environ["XDG_STATE_HOME"])
    local = write_json(
        root / ".claude" / "settings.local.json", {"permissions": {"additionalDirectories": [str(state)]}}
    )

    result = run_doctor(root, tools)

    assert result.returncode == 1
    why = f"(permissions.additionalDirectories in {local}), which Claude Code's sandbox lets the shell write"
    assert why in "\n".join(lines(result, "fail"))
    assert f"remove {str(state)!r} from permissions.additionalDirectories" in result.stdout


# --- the other clients --------------------------------------------------------------------------------------------


def trust_in_codex(root: Path, *extra: str) -> None:
    """The user's Codex config: this project trusted, and /tmp kept out of workspace-write (this test's state folder
    is under pytest's /tmp)."""
    config = Path(os.environ["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[projects."{root}"]\ntrust_level = "trusted"\n\n'
        "[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n" + "".join(extra)
    )


def test_codex_in_workspace_write_holds_once_the_project_is_trusted(root: Path, tools: Path) -> None:
    trust_in_codex(root)
    init(root, "codex", tools)

    result = run_doctor(root, tools)

    assert result.returncode == 0, result.stdout
    assert "ok    Codex: sandbox_mode workspace-write (.codex/config.toml)" in result.stdout
    assert "ok    Codex: hooks for PreToolUse, PostToolUse, UserPromptSubmit, SessionStart, Stop" in result.stdout


def test_codex_sandbox_mode_waits_for_the_person_to_trust_the_project(root: Path, tools: Path) -> None:
    trust_in_codex(Path("/some/other/project"))
    init(root, "codex", tools)

    result = run_doctor(root, tools)

    line = "warn  Codex: .codex/config.toml is not read until you trust this project in Codex"
    assert any(x.startswith(line) for x in lines(result, "warn")), result.stdout
    assert result.returncode == 0


def test_codex_without_a_confining_sandbox_mode_fails(root: Path, tools: Path) -> None:
    trust_in_codex(root)
    init(root, "codex", tools, sandbox=False)

    result = run_doctor(root, tools)

    line = "fail  Codex: sandbox_mode is null (not set), so its shell writes wherever you can"
    assert any(x.startswith(line) for x in lines(result, "fail")), result.stdout
    assert fix_under(result, line) == "abilities-mcp init codex --sandbox"


def test_gemini_with_tool_sandboxing_holds(root: Path, tools: Path) -> None:
    init(root, "gemini", tools)

    result = run_doctor(root, tools)

    assert result.returncode == 0, result.stdout
    assert "ok    Gemini CLI: sandbox on, as verified (toolSandboxing in .gemini/settings.json)" in result.stdout


def test_a_client_with_no_sandbox_warns_with_what_to_do_instead_and_does_not_fail(root: Path, tools: Path) -> None:
    init(root, "opencode", tools, sandbox=False)

    result = run_doctor(root, tools)

    assert result.returncode == 0, result.stdout
    assert "warn  OpenCode: OpenCode has no sandbox of its own" in result.stdout
    assert "ok    OpenCode: plugin .opencode/plugins/abilities-mcp.js runs " in result.stdout


def test_vscode_without_hooks_warns_that_its_own_tools_are_not_gated(root: Path, tools: Path) -> None:
    init(root, "vscode", tools, sandbox=False)

    result = run_doctor(root, tools)

    assert "warn  VS Code: has no hooks: this server's tools are gated, the client's own (shell, edits) are not" in (
        result.stdout
    )


def test_a_project_with_no_client_set_up_warns(root: Path, tools: Path) -> None:
    result = run_doctor(root, tools)

    assert result.returncode == 0
    assert "warn  clients: no client is set up in this project" in result.stdout
    assert fix_under(result, "warn  clients:").startswith("abilities-mcp init claude --sandbox")


# --- client versions ----------------------------------------------------------------------------------------------


def test_a_client_on_path_at_the_verified_version_is_ok(root: Path, tools: Path) -> None:
    init(root, "claude", tools)
    stub(tools / "claude", f'echo "{VERIFIED["claude"].version} (Claude Code)"')

    result = run_doctor(root, tools)

    assert f"ok    Claude Code: {VERIFIED['claude'].version}, verified in CI" in result.stdout


def version_setup(root: Path, run) -> doctor.Setup:
    return doctor.Setup(
        Project.resolve(root), Where.here(), ["codex"], which=lambda name: f"/opt/{name}", run=lambda *a, **k: run()
    )


def answers(stdout: str):
    return lambda: subprocess.CompletedProcess([], 0, stdout, "")


def timeout():
    raise subprocess.TimeoutExpired("codex", doctor.VERSION_TIMEOUT_SECONDS)


@pytest.mark.parametrize(
    ("run", "status", "text", "fix"),
    [
        (answers(f"codex-cli {VERIFIED['codex'].version}\n"), "ok", f"{VERIFIED['codex'].version}, verified in CI", ""),
        (answers("codex-cli 0.170.2\n"), "warn", f"0.170.2, not the {VERIFIED['codex'].version} CI verifies", "npm"),
        (timeout, "warn", "`codex --version` failed", "npm install -g @openai/codex@"),
        (answers("codex\n"), "warn", "`codex --version` said no version", "npm install -g"),
    ],
    ids=["verified", "another-version", "hangs", "no-version"],
)
def test_a_clients_version_is_compared_with_the_one_ci_verifies(root: Path, run, status, text, fix) -> None:
    [finding] = doctor.client_versions(version_setup(root, run))

    assert (finding.status, finding.subject) == (status, "Codex")
    assert finding.text.startswith(text) and finding.fix.startswith(fix)


def test_a_client_not_on_path_is_not_checked(root: Path) -> None:
    setup = doctor.Setup(Project.resolve(root), Where.here(), ["gemini", "cursor"], which=lambda name: None)

    [finding] = doctor.client_versions(setup)  # Cursor has no version CI verifies

    assert finding.status == "skip" and "`gemini` is not on PATH" in finding.text


def test_the_readme_names_the_versions_ci_verifies() -> None:
    table = (REPO / "README.md").read_text().split("| client | command |", 1)[1].split("\n\n", 1)[0]
    for client, pin in VERIFIED.items():
        row = next(line for line in table.splitlines() if f"`abilities-mcp init {client}" in line)
        assert re.search(rf"\b{re.escape(pin.label)} {re.escape(pin.version)}\b", row), row


# --- trust --------------------------------------------------------------------------------------------------------

DEPLOY = "description: deploy\nsteps:\n  - {id: ok, type: approval, prompt: Go?}\nsettings: {enforcement: strict}\n"


def test_an_edit_waiting_for_trust_fails_and_names_the_file_and_the_command(root: Path, tools: Path) -> None:
    from support import trust_project

    (root / "abilities" / "deploy.yaml").write_text(DEPLOY)
    trust_project(Project.resolve(root))
    (root / "abilities" / "deploy.yaml").write_text(DEPLOY.replace("strict", "loose"))

    result = run_doctor(root, tools)

    assert result.returncode == 1
    [line] = [x for x in lines(result, "fail") if x.startswith("fail  trust: ")]
    assert "abilities/deploy.yaml edits that would lower a gate (settings.enforcement strict → loose)" in line
    assert fix_under(result, "fail  trust: ").endswith("abilities-mcp trust")


def test_a_file_nobody_trusted_is_a_warning_and_a_trusted_project_is_ok(root: Path, tools: Path) -> None:
    from support import trust_project

    (root / "abilities" / "deploy.yaml").write_text(DEPLOY)
    warned = [x for x in lines(run_doctor(root, tools), "warn") if x.startswith("warn  trust: ")]
    assert warned == [
        "warn  trust: 1 file(s) not as a person trusted them (abilities/deploy.yaml); new abilities run strict"
    ]
    trust_project(Project.resolve(root))
    assert "ok    trust: every file that decides a gate is as a person trusted it" in lines(
        run_doctor(root, tools), "ok"
    )


def test_an_abilities_mcp_installed_inside_the_project_fails_since_the_agent_may_rewrite_it(
    root: Path, tools: Path
) -> None:
    (root / ".venv" / "bin").mkdir(parents=True)
    inside = stub(root / ".venv" / "bin" / "abilities-mcp", "exit 0")
    init(root, "claude", tools)
    data = read_json(root / ".mcp.json")
    data["mcpServers"]["abilities"]["command"] = str(inside)
    write_json(root / ".mcp.json", data)

    result = run_doctor(root, tools)

    [line] = [x for x in lines(result, "fail") if x.startswith("fail  install: ")]
    assert f"Claude Code's abilities-mcp ({inside})" in line and "can rewrite what gates it" in line
    assert "install abilities-mcp outside the project" in fix_under(result, "fail  install: ")
