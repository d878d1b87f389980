"""`abilities-mcp init CLIENT --gateway` for every client with a project server list: each client's own spelling of
three servers (a local stdio one with an environment variable, a remote one, one the gateway cannot take) run
through the real command; the files that result, checked byte for byte; gateway.json accepted by `validate`; and the
moved server reached through this server's tool_search and tool_call, its variable expanded by the gateway."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.clients.toml_text import without_table
from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from support import CLI

# Generous: a cold interpreter imports the package.
CLI_TIMEOUT_SECONDS = 60
# Nothing listens there: the remote server is moved without being reached, and fails fast if it is.
DOCS_URL = "http://127.0.0.1:9/mcp"
# A local upstream whose one tool answers with the variable its entry passes it.
SHOP_SERVER = '''\
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("shop")


@server.tool()
async def stock_level(item: str) -> str:
    """Look up how many of an item the shop has in stock."""
    return f"{item}: 7 in stock ({os.environ.get('SHOP_MODE', 'unset')})"


if __name__ == "__main__":
    server.run("stdio")
'''


@dataclass
class Case:
    """One client: its config file, that file before (the three servers), the same file holding only the server
    that stays (what plain `init` must turn it into), and gateway.json's servers after."""

    config: str
    before: str
    kept_only: str
    kept: str
    why: str
    moved: dict[str, Any]


def json_case(config: str, keys: list[str], servers: dict, kept: str, why: str, moved: dict, **top: Any) -> Case:
    def file(table: dict) -> str:
        data: Any = table
        for key in reversed(keys):
            data = {key: data}
        return json.dumps({**top, **data}, indent=2) + "\n"

    return Case(config, file(servers), file({kept: servers[kept]}), kept, why, moved)


def cases(argv: list[str]) -> dict[str, Case]:
    py, script = argv
    bearer = {"Authorization": "Bearer ${DOCS_TOKEN}"}
    shop = {"command": py, "args": [script], "env": {"SHOP_MODE": "${SHOP_MODE}"}}
    docs = {"type": "http", "url": DOCS_URL, "headers": bearer}
    return {
        "claude": json_case(
            ".mcp.json",
            ["mcpServers"],
            {"shop": {"type": "stdio", **shop}, "docs": docs, "legacy": {"type": "sse", "url": DOCS_URL}},
            "legacy",
            "type: 'sse' is not allowed",
            {"shop": {"type": "stdio", **shop}, "docs": docs},
        ),
        "cursor": json_case(
            ".cursor/mcp.json",
            ["mcpServers"],
            {"shop": shop, "docs": {"url": DOCS_URL, "headers": bearer}, "dotenv": {"command": "x", "envFile": ".env"}},
            "dotenv",
            "envFile: unknown key 'envFile'",
            {"shop": shop, "docs": {"url": DOCS_URL, "headers": bearer}},
        ),
        "vscode": json_case(
            ".vscode/mcp.json",
            ["servers"],
            {
                "shop": {"type": "stdio", **shop, "env": {"SHOP_MODE": "${env:SHOP_MODE}"}},
                "docs": {**docs, "headers": {"Authorization": "Bearer ${env:DOCS_TOKEN}"}},
                "asks": {"type": "stdio", "command": "x", "env": {"KEY": "${input:api-key}"}},
            },
            "asks",
            "VS Code variables the gateway cannot expand: ${input:api-key}",
            {"shop": shop, "docs": docs},
            inputs=[{"id": "api-key", "type": "promptString", "password": True}],
        ),
        "gemini": json_case(
            ".gemini/settings.json",
            ["mcpServers"],
            {
                "shop": {**shop, "env": {"SHOP_MODE": "$SHOP_MODE"}, "timeout": 30000, "trust": True},
                "docs": {"httpUrl": DOCS_URL, "headers": bearer},
                "picky": {"command": "x", "includeTools": ["one"]},
            },
            "picky",
            "includeTools has no equivalent",
            {"shop": {**shop, "timeout": "30000ms"}, "docs": docs},
        ),
        "opencode": json_case(
            "opencode.json",
            ["mcp"],
            {
                "shop": {
                    "type": "local",
                    "command": argv,
                    "environment": {"SHOP_MODE": "{env:SHOP_MODE}"},
                    "enabled": True,
                    "timeout": 10000,
                },
                "docs": {"type": "remote", "url": DOCS_URL, "headers": {"Authorization": "Bearer {env:DOCS_TOKEN}"}},
                "off": {"type": "local", "command": ["x"], "enabled": False},
            },
            "off",
            "disabled in OpenCode",
            {"shop": shop, "docs": docs},
            **{"$schema": "https://opencode.ai/config.json"},
        ),
        "codex": Case(
            ".codex/config.toml",
            textwrap.dedent(f"""\
                # this project's Codex settings
                model = "gpt-5"

                # the shop's stock, read-only
                [mcp_servers.shop]
                command = {json.dumps(py)}
                args = [{json.dumps(script)}]
                env_vars = ["SHOP_MODE"]
                tool_timeout_sec = 90
                startup_timeout_sec = 20

                [mcp_servers.docs]
                url = "{DOCS_URL}"
                bearer_token_env_var = "DOCS_TOKEN"

                # only one tool of this one
                [mcp_servers.picky]
                command = "x"
                enabled_tools = ["one"]

                [profiles.fast]
                model = "gpt-5-mini"
                """),
            textwrap.dedent("""\
                # this project's Codex settings
                model = "gpt-5"

                # only one tool of this one
                [mcp_servers.picky]
                command = "x"
                enabled_tools = ["one"]

                [profiles.fast]
                model = "gpt-5-mini"
                """),
            "picky",
            "enabled_tools has no equivalent",
            {"shop": {**shop, "timeout": "90s"}, "docs": docs},
        ),
    }


CLIENTS = ["claude", "cursor", "vscode", "gemini", "opencode", "codex"]


@pytest.fixture
def shop(tmp_path: Path) -> list[str]:
    script = tmp_path / "shop_server.py"
    script.write_text(SHOP_SERVER)
    return [sys.executable, str(script)]


@pytest.fixture(autouse=True)
def _variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_MODE", "wholesale")
    monkeypatch.setenv("DOCS_TOKEN", "t0ken")


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [*CLI, "--root", str(root), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS)


def init(root: Path, client: str, *more: str) -> subprocess.CompletedProcess:
    return run(root, "init", client, "--command", "abilities-mcp", *more)


def project_with(folder: Path, case: Case, text: str) -> Path:
    (folder / case.config).parent.mkdir(parents=True, exist_ok=True)
    (folder / case.config).write_text(text)
    return folder


def files(root: Path) -> dict[str, str]:
    """Each file of the project as text, the project's own path (the hooks' --root) written ROOT."""
    found = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}
    return {name: text.replace(str(root.resolve()), "ROOT") for name, text in found.items()}


@pytest.mark.parametrize("client", CLIENTS)
async def test_init_gateway_moves_what_the_gateway_can_take_and_the_agent_reaches_it_through_tool_search(
    client: str, root: Path, tmp_path: Path, shop: list[str]
) -> None:
    case = cases(shop)[client]
    project_with(root, case, case.before)
    twin = project_with(tmp_path / "twin", case, case.kept_only)  # the same project, had it only the kept server

    done = init(root, client, "--gateway")

    assert done.returncode == 0, done.stderr
    assert init(twin, client).returncode == 0
    written = files(root)
    assert written.pop("gateway.json") == json.dumps({"mcpServers": case.moved}, indent=2) + "\n"
    assert written == files(twin)  # the client's files: as init writes them, with only the kept server left
    assert f"kept {case.kept} in {root / case.config}, where the agent can still call it directly" in done.stdout
    assert case.why in done.stdout
    assert f"moved shop, docs from {root / case.config} to {root / 'gateway.json'}" in done.stdout
    checked = run(root, "validate")
    assert checked.returncode == 0 and "gateway.json" in checked.stdout, checked.stdout + checked.stderr

    async with Client(create_server(Project.resolve(root))) as agent:
        found = await agent.call_tool("tool_search", {"task": "how many mugs does the shop have in stock"})
        called = await agent.call_tool("tool_call", {"tool": "shop__stock_level", "arguments": {"item": "mugs"}})

    assert not found.is_error, found
    assert found.structured_content["tools"][0]["tool"] == "shop__stock_level"
    assert not called.is_error, called
    assert called.content[0].text == "mugs: 7 in stock (wholesale)"  # ${SHOP_MODE}, expanded by the gateway


@pytest.mark.parametrize("client", CLIENTS)
def test_dry_run_shows_both_files_changes_and_writes_nothing_and_a_second_run_changes_nothing(
    client: str, root: Path, shop: list[str]
) -> None:
    case = cases(shop)[client]
    project_with(root, case, case.before)
    before = files(root)

    dry = init(root, client, "--gateway", "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert files(root) == before
    assert f"+++ {root / 'gateway.json'}" in dry.stdout and f"+++ {root / case.config}" in dry.stdout
    assert '+    "shop": {' in dry.stdout and "(dry run: nothing written)" in dry.stdout
    assert init(root, client, "--gateway").returncode == 0
    after = files(root)
    again = init(root, client, "--gateway")
    assert again.returncode == 0 and files(root) == after
    assert f"unchanged {root / case.config}" in again.stdout and f"no servers in {root / case.config}" in again.stdout


@pytest.mark.parametrize("client", CLIENTS)
def test_a_gateway_json_server_of_the_same_name_stops_init_unless_forced(
    client: str, root: Path, shop: list[str]
) -> None:
    case = cases(shop)[client]
    project_with(root, case, case.before)
    theirs = {"mcpServers": {"shop": {"command": "other-shop"}}}
    (root / "gateway.json").write_text(json.dumps(theirs))
    before = files(root)

    refused = init(root, client, "--gateway")

    assert refused.returncode == 1
    assert "already has a server 'shop' that differs" in refused.stderr and "--force" in refused.stderr
    assert files(root) == before
    forced = init(root, client, "--gateway", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((root / "gateway.json").read_text()) == {"mcpServers": case.moved}


def test_a_codex_server_written_inline_stays_and_init_says_to_move_it_by_hand(root: Path) -> None:
    config = root / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f'[mcp_servers]\nshop = {{ command = "uvx", args = ["shop"] }}\n\n[mcp_servers.docs]\nurl = "{DOCS_URL}"\n'
    )

    done = init(root, "codex", "--gateway")

    assert done.returncode == 0, done.stderr
    assert "kept shop" in done.stdout and "init removes only a [mcp_servers.shop] table; move it by hand" in done.stdout
    assert config.read_text().startswith(
        '[mcp_servers]\nshop = { command = "uvx", args = ["shop"] }\n\n[mcp_servers.abilities]'
    )
    assert json.loads((root / "gateway.json").read_text()) == {
        "mcpServers": {"docs": {"type": "http", "url": DOCS_URL}}
    }


def test_the_entries_that_stay_in_mcp_json_keep_their_text(root: Path) -> None:
    legacy = '{"type": "sse",  "url": "http://127.0.0.1:9/sse"}'  # one line, as its author wrote it: it stays
    shop = '{"command": "uvx", "args": ["shop"]}'
    (root / ".mcp.json").write_text(
        f'{{\n  "mcpServers": {{\n    "shop": {shop},\n    "legacy": {legacy}\n  }},\n  "note": [1,2]\n}}\n'
    )

    done = init(root, "claude", "--gateway")

    assert done.returncode == 0, done.stderr
    text = (root / ".mcp.json").read_text()
    assert text.startswith(f'{{\n  "mcpServers": {{\n    "legacy": {legacy},\n    "abilities": {{\n'), text
    assert text.endswith('\n  },\n  "note": [1,2]\n}\n'), text
    assert json.loads((root / "gateway.json").read_text()) == {"mcpServers": {"shop": json.loads(shop)}}


def test_claude_desktop_is_left_alone_its_config_is_the_users_not_the_projects(root: Path) -> None:
    done = init(root, "desktop", "--gateway")

    assert done.returncode == 1
    assert "Claude Desktop's config is your user's, not the project's" in done.stderr
    assert "abilities-mcp gateway add" in done.stderr and not (root / "gateway.json").exists()


def test_a_toml_table_is_removed_with_its_sub_tables_and_its_own_comments_and_no_other_byte() -> None:
    text = (
        "top = 1  # kept\r\n\r\n# about shop\r\n[ mcp_servers . \"shop\" ]  # the shop\r\ncommand = 'x'\r\n\r\n"
        "# about web\r\n[mcp_servers.web]\r\nurl = 'y'\r\n\r\n[mcp_servers.shop.env]\r\nA = '1'\r\n"
    )

    assert without_table(text, ["mcp_servers", "shop"]) == (
        "top = 1  # kept\r\n\r\n# about web\r\n[mcp_servers.web]\r\nurl = 'y'\r\n"
    )
    assert without_table(text, ["mcp_servers", "nothing"]) is None
    # a header that only looks like one, inside a multi-line string: the parsed check refuses the cut
    tricky = "[mcp_servers.a]\ncommand = 'x'\nnote = '''\n[mcp_servers.b]\n'''\n[mcp_servers.b]\nurl = 'z'\n"
    assert without_table(tricky, ["mcp_servers", "b"]) is None
