"""What the command imports and does before it works: the CLI never loads the MCP SDK, the server's command line never
loads the clients' modules, and the collector that start-up turns off comes back on."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.cli import main as cli_main
from abilities_mcp.cli.parser import HOOK_CLIENTS, INIT_CLIENTS
from abilities_mcp.clients.configs import CLIENTS
from abilities_mcp.clients.payloads import EVENTS

IMPORT_TIMEOUT_SECONDS = 60


def imported(code: str, cwd: Path) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=IMPORT_TIMEOUT_SECONDS,
        check=True,
    )
    return set(result.stdout.split())


def test_the_help_names_exactly_the_clients_argparse_accepts() -> None:
    assert INIT_CLIENTS.split(", ") == CLIENTS
    assert HOOK_CLIENTS.split(", ") == sorted(EVENTS)


@pytest.mark.parametrize("command", ["list", "status", "validate", "history"])
def test_a_person_s_command_never_imports_the_mcp_sdk(root: Path, command: str) -> None:
    """The SDK's import is most of a second: `list` must not pay it (server/__init__.py once made every command)."""
    modules = imported(
        f"from abilities_mcp.cli.main import main; main(['--root', {str(root)!r}, {command!r}])", root.parent
    )
    assert "abilities_mcp.server.views" in modules or command == "validate"
    assert not {m for m in modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))}


def test_the_servers_command_line_is_read_without_the_clients_modules(root: Path) -> None:
    modules = imported(f"from abilities_mcp.cli.parser import parse_args; parse_args(['--root', {str(root)!r}])", root)
    assert not {m for m in modules if m.startswith("abilities_mcp.clients")}


def test_init_still_refuses_a_client_it_does_not_know_naming_the_ones_it_does(root: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "init", "nope"],
        capture_output=True,
        text=True,
        timeout=IMPORT_TIMEOUT_SECONDS,
    )
    assert result.returncode == 2
    assert "invalid choice: 'nope'" in result.stderr and "'desktop'" in result.stderr


def test_serve_runs_with_the_collector_on_once_the_server_is_built(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up turns the collector off; a server left that way would never collect a cycle in its whole life."""
    import anyio

    seen: list[bool] = []
    monkeypatch.setattr(anyio, "run", lambda *args, **kwargs: seen.append(gc.isenabled()))
    try:
        assert cli_main.main(["--root", str(root)]) == 0
    finally:
        gc.unfreeze()
        gc.enable()
    assert seen == [True]


def test_every_other_command_runs_with_the_collector_on(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gc.disable()
    try:
        assert cli_main.main(["--root", str(root), "list"]) == 0
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_serve_builds_no_result_model_and_imports_no_rich_before_the_first_call(root: Path) -> None:
    """The server as `serve` builds it: the tools from their generated schemas (server/schema_data.py), the result
    models' validators left for the first call that returns one, and no rich handler for a root logger that has one."""
    code = (
        "import logging; logging.basicConfig()\n"
        "from abilities_mcp.server.app import create_server\n"
        "from abilities_mcp.server.results import Run\n"
        "from abilities_mcp.state.project import Project\n"
        f"server = create_server(Project.resolve({str(root)!r}))\n"
        "assert len(server._tool_manager.list_tools()) == 21\n"
        "assert not Run.__pydantic_complete__, 'a result model was built at start-up'"
    )
    modules = imported(code, root)
    assert "abilities_mcp.server.schema_data" in modules
    assert not {m for m in modules if m == "rich" or m.startswith("rich.")}
