"""The servers each client is configured with: which names run this server, read whole from the client's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abilities_mcp.clients.servers import cursor_server, is_ours, known_names, own_names, runs_abilities_mcp


@pytest.mark.parametrize(
    ("argv", "ours"),
    [
        (["abilities-mcp", "serve"], True),
        (["/home/you/.venv/bin/abilities-mcp"], True),
        (["/usr/bin/python3", "-m", "abilities_mcp", "serve"], True),
        (["uvx", "--from", "git+https://example.org/abilities-mcp", "abilities-mcp", "serve"], True),
        (["uv", "run", "abilities-mcp"], True),
        (["/opt/abilities-mcp-tools/bin/server"], False),
        (["abilities-mcp-proxy", "serve"], False),
        (["node", "server.js", "--label", "abilities-mcp"], False),
        (["python", "-m", "abilities_mcp_evil"], False),
        ([], False),
    ],
    ids=[
        "script",
        "script-path",
        "module",
        "uvx",
        "uv-run",
        "path-holding-the-name",
        "longer-name",
        "an-argument",
        "another-module",
        "no-command",
    ],
)
def test_a_command_runs_this_server_only_by_its_whole_program_name(argv: list[str], ours: bool) -> None:
    assert runs_abilities_mcp(argv) is ours


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


OURS = {"command": "abilities-mcp", "args": ["serve"]}
THEIRS = {"command": "npx", "args": ["db-mcp"]}


def test_with_no_config_naming_it_this_server_is_inits_default_name(root: Path) -> None:
    assert own_names("claude", root) == {"abilities"}
    assert is_ours("claude", root, "abilities") and not is_ours("claude", root, "gates")


def test_the_project_config_wins_a_name_over_the_users(root: Path, tmp_path: Path) -> None:
    write(root / ".mcp.json", {"mcpServers": {"gates": OURS, "db": THEIRS}})
    write(tmp_path / "home" / ".claude.json", {"mcpServers": {"db": OURS, "abilities": THEIRS}})

    assert own_names("claude", root) == {"gates", "db"}
    assert is_ours("claude", root, "gates") and not is_ours("claude", root, "db")
    assert not is_ours("claude", root, "abilities")  # named: another server's


@pytest.mark.parametrize(
    ("client", "relpath", "text"),
    [
        ("codex", ".codex/config.toml", '[mcp_servers.gates]\ncommand = "abilities-mcp"\nargs = ["serve"]\n'),
        ("gemini", ".gemini/settings.json", '{"mcpServers": {"gates": {"command": "abilities-mcp"}}, // mine\n}'),
        ("cursor", ".cursor/mcp.json", json.dumps({"mcpServers": {"gates": OURS}})),
        ("opencode", "opencode.jsonc", '{"mcp": {"gates": {"type": "local", "command": ["abilities-mcp"]}}}'),
        (
            "opencode",
            ".opencode/opencode.json",
            json.dumps({"mcp": {"servers": {"gates": {"command": ["abilities-mcp"]}}}}),
        ),
    ],
    ids=["codex-toml", "gemini-with-comments", "cursor", "opencode-jsonc", "opencode-v2-in-dot-opencode"],
)
def test_each_clients_project_file_names_this_server(root: Path, client: str, relpath: str, text: str) -> None:
    write(root / relpath, text)

    assert own_names(client, root) == {"gates"}


def test_opencode_knows_every_server_by_the_name_its_tools_carry(root: Path, tmp_path: Path) -> None:
    write(root / "opencode.json", {"mcp": {"my.db": THEIRS}})
    write(
        tmp_path / "home" / ".config" / "opencode" / "opencode.json", {"mcp": {"gates": {"command": ["abilities-mcp"]}}}
    )

    assert known_names("opencode", root) == {"my_db", "gates"}


def test_a_cursor_command_is_the_server_whose_whole_command_it_is(root: Path) -> None:
    write(
        root / ".cursor" / "mcp.json",
        {"mcpServers": {"abilities": {**OURS, "args": ["serve", "--root", "${workspaceFolder}"]}, "db": THEIRS}},
    )

    assert cursor_server(root, f"abilities-mcp serve --root {root}").name == "abilities"
    assert cursor_server(root, "abilities-mcp").name == "abilities"
    assert cursor_server(root, "npx   db-mcp").name == "db"
    assert cursor_server(root, "abilities-mcp serve --root /elsewhere") is None
    assert cursor_server(root, "npx").name == "db"  # the program alone: the one server that runs it


def test_a_bare_program_two_cursor_servers_run_names_neither(root: Path) -> None:
    write(root / ".cursor" / "mcp.json", {"mcpServers": {"db": THEIRS, "web": {"command": "npx", "args": ["web"]}}})

    assert cursor_server(root, "npx") is None
