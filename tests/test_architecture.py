"""The layers ARCHITECTURE.md draws, held by import-linter's contracts in `.importlinter`: the tree keeps them, and
a forbidden import breaks the contract that names it."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# import-linter builds the whole import graph; on a shared 2-core machine that stays well under this.
LINT_TIMEOUT_SECONDS = 120


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """Run the contracts over the package found under `src` (first on the path), with the repository's config."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / ".importlinter"), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        timeout=LINT_TIMEOUT_SECONDS,
    )


def test_the_source_tree_keeps_every_layer_contract() -> None:
    result = lint_imports(REPO / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("state/owners.py", "from ..abilities import catalog", "abilities_mcp.state is not allowed to import"),
        ("engine/machine.py", "from ..server import views", "abilities_mcp.engine is not allowed to import"),
        ("prerequisites/gates.py", "import pydantic", "abilities_mcp.clients.hook is not allowed to import pydantic"),
        ("engine/live.py", "from . import core", "No cycles are allowed in abilities_mcp.engine"),
        ("abilities/models.py", "import anyio", "abilities_mcp.abilities.models is not allowed to import anyio"),
        ("cli/main.py", "import mcp", "abilities_mcp.cli is not allowed to import mcp"),
        ("gateway/proxy.py", "from ..server import views", "abilities_mcp.gateway is not allowed to import"),
        ("gateway/config.py", "import mcp", "abilities_mcp.gateway.config is not allowed to import mcp"),
    ],
    ids=[
        "state-imports-a-capability",
        "engine-imports-the-server",
        "pydantic-on-the-hook-path",
        "a-cycle-inside-engine",
        "the-models-import-anyio",
        "cli-imports-mcp-directly",
        "the-gateway-imports-the-server",
        "the-gateway-config-imports-mcp",
    ],
)
def test_a_forbidden_import_breaks_the_contract_that_names_it(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    shutil.copytree(
        REPO / "src" / "abilities_mcp", tmp_path / "abilities_mcp", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = tmp_path / "abilities_mcp" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")

    result = lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in result.stdout, result.stdout


# --- ARCHITECTURE.md is the map: it must match the tree --------------------------------------------------------

ARCHITECTURE = REPO / "ARCHITECTURE.md"
PACKAGE = REPO / "src" / "abilities_mcp"


def defined_names(path: Path) -> set[str]:
    """Top-level functions and classes of a module, and `Class.method` for their methods."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}.{n.name}" for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    return names


def test_every_module_path_architecture_md_names_exists() -> None:
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.(?:py|js))`", ARCHITECTURE.read_text()))
    assert named, "ARCHITECTURE.md names no module paths"
    missing = sorted(p for p in named if not (PACKAGE / p).exists() and not (REPO / p).exists())
    assert not missing, f"ARCHITECTURE.md names modules that do not exist: {missing}"


def test_the_module_table_lists_every_module_of_every_folder() -> None:
    text = ARCHITECTURE.read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)/` \| (.*) \|$", text, re.M))
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert sorted(rows) == folders
    for folder in folders:
        modules = {p.stem for p in (PACKAGE / folder).glob("*.py") if p.stem != "__init__"}
        modules |= {p.name for p in (PACKAGE / folder).glob("*.js")}
        listed = set(re.findall(r"`([a-z_]+(?:\.js)?)`", rows[folder]))
        assert modules <= listed, f"{folder}/: ARCHITECTURE.md does not list {sorted(modules - listed)}"


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("engine/handback.py", "AgentSteps._live_for_handback"),
        ("engine/handback.py", "_not_awaiting_agent"),
        ("engine/handoff.py", "check_handback"),
        ("server/ability_tools.py", "_refused_handback"),
        ("server/session.py", "Session.refused_or_warned"),
        ("clients/hook.py", "main"),
        ("clients/payloads.py", "parse"),
        ("clients/hook.py", "before"),
        ("clients/hook.py", "_step_verdict"),
        ("clients/hook.py", "_workflow_answer"),
        ("clients/answers.py", "_claude_output"),
        ("clients/hook.py", "after"),
        ("clients/enforcement.py", "tool_verdict"),
        ("prerequisites/sessions.py", "SessionState.record"),
        ("engine/core.py", "Engine.start"),
        ("engine/core.py", "Engine._drive"),
        ("engine/core.py", "Engine._run_step"),
        ("abilities/checks.py", "execution_order"),
    ],
    ids=lambda v: v,
)
def test_the_three_flows_name_functions_where_they_are(module: str, name: str) -> None:
    text = ARCHITECTURE.read_text()
    short = name.rsplit(".", 1)[-1]
    assert f"`{module}`" in text and (f"`{name}`" in text or f"`{short}`" in text), "ARCHITECTURE.md no longer says it"
    assert name in defined_names(PACKAGE / module), f"{module} no longer defines {name}; update ARCHITECTURE.md"
