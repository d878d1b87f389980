"""The layers ARCHITECTURE.md draws, held by import-linter's contracts in `.importlinter`: the tree keeps them, and
a forbidden import breaks the contract that names it."""

from __future__ import annotations

import os
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
    ],
    ids=[
        "state-imports-a-capability",
        "engine-imports-the-server",
        "pydantic-on-the-hook-path",
        "a-cycle-inside-engine",
        "the-models-import-anyio",
        "cli-imports-mcp-directly",
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
