"""Script steps: turning a step into a safe command line, and judging what it produced."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..abilities.models import DEFAULT_STEP_TIMEOUT_SECONDS, ScriptStep
from ..abilities.templates import input_env, render_shell, render_text
from ..durations import format_duration, parse_duration
from .process import ScriptResult

if TYPE_CHECKING:
    from .live import LiveRun

# How much of stderr a failure message quotes.
STDERR_QUOTE_CHARS = 500
# The Python running abilities-mcp, for a step that needs the interpreter it was installed into (from a venv: that
# venv's, with its packages) whatever `python3` PATH finds. The server's environment may set it; a step's env wins.
PYTHON_VAR = "ABILITIES_PYTHON"


def needles(step: ScriptStep) -> dict[str, tuple[str, ...]]:
    """The texts validation looks for, searched in the whole output as it streams."""
    rules = step.validation
    return {
        "stdout_needles": (rules.stdout_contains,) if rules and rules.stdout_contains else (),
        "stderr_needles": (rules.stderr_contains,) if rules and rules.stderr_contains else (),
    }


def step_timeout(step: ScriptStep) -> float:
    return parse_duration(step.timeout) if step.timeout is not None else DEFAULT_STEP_TIMEOUT_SECONDS


def prepare_script(step: ScriptStep, live: LiveRun, root: Path) -> tuple[str, Path, dict[str, str]]:
    """The command (placeholders as quoted variables), its cwd inside the root, and its environment."""

    resolve = live.resolve
    # Without a placeholder the command is its own rendering (nothing to quote): skip walking it.
    command, values = render_shell(step.run, resolve) if "{{" in step.run else (step.run, {})
    cwd = (root / render_text(step.cwd, resolve)).resolve() if step.cwd else root
    if cwd != root and root not in cwd.parents:
        raise ValueError(f"cwd {step.cwd!r} resolves to {str(cwd)!r}, outside the project root; fix cwd")
    if not cwd.is_dir():
        raise ValueError(f"cwd {step.cwd!r} does not exist under the project root; create it or fix cwd")
    env = {
        **({PYTHON_VAR: sys.executable} if sys.executable else {}),
        **live.base_env,
        **input_env(live.inputs),
        **{k: render_text(v, resolve).replace("\0", "") for k, v in step.env.items()},
        **values,
    }
    return command, cwd, env


def check_result(step: ScriptStep, result: ScriptResult, cwd: Path) -> str | None:
    """Why the attempt failed (timeout, exit code, validation), or None when it passed."""
    rules = step.validation
    expected = rules.exit_code if rules else 0
    if result.timed_out:
        return f"timed out after {format_duration(step_timeout(step))}; raise timeout: or speed up the command"
    if result.exit_code != expected:
        return f"exit code {result.exit_code}, expected {expected}{_stderr_quote(result)}"
    if rules and rules.stdout_contains and f"stdout:{rules.stdout_contains}" not in result.found:
        return f"stdout does not contain {rules.stdout_contains!r}"
    if rules and rules.stderr_contains and f"stderr:{rules.stderr_contains}" not in result.found:
        return f"stderr does not contain {rules.stderr_contains!r}"
    if rules and rules.file_exists is not None and not (cwd / rules.file_exists).exists():
        return f"file {rules.file_exists!r} does not exist after the step"
    return None


def _stderr_quote(result: ScriptResult) -> str:
    tail = result.stderr.strip()[-STDERR_QUOTE_CHARS:]
    return f"; stderr: {tail}" if tail else ""
