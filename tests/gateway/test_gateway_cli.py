"""`abilities-mcp init CLIENT --gateway` (the project's other servers moved into gateway.json, in each client's
spelling, `--dry-run` showing both diffs) and `abilities-mcp gateway list|add|remove`, all through the real command: key order and
indentation kept, atomic writes, clear refusals that change nothing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support import CLI

CLI_TIMEOUT_SECONDS = 60
OURS = {"type": "stdio", "command": "abilities-mcp", "args": ["serve"]}
SQLITE = {"type": "stdio", "command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "${DB:-shop.db}"]}
WEB = {"type": "http", "url": "https://example.org/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
SSE = {"type": "sse", "url": "https://example.org/sse"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "--root", str(root), *args], capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS
    )


def init(root: Path, *more: str) -> subprocess.CompletedProcess:
    return run(root, "init", "claude", "--command", "abilities-mcp", "--gateway", *more)


def write(path: Path, data: Any, indent: int | str = 4) -> str:
    text = json.dumps(data, indent=indent) + "\n"
    path.write_text(text)
    return text


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_init_gateway_moves_every_other_server_into_gateway_json_and_keeps_the_rest(root: Path) -> None:
    write(root / ".mcp.json", {"mcpServers": {"sqlite": SQLITE, "web": WEB}, "keep": {"me": [1, 2]}}, indent=4)

    done = init(root)

    assert done.returncode == 0, done.stderr
    mcp = read(root / ".mcp.json")
    assert mcp == {"mcpServers": {"abilities": OURS}, "keep": {"me": [1, 2]}}
    assert list(mcp) == ["mcpServers", "keep"]
    assert (root / ".mcp.json").read_text().startswith('{\n    "mcpServers": {\n        "abilities"')  # 4 spaces
    assert read(root / "gateway.json") == {"mcpServers": {"sqlite": SQLITE, "web": WEB}}
    assert f"moved sqlite, web from {root / '.mcp.json'} to {root / 'gateway.json'}" in done.stdout
    assert (root / ".claude" / "settings.json").exists()  # the hooks, as init writes them without --gateway
    # gateway.json is valid as written: validate reports it clean.
    checked = run(root, "validate", "--json")
    assert '"gateway.json"' in checked.stdout and "mcpServers" not in checked.stdout, checked.stdout


def test_init_gateway_dry_run_shows_both_diffs_and_writes_nothing(root: Path) -> None:
    before = write(root / ".mcp.json", {"mcpServers": {"sqlite": SQLITE}})

    done = init(root, "--dry-run")

    assert done.returncode == 0, done.stderr
    assert f"--- {root / '.mcp.json'}" in done.stdout
    assert '-        "sqlite": {' in done.stdout
    assert f"+++ {root / 'gateway.json'}" in done.stdout
    assert '+    "sqlite": {' in done.stdout
    assert "(dry run: nothing written)" in done.stdout
    assert (root / ".mcp.json").read_text() == before
    assert not (root / "gateway.json").exists()


def test_a_second_init_gateway_changes_nothing(root: Path) -> None:
    write(root / ".mcp.json", {"mcpServers": {"sqlite": SQLITE}})
    assert init(root).returncode == 0
    files = {p: p.read_bytes() for p in (root / ".mcp.json", root / "gateway.json")}
    inodes = {p: p.stat().st_ino for p in files}

    again = init(root)

    assert again.returncode == 0, again.stderr
    assert f"unchanged {root / '.mcp.json'}" in again.stdout
    assert "no servers in" in again.stdout
    assert {p: p.read_bytes() for p in files} == files
    assert {p: p.stat().st_ino for p in files} == inodes


def test_a_server_the_gateway_cannot_take_stays_in_mcp_json_saying_why(root: Path) -> None:
    write(root / ".mcp.json", {"mcpServers": {"legacy": SSE, "sqlite": SQLITE}})

    done = init(root)

    assert done.returncode == 0, done.stderr
    assert read(root / ".mcp.json")["mcpServers"] == {"legacy": SSE, "abilities": OURS}
    assert read(root / "gateway.json")["mcpServers"] == {"sqlite": SQLITE}
    assert "kept legacy in" in done.stdout and "where the agent can still call it directly" in done.stdout
    assert "mcpServers.legacy.type: 'sse' is not allowed" in done.stdout


def test_servers_join_an_existing_gateway_json_keeping_its_order_and_indentation(root: Path) -> None:
    write(root / "gateway.json", {"$schema": "x", "mcpServers": {"first": {"command": "a"}}}, indent="\t")
    write(root / ".mcp.json", {"mcpServers": {"sqlite": SQLITE}})

    assert init(root).returncode == 0

    text = (root / "gateway.json").read_text()
    assert text.startswith('{\n\t"$schema": "x",\n\t"mcpServers": {\n\t\t"first"')
    assert list(json.loads(text)["mcpServers"]) == ["first", "sqlite"]


def test_a_name_gateway_json_already_has_otherwise_stops_init_with_nothing_written(root: Path) -> None:
    gateway = write(root / "gateway.json", {"mcpServers": {"sqlite": {"command": "something-else"}}})
    mcp = write(root / ".mcp.json", {"mcpServers": {"sqlite": SQLITE}})

    done = init(root)

    assert done.returncode == 1
    assert "already has a server 'sqlite' that differs from the one to move" in done.stderr
    assert "--force" in done.stderr and "Traceback" not in done.stderr
    assert (root / "gateway.json").read_text() == gateway and (root / ".mcp.json").read_text() == mcp
    assert not (root / ".claude").exists()


def test_mcp_json_with_comments_stops_init_gateway_naming_the_servers_to_move_by_hand(root: Path) -> None:
    text = '{\n  // mine\n  "mcpServers": {"sqlite": {"command": "uvx"}, "abilities": ' + json.dumps(OURS) + "}\n}\n"
    (root / ".mcp.json").write_text(text)

    done = init(root)

    assert done.returncode == 1
    assert "has comments or trailing commas" in done.stderr and "sqlite" in done.stderr
    assert (root / ".mcp.json").read_text() == text
    assert not (root / "gateway.json").exists()


# Each client's own spelling of the same three servers: one stdio with an environment variable, one streamable HTTP
# (moved, as gateway.json says them: SQLITE_MOVED, WEB), and one the gateway cannot take (it stays, with the reason).
SQLITE_MOVED = {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "${DB:-shop.db}"]}
CLIENT_CONFIGS = {
    "cursor": (
        ".cursor/mcp.json",
        ["mcpServers"],
        {"sqlite": SQLITE, "web": WEB, "old": SSE},
        {"sqlite": SQLITE, "web": WEB},
        "old",
        "sse",
    ),
    "vscode": (
        ".vscode/mcp.json",
        ["servers"],
        {
            "sqlite": {"type": "stdio", "command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "${env:DB}"]},
            "web": {
                "type": "http",
                "url": "https://example.org/mcp",
                "headers": {"Authorization": "Bearer ${env:TOKEN}"},
            },
            "asks": {"type": "stdio", "command": "tool", "env": {"KEY": "${input:api-key}"}},
        },
        {
            "sqlite": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "${DB}"]},
            "web": {"type": "http", "url": "https://example.org/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        },
        "asks",
        "${input:api-key}",
    ),
    "gemini": (
        ".gemini/settings.json",
        ["mcpServers"],
        {
            "sqlite": {**SQLITE_MOVED, "timeout": 30000, "trust": True},
            "web": {"httpUrl": "https://example.org/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "picky": {"command": "tool", "includeTools": ["one"]},
        },
        {"sqlite": {**SQLITE_MOVED, "timeout": "30000ms"}, "web": WEB},
        "picky",
        "includeTools",
    ),
    "opencode": (
        "opencode.json",
        ["mcp"],
        {
            "sqlite": {
                "type": "local",
                "command": ["uvx", "mcp-server-sqlite", "--db-path", "${DB:-shop.db}"],
                "environment": {"MODE": "ro"},
                "enabled": True,
            },
            "web": {
                "type": "remote",
                "url": "https://example.org/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
            },
            "off": {"type": "local", "command": ["tool"], "enabled": False},
        },
        {"sqlite": {**SQLITE_MOVED, "env": {"MODE": "ro"}}, "web": WEB},
        "off",
        "disabled in OpenCode",
    ),
}


@pytest.mark.parametrize("client", list(CLIENT_CONFIGS))
def test_init_gateway_moves_each_clients_servers_in_that_clients_spelling(root: Path, client: str) -> None:
    relpath, keys, servers, moved, kept, why = CLIENT_CONFIGS[client]
    config = root / relpath
    config.parent.mkdir(parents=True, exist_ok=True)
    nested: Any = servers
    for key in reversed(keys):
        nested = {key: nested}
    write(config, nested)

    dry = run(root, "init", client, "--command", "abilities-mcp", "--gateway", "--dry-run")
    assert dry.returncode == 0 and not (root / "gateway.json").exists(), dry.stderr
    assert "gateway.json" in dry.stdout and '"sqlite"' in dry.stdout
    done = run(root, "init", client, "--command", "abilities-mcp", "--gateway")

    assert done.returncode == 0, done.stderr
    assert read(root / "gateway.json") == {"mcpServers": moved}
    left: Any = read(config)
    for key in keys:
        left = left[key]
    assert kept in left and "sqlite" not in left and "web" not in left
    assert f"kept {kept} in {config}" in done.stdout and why in done.stdout
    checked = run(root, "validate", "--json")
    assert checked.returncode == 0, checked.stdout
    again = run(root, "init", client, "--command", "abilities-mcp", "--gateway")
    assert again.returncode == 0 and read(root / "gateway.json") == {"mcpServers": moved}  # nothing moves twice


@pytest.mark.parametrize(("client", "why"), [("desktop", "your user's")])
def test_gateway_says_why_it_leaves_a_client_alone_and_what_to_do(root: Path, client: str, why: str) -> None:
    done = run(root, "init", client, "--command", "abilities-mcp", "--gateway")

    assert done.returncode == 1
    assert why in done.stderr and "abilities-mcp gateway add" in done.stderr
    assert not (root / "gateway.json").exists()


def test_gateway_add_list_remove_edit_gateway_json_in_place(root: Path) -> None:
    write(root / "gateway.json", {"mcpServers": {"first": {"command": "a", "args": []}}}, indent=3)

    added = run(root, "gateway", "add", "db", "--env", "MODE=ro", "--", "uvx", "mcp-server-sqlite", "--db-path", "x")
    web = run(root, "gateway", "add", "web", "--url", "https://example.org/mcp", "--timeout", "30s")
    listed = run(root, "gateway", "list")
    removed = run(root, "gateway", "remove", "first")

    assert added.returncode == 0 and web.returncode == 0, added.stderr + web.stderr
    assert f"Added server 'db' to {root / 'gateway.json'}." in added.stdout
    assert listed.stdout.splitlines() == [
        "  first                   60s  a",
        "  db                      60s  uvx mcp-server-sqlite --db-path x",
        "  web                     30s  https://example.org/mcp",
    ]
    assert removed.returncode == 0
    text = (root / "gateway.json").read_text()
    assert text.startswith('{\n   "mcpServers": {\n      "db"')  # its 3-space indentation kept
    assert json.loads(text) == {
        "mcpServers": {
            "db": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "x"], "env": {"MODE": "ro"}},
            "web": {"url": "https://example.org/mcp", "timeout": "30s"},
        }
    }


def test_gateway_add_env_with_a_bare_name_passes_that_variable_on_and_writes_no_value(root: Path) -> None:
    done = subprocess.run(
        [*CLI, "--root", str(root), "gateway", "add", "db", "--env", "SSL_CERT_FILE", "--env", "MODE=ro", "--", "x"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        env={**os.environ, "SSL_CERT_FILE": "/secret/ca.pem"},
    )

    assert done.returncode == 0, done.stderr
    entry = read(root / "gateway.json")["mcpServers"]["db"]
    assert entry["env"] == {"SSL_CERT_FILE": "${SSL_CERT_FILE:-}", "MODE": "ro"}  # a reference, not the value
    assert "/secret" not in (root / "gateway.json").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "db", "--", "other"], "A server named 'db' already exists"),
        (["add", "a__b", "--", "x"], "holds '__', which separates server and tool"),
        (["add", "x", "--timeout", "soon", "--", "x"], "mcpServers.x.timeout"),
        (["add", "x"], "Give the server either a command, after --"),
        (["add", "x", "--env", "NOT A NAME", "--", "x"], "--env 'NOT A NAME': write NAME=VALUE, or a bare NAME"),
        (["add", "x", "--url", "https://e.org", "--header", "NOEQUALS"], "--header 'NOEQUALS': write KEY=VALUE"),
        (["remove", "bd"], "Server 'bd' not found in"),
    ],
)
def test_a_gateway_edit_that_cannot_be_made_says_why_changes_nothing_and_exits_2(
    root: Path, args: list[str], message: str
) -> None:
    before = write(root / "gateway.json", {"mcpServers": {"db": {"command": "uvx"}}})

    done = run(root, "gateway", *args)

    assert done.returncode == 2  # docs/cli.md: a command that cannot do what was asked exits 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert (root / "gateway.json").read_text() == before


def test_a_gateway_json_that_does_not_parse_is_left_alone(root: Path) -> None:
    (root / "gateway.json").write_text('{"mcpServers": {"db": ')

    done = run(root, "gateway", "add", "x", "--", "x")

    assert done.returncode == 2
    assert "fix it before editing, nothing was changed" in done.stderr
    assert (root / "gateway.json").read_text() == '{"mcpServers": {"db": '
