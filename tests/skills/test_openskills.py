"""OpenSkills' formats, compared byte for byte with what the real OpenSkills (npm, pinned) prints and writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.skills.openskills import available_skills, read_output, removed, synced, system_block
from abilities_mcp.skills.skillset import SkillSet
from abilities_mcp.state.project import Project
from real_clients import installed

OPENSKILLS = ("openskills", "1.5.0", "openskills")
SKILLS = {
    "alpha": '---\nname: alpha\ndescription: Fill PDF forms & merge <pages> with the "right" fonts\n---\n\n# Alpha\n',
    "beta-two": "---\nname: beta-two\ndescription: Second one\nlicense: MIT\n---\n\nBeta body\nno newline",
    "gamma": "---\nname: gamma\ndescription: Third, with a colon: kept\n---\n\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project whose skills sit in .claude/skills, one of OpenSkills' four folders, so both find the same ones."""
    root = tmp_path / "project"
    for name, text in SKILLS.items():
        (root / ".claude" / "skills" / name).mkdir(parents=True)
        (root / ".claude" / "skills" / name / "SKILL.md").write_text(text)
    home = tmp_path / "home"  # made by the autouse fixture that isolates HOME
    return Project(root, tmp_path / "state", home=home, config_home=home / ".config")


def openskills(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    executable = installed(OPENSKILLS)
    return subprocess.run(
        [str(executable), *args],
        cwd=project.root,
        env={**os.environ, "HOME": str(project.home), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_read_output_is_openskills_own(project: Project) -> None:
    skillset = SkillSet(project).refresh()
    theirs = openskills(project, "read", "alpha,beta-two,gamma")
    assert theirs.returncode == 0, theirs.stderr
    ours = "".join(read_output(s, s.path.read_text()) for s in (skillset.skills[n] for n in SKILLS))
    assert ours == theirs.stdout


def test_the_cli_read_command_prints_exactly_what_openskills_read_prints(project: Project) -> None:
    theirs = openskills(project, "read", "alpha,gamma")
    ours = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(project.root), "skills", "read", "alpha,gamma"],
        env={**os.environ, "HOME": str(project.home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ours.returncode, ours.stdout) == (0, theirs.stdout)


def test_the_agents_md_block_is_openskills_own_but_for_the_command_that_reads_a_skill(project: Project) -> None:
    theirs = openskills(project, "sync", "-y", "-o", "AGENTS.md")
    assert theirs.returncode == 0, theirs.stderr
    written = (project.root / "AGENTS.md").read_text()
    skills = sorted(SkillSet(project).refresh().skills.values(), key=lambda s: s.name)
    ours = synced(None, system_block(skills, "npx openskills read"), "AGENTS")
    assert ours == written
    # The catalog inside it is available_skills() to the byte.
    assert available_skills(skills) in written


def test_syncing_again_changes_nothing_and_an_agents_md_keeps_the_rest_of_its_text(project: Project) -> None:
    skills = sorted(SkillSet(project).refresh().skills.values(), key=lambda s: s.name)
    block = system_block(skills, "abilities-mcp skills read")
    original = "# Agents\n\nBuild with `make`.\n\n## Style\n\nTabs.\n"
    once = synced(original, block, "AGENTS")
    assert once.startswith(original.rstrip()) and once.endswith(f"{block}\n")
    assert synced(once, block, "AGENTS") == once
    smaller = system_block(skills[:1], "abilities-mcp skills read")
    assert synced(once, smaller, "AGENTS") == f"{original.rstrip()}\n\n{smaller}\n"
    assert "<skills_system" not in removed(once) and "Build with `make`." in removed(once)


def test_no_skill_renders_no_catalog() -> None:
    assert available_skills([]) == ""
