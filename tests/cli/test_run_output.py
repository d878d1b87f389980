"""What the CLI prints, round two (issue 30): live progress redrawn with real codes while a step's stay inert, a
failure's reason said once, honest step counts, exit codes as docs/cli.md says, answers by their first letters,
`history --json`, skill events from `skills plan`, and no note for a project skill identical to a built-in one."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from abilities_mcp.cli.parser import build_parser, pick
from support import REPO, Terminal, cli, write_skill

# A command finishes well within this (a cold interpreter imports pydantic and the SDK).
CLI_TIMEOUT_SECONDS = 60

# The first step fails with a traceback on stderr; the three after it never run.
FAILS_FIRST = """
description: fails at the first step
steps:
  - id: build
    type: script
    run: "echo building; echo 'Traceback: ModuleNotFoundError: No module named sentinel_mod' >&2; exit 1"
  - {id: test, type: script, run: "true", needs: [build]}
  - {id: lint, type: script, run: "true", needs: [test]}
  - {id: report, type: script, run: "true", needs: [lint]}
"""


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(root, *args), capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS, env=env)


def write(root: Path, name: str, text: str) -> None:
    (root / "abilities" / f"{name}.yaml").write_text(textwrap.dedent(text))


# --- live progress at a real terminal ---------------------------------------------------------------------------


def test_at_a_terminal_the_redraw_codes_are_obeyed_and_what_a_step_printed_is_shown_as_text(root: Path) -> None:
    # The step prints an escape that would clear the screen; its last line is what the progress line shows.
    write(
        root,
        "slow",
        "description: slow\nsteps:\n  - {id: count, type: script, run: 'printf \"tick \\033[2J1\\n\"; sleep 600'}\n",
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    term = Terminal(cli(root, "run", "slow"), root, env=env)
    try:
        shown = term.expect("tick \\x1b[2J1")  # the step's escape, as the text it is
        term.type("\x03")
        term.expect("cancelled")
        assert term.wait() == 3
    finally:
        if term.proc.poll() is None:
            term.proc.kill()

    assert "\r\x1b[K  [>] count  " in shown  # the CLI's own redraw reaches the terminal as codes
    assert "\\x0d" not in shown and "\\x1b[K" not in shown  # ... never as text
    assert "\x1b[2J" not in shown  # and what the step printed is never obeyed


# --- a failure said once ----------------------------------------------------------------------------------------


def test_a_failure_reason_is_said_once_in_the_failed_steps_block_and_skipped_steps_name_the_step(root: Path) -> None:
    write(root, "fails", FAILS_FIRST)

    done = run(root, "run", "fails")

    assert done.returncode == 1
    everything = done.stdout + done.stderr
    assert everything.count("sentinel_mod") == 1, everything  # once: in the block's stderr tail
    assert everything.count("exit code 1, expected 0") == 1, everything
    assert "--- build failed: exit code 1, expected 0\n" in done.stderr
    assert "    | Traceback: ModuleNotFoundError: No module named sentinel_mod" in done.stderr
    for step in ("test", "lint", "report"):
        assert f"  [skip] {step}: not run: step 'build' failed\n" in done.stdout
        assert re.search(rf"^  {step} +skipped +not run: step 'build' failed$", done.stdout, re.M), done.stdout
    assert "(1 of 4 steps ran; 1 failed, 3 skipped)" in done.stdout
    assert "error:" not in everything  # the run stopped at build: its block says why

    run_id = done.stdout.split()[1].rstrip(":")
    status = run(root, "status", run_id)

    assert status.returncode == 0
    assert status.stdout.count("sentinel_mod") == 1, status.stdout
    assert "(1 of 4 steps ran; 1 failed, 3 skipped)" in status.stdout
    assert "--- build failed: exit code 1, expected 0\n" in status.stdout
    assert f"all of it: abilities-mcp logs {run_id} build" in status.stdout


def test_the_count_says_how_many_steps_ran_and_what_became_of_the_rest(root: Path) -> None:
    write(
        root,
        "skips",
        """
        description: one step skipped by its when
        inputs: {full: {type: boolean, default: false}}
        steps:
          - {id: a, type: script, run: "true"}
          - {id: b, type: script, run: "true", when: inputs.full == true}
        """,
    )

    done = run(root, "run", "skips")

    assert done.returncode == 0, done.stderr
    assert "skips  completed  (1 of 2 steps ran; 1 skipped)" in done.stdout


def test_a_run_error_that_is_no_steps_failure_is_still_said(root: Path) -> None:
    write(
        root,
        "hooked",
        """
        description: its hook fails before any step
        hooks: {before: ["echo no-go >&2; exit 4"]}
        steps:
          - {id: a, type: script, run: "true"}
        """,
    )

    done = run(root, "run", "hooked")

    assert done.returncode == 1
    assert re.search(r"^error: .*hooks\.before\[0\].*exit code 4", done.stdout, re.M), done.stdout


# --- exit codes as docs/cli.md says -----------------------------------------------------------------------------

CANNOT = {
    "status-with-no-runs": (["status"], "No runs yet."),
    "skills-plan-of-a-missing-file": (["skills", "plan", "nope.md"], "no plan at"),
    "an-unknown-template": (["workflows", "add", "--template", "nope"], "Unknown template 'nope'"),
    "decide-with-no-such-answer": (["decide", "run_x", "maybe"], "type retry, continue or stop"),
}


@pytest.mark.parametrize(("args", "said"), CANNOT.values(), ids=CANNOT.keys())
def test_a_command_that_cannot_do_what_was_asked_exits_2_and_says_why(root: Path, args: list[str], said: str) -> None:
    done = run(root, *args)

    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


# --- answers by their first letters -----------------------------------------------------------------------------

PICKS = {
    "whole": ("retry", "retry"),
    "first-letter": ("r", "retry"),
    "any-case": ("C", "continue"),
    "a-prefix": ("sto", "stop"),
}


@pytest.mark.parametrize(("typed", "value"), PICKS.values(), ids=PICKS.keys())
def test_an_answer_may_be_the_first_letters_of_one_choice(typed: str, value: str) -> None:
    assert pick(["retry", "continue", "stop"], typed) == value
    assert build_parser().parse_args(["decide", "run_x", typed]).decision == value


@pytest.mark.parametrize(
    ("typed", "said"),
    [("x", "'x' is not one of the answers; type retry, continue or stop"), ("", "is not one of the answers")],
    ids=["unknown", "empty"],
)
def test_an_answer_that_names_no_choice_is_refused_in_plain_words(typed: str, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        pick(["retry", "continue", "stop"], typed)


def test_an_ambiguous_answer_names_the_choices_it_could_be() -> None:
    with pytest.raises(ValueError, match=r"'s' could be 'ship' or 'stop'; type more of it"):
        pick(["ship", "stop"], "s")


def test_run_at_a_terminal_takes_a_decision_by_its_first_letter(root: Path) -> None:
    write(
        root,
        "flaky",
        """
        description: flaky
        steps:
          - {id: flaky, type: script, run: 'echo x >> tries; test $(wc -l < tries) -ge 2', on_failure: ask}
        """,
    )
    term = Terminal(cli(root, "run", "flaky"), root)
    term.expect("Answer (retry / continue / stop): ")
    term.type("x")
    assert "'x' is not one of the answers" in term.expect("(or its first letters)")
    term.type("r")
    assert "completed  (1 of 1 steps ran)" in term.expect("steps ran)")
    assert term.wait() == 0
    assert len((root / "tries").read_text().split()) == 2


# --- list, history --json ---------------------------------------------------------------------------------------


def test_list_aligns_the_row_of_an_invalid_ability_with_the_others(root: Path) -> None:
    write(root, "good", "description: fine\nsteps:\n  - {id: a, type: script, run: 'true'}\n")
    write(root, "broken", "description: typo\nsteps:\n  - {id: a, type: scirpt, run: 'true'}\n")

    lines = run(root, "list").stdout.splitlines()

    assert f"{'good':28} fine" in lines
    assert any(
        re.fullmatch(r"broken {23}(typo  )?\[invalid: run `abilities-mcp validate`\]", line) for line in lines
    ), lines


def test_history_json_prints_what_the_ability_history_tool_returns(root: Path) -> None:
    assert json.loads(run(root, "history", "--json").stdout) == {"runs": [], "call_approvals": []}
    write(root, "fine", "description: fine\nsteps:\n  - {id: a, type: script, run: 'true'}\n")
    run_id = run(root, "run", "fine").stdout.split()[1].rstrip(":")

    done = run(root, "history", "--json")

    assert done.returncode == 0
    (entry,) = json.loads(done.stdout)["runs"]
    assert (entry["run_id"], entry["ability"], entry["status"]) == (run_id, "fine", "completed")
    assert set(entry) == {"run_id", "ability", "status", "started_at", "finished_at"}


# --- skills -----------------------------------------------------------------------------------------------------


def test_skills_plan_records_skill_events_as_an_mcp_session_does(root: Path) -> None:
    write_skill(root, "pdf-tools", "name: pdf-tools\ndescription: Fill and merge PDF forms.")

    planned = run(root, "skills", "plan", "--task", "merge the PDF forms (skills: pdf-tools)")
    events = json.loads(run(root, "events", "--json").stdout)

    assert planned.returncode == 0, planned.stderr
    kinds = [e["kind"] for e in events["events"]]
    assert kinds == ["SKILLS_DISCOVERED", "SKILLS_SELECTED"], events
    discovered, selected = events["events"]
    assert discovered["names"] == ["pdf-tools"] and discovered["session_id"].startswith("cli-")
    assert selected["session_id"] == discovered["session_id"]
    assert [s["name"] for s in selected["skills"]] == ["pdf-tools"]
    assert selected["task_label"] == "merge the PDF forms"  # the task, its skills hint read off
    assert events["counters"]["skills_selected_total"] == 1


def test_a_project_skill_identical_to_a_built_in_one_makes_no_note_and_one_that_differs_does(root: Path) -> None:
    shutil.copytree(REPO / "skills", root / "skills")  # a clone of this repository: its skills are the built-ins
    env = {**os.environ, "ABILITIES_BUILTIN_SKILLS": "1"}

    same = run(root, "skills", "list", env=env)

    assert same.returncode == 0
    assert "hides" not in same.stdout + same.stderr, same.stderr
    assert "note:" not in same.stderr

    (root / "skills" / "skill-author" / "SKILL.md").write_text(
        "---\nname: skill-author\ndescription: Our own rules for skills.\n---\n\nOurs.\n"
    )
    differs = run(root, "skills", "list", env=env)

    assert differs.stderr.count("hides the built-in one") == 1 and "'skill-author'" in differs.stderr


# --- docs -------------------------------------------------------------------------------------------------------


def test_docs_cli_lists_every_schema_the_command_prints() -> None:
    kinds = ["ability", "workflows", "gateway", "settings"]
    assert [build_parser().parse_args(["schema", kind]).kind for kind in kinds] == kinds
    row = next(line for line in (REPO / "docs" / "cli.md").read_text().splitlines() if line.startswith("| `schema "))
    assert row.startswith("| `schema " + "\\|".join(kinds) + "`"), row
