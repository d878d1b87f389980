"""Skills from outside the model's tools: `abilities-mcp skills list|route|read`, `validate` on SKILL.md files, and
the skill tools and resources through a real stdio server process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import TextContent

from skill_shapes import make_skills
from support import stdio_params

# Generous: a cold interpreter imports pydantic and the SDK.
CLI_TIMEOUT_SECONDS = 60
# One ranked line of `skills route`: score, name, reasons.
ROUTE_LINE = re.compile(r"^(\d\.\d\d)  (\S+)  \((.+)\)$")
PROJECT_SKILLS = ["Bad--Name-", "api-reference", "colon-value", "deploy-notes", "pdf-tools", "template-skill"]


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m abilities_mcp --root ROOT ARGS` (HOME is the test's own, see conftest) with its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
    )


def write_skill(folder: Path, name: str, description: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")
    return folder


@pytest.fixture
def skills_dir(root: Path, tmp_path: Path) -> Path:
    make_skills(root / "skills", tmp_path / "outside")
    return root / "skills"


@pytest.fixture
def user_skill(skills_dir: Path, tmp_path: Path) -> Path:
    """One skill in the user's ~/.agents/skills (HOME is tmp/home for the test and its subprocesses)."""
    return write_skill(tmp_path / "home" / ".agents" / "skills" / "user-notes", "user-notes", "Keep personal notes.")


def openskills_read(name: str, folder: Path) -> str:
    """What `openskills read NAME` prints: console.log of each line, the raw SKILL.md among them."""
    return f"Reading: {name}\nBase directory: {folder}\n\n{(folder / 'SKILL.md').read_text()}\n\nSkill read: {name}\n"


# --- skills list ------------------------------------------------------------------------------------------------


def test_skills_list_prints_each_skill_with_its_location_and_a_summary(root: Path, user_skill: Path) -> None:
    result = cli(root, "skills", "list")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in PROJECT_SKILLS:
        assert re.search(rf"^  {re.escape(name)} +\(project\)$", result.stdout, re.M), name
    header = lines.index(f"  {'user-notes':25} (user)")
    assert lines[header + 1] == "    Keep personal notes."
    template = lines.index(f"  {'template-skill':25} (project)")
    assert lines[template + 2] == "    warning: name: Directory name 'template' must match skill name 'template-skill'"
    assert lines[-1] == "Summary: 6 project, 1 user, 0 built-in (7 total)"


def test_skills_list_json_has_the_skill_list_tools_shape(root: Path, user_skill: Path) -> None:
    result = cli(root, "skills", "list", "--json")

    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    skills = {s["name"]: s for s in listed["skills"]}
    assert set(skills) == {*PROJECT_SKILLS, "user-notes"}
    assert all(set(s) == {"name", "description", "location", "path", "warnings"} for s in skills.values())
    assert skills["user-notes"]["location"] == "user" and skills["pdf-tools"]["location"] == "project"
    assert skills["user-notes"]["path"] == str(user_skill / "SKILL.md")
    assert any("must match skill name" in w for w in skills["template-skill"]["warnings"])
    assert listed["notes"] == []


# --- skills route -----------------------------------------------------------------------------------------------


def test_skills_route_prints_one_ranked_line_per_fitting_skill_best_first(skills_dir: Path, root: Path) -> None:
    result = cli(root, "skills", "route", "use colon-value to extract text and tables from PDF files")

    assert result.returncode == 0, result.stderr
    ranked = [ROUTE_LINE.match(line) for line in result.stdout.splitlines()]
    assert all(ranked), result.stdout
    assert [m.group(2) for m in ranked][:2] == ["colon-value", "pdf-tools"]
    assert ranked[0].group(1) == "1.00" and "names the skill" in ranked[0].group(3)
    scores = [float(m.group(1)) for m in ranked]
    assert scores == sorted(scores, reverse=True)


def test_skills_route_says_so_when_no_skill_fits(skills_dir: Path, root: Path) -> None:
    result = cli(root, "skills", "route", "what", "will", "the", "weather", "be", "in", "Lisbon")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "No skill fits this task.\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "use", "pdf-tools", "to", "fill", "a", "form"],
        ["use", "pdf-tools", "to", "fill", "a", "form", "--json"],
        ["--limit", "1", "--json", "use pdf-tools to fill a form"],
    ],
    ids=["option-first", "option-last", "quoted-task"],
)
def test_skills_route_json_parses_with_matches_wherever_the_option_is(
    skills_dir: Path, root: Path, args: list[str]
) -> None:
    result = cli(root, "skills", "route", *args)

    assert result.returncode == 0, result.stderr
    matches = json.loads(result.stdout)["matches"]
    assert matches[0]["name"] == "pdf-tools"
    assert set(matches[0]) == {"name", "description", "score", "reasons"}


def test_skills_route_json_of_a_task_no_skill_fits_is_an_empty_list(skills_dir: Path, root: Path) -> None:
    result = cli(root, "skills", "route", "--json", "what will the weather be in Lisbon tomorrow")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"matches": []}


# --- skills read ------------------------------------------------------------------------------------------------


def test_skills_read_prints_exactly_what_openskills_read_prints(skills_dir: Path, root: Path) -> None:
    result = cli(root, "skills", "read", "pdf-tools")

    assert result.returncode == 0, result.stderr
    assert result.stdout == openskills_read("pdf-tools", skills_dir / "pdf-tools")


@pytest.mark.parametrize(
    "names",
    [["colon-value,pdf-tools"], ["colon-value", "pdf-tools"], ["colon-value, pdf-tools,colon-value,"]],
    ids=["comma-list", "separate-words", "spaces-and-repeats"],
)
def test_skills_read_of_several_names_reads_each_once_in_order(skills_dir: Path, root: Path, names: list[str]) -> None:
    result = cli(root, "skills", "read", *names)

    assert result.returncode == 0, result.stderr
    assert result.stdout == openskills_read("colon-value", skills_dir / "colon-value") + openskills_read(
        "pdf-tools", skills_dir / "pdf-tools"
    )


def test_skills_read_gives_the_folder_of_a_skill_whose_name_differs_from_it(skills_dir: Path, root: Path) -> None:
    result = cli(root, "skills", "read", "template-skill")

    assert result.stdout == openskills_read("template-skill", skills_dir / "template")


@pytest.mark.parametrize("names", ["nope", "pdf-tools,nope"], ids=["missing", "one-of-two-missing"])
def test_skills_read_of_a_missing_skill_prints_nothing_and_exits_1(skills_dir: Path, root: Path, names: str) -> None:
    result = cli(root, "skills", "read", names)

    assert result.returncode == 1
    assert result.stdout == ""
    assert "Error: Skill(s) not found: nope" in result.stderr


# --- validate ---------------------------------------------------------------------------------------------------


def test_validate_exits_1_when_a_skill_breaks_the_spec_naming_its_skill_md_and_the_message(
    skills_dir: Path, root: Path
) -> None:
    result = cli(root, "validate")

    assert result.returncode == 1, result.stdout
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.endswith(f"({skills_dir / 'template' / 'SKILL.md'})"))
    assert lines[header].startswith("ERROR skill") and "template-skill" in lines[header]
    assert lines[header + 1].strip() == "name: Directory name 'template' must match skill name 'template-skill'"
    assert f"({skills_dir / 'broken-yaml' / 'SKILL.md'})" in result.stdout  # not loaded, still reported
    assert re.search(
        rf"^ok +skill +pdf-tools +\({re.escape(str(skills_dir / 'pdf-tools' / 'SKILL.md'))}\)$", result.stdout, re.M
    )


def test_validate_exits_0_when_every_skill_and_ability_is_valid(root: Path, write) -> None:
    write("greet", "description: greets\nsteps:\n  - {id: hello, type: script, run: echo hello}\n")
    skill = write_skill(root / ".claude" / "skills" / "pdf-tools", "pdf-tools", "Work with PDF files.")

    result = cli(root, "validate")

    assert result.returncode == 0, result.stdout
    assert re.search(rf"^ok +skill +pdf-tools +\({re.escape(str(skill / 'SKILL.md'))}\)$", result.stdout, re.M)
    assert re.search(r"^ok +ability +greet ", result.stdout, re.M)


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [("pdf-tools", 0, None), ("template-skill", 1, "name: Directory name 'template' must match skill name")],
    ids=["valid", "invalid"],
)
def test_validate_with_a_skill_name_checks_that_skill_only(
    skills_dir: Path, root: Path, name: str, code: int, message: str | None
) -> None:
    result = cli(root, "validate", name)

    assert result.returncode == code, result.stdout
    checked = [line for line in result.stdout.splitlines() if line.startswith(("ok ", "ERROR "))]
    assert len(checked) == 1 and f" {name} " in checked[0]
    assert message is None or message in result.stdout


# --- a real stdio server ----------------------------------------------------------------------------------------


async def test_the_skill_tools_and_resources_work_through_a_real_stdio_server(skills_dir: Path, root: Path) -> None:
    async with Client(stdio_params(root)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        routed = await client.call_tool("skill_route", {"task": "use pdf-tools to fill the PDF form"})
        loaded = await client.call_tool("skill_load", {"name": "pdf-tools"})
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        skill_md = (await client.read_resource("skill://pdf-tools/SKILL.md")).contents

    assert {"skill_list", "skill_route", "skill_load", "skill_read"} <= tools
    assert routed.structured_content["matches"][0]["name"] == "pdf-tools"
    text = loaded.structured_content["text"]
    assert text.startswith('<skill_content name="pdf-tools">\n# PDF tools') and text.endswith("</skill_content>")
    assert f"Skill directory: {skills_dir / 'pdf-tools'}" in text
    assert [c.text for c in loaded.content if isinstance(c, TextContent)] == [text]
    assert {"skill://pdf-tools/SKILL.md", "skill://pdf-tools/references/forms.md"} <= resources
    assert [c.text for c in skill_md] == [(skills_dir / "pdf-tools" / "SKILL.md").read_text()]
