"""skill_plan over the SDK client, and `skills plan` / `skills sync` at the command line: one call per step gives
the task, the chosen skills with reasons, and a prompt block ready to paste."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from support import cli, write_skill

pytestmark = pytest.mark.anyio


def skill(root: Path, name: str, description: str, body: str = "Do the thing.\n", files: dict | None = None) -> Path:
    return write_skill(root, name, f"name: {name}\ndescription: {description}", body, files)


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(root, *args), capture_output=True, text=True, timeout=60)


@pytest.fixture
def skills(root: Path) -> Path:
    skill(root, "xlsx", "Create and edit Excel spreadsheets (.xlsx). Use for spreadsheets, sheets, formulas.")
    skill(root, "pdf", "Read, fill and merge PDF files. Use when the user works with PDFs.")
    skill(root, "code-review", "Review a change for bugs, security and style. Use to review a pull request or diff.")
    skill(
        root,
        "changelog",
        "Write CHANGELOG entries and release notes from commits.",
        files={"references/guide.md": "# Guide\n"},
    )
    (root / "PLAN.md").write_text(
        textwrap.dedent(
            """\
            # Plan
            ## Build
            - [x] Set up the project
            - [ ] Export the quarterly report as a spreadsheet (skills: xlsx, nope)
            - [ ] Draft the release notes
            ## Verification
            - [ ] Verify the export opens
            """
        )
    )
    return root


async def test_the_plans_next_task_comes_with_its_named_skills_first_and_unknown_ones_as_errors(client, skills):
    result = await client.call_tool("skill_plan", {"plan": "PLAN.md"})
    assert not result.is_error, result.content
    plan = result.structured_content
    assert plan["task"] == {
        "text": "Export the quarterly report as a spreadsheet",
        "line": 4,
        "section": "Build",
        "parent": None,
    }
    assert plan["strategy"] == "hint"
    assert plan["skills"][0] == {"name": "xlsx", "reason": "named in the task"}
    assert len(plan["skills"]) <= 2
    [error] = plan["errors"]
    assert error["name"] == "nope" and "Unknown skill 'nope'" in error["error"]
    prompt = plan["prompt"]
    assert prompt.startswith("<available_skills>\n\n<skill>\n<name>changelog</name>")
    assert "Reading: xlsx\nBase directory: " in prompt and prompt.rstrip().endswith(
        "Skill read: " + plan["skills"][-1]["name"]
    )


async def test_a_review_step_gets_one_matched_skill(client, skills) -> None:
    result = await client.call_tool("skill_plan", {"task": "review this pull request diff", "step_kind": "review"})
    plan = result.structured_content
    assert (plan["strategy"], [s["name"] for s in plan["skills"]]) == ("match", ["code-review"])
    assert plan["task"]["line"] == 0 and plan["skills"][0]["reason"]


async def test_a_task_no_skill_fits_gets_none_and_still_the_catalog(client, skills) -> None:
    plan = (await client.call_tool("skill_plan", {"task": "what is the capital of portugal"})).structured_content
    assert (plan["strategy"], plan["skills"], plan["errors"]) == ("none", [], [])
    assert plan["prompt"].startswith("<available_skills>") and "Reading:" not in plan["prompt"]


async def test_a_long_skill_is_cut_at_the_budget_with_a_marker_and_references_come_when_asked(client, root) -> None:
    skill(root, "huge", "Write changelog release notes.", "x" * 30_000 + "\nTHE END\n", {"references/a.md": "REF A\n"})
    args = {"task": "write the release notes (skills: huge)", "budget": 5000, "include_references": True}
    plan = (await client.call_tool("skill_plan", args)).structured_content
    assert plan["truncated"] == ["huge"]
    assert "[truncated: 5000 of " in plan["prompt"] and "THE END" not in plan["prompt"]
    assert "--- references/a.md ---\nREF A" in plan["prompt"]


async def test_a_finished_plan_says_so_and_a_bad_plan_is_an_error_that_says_to_choose(client, root) -> None:
    (root / "DONE.md").write_text("- [x] all done\n")
    (root / "PROSE.md").write_text("Just prose.\n")
    done = (await client.call_tool("skill_plan", {"plan": "DONE.md"})).structured_content
    assert (done["task"], done["skills"], done["strategy"]) == (None, [], "none")
    for plan, words in [
        ("PROSE.md", "no checklist items"),
        ("missing.md", "no plan at"),
        ("../../etc/passwd", "outside the project"),
    ]:
        result = await client.call_tool("skill_plan", {"plan": plan})
        assert (
            result.is_error and words in result.content[0].text and "pick the task yourself" in result.content[0].text
        )
    result = await client.call_tool("skill_plan", {})
    assert result.is_error and "give a plan" in result.content[0].text


def test_the_cli_prints_the_task_the_skills_and_the_prompt(skills: Path) -> None:
    done = run(skills, "skills", "plan", "PLAN.md")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "Task (line 4, Build): Export the quarterly report as a spreadsheet\nSkill: xlsx (named in"
    )
    assert "Skipped: nope: Unknown skill 'nope'." in done.stdout and "<available_skills>" in done.stdout
    as_json = json.loads(
        run(skills, "skills", "plan", "--task", "review the diff", "--kind", "review", "--json").stdout
    )
    assert [s["name"] for s in as_json["skills"]] == ["code-review"]
    missing = run(skills, "skills", "plan", "nope.md")
    assert missing.returncode == 2 and "no plan at" in missing.stderr and "Traceback" not in missing.stderr


def test_sync_writes_the_catalog_into_agents_md_once_and_keeps_the_rest(skills: Path) -> None:
    agents = skills / "AGENTS.md"
    agents.write_text("# Agents\n\nRun `make test` before committing.\n")
    preview = run(skills, "skills", "sync", "--dry-run")
    assert preview.returncode == 0 and '+<skills_system priority="1">' in preview.stdout
    assert agents.read_text() == "# Agents\n\nRun `make test` before committing.\n"
    first = run(skills, "skills", "sync")
    assert first.returncode == 0 and first.stdout == "Synced 4 skill(s) to AGENTS.md.\n"
    text = agents.read_text()
    assert text.startswith('# Agents\n\nRun `make test` before committing.\n\n<skills_system priority="1">')
    assert "- Invoke: `abilities-mcp skills read <skill-name>` (run in your shell)" in text
    assert "<name>xlsx</name>" in text
    again = run(skills, "skills", "sync")
    assert again.stdout == "AGENTS.md is up to date (4 skill(s)).\n" and agents.read_text() == text
    outside = run(skills, "skills", "sync", "--output", "../AGENTS.md")
    assert outside.returncode == 2 and "outside the project" in outside.stderr
    not_md = run(skills, "skills", "sync", "--output", "AGENTS.txt")
    assert not_md.returncode == 2 and "not a Markdown file" in not_md.stderr
