"""The skills this package ships: in every project at the lowest precedence, off when asked, shadowed by the
project's own skill of the same name, and in the built package (the folder is a link to the repository's skills/)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.server import create_server
from abilities_mcp.skills.skillset import BUILTIN_SKILLS, SkillSet
from abilities_mcp.state.project import Project
from support import REPO

SHIPPED = sorted(p.name for p in (REPO / "skills").iterdir() if (p / "SKILL.md").is_file())


@pytest.fixture(autouse=True)
def builtin_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABILITIES_BUILTIN_SKILLS", "1")


def test_a_project_without_skills_has_the_built_in_ones(project: Project) -> None:
    skills = SkillSet(project).refresh().skills
    assert sorted(skills) == SHIPPED and SHIPPED
    assert {s.scope for s in skills.values()} == {"builtin"}
    assert all(s.real_directory.is_relative_to(BUILTIN_SKILLS.resolve()) for s in skills.values())


def test_a_project_skill_of_the_same_name_wins_and_says_so(project: Project, root: Path) -> None:
    own = root / "skills" / "changelog-writer"
    own.mkdir(parents=True)
    (own / "SKILL.md").write_text("---\nname: changelog-writer\ndescription: Our own changelog rules.\n---\n\nOurs.\n")
    skillset = SkillSet(project).refresh()
    assert skillset.skills["changelog-writer"].scope == "project"
    assert skillset.skills["changelog-writer"].description == "Our own changelog rules."
    assert any("hides the built-in one" in n for n in skillset.warnings(skillset.skills["changelog-writer"]))


@pytest.mark.parametrize("off", ["0", "false", "OFF", "no"])
def test_they_can_be_turned_off(project: Project, monkeypatch: pytest.MonkeyPatch, off: str) -> None:
    monkeypatch.setenv("ABILITIES_BUILTIN_SKILLS", off)
    assert SkillSet(project).refresh().skills == {}


@pytest.mark.anyio
async def test_they_load_list_as_builtin_and_stay_out_of_the_projects_validation(project: Project) -> None:
    async with Client(create_server(project)) as client:
        listed = (await client.call_tool("skill_list", {})).structured_content["skills"]
        loaded = await client.call_tool("skill_load", {"name": "skill-author"})
        escape = await client.call_tool("skill_read", {"name": "skill-author", "path": "../ability-author/SKILL.md"})
        validated = (await client.call_tool("ability_validate", {})).structured_content
    assert {(s["name"], s["location"]) for s in listed} == {(name, "builtin") for name in SHIPPED}
    assert not loaded.is_error and '<skill_content name="skill-author">' in loaded.content[0].text
    assert escape.is_error and "climbs out" in escape.content[0].text
    assert [f for f in validated["files"] if f["kind"] == "skill"] == []


def test_the_built_wheel_carries_them(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("abilities_mcp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for skill in SHIPPED:
        assert f"abilities_mcp/builtin_skills/{skill}/SKILL.md" in names
    assert "abilities_mcp/schema/ability.schema.json" in names  # the ability format's schema, for editors
