"""A server started by hand at a terminal: the Inspector command its banner prints runs this very program by its
absolute path, so it works where `abilities-mcp` is not on PATH (npx runs it without a shell: ENOENT otherwise)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from support import Terminal

# The console script pip put beside this interpreter.
SCRIPT = Path(sys.executable).parent / "abilities-mcp"


def inspector_command(banner: str) -> list[str]:
    """The command the banner's `inspect` line hands the Inspector (between --cli and --method)."""
    line = next(line for line in banner.splitlines() if line.strip().startswith("inspect "))
    argv = shlex.split(line.strip().removeprefix("inspect"))
    return argv[argv.index("--cli") + 1 : argv.index("--method")]


@pytest.mark.parametrize(
    ("argv", "cwd", "expected"),
    [
        (["./abilities-mcp"], SCRIPT.parent, [str(SCRIPT)]),
        ([sys.executable, "-m", "abilities_mcp"], None, [sys.executable, "-m", "abilities_mcp"]),
    ],
    ids=["console-script-by-a-relative-path", "python-m"],
)
def test_the_banners_inspector_command_is_this_program_by_its_absolute_path(
    root: Path, tmp_path: Path, argv: list[str], cwd: Path | None, expected: list[str]
) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # abilities-mcp is not on PATH
    term = Terminal([*argv, "--root", str(root)], cwd=cwd or tmp_path, env=env)
    try:
        banner = term.expect("Ctrl-C")
    finally:
        term.proc.kill()
        term.proc.wait(timeout=30)

    command = inspector_command(banner)
    assert command == [*expected, "--root", str(root)]
    assert os.path.isabs(command[0]) and os.access(command[0], os.X_OK)
