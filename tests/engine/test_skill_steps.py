"""Skill steps: the run pauses in awaiting_agent with the skill handed out, and takes the step back like an agent's."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcp import Client

from support import REPO

SKILL = """\
---
name: release-notes
description: Write release notes from a list of changes. Use for changelog entries.
---
# Release notes

Group the changes under Added / Fixed.
"""

ABILITY = """
description: notes
inputs:
  version: {type: string, default: 1.2.3}
steps:
  - {id: changes, type: script, run: echo "fixed the login bug"}
  - id: notes
    type: skill
    skill: release-notes
    needs: [changes]
    inputs: {version: "{{inputs.version}}", format: markdown, sections: [Added, Fixed]}
    tools: [Write]
    on_failure: retry
    max_retries: 1
    validation: {output_contains: "## 1.2.3"}
"""


def add_skill(root: Path) -> Path:
    folder = root / "skills" / "release-notes"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    (folder / "references" / "style.md").write_text("Short lines.\n")
    return folder


async def start(client: Client, **inputs) -> dict:
    result = await client.call_tool("ability_run", {"name": "notes", "inputs": inputs, "wait_seconds": 10})
    assert not result.is_error, result.content
    return result.structured_content


async def test_a_skill_step_hands_out_the_skill_body_folder_and_interpolated_inputs(client, write, root) -> None:
    folder = add_skill(root)
    write("notes", ABILITY)
    run = await start(client, version="2.0.0")
    assert run["status"] == "awaiting_agent"
    step = run["current_step"]
    assert step["id"] == "notes" and step["type"] == "skill" and step["skill"] == "release-notes"
    text = step["instructions"]
    assert "Apply the skill 'release-notes'" in text
    assert "Group the changes under Added / Fixed." in text and "name: release-notes" not in text  # body only
    assert f"Skill directory: {folder}" in text and "<file>references/style.md</file>" in text
    assert "- version: 2.0.0" in text and "- format: markdown" in text and '- sections: ["Added", "Fixed"]' in text
    assert "### changes (completed)\nfixed the login bug" in text  # prior steps' context as for agent steps
    assert step["allowed_tools"] == ["Skill", "Write"]
    assert run["next_calls"][0]["tool"] == "ability_step_complete"


async def test_a_skill_step_is_handed_back_checked_and_completes_the_run(client, write, root) -> None:
    add_skill(root)
    write("notes", ABILITY)
    run = await start(client)
    call = {"run_id": run["run_id"], "step_id": "notes"}
    refused = await client.call_tool("ability_step_complete", {**call, "output": "no heading"})
    assert refused.is_error and "does not contain '## 1.2.3'" in refused.content[0].text
    assert "handed out again (attempt 2)" in refused.content[0].text
    done = await client.call_tool("ability_step_complete", {**call, "output": "## 1.2.3\n### Fixed\n- login"})
    assert done.structured_content["status"] == "completed"
    notes = next(s for s in done.structured_content["steps"] if s["id"] == "notes")
    assert notes["status"] == "completed" and notes["output"].startswith("## 1.2.3")


async def test_a_skill_gone_from_disk_fails_the_step_with_the_reason(client, write, root) -> None:
    folder = add_skill(root)
    write("notes", ABILITY.replace('run: echo "fixed the login bug"', f"run: rm -r {folder}"))
    run = await start(client)
    assert run["status"] == "failed"
    notes = next(s for s in run["steps"] if s["id"] == "notes")
    assert notes["status"] == "failed" and "Unknown skill 'release-notes'" in notes["error"]


async def test_a_skill_step_naming_an_unknown_skill_is_refused_before_anything_runs(client, write, root) -> None:
    write("notes", ABILITY)
    result = await client.call_tool("ability_run", {"name": "notes"})
    assert result.is_error and "unknown skill 'release-notes'" in result.content[0].text
    assert (await client.call_tool("ability_history", {})).structured_content["runs"] == []


async def test_the_skill_handed_out_is_the_one_on_disk_when_the_step_starts(client, write, root) -> None:
    folder = add_skill(root)
    write("notes", ABILITY)
    (folder / "SKILL.md").write_text(SKILL.replace("Group the changes", "Sort the changes"))
    run = await start(client)
    assert "Sort the changes under Added / Fixed." in run["current_step"]["instructions"]


async def test_the_shipped_release_notes_ability_hands_out_the_changelog_writer_skill(project, tmp_path) -> None:
    from abilities_mcp.server.app import create_server

    repo = REPO
    shutil.copytree(repo / "abilities", project.root / "abilities", dirs_exist_ok=True)
    shutil.copytree(repo / "skills", project.root / "skills")
    async with Client(create_server(project)) as client:
        result = await client.call_tool(
            "ability_run", {"name": "release/notes", "inputs": {"version": "1.4.0"}, "wait_seconds": 20}
        )
        run = result.structured_content
        assert run["status"] == "awaiting_agent" and run["current_step"]["skill"] == "changelog-writer"
        assert "Keep a Changelog" in run["current_step"]["instructions"]
        call = {"run_id": run["run_id"], "step_id": "draft"}
        entry = "## [1.4.0] - 2026-11-21\n### Added\n- Skills."
        done = await client.call_tool("ability_step_complete", {**call, "output": entry})
        assert done.structured_content["status"] == "completed"
