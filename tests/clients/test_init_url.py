"""`abilities-mcp init CLIENT --url URL` (team mode): each client's HTTP server entry with the token from the
environment, hooks that ask the team server, and `doctor` accepting both."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from abilities_mcp.cli import doctor
from abilities_mcp.clients import configs, remote_configs, wiring
from abilities_mcp.clients.sandbox import Where
from abilities_mcp.state.project import Project

URL = "https://abilities.example.test"
MCP = f"{URL}/mcp"


def init(root: Path, client: str, url: str = URL, **options) -> int:
    settings = {"dry_run": False, "name": "abilities", "command": "abilities-mcp", "force": False, **options}
    return remote_configs.init(root, client, url=url, **settings)


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


ENTRIES = {
    "claude": (".mcp.json", ["mcpServers"], {"type": "http", "url": MCP, "headers": {"Authorization": "Bearer ${ABILITIES_TOKEN}"}}),
    "gemini": (".gemini/settings.json", ["mcpServers"], {"httpUrl": MCP, "headers": {"Authorization": "Bearer ${ABILITIES_TOKEN}"}}),
    "cursor": (".cursor/mcp.json", ["mcpServers"], {"url": MCP, "headers": {"Authorization": "Bearer ${env:ABILITIES_TOKEN}"}}),
    "vscode": (".vscode/mcp.json", ["servers"], {"type": "http", "url": MCP, "headers": {"Authorization": "Bearer ${input:abilities-token}"}}),
    "opencode": (
        "opencode.json",
        ["mcp"],
        {"type": "remote", "url": MCP, "headers": {"Authorization": "Bearer {env:ABILITIES_TOKEN}"}, "enabled": True},
    ),
}  # fmt: skip


@pytest.mark.parametrize("client", list(ENTRIES))
def test_each_json_client_gets_the_team_servers_http_entry_with_the_token_from_the_environment(root, client) -> None:
    assert init(root, client, url=URL + "/mcp/") == 0  # the /mcp the person may paste is the entry's, not the base
    relpath, keys, entry = ENTRIES[client]
    table = read_json(root / relpath)
    for key in keys:
        table = table[key]
    assert table["abilities"] == entry
    assert "ABILITIES_TOKEN" not in json.dumps(table).replace("ABILITIES_TOKEN}", "")  # a name, never a value


def test_vscode_asks_for_the_token_once_as_a_password(root) -> None:
    assert init(root, "vscode") == 0
    inputs = read_json(root / ".vscode" / "mcp.json")["inputs"]
    assert inputs == [
        {"type": "promptString", "id": "abilities-token", "description": "abilities-mcp access token", "password": True}
    ]
    assert init(root, "vscode") == 0
    assert len(read_json(root / ".vscode" / "mcp.json")["inputs"]) == 1


def test_codex_gets_url_and_bearer_token_env_var(root) -> None:
    assert init(root, "codex") == 0
    server = tomllib.loads((root / ".codex" / "config.toml").read_text())["mcp_servers"]["abilities"]
    assert server == {"url": MCP, "bearer_token_env_var": "ABILITIES_TOKEN"}


@pytest.mark.parametrize(
    ("client", "relpath", "event"),
    [
        ("claude", ".claude/settings.json", "PreToolUse"),
        ("codex", ".codex/hooks.json", "PreToolUse"),
        ("gemini", ".gemini/settings.json", "BeforeTool"),
        ("cursor", ".cursor/hooks.json", "beforeShellExecution"),
    ],
)
def test_the_hooks_ask_the_team_server_and_doctor_accepts_them(root, client, relpath, event) -> None:
    assert init(root, client) == 0
    assert f"abilities-mcp hook {client} {event} --url {URL}" in (root / relpath).read_text()
    wired = wiring.hooks(client, root)
    assert not wired.missing and set(wired.urls.values()) == {URL}
    setup = doctor.Setup(Project.resolve(root), Where.here(), [client], which=lambda name: f"/usr/bin/{name}")
    findings = doctor.server_entries(setup) + doctor.hooks(setup)
    assert all(f.status == doctor.OK for f in findings), findings
    assert f"team server at {MCP}" in findings[0].text


def test_a_local_hook_without_root_still_fails_doctor(root) -> None:
    """The --url exemption is for hooks that ask a team server; an unpinned local one stays a failure."""
    settings = root / ".claude" / "settings.json"
    assert configs.init(root, "claude", dry_run=False, name="abilities", command="abilities-mcp", force=False) == 0
    text = settings.read_text().replace(f" --root {root}", "")
    settings.write_text(text)
    setup = doctor.Setup(Project.resolve(root), Where.here(), ["claude"], which=lambda name: f"/usr/bin/{name}")
    assert doctor.hooks(setup)[0].status == doctor.FAIL


def test_init_url_replaces_the_local_hooks_and_the_opencode_plugin_passes_it(root) -> None:
    assert configs.init(root, "claude", dry_run=False, name="abilities", command="abilities-mcp", force=False) == 0
    assert init(root, "claude") == 0
    text = (root / ".claude" / "settings.json").read_text()
    assert "--root" not in text and text.count(f"--url {URL}") == len(configs.CLAUDE_HOOKS)
    assert init(root, "opencode") == 0
    plugin = (root / ".opencode" / "plugins" / "abilities-mcp.js").read_text()
    assert f'const HOOK_OPTIONS = ["--url", "{URL}"]' in plugin
    assert wiring.plugin(root) == (["abilities-mcp"], True)


@pytest.mark.parametrize(
    ("url", "options", "said"),
    [
        ("ftp://team", {}, "give the team server's address"),
        ("https://team?x=1", {}, "give the team server's address"),
        (URL, {"gateway": True}, "--gateway with --url"),
    ],
    ids=["scheme", "query", "gateway"],
)
def test_a_url_init_cannot_use_is_refused_with_nothing_written(root, capsys, url, options, said) -> None:
    assert init(root, "claude", url=url, **options) == 1
    assert said in capsys.readouterr().err and not (root / ".mcp.json").exists()


def test_claude_desktop_has_no_team_entry(root, capsys) -> None:
    assert init(root, "desktop") == 1
    assert "connectors" in capsys.readouterr().err
