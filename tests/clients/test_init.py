"""`abilities-mcp init CLIENT`: the files each client gets, merged into what the person already has without losing
a key, a handler, the order or the indentation; refused, with the file named and nothing written, when a rewrite
would lose something; and a second run that changes no byte."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from abilities_mcp.clients import configs as client_config
from abilities_mcp.clients.configs import (
    CLIENTS,
    PLUGIN_OPTIONS_TOKEN,
    PLUGIN_TOKEN,
    desktop_config_path,
    resolve_command,
)
from abilities_mcp.state.project import Project

# Generous: a cold interpreter imports the package.
CLI_TIMEOUT_SECONDS = 60
HOOK_EVENTS = ["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop"]
# The events whose hooks take a matcher (the tool name, or SessionStart's source); the others take none.
MATCHERS = {"PreToolUse": "*", "PostToolUse": "*", "SessionStart": "startup|resume|clear|compact|fork"}
WORKSPACE = ["--root", "${workspaceFolder}"]
# (client, file under the project root, keys down to the servers' object, our entry for --command abilities-mcp)
JSON_CLIENTS = [
    ("claude", ".mcp.json", ["mcpServers"], {"type": "stdio", "command": "abilities-mcp", "args": ["serve"]}),
    ("opencode", "opencode.json", ["mcp"], {"type": "local", "command": ["abilities-mcp", "serve"], "enabled": True}),
    ("cursor", ".cursor/mcp.json", ["mcpServers"], {"command": "abilities-mcp", "args": ["serve", *WORKSPACE]}),
    (
        "vscode",
        ".vscode/mcp.json",
        ["servers"],
        {"type": "stdio", "command": "abilities-mcp", "args": ["serve", *WORKSPACE]},
    ),
    ("gemini", ".gemini/settings.json", ["mcpServers"], {"command": "abilities-mcp", "args": ["serve"]}),
]
JSON_IDS = [c[0] for c in JSON_CLIENTS]


@pytest.fixture(autouse=True)
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `abilities-mcp` executable first on PATH, as after `pip install` (Claude Desktop resolves it)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "abilities-mcp"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return script


def init(root: Path, client: str, **options) -> int:
    settings = {"dry_run": False, "name": "abilities", "command": "abilities-mcp", "force": False, **options}
    return client_config.init(root, client, **settings)


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data, indent: int | str = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")
    return path


def snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under folder: its bytes, mtime and inode (an atomic rewrite changes the inode even if not bytes)."""
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def desktop_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "Claude" / "claude_desktop_config.json"


def plugin_template() -> str:
    return resources.files("abilities_mcp.clients").joinpath("opencode_plugin.js").read_text(encoding="utf-8")


def claude_handler(event: str, root: Path | None, command: str = "abilities-mcp") -> dict:
    """Our Claude Code handler as init writes it, the project pinned by --root (None: an older init's, without)."""
    pinned = f" --root {shlex.quote(str(root))}" if root is not None else ""
    return {"type": "command", "command": f"{command} hook claude {event}{pinned}", "timeout": 10}


# --- what each client gets --------------------------------------------------------------------------------------


def test_claude_gets_the_server_in_mcp_json_and_one_hook_per_event_in_settings(root: Path, capsys) -> None:
    assert init(root, "claude") == 0

    assert read_json(root / ".mcp.json") == {
        "mcpServers": {"abilities": {"type": "stdio", "command": "abilities-mcp", "args": ["serve"]}}
    }
    assert read_json(root / ".claude" / "settings.json") == {
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [claude_handler("PreToolUse", root)]}],
            "PostToolUse": [{"matcher": "*", "hooks": [claude_handler("PostToolUse", root)]}],
            "UserPromptSubmit": [{"hooks": [claude_handler("UserPromptSubmit", root)]}],
            "SessionStart": [
                {"matcher": "startup|resume|clear|compact|fork", "hooks": [claude_handler("SessionStart", root)]}
            ],
            "Stop": [{"hooks": [claude_handler("Stop", root)]}],
        }
    }
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"wrote {root / '.mcp.json'}", f"wrote {root / '.claude' / 'settings.json'}"]
    assert out[2:] == [client_config.NEXT_STEPS["claude"]]  # what to do next, the doctor among it
    assert "start a new Claude Code session" in out[2] and "abilities-mcp doctor" in out[2]


def test_claude_hooks_wire_exactly_the_events_the_hook_command_answers() -> None:
    from abilities_mcp.clients.hook import EVENTS

    assert list(client_config.CLAUDE_HOOKS) == list(EVENTS["claude"]) == HOOK_EVENTS


def test_claude_hooks_follow_the_documented_format_and_quote_a_path_with_spaces(root: Path) -> None:
    command = "'/opt/my tools/abilities-mcp' --log-level debug"
    assert init(root, "claude", command=command) == 0

    hooks = read_json(root / ".claude" / "settings.json")["hooks"]
    assert list(hooks) == HOOK_EVENTS
    for event, groups in hooks.items():
        assert isinstance(groups, list) and len(groups) == 1
        (group,) = groups
        assert set(group) == ({"matcher", "hooks"} if event in MATCHERS else {"hooks"}), event
        assert group.get("matcher") == MATCHERS.get(event)
        (handler,) = group["hooks"]
        assert handler["type"] == "command" and isinstance(handler["timeout"], int)
        argv = ["/opt/my tools/abilities-mcp", "--log-level", "debug", "hook", "claude", event, "--root", str(root)]
        assert shlex.split(handler["command"]) == argv
    server = read_json(root / ".mcp.json")["mcpServers"]["abilities"]
    assert server == {
        "type": "stdio",
        "command": "/opt/my tools/abilities-mcp",
        "args": ["--log-level", "debug", "serve"],
    }


# The files each of these clients gets: its server entry's, and its hooks' (VS Code's hooks are not wired).
CLIENT_FILES = {
    "cursor": [".cursor/hooks.json", ".cursor/mcp.json"],
    "vscode": [".vscode/mcp.json"],
    "gemini": [".gemini/settings.json"],
}


@pytest.mark.parametrize(("client", "relpath", "keys", "entry"), JSON_CLIENTS[2:], ids=JSON_IDS[2:])
def test_cursor_vscode_and_gemini_get_their_documented_entry(root: Path, client, relpath, keys, entry) -> None:
    assert init(root, client) == 0

    assert read_json(root / relpath)[keys[0]] == {"abilities": entry}
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == CLIENT_FILES[client]


@pytest.mark.parametrize("client", ["codex", "gemini", "cursor"])
def test_codex_gemini_and_cursor_hooks_wire_exactly_the_events_the_hook_command_answers(client) -> None:
    from abilities_mcp.clients.hook import EVENTS, KINDS

    wired = list(client_config.CLIENT_HOOKS[client])
    assert set(wired) <= set(EVENTS[client])
    # Every kind the hook answers before and after a tool, and at stop, is wired.
    assert {KINDS[e] for e in wired} >= {"before", "after", "stop"}


def hook_argv(client: str, event: str, root: Path) -> list[str]:
    return ["/opt/my tools/abilities-mcp", "hook", client, event, "--root", str(root)]


def test_codex_gets_its_hooks_in_hooks_json_beside_config_toml(root: Path, capsys) -> None:
    assert init(root, "codex", command="'/opt/my tools/abilities-mcp'") == 0

    hooks = read_json(root / ".codex" / "hooks.json")["hooks"]
    assert list(hooks) == ["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop"]
    for event, [group] in hooks.items():
        assert group.get("matcher") == ("*" if event.endswith("ToolUse") else None)
        [handler] = group["hooks"]
        assert set(handler) == {"type", "command", "timeout"} and handler["type"] == "command"
        assert shlex.split(handler["command"]) == hook_argv("codex", event, root) and handler["timeout"] == 10
    assert "[mcp_servers.abilities]" in (root / ".codex" / "config.toml").read_text()
    out = capsys.readouterr().out
    assert "/hooks" in out and "trust" in out


def test_gemini_gets_its_hooks_beside_the_server_in_settings_json(root: Path, capsys) -> None:
    assert init(root, "gemini", command="'/opt/my tools/abilities-mcp'") == 0

    hooks = read_json(root / ".gemini" / "settings.json")["hooks"]
    assert list(hooks) == ["BeforeTool", "AfterTool", "BeforeAgent", "SessionStart", "AfterAgent"]
    for event, [group] in hooks.items():
        assert group.get("matcher") == ("*" if event.endswith("Tool") else None)
        [handler] = group["hooks"]
        assert shlex.split(handler["command"]) == hook_argv("gemini", event, root)
        assert handler["type"] == "command" and handler["timeout"] == 10_000  # milliseconds
    assert "trusted folder" in capsys.readouterr().out


def test_cursor_gets_a_versioned_hooks_json(root: Path, capsys) -> None:
    assert init(root, "cursor", command="'/opt/my tools/abilities-mcp'") == 0

    data = read_json(root / ".cursor" / "hooks.json")
    assert data["version"] == 1
    assert {e: [shlex.split(h["command"]) for h in hs] for e, hs in data["hooks"].items()} == {
        e: [hook_argv("cursor", e, root)] for e in client_config.CLIENT_HOOKS["cursor"]
    }
    assert data["hooks"]["preToolUse"][0]["matcher"] == "Write|Edit|StrReplace|Delete"
    assert "not driven for real" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("client", "relpath", "theirs"),
    [
        (
            "codex",
            ".codex/hooks.json",
            {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}]}},
        ),
        (
            "gemini",
            ".gemini/settings.json",
            {
                "ui": {"theme": "dark"},
                "hooks": {
                    "BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "fmt.sh"}]}]
                },
            },
        ),
        (
            "cursor",
            ".cursor/hooks.json",
            {"version": 1, "hooks": {"beforeShellExecution": [{"command": "./audit.sh"}]}},
        ),
    ],
    ids=["codex", "gemini", "cursor"],
)
def test_codex_gemini_and_cursor_hooks_keep_the_persons_handlers_and_a_rerun_changes_no_byte(
    root: Path, client, relpath, theirs
) -> None:
    path = write_json(root / relpath, theirs)
    assert init(root, client) == 0
    first = path.read_bytes()
    assert init(root, client) == 0

    assert path.read_bytes() == first
    text = first.decode()
    for command in ("lint.sh", "fmt.sh", "./audit.sh"):
        assert (command in json.dumps(theirs)) == (command in text)
    assert f"hook {client} " in text


@pytest.mark.parametrize(
    ("client", "relpath"),
    [("codex", ".codex/hooks.json"), ("gemini", ".gemini/settings.json"), ("cursor", ".cursor/hooks.json")],
)
def test_codex_gemini_and_cursor_hooks_files_with_comments_are_refused_untouched(
    root: Path, client, relpath, capsys
) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True)
    path.write_text('{\n  // mine\n  "hooks": {}\n}\n')

    assert init(root, client) == 1

    assert path.read_text() == '{\n  // mine\n  "hooks": {}\n}\n'
    assert "comments" in capsys.readouterr().err
    assert not (root / ".codex" / "config.toml").exists() and not (root / ".cursor" / "mcp.json").exists()


def test_codex_gemini_and_cursor_dry_run_shows_the_hooks_and_writes_nothing(root: Path, capsys) -> None:
    for client in ("codex", "gemini", "cursor"):
        assert init(root, client, dry_run=True) == 0

    out = capsys.readouterr().out
    assert not any(root.rglob("*.json")) and not any(root.rglob("*.toml"))
    for line in ("+++ " + str(root / ".codex" / "hooks.json"), "hook codex PreToolUse", "hook gemini BeforeTool"):
        assert line in out
    assert "hook cursor beforeShellExecution" in out


def test_opencode_gets_the_v1_entry_with_schema_and_the_plugin(root: Path) -> None:
    assert init(root, "opencode", command="uvx abilities-mcp") == 0

    assert read_json(root / "opencode.json") == {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {"abilities": {"type": "local", "command": ["uvx", "abilities-mcp", "serve"], "enabled": True}},
    }
    plugin = (root / ".opencode" / "plugins" / "abilities-mcp.js").read_text(encoding="utf-8")
    before, after = plugin_template().replace(PLUGIN_OPTIONS_TOKEN, "[]").split(PLUGIN_TOKEN)
    assert PLUGIN_TOKEN not in plugin
    assert plugin.startswith(before) and plugin.endswith(after)
    assert plugin[len(before) : len(plugin) - len(after)] == '["uvx", "abilities-mcp"]'


def test_opencode_keeps_the_v2_layout_it_finds(root: Path) -> None:
    other = {"type": "local", "command": ["other-server"]}
    write_json(root / "opencode.json", {"mcp": {"servers": {"other": other}}, "model": "x"})

    assert init(root, "opencode") == 0

    assert read_json(root / "opencode.json") == {
        "mcp": {"servers": {"other": other, "abilities": {"type": "local", "command": ["abilities-mcp", "serve"]}}},
        "model": "x",
    }


def test_opencode_edits_opencode_jsonc_when_that_is_the_file_there(root: Path) -> None:
    write_json(root / "opencode.jsonc", {"theme": "dark"})

    assert init(root, "opencode") == 0

    assert not (root / "opencode.json").exists()
    data = read_json(root / "opencode.jsonc")
    assert data["theme"] == "dark" and "$schema" not in data and "abilities" in data["mcp"]


def test_opencode_replaces_a_plugin_that_differs_and_says_so(root: Path, capsys) -> None:
    plugin = root / ".opencode" / "plugins" / "abilities-mcp.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("// an older plugin\n")

    assert init(root, "opencode") == 0

    assert PLUGIN_TOKEN not in plugin.read_text() and "an older plugin" not in plugin.read_text()
    out = capsys.readouterr().out
    assert f"wrote {plugin}" in out and "differed from this version's plugin" in out


def test_codex_gets_a_toml_table(root: Path) -> None:
    assert init(root, "codex", command='uvx "abilities mcp"') == 0

    text = (root / ".codex" / "config.toml").read_text(encoding="utf-8")
    assert text == '[mcp_servers.abilities]\ncommand = "uvx"\nargs = ["abilities mcp", "serve"]\n'
    assert tomllib.loads(text) == {"mcp_servers": {"abilities": {"command": "uvx", "args": ["abilities mcp", "serve"]}}}


@pytest.mark.parametrize(
    "existing",
    ['model = "o3"\n# my servers\n[mcp_servers.other]\ncommand = "x"\n', 'model = "o3"', 'model = "o3"\n\n'],
    ids=["table-at-end", "no-final-newline", "blank-line-at-end"],
)
def test_codex_appends_after_the_existing_text_byte_for_byte(root: Path, existing: str) -> None:
    path = root / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_bytes(existing.encode())

    assert init(root, "codex", command=shlex.join(['C:\\tools\\a"b'])) == 0

    text = path.read_bytes().decode()
    assert text.startswith(existing)
    assert "\n\n[mcp_servers.abilities]\n" in text and "\n\n\n" not in text
    data = tomllib.loads(text)
    assert data["mcp_servers"]["abilities"] == {"command": 'C:\\tools\\a"b', "args": ["serve"]}
    assert data["model"] == "o3"


def test_codex_leaves_an_entry_that_differs_and_refuses_to_rewrite_it_with_force(root: Path, capsys) -> None:
    path = root / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('[mcp_servers.abilities] # mine\ncommand = "old"\n')
    before = path.read_bytes()

    assert init(root, "codex") == 0
    assert "kept your existing abilities entry" in capsys.readouterr().out
    assert init(root, "codex", force=True) == 1

    err = capsys.readouterr().err
    assert str(path) in err and "by hand" in err
    assert tomllib.loads(err.split("by hand with:\n", 1)[1])["mcp_servers"]["abilities"]["command"] == "abilities-mcp"
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "text",
    ["[mcp_servers\ncommand = 1\n", "mcp_servers = { other = { command = 'x' } }\n"],
    ids=["invalid-toml", "inline-table-cannot-grow"],
)
def test_codex_refuses_a_file_it_cannot_append_to(root: Path, text: str, capsys) -> None:
    path = root / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(text)

    assert init(root, "codex") == 1

    assert str(path) in capsys.readouterr().err
    assert path.read_text() == text


def test_desktop_gets_absolute_paths_and_the_project_root(root: Path, installed: Path) -> None:
    assert init(root, "desktop") == 0

    assert read_json(desktop_file()) == {
        "mcpServers": {"abilities": {"command": str(installed), "args": ["serve", "--root", str(root)]}}
    }


def test_desktop_refuses_a_command_it_cannot_find(root: Path, capsys) -> None:
    assert init(root, "desktop", command="no-such-abilities-mcp") == 1

    assert "--command with an absolute path" in capsys.readouterr().err
    assert not desktop_file().exists()


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("darwin", {}, "/h/Library/Application Support/Claude/claude_desktop_config.json"),
        ("win32", {"APPDATA": "/r"}, "/r/Claude/claude_desktop_config.json"),
        ("win32", {}, "/h/AppData/Roaming/Claude/claude_desktop_config.json"),
        ("linux", {"XDG_CONFIG_HOME": "/x"}, "/x/Claude/claude_desktop_config.json"),
        ("linux", {}, "/h/.config/Claude/claude_desktop_config.json"),
        ("linux", {"XDG_CONFIG_HOME": "relative"}, "/h/.config/Claude/claude_desktop_config.json"),
    ],
    ids=["macos", "windows", "windows-no-appdata", "linux-xdg", "linux-default", "linux-relative-xdg-ignored"],
)
def test_desktop_config_path_follows_each_platform(platform: str, env: dict, expected: str) -> None:
    assert desktop_config_path(platform, env, Path("/h")) == Path(expected)


# --- merging into what is there ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "relpath", "keys", "entry"), JSON_CLIENTS, ids=JSON_IDS)
@pytest.mark.parametrize("indent", ["\t", 4], ids=["tabs", "4-spaces"])
def test_merge_keeps_other_keys_other_servers_the_order_and_the_indentation(
    root: Path, client, relpath, keys, entry, indent
) -> None:
    mine = {"command": "mine", "args": []}
    existing = {"z-first": 1, keys[0]: {"mine": mine}, "a-last": {"nested": [1, 2]}}
    path = write_json(root / relpath, existing, indent)

    assert init(root, client) == 0

    expected = {"z-first": 1, keys[0]: {"mine": mine, "abilities": entry}, "a-last": {"nested": [1, 2]}}
    if client == "gemini":  # its hooks share the file, after everything else
        expected["hooks"] = read_json(path)["hooks"]
    assert path.read_text(encoding="utf-8") == json.dumps(expected, indent=indent) + "\n"


@pytest.mark.parametrize(("client", "relpath", "keys", "entry"), JSON_CLIENTS, ids=JSON_IDS)
def test_merge_keeps_the_text_of_everything_it_leaves_alone(root: Path, client, relpath, keys, entry) -> None:
    mine = '{"command": "uvx",  "args": ["mcp-server-sqlite", "--db-path", "./shop.db"]}'  # one line, as written
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{{\n  "first": [1,2,  3],\n  "{keys[0]}": {{\n    "mine": {mine}\n  }}\n}}\n')

    assert init(root, client) == 0

    kept = f'{{\n  "first": [1,2,  3],\n  "{keys[0]}": {{\n    "mine": {mine},\n    "abilities": {{\n'
    assert path.read_text().startswith(kept)
    assert read_json(path)[keys[0]]["abilities"] == entry


def test_claude_hooks_merge_beside_the_persons_own_handlers(root: Path) -> None:
    mine = {"type": "command", "command": "./lint.sh", "timeout": 5}
    existing = {
        "permissions": {"deny": ["Bash(rm *)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [mine]}],
            "Stop": [{"hooks": [mine]}],
            "Notification": [{"hooks": [mine]}],
        },
    }
    path = write_json(root / ".claude" / "settings.json", existing)

    assert init(root, "claude") == 0

    hooks = read_json(path)["hooks"]
    assert read_json(path)["permissions"] == existing["permissions"]
    assert hooks["PreToolUse"] == [
        {"matcher": "Bash", "hooks": [mine]},
        {"matcher": "*", "hooks": [claude_handler("PreToolUse", root)]},
    ]
    assert hooks["Stop"] == [{"hooks": [mine]}, {"hooks": [claude_handler("Stop", root)]}]
    assert hooks["Notification"] == [{"hooks": [mine]}]
    assert list(hooks) == ["PreToolUse", "Stop", "Notification", "PostToolUse", "UserPromptSubmit", "SessionStart"]


def test_claude_recognises_its_handler_under_another_command_and_replaces_it_in_place_only_with_force(
    root: Path, capsys
) -> None:
    mine = {"type": "command", "command": "./lint.sh"}
    ours_before = claude_handler("PreToolUse", None, "/old/venv/bin/abilities-mcp")
    exec_form = {"type": "command", "command": "/old/abilities-mcp", "args": ["hook", "claude", "Stop"]}
    existing = {
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [mine, ours_before]}], "Stop": [{"hooks": [exec_form]}]}
    }
    path = write_json(root / ".claude" / "settings.json", existing)

    assert init(root, "claude") == 0
    hooks = read_json(path)["hooks"]
    assert hooks["PreToolUse"] == existing["hooks"]["PreToolUse"] and hooks["Stop"] == existing["hooks"]["Stop"]
    out = capsys.readouterr().out
    assert "kept your existing PreToolUse hook" in out and "kept your existing Stop hook" in out

    assert init(root, "claude", force=True) == 0
    hooks = read_json(path)["hooks"]
    assert hooks["PreToolUse"] == [{"matcher": "*", "hooks": [mine, claude_handler("PreToolUse", root)]}]
    assert hooks["Stop"] == [{"hooks": [claude_handler("Stop", root)]}]


# Each client with hooks: the file init writes them to.
HOOK_FILES = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
}


def repinned(data, root: str | None):
    """`data` with each of our hook commands pinned to `root` instead (None: unpinned, as an older init wrote it)."""
    if isinstance(data, list):
        return [repinned(item, root) for item in data]
    if not isinstance(data, dict):
        return data
    data = {k: repinned(v, root) for k, v in data.items()}
    if isinstance(data.get("command"), str) and " hook " in data["command"]:
        words, _ = client_config.split_root(shlex.split(data["command"]))
        data["command"] = shlex.join([*words, "--root", root] if root else words)
    return data


@pytest.mark.parametrize("pinned_to", [None, "/where/the/project/was"], ids=["unpinned", "moved"])
@pytest.mark.parametrize("client", list(HOOK_FILES))
def test_init_pins_the_hooks_an_older_init_or_another_place_wrote_without_force(
    root: Path, client: str, pinned_to: str | None, capsys
) -> None:
    assert init(root, client) == 0
    path = root / HOOK_FILES[client]
    current = read_json(path)
    mine = {"type": "command", "command": "./lint.sh"}
    older = repinned(current, pinned_to)
    event = next(iter(older["hooks"]))
    if client == "cursor":
        older["hooks"][event].insert(0, {"command": "./lint.sh"})
    else:
        older["hooks"][event].insert(0, {"hooks": [mine]})
    assert older != current
    write_json(path, older)
    capsys.readouterr()

    assert init(root, client) == 0

    assert read_json(path) == {
        **current,
        "hooks": {**current["hooks"], event: older["hooks"][event][:1] + current["hooks"][event]},
    }
    out = capsys.readouterr().out
    assert f"updated the abilities-mcp hooks for {', '.join(current['hooks'])} in {path}" in out, out
    assert f"--root {root}" in out and "kept your existing" not in out


def test_a_hook_of_ours_that_differs_in_more_than_its_root_is_still_kept_unless_force(root: Path, capsys) -> None:
    older = claude_handler("Stop", None, "/old/venv/bin/abilities-mcp")
    path = write_json(root / ".claude" / "settings.json", {"hooks": {"Stop": [{"hooks": [older]}]}})

    assert init(root, "claude") == 0

    assert read_json(path)["hooks"]["Stop"] == [{"hooks": [older]}]
    out = capsys.readouterr().out
    assert "kept your existing Stop hook" in out and "updated the abilities-mcp hooks" not in out


@pytest.mark.parametrize(
    "command",
    [
        "abilities-mcp hook claude Stop",
        "abilities-mcp hook claude Stop --root /p",
        "abilities-mcp hook claude Stop '--root=/p q'",
        "'/opt/my tools/abilities-mcp' hook claude Stop --root '/home/me/my project'",
    ],
)
def test_our_hook_is_recognised_with_and_without_its_root(command: str) -> None:
    assert client_config.is_our_hook({"type": "command", "command": command}, "Stop")
    assert not client_config.is_our_hook({"type": "command", "command": command}, "PreToolUse")
    exec_form = {"type": "command", "command": "abilities-mcp", "args": shlex.split(command)[1:]}
    assert client_config.is_our_hook(exec_form, "Stop")


def test_the_opencode_plugin_runs_the_hook_pinned_to_its_project() -> None:
    assert '"hook", "opencode", event, "--root", root, ...HOOK_OPTIONS]' in plugin_template()


@pytest.mark.parametrize(("client", "relpath", "keys", "entry"), JSON_CLIENTS, ids=JSON_IDS)
def test_an_entry_of_the_same_name_that_differs_is_kept_unless_force(
    root: Path, client, relpath, keys, entry, capsys
) -> None:
    theirs = {"command": "their-own", "args": ["--x"]}
    path = write_json(root / relpath, {keys[0]: {"abilities": theirs, "after": {"command": "y"}}})
    before = path.read_bytes()

    assert init(root, client) == 0
    if client == "gemini":  # the hooks that share its file are added; the entry is not touched
        assert {k: v for k, v in read_json(path).items() if k != "hooks"} == json.loads(before)
    else:
        assert path.read_bytes() == before
    assert f"kept your existing abilities entry in {path} (differs from ours; --force replaces it)" in (
        capsys.readouterr().out
    )

    assert init(root, client, force=True) == 0
    servers = read_json(path)[keys[0]]
    assert servers == {"abilities": entry, "after": {"command": "y"}}
    assert list(servers) == ["abilities", "after"]


@pytest.mark.parametrize("client", CLIENTS, ids=CLIENTS)
def test_a_second_run_changes_no_byte(root: Path, tmp_path: Path, client: str, capsys) -> None:
    assert init(root, client) == 0
    first = snapshot(tmp_path)
    capsys.readouterr()

    assert init(root, client) == 0

    assert snapshot(tmp_path) == first
    files = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("wrote", "unchanged"))]
    assert files and all(line.startswith("unchanged ") for line in files)


@pytest.mark.parametrize("client", CLIENTS, ids=CLIENTS)
def test_dry_run_writes_nothing_and_prints_the_diff(root: Path, tmp_path: Path, client: str, capsys) -> None:
    before = snapshot(tmp_path)

    assert init(root, client, dry_run=True, name="dry-server") == 0

    assert snapshot(tmp_path) == before
    out = capsys.readouterr().out
    assert "\n+++ " in out and "dry-server" in out
    assert out.rstrip().endswith("(dry run: nothing written)")


def test_dry_run_on_an_existing_file_shows_the_change_and_keeps_the_bytes(root: Path, capsys) -> None:
    path = write_json(root / ".cursor" / "mcp.json", {"mcpServers": {"abilities": {"command": "old"}}})
    before = path.read_bytes()

    assert init(root, "cursor", dry_run=True, force=True) == 0

    assert path.read_bytes() == before
    out = capsys.readouterr().out
    assert f"--- {path}\n+++ {path}\n" in out
    assert '-      "command": "old"' in out and '+      "command": "abilities-mcp",' in out


def test_a_rewrite_keeps_the_files_mode_and_a_new_file_follows_the_umask(root: Path) -> None:
    path = write_json(root / ".mcp.json", {"other": 1})
    path.chmod(0o640)
    mask = os.umask(0o077)
    try:
        assert init(root, "claude") == 0
    finally:
        os.umask(mask)

    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert stat.S_IMODE((root / ".claude" / "settings.json").stat().st_mode) == 0o600
    assert not [p for p in root.rglob("*.tmp")]


def test_a_symlinked_config_stays_a_symlink(root: Path, tmp_path: Path) -> None:
    real = write_json(tmp_path / "dotfiles" / "mcp.json", {"mcpServers": {}})
    link = root / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)

    assert init(root, "cursor") == 0

    assert link.is_symlink() and "abilities" in read_json(real)["mcpServers"]


# --- refusals ---------------------------------------------------------------------------------------------------

BROKEN = [
    ('{"mcpServers": {}, "mcpServers": {}}\n', "appears twice"),
    ('{"mcpServers": {\n', "not valid JSON"),
    ('["a list"]\n', "must be a JSON object"),
    ("null\n", "holds null"),
    ('{"mcpServers": []}\n', "mcpServers must be a JSON object"),
]


@pytest.mark.parametrize(("text", "why"), BROKEN, ids=["duplicate-key", "invalid", "list", "null", "servers-a-list"])
def test_a_json_file_that_cannot_be_edited_is_refused_and_nothing_is_written(
    root: Path, tmp_path: Path, text: str, why: str, capsys
) -> None:
    path = root / ".mcp.json"
    path.write_text(text)
    before = snapshot(tmp_path)

    assert init(root, "claude") == 1

    err = capsys.readouterr().err
    assert str(path) in err and why in err and "nothing was changed" in err
    assert snapshot(tmp_path) == before  # settings.json is not written either


JSONC = """{
  // servers for this workspace
  "servers": {
    "other": {"type": "stdio", "command": "x",},
  },
}
"""


def test_jsonc_with_comments_is_not_rewritten_and_the_snippet_to_add_is_printed(root: Path, capsys) -> None:
    path = root / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(JSONC)

    assert init(root, "vscode") == 1

    err = capsys.readouterr().err
    assert str(path) in err and "comments" in err
    snippet = json.loads(err.split("by hand:\n", 1)[1])
    assert snippet == {"servers": {"abilities": JSON_CLIENTS[3][3]}}
    assert path.read_text() == JSONC


def test_jsonc_that_already_has_the_entry_is_unchanged(root: Path, capsys) -> None:
    path = root / ".vscode" / "mcp.json"
    path.parent.mkdir()
    entry = json.dumps(JSON_CLIENTS[3][3])
    path.write_text(JSONC.replace('"other"', f'"abilities": {entry}, /* added by hand */ "other"'))
    before = path.read_bytes()

    assert init(root, "vscode") == 0

    assert path.read_bytes() == before
    assert f"unchanged {path}" in capsys.readouterr().out


def test_opencode_jsonc_in_the_v2_layout_gets_a_v2_snippet(root: Path, capsys) -> None:
    path = root / "opencode.jsonc"
    path.write_text('{\n  // mine\n  "mcp": {"servers": {}}\n}\n')

    assert init(root, "opencode") == 1

    snippet = json.loads(capsys.readouterr().err.split("by hand:\n", 1)[1])
    assert snippet == {"mcp": {"servers": {"abilities": {"type": "local", "command": ["abilities-mcp", "serve"]}}}}
    assert not (root / ".opencode").exists()


@pytest.mark.parametrize(
    "name",
    ["", "has space", "dots.not.allowed", "x" * 41, "ünïcode", "workspace"],
    ids=["empty", "space", "dots", "41-chars", "non-ascii", "reserved"],
)
def test_a_server_name_claude_code_would_reject_is_refused(root: Path, tmp_path: Path, name: str, capsys) -> None:
    before = snapshot(tmp_path)

    assert init(root, "cursor", name=name) == 1

    assert "1-40 letters, digits, '-' or '_'" in capsys.readouterr().err
    assert snapshot(tmp_path) == before


def test_a_40_character_name_is_accepted(root: Path) -> None:
    assert init(root, "cursor", name="a_b-" * 10) == 0

    assert list(read_json(root / ".cursor" / "mcp.json")["mcpServers"]) == ["a_b-" * 10]


# --- the command the client runs --------------------------------------------------------------------------------


def test_the_default_command_is_abilities_mcp_when_it_is_on_path() -> None:
    assert resolve_command(None) == (["abilities-mcp"], None)


def test_off_path_the_running_script_is_used_by_its_absolute_path(tmp_path: Path, monkeypatch, installed) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(installed.parent)
    monkeypatch.setattr(sys, "argv", ["abilities-mcp", "init", "claude"])

    argv, note = resolve_command(None)

    assert argv == [str(installed)]
    assert note == f"abilities-mcp is not on PATH; the config runs {installed} — pass --command to choose"


def test_off_path_without_a_script_the_config_runs_this_python(root: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "pytest")])

    assert init(root, "gemini", command=None) == 0

    entry = read_json(root / ".gemini" / "settings.json")["mcpServers"]["abilities"]
    assert entry == {"command": sys.executable, "args": ["-m", "abilities_mcp", "serve"]}
    assert "abilities-mcp is not on PATH; the config runs" in capsys.readouterr().out


def test_a_command_naming_an_existing_file_is_taken_whole(root: Path, tmp_path: Path) -> None:
    script = tmp_path / "my tools" / "abilities-mcp"
    script.parent.mkdir()
    script.write_text("")

    assert init(root, "gemini", command=str(script)) == 0

    assert read_json(root / ".gemini" / "settings.json")["mcpServers"]["abilities"]["command"] == str(script)


@pytest.mark.parametrize("command", ["", "   ", "'unclosed"], ids=["empty", "blank", "unclosed-quote"])
def test_a_command_that_does_not_split_is_refused(root: Path, command: str, capsys) -> None:
    assert init(root, "cursor", command=command) == 1

    assert "--command" in capsys.readouterr().err
    assert not (root / ".cursor").exists()


# --- through the real command -----------------------------------------------------------------------------------


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "init", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
    )


def test_the_init_command_writes_claudes_files_and_a_second_run_reports_them_unchanged(root: Path) -> None:
    first = cli(root, "claude", "--command", "abilities-mcp")
    second = cli(root, "claude", "--command", "abilities-mcp")

    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"wrote {root / '.mcp.json'}",
        f"wrote {root / '.claude' / 'settings.json'}",
        client_config.NEXT_STEPS["claude"],
    ]
    assert second.stdout.splitlines() == [
        f"unchanged {root / '.mcp.json'}",
        f"unchanged {root / '.claude' / 'settings.json'}",
    ]
    assert read_json(root / ".mcp.json")["mcpServers"]["abilities"]["args"] == ["serve"]


def test_the_init_command_takes_name_dry_run_and_force(root: Path) -> None:
    write_json(root / ".vscode" / "mcp.json", {"servers": {"abl": {"command": "old"}}})

    dry = cli(root, "vscode", "--name", "abl", "--dry-run", "--force", "--command", "abilities-mcp")
    assert dry.returncode == 0, dry.stderr
    assert '+      "command": "abilities-mcp",' in dry.stdout and "(dry run: nothing written)" in dry.stdout
    assert read_json(root / ".vscode" / "mcp.json") == {"servers": {"abl": {"command": "old"}}}

    real = cli(root, "vscode", "--name", "abl", "--force", "--command", "abilities-mcp")
    assert real.returncode == 0, real.stderr
    assert read_json(root / ".vscode" / "mcp.json")["servers"]["abl"]["command"] == "abilities-mcp"


def test_the_init_command_exits_1_with_the_reason_on_stderr(root: Path) -> None:
    (root / ".mcp.json").write_text("{oops")

    result = cli(root, "claude", "--command", "abilities-mcp")

    assert result.returncode == 1
    assert str(root / ".mcp.json") in result.stderr and result.stdout == ""


def test_the_init_command_without_command_writes_the_one_on_path(root: Path) -> None:
    result = cli(root, "cursor")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {root / '.cursor' / 'mcp.json'}\n")
    assert read_json(root / ".cursor" / "mcp.json")["mcpServers"]["abilities"]["command"] == "abilities-mcp"


def test_a_relative_command_is_written_absolute_and_a_kebab_case_handler_counts_as_ours(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = root / "bin" / "abilities-mcp"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    settings = root / ".claude" / "settings.json"
    settings.parent.mkdir()
    stop = {"type": "command", "command": "abilities-mcp hook claude stop"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [stop]}]}}))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert (
            client_config.init(
                root, "claude", dry_run=False, name="abilities", command="bin/abilities-mcp", force=False
            )
            == 0
        )
    finally:
        os.chdir(cwd)

    hooks = json.loads(settings.read_text())["hooks"]
    assert hooks["Stop"] == [{"hooks": [stop]}]  # the hand-written handler, not a second one
    assert hooks["PreToolUse"][0]["hooks"][0]["command"] == f"{script} hook claude PreToolUse --root {root}"
    assert json.loads((root / ".mcp.json").read_text())["mcpServers"]["abilities"]["command"] == str(script)


# --- --sandbox: the client's own sandbox, as verified -----------------------------------------------------------

VERIFIED_CLAUDE_SANDBOX = {
    "enabled": True,
    "autoAllowBashIfSandboxed": True,
    "allowUnsandboxedCommands": False,
    "failIfUnavailable": True,
}


@pytest.fixture
def codex_keeps_tmp_out() -> Path:
    """The user's Codex config keeps /tmp and $TMPDIR out of workspace-write: these tests' state folder is under
    /tmp (pytest's tmp_path), which Codex's sandbox would otherwise let the shell write."""
    config = Path(os.environ["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n")
    return config


def test_claude_sandbox_turns_on_the_verified_sandbox_beside_the_hooks(root: Path, capsys) -> None:
    assert init(root, "claude", sandbox=True) == 0

    settings = read_json(root / ".claude" / "settings.json")
    assert settings["sandbox"] == VERIFIED_CLAUDE_SANDBOX
    assert list(settings["hooks"]) == HOOK_EVENTS
    assert "allowUnsandboxedCommands is false" in capsys.readouterr().out


def test_gemini_sandbox_turns_on_tool_sandboxing_and_keeps_the_persons_security_settings(root: Path, capsys) -> None:
    write_json(root / ".gemini" / "settings.json", {"security": {"auth": {"selectedType": "gemini-api-key"}}})

    assert init(root, "gemini", sandbox=True) == 0

    settings = read_json(root / ".gemini" / "settings.json")
    assert settings["security"] == {"auth": {"selectedType": "gemini-api-key"}, "toolSandboxing": True}
    assert "abilities" in settings["mcpServers"] and "BeforeTool" in settings["hooks"]
    assert "security.toolSandboxing" in capsys.readouterr().out


@pytest.mark.usefixtures("codex_keeps_tmp_out")
def test_codex_sandbox_puts_sandbox_mode_first_and_keeps_every_other_byte(root: Path) -> None:
    path = root / ".codex" / "config.toml"
    path.parent.mkdir()
    existing = '# my settings\nmodel = "o3"\n\n[mcp_servers.other] # mine\ncommand = "x"\n'
    path.write_text(existing)

    assert init(root, "codex", sandbox=True) == 0

    text = path.read_text()
    assert text.startswith('sandbox_mode = "workspace-write"\n\n' + existing)
    data = tomllib.loads(text)
    assert data["sandbox_mode"] == "workspace-write" and data["model"] == "o3"  # a root key, not the last table's
    assert set(data["mcp_servers"]) == {"other", "abilities"}


@pytest.mark.parametrize("client", ["claude", "gemini", "codex"])
@pytest.mark.usefixtures("codex_keeps_tmp_out")
def test_a_second_sandbox_run_changes_no_byte(root: Path, tmp_path: Path, client: str, capsys) -> None:
    assert init(root, client, sandbox=True) == 0
    first = snapshot(tmp_path)
    capsys.readouterr()

    assert init(root, client, sandbox=True) == 0

    assert snapshot(tmp_path) == first
    files = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("wrote", "unchanged"))]
    assert files and all(line.startswith("unchanged ") for line in files)


def test_sandbox_dry_run_shows_the_settings_and_writes_nothing(root: Path, tmp_path: Path, capsys) -> None:
    before = snapshot(tmp_path)

    assert init(root, "claude", sandbox=True, dry_run=True) == 0

    assert snapshot(tmp_path) == before
    out = capsys.readouterr().out
    assert '+    "allowUnsandboxedCommands": false,' in out and '+    "enabled": true,' in out
    assert out.rstrip().endswith("(dry run: nothing written)")


def test_a_conflicting_sandbox_value_is_kept_and_named_and_replaced_only_with_force(root: Path, capsys) -> None:
    theirs = {"sandbox": {"enabled": True, "allowUnsandboxedCommands": True, "network": {"allowedDomains": ["x.org"]}}}
    path = write_json(root / ".claude" / "settings.json", theirs)

    assert init(root, "claude", sandbox=True) == 0
    kept = read_json(path)["sandbox"]
    assert kept["allowUnsandboxedCommands"] is True and kept["failIfUnavailable"] is True
    out = capsys.readouterr().out
    assert f"kept your sandbox.allowUnsandboxedCommands = true in {path}" in out
    assert "dangerouslyDisableSandbox" in out and "--force replaces it" in out

    assert init(root, "claude", sandbox=True, force=True) == 0
    assert read_json(path)["sandbox"] == {**VERIFIED_CLAUDE_SANDBOX, "network": {"allowedDomains": ["x.org"]}}


@pytest.mark.usefixtures("codex_keeps_tmp_out")
def test_a_conflicting_codex_sandbox_mode_is_kept_and_force_prints_the_line_to_change_by_hand(
    root: Path, capsys
) -> None:
    path = root / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('sandbox_mode = "danger-full-access"\n')

    assert init(root, "codex", sandbox=True) == 0
    assert tomllib.loads(path.read_text())["sandbox_mode"] == "danger-full-access"
    assert 'kept your sandbox_mode = "danger-full-access"' in capsys.readouterr().out
    before = path.read_bytes()

    assert init(root, "codex", sandbox=True, force=True) == 1

    assert path.read_bytes() == before
    assert 'by hand with:\nsandbox_mode = "workspace-write"' in capsys.readouterr().err


def test_a_local_setting_that_turns_the_sandbox_off_is_named(root: Path, capsys) -> None:
    local = write_json(root / ".claude" / "settings.local.json", {"sandbox": {"enabled": False}})

    assert init(root, "claude", sandbox=True) == 0

    out = capsys.readouterr().out
    assert f"{local} sets sandbox.enabled = false, which wins over {root / '.claude' / 'settings.json'}" in out
    assert read_json(local) == {"sandbox": {"enabled": False}}  # the person's own file, not init's


@pytest.mark.parametrize("client", ["opencode", "cursor", "vscode", "desktop"])
def test_sandbox_for_a_client_without_one_is_refused_with_what_to_do_instead(
    root: Path, tmp_path: Path, client: str, capsys
) -> None:
    before = snapshot(tmp_path)

    assert init(root, client, sandbox=True) == 1

    assert snapshot(tmp_path) == before
    err = capsys.readouterr().err
    assert err.startswith("--sandbox: ") and f"abilities-mcp init {client}`" in err and "Nothing was changed" in err


def test_sandbox_for_opencode_names_its_permission_setting(root: Path, capsys) -> None:
    assert init(root, "opencode", sandbox=True) == 1

    err = capsys.readouterr().err
    assert "no sandbox of its own" in err and '"permission": {"bash": "ask"}' in err and "another OS user" in err


def test_sandbox_is_refused_when_the_state_folder_is_inside_the_project(root: Path, tmp_path: Path, capsys) -> None:
    before = snapshot(tmp_path)

    assert init(root, "claude", sandbox=True, state_dir=root / ".state") == 1

    assert snapshot(tmp_path) == before
    err = capsys.readouterr().err
    assert f"the state folder {str(root / '.state')!r} is inside {str(root)!r} (the project)" in err
    assert "--state-dir" in err and "Nothing was changed" in err


def test_sandbox_is_refused_when_claude_code_lets_the_shell_write_the_state_folder(root: Path, capsys) -> None:
    state = Path(os.environ["XDG_STATE_HOME"]) / "abilities-mcp"
    local = write_json(
        root / ".claude" / "settings.local.json", {"sandbox": {"filesystem": {"allowWrite": [str(state)]}}}
    )

    assert init(root, "claude", sandbox=True) == 1

    err = capsys.readouterr().err
    assert f"sandbox.filesystem.allowWrite in {local}" in err and f"remove {str(state)!r} from" in err
    assert not (root / ".claude" / "settings.json").exists()


def test_codex_sandbox_is_refused_while_its_workspace_write_leaves_the_state_folder_in_tmp(root: Path, capsys) -> None:
    assert Project.resolve(root).state_dir.is_relative_to("/tmp")  # pytest's tmp_path

    assert init(root, "codex", sandbox=True) == 1

    err = capsys.readouterr().err
    assert "is inside '/tmp' (Codex's workspace-write)" in err and "exclude_slash_tmp = true" in err
    assert not (root / ".codex").exists()


def test_the_init_command_takes_sandbox_and_the_state_dir_it_checks(root: Path, tmp_path: Path) -> None:
    inside = cli(root, "claude", "--sandbox", "--command", "abilities-mcp", "--state-dir", str(root / "state"))
    assert inside.returncode == 1 and "inside" in inside.stderr and not (root / ".claude").exists()

    done = cli(root, "claude", "--sandbox", "--command", "abilities-mcp", "--state-dir", str(tmp_path / "state"))

    assert done.returncode == 0, done.stderr
    assert read_json(root / ".claude" / "settings.json")["sandbox"] == VERIFIED_CLAUDE_SANDBOX
