"""The `abilities-mcp` command as a person or CI runs it: a real process, its output and its exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support import REPO

# Generous: a cold interpreter imports pydantic and the SDK; a step itself never takes long here.
CLI_TIMEOUT_SECONDS = 60

GREET = """
    description: greets someone
    inputs:
      who: {type: string, required: true, description: Who to greet}
      times: {type: integer, default: 1}
    steps:
      - id: greet
        type: script
        run: echo "hello {{inputs.who}}"
"""
BOOM = """
    description: always fails
    steps:
      - {id: boom, type: script, run: echo about to fail >&2; exit 3}
"""


def cli(*args: str | Path, root: Path | None = None, state_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m abilities_mcp ARGS` (with --root/--state-dir when given) and capture its output."""
    options = [*(["--root", str(root)] if root else []), *(["--state-dir", str(state_dir)] if state_dir else [])]
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", *options, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


# --- validate ---------------------------------------------------------------------------------------------------


def test_validate_exits_1_and_names_the_file_the_field_and_the_fix(root: Path, write) -> None:
    write("good", "description: fine\nsteps:\n  - {id: a, type: script, run: 'true'}\n")
    broken = write("broken", "description: typo\nsteps:\n  - {id: a, type: script, run: 'true', need: [b]}\n")

    result = cli("validate", root=root)

    assert result.returncode == 1, result
    assert str(broken) in result.stdout
    assert re.search(r"steps\[0\]\.need\b.*did you mean .needs.", result.stdout), result.stdout


def test_validate_exits_0_on_a_clean_project(root: Path, write) -> None:
    write("greet", GREET)

    result = cli("validate", root=root)

    assert result.returncode == 0, result
    assert "greet" in result.stdout


def test_validate_passes_on_this_repository(state_dir: Path) -> None:
    result = cli("validate", root=REPO, state_dir=state_dir)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "test-suite" in result.stdout


# --- list -------------------------------------------------------------------------------------------------------


def test_list_shows_each_ability_with_its_description_and_inputs(root: Path, write) -> None:
    write("greet", GREET)
    write("boom", BOOM)

    result = cli("list", root=root)

    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert any(re.match(r"boom\s+always fails$", line) for line in lines), result.stdout
    assert any(re.match(r"greet\s+greets someone$", line) for line in lines), result.stdout
    assert "-i who=<string> (required)" in result.stdout
    assert "-i times=<integer> (default 1)" in result.stdout


# --- run, status, history ---------------------------------------------------------------------------------------


def test_run_prints_progress_and_exits_0_when_the_ability_completes(root: Path, write, state_dir: Path) -> None:
    write("greet", GREET)

    result = cli("run", "greet", "-i", "who=world", root=root, state_dir=state_dir)

    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert re.match(r"run run_\w+: greet$", lines[0]), lines
    assert any(re.match(r"\s*\[ok\] greet\b", line) for line in lines), lines
    assert re.search(r"greet\s+completed", result.stdout)


def test_run_exits_1_when_a_step_fails(root: Path, write, state_dir: Path) -> None:
    write("boom", BOOM)

    result = cli("run", "boom", root=root, state_dir=state_dir)

    assert result.returncode == 1, result
    assert re.search(r"\[FAIL\] boom\b", result.stdout), result.stdout
    assert re.search(r"boom\s+failed", result.stdout)
    assert "--- boom failed: exit code 3, expected 0\n" in result.stderr  # the reason, said in the step's block


BAD_INPUTS = {
    "missing-required": ([], "who"),
    "wrong-type": (["-i", "who=x", "-i", "times=often"], "times"),
    "unknown-name": (["-i", "who=x", "-i", "whom=y"], "whom"),
    "not-key-value": (["-i", "who"], "key=value"),
}


@pytest.mark.parametrize(("args", "named"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_run_exits_2_and_says_what_is_wrong_with_the_inputs_on_stderr(
    root: Path, write, state_dir: Path, args: list[str], named: str
) -> None:
    write("greet", GREET)

    result = cli("run", "greet", *args, root=root, state_dir=state_dir)

    assert result.returncode == 2, result
    assert named in result.stderr
    assert "[ok]" not in result.stdout


def test_status_and_history_show_a_run_made_at_the_terminal(root: Path, write, state_dir: Path) -> None:
    write("greet", GREET)
    ran = cli("run", "greet", "-i", "who=world", root=root, state_dir=state_dir)
    run_id = re.match(r"run (run_\w+):", ran.stdout).group(1)

    status = cli("status", root=root, state_dir=state_dir)
    as_json = cli("status", run_id, "--json", root=root, state_dir=state_dir)
    history = cli("history", root=root, state_dir=state_dir)

    assert status.returncode == 0, status
    assert re.search(rf"run {run_id}\s+greet\s+completed", status.stdout), status.stdout
    assert as_json.returncode == 0, as_json
    run = json.loads(as_json.stdout)
    assert (run["run_id"], run["status"]) == (run_id, "completed")
    assert run["steps"][0]["output"] == "hello world"
    assert history.returncode == 0, history
    assert re.search(rf"^{run_id}\s+completed\s+greet\b", history.stdout, re.MULTILINE), history.stdout


def test_status_of_an_unknown_run_exits_2_and_says_so(root: Path, state_dir: Path) -> None:
    result = cli("status", "run_nope", root=root, state_dir=state_dir)

    assert result.returncode == 2
    assert "run_nope" in result.stderr


# --- schema -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ability_schema() -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "schema", "ability"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=True,
    )
    return json.loads(result.stdout)


def test_schema_ability_prints_a_json_schema_whose_step_models_forbid_unknown_keys(ability_schema: dict) -> None:
    steps = ability_schema["properties"]["steps"]
    step_models = [ref["$ref"].rsplit("/", 1)[1] for ref in steps["items"]["oneOf"]]

    assert sorted(step_models) == ["AgentStep", "ApprovalStep", "ScriptStep", "SkillStep", "WorkflowStep"]
    assert ability_schema["additionalProperties"] is False
    for name in step_models:
        assert ability_schema["$defs"][name]["additionalProperties"] is False, name


def test_the_repository_example_abilities_match_the_printed_schema(ability_schema: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(ability_schema)
    examples = sorted((REPO / "abilities").rglob("*.y*ml"))

    assert examples, "the repository ships example abilities"
    for path in examples:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], path
    typo = {"description": "x", "steps": [{"id": "a", "type": "script", "run": "true", "need": ["b"]}]}
    assert not validator.is_valid(typo), "the schema must reject an unknown key"


# --- help and serve ---------------------------------------------------------------------------------------------


def test_help_describes_every_command() -> None:
    result = cli("--help")

    assert result.returncode == 0, result
    for command in ("serve", "validate", "list", "run", "status", "history", "schema"):
        assert re.search(rf"^\s+{command}\s", result.stdout, re.MULTILINE), command


@pytest.mark.parametrize("log_level", ["warning", "debug"])
def test_the_server_writes_nothing_to_stdout_before_the_client_speaks(root: Path, write, log_level: str) -> None:
    write("greet", GREET)

    result = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "--log-level", log_level],
        input=b"",
        capture_output=True,
        timeout=CLI_TIMEOUT_SECONDS,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert (b"DEBUG" in result.stderr) == (log_level == "debug"), "logs belong on stderr"


def test_the_server_keeps_only_as_many_finished_runs_as_history_runs_says(root: Path, write, state_dir: Path) -> None:
    write(
        "quick",
        """
        description: quick
        steps:
          - {id: s, type: script, run: 'true'}
    """,
    )
    for _ in range(3):
        assert cli("run", "quick", root=root, state_dir=state_dir).returncode == 0
    server = subprocess.run(
        [
            sys.executable,
            "-m",
            "abilities_mcp",
            "--root",
            str(root),
            "--state-dir",
            str(state_dir),
            "--history-runs",
            "1",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert server.returncode == 0, server.stderr
    history = cli("history", root=root, state_dir=state_dir).stdout.strip().splitlines()
    assert len(history) == 1 and "quick" in history[0]


def test_run_at_a_terminal_shows_an_agent_step_and_takes_the_typed_answer(root: Path, write, state_dir: Path) -> None:
    write(
        "ask",
        """
        description: ask
        steps:
          - {id: think, type: agent, prompt: "Say APPROVED", validation: {output_contains: APPROVED}, on_failure: retry}
          - {id: after, type: script, run: 'echo "got {{steps.think.output}}"', needs: [think]}
    """,
    )
    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "--state-dir", str(state_dir), "run", "ask"],
        input="nope\n.\nAPPROVED indeed\n.\n",
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--- step think is yours ---" in done.stdout and "Say APPROVED" in done.stdout
    assert "ability_step_complete" not in done.stdout  # the agent's protocol is not the person's
    assert "answer refused: the output does not contain 'APPROVED'" in done.stderr
    status = cli("status", "--json", root=root, state_dir=state_dir)
    after = next(s for s in json.loads(status.stdout)["steps"] if s["id"] == "after")
    assert after["output"] == "got APPROVED indeed"


@pytest.mark.parametrize(
    ("make", "command", "says"),
    [
        (lambda tmp: tmp / "a-file", "list", "is not a folder"),
        (lambda tmp: tmp / "missing", "serve", "does not exist"),
        (lambda tmp: tmp / "${workspaceFolder}", "list", "does not exist"),
    ],
    ids=["a-file", "missing-for-serve", "an-unexpanded-client-variable"],
)
def test_a_project_root_that_is_not_a_folder_is_refused_and_nothing_is_created(tmp_path: Path, make, command, says):
    here = tmp_path / "here"
    here.mkdir()
    (here / "a-file").write_text("not a project")
    root = make(here)

    done = cli(command, root=root)

    assert done.returncode == 2
    assert says in done.stderr and "--root" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in here.iterdir()) == ["a-file"]  # no folder made, no state file
