"""Skill events and counters: what a session found (and what failed to load), what skill_plan chose, what it cut;
read back with `abilities-mcp events`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.server import create_server
from abilities_mcp.state import skill_events
from abilities_mcp.state.project import Project
from abilities_mcp.state.store import Store
from support import cli, write_skill

pytestmark = pytest.mark.anyio


def skill(root: Path, name: str, description: str, body: str = "Steps.\n") -> None:
    write_skill(root, name, f"name: {name}\ndescription: {description}", body)


@pytest.fixture
def skills(root: Path) -> Path:
    skill(root, "xlsx", "Create and edit Excel spreadsheets.")
    skill(root, "long", "Write release notes.", "y" * 3000)
    (root / "skills" / "broken").mkdir()
    (root / "skills" / "broken" / "SKILL.md").write_text("---\nname: broken\n---\n\nno description\n")
    return root


def recorded(project: Project, **filters) -> list[dict]:
    store = Store(project.state_db)
    try:
        return skill_events.events(store, **filters)
    finally:
        store.close()


async def test_a_session_records_what_it_found_once_and_again_after_a_change(project, skills, caplog) -> None:
    async with Client(create_server(project)) as client:
        await client.call_tool("skill_list", {})
        await client.call_tool("skill_route", {"task": "a spreadsheet"})
        first = recorded(project, kind="SKILLS_DISCOVERED")
        skill(skills, "pdf", "Read PDF files.")
        await client.call_tool("skill_list", {})
    found = recorded(project, kind="SKILLS_DISCOVERED")
    assert len(first) == 1 and len(found) == 2
    assert (first[0]["count"], first[0]["names"], first[0]["locations"]["project"]) == (2, ["long", "xlsx"], 2)
    assert found[1]["names"] == ["long", "pdf", "xlsx"]
    [failed, *_] = recorded(project, kind="SKILLS_LOAD_FAILED")
    assert failed["name"] == "broken" and failed["path"].endswith("skills/broken/SKILL.md") and failed["error"]
    assert "skills/broken/SKILL.md did not load" in caplog.text  # the log names the path


async def test_a_plan_step_records_its_selection_its_missing_hints_and_what_it_cut(project, skills) -> None:
    async with Client(create_server(project)) as client:
        args = {"task": "the notes (skills: long, nope)", "budget": 1000}
        result = await client.call_tool("skill_plan", args)
    assert not result.is_error
    [selected] = recorded(project, kind="SKILLS_SELECTED")
    assert (selected["step_kind"], selected["task_label"], selected["strategy"]) == (
        "implementation",
        "the notes",
        "hint",
    )
    assert selected["skills"][0] == {"name": "long", "reason": "named in the task"}
    assert selected["session_id"] and selected["run_id"] is None
    assert any(e["name"] == "nope" for e in recorded(project, kind="SKILLS_LOAD_FAILED"))
    assert [(e["name"], e["max_chars"]) for e in recorded(project, kind="SKILLS_TRUNCATED")] == [("long", 1000)]
    store = Store(project.state_db)
    totals = skill_events.counters(store)
    store.close()
    assert totals["skills_selected_total"] == len(selected["skills"])
    assert totals["skills_truncated_total"] == 1 and totals["skills_discovered_total"] == 1


async def test_the_events_command_filters_and_prints_counters(project, skills) -> None:
    async with Client(create_server(project)) as client:
        await client.call_tool("skill_plan", {"task": "a spreadsheet (skills: xlsx)"})
    env_root = project.root
    done = subprocess.run(
        cli(env_root, "events", "--kind", "SKILLS_SELECTED", "--json", "--state-dir", str(project.state_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert [e["kind"] for e in answer["events"]] == ["SKILLS_SELECTED"]
    assert answer["counters"]["skills_selected_total"] == 1
    text = subprocess.run(
        cli(env_root, "events", "--since", "1h", "--state-dir", str(project.state_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "SKILLS_DISCOVERED" in text and "SKILLS_SELECTED" in text
    assert text.splitlines()[-1].startswith("skills_discovered_total 1  skills_selected_total 1")


def test_the_table_keeps_only_the_newest_events(project: Project, monkeypatch) -> None:
    monkeypatch.setattr(skill_events, "MAX_EVENTS", 5)
    store = Store(project.state_db)
    for i in range(8):
        skill_events.record(store, "SKILLS_TRUNCATED", {"name": f"s{i}", "max_chars": 1}, "ses")
    kept = [e["name"] for e in skill_events.events(store)]
    store.close()
    assert kept == ["s3", "s4", "s5", "s6", "s7"]


async def test_a_skill_step_records_the_runs_choice_with_the_run(project, skills, write) -> None:
    write(
        "apply",
        """
        description: apply a skill
        steps:
          - {id: sheet, type: skill, skill: xlsx}
        """,
    )
    async with Client(create_server(project)) as client:
        run = (await client.call_tool("ability_run", {"name": "apply", "wait_seconds": 10})).structured_content
    assert run["status"] == "awaiting_agent"
    [selected] = recorded(project, kind="SKILLS_SELECTED", run_id=run["run_id"])
    assert selected["skills"] == [{"name": "xlsx", "reason": "step 'sheet' of 'apply' names it"}]
    assert selected["step_kind"] == "skill step" and selected["session_id"]
