"""abilities-mcp.json: checked field by field (the JSON Schema says the same), and what it sets is the default under
every flag and environment variable: skill folders, built-in skills, plan limits, session TTL, history."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from abilities_mcp.clients.hook import _ttl
from abilities_mcp.skills.selection import for_step
from abilities_mcp.skills.skillset import SkillSet
from abilities_mcp.state.project import Project
from abilities_mcp.state.settings import FILE_NAME, chosen, json_schema, read
from support import cli

GOOD = {
    "$schema": "./schema/settings.schema.json",
    "skills": {
        "folders": ["docs/skills", "~/team-skills"],
        "builtin": False,
        "plan": {"implementation": 3, "review": 0, "budget": 5000, "references": True},
    },
    "sessions": {"ttl": "30m"},
    "history": {"runs": 50, "days": 7.5},
}
BAD = [
    ({"skill": {}}, "skill", "unknown key 'skill'; did you mean 'skills'?"),
    ({"skills": {"bultin": True}}, "skills.bultin", "did you mean 'builtin'?"),
    ({"skills": {"builtin": "no"}}, "skills.builtin", 'must be true or false, not "no"'),
    ({"skills": {"folders": "skills"}}, "skills.folders", "must be a list of folder paths"),
    ({"skills": {"folders": ["ok", ""]}}, "skills.folders", "must be a list of folder paths"),
    ({"skills": {"plan": {"review": -1}}}, "skills.plan.review", "at least 0, not -1"),
    ({"skills": {"plan": {"budget": 10}}}, "skills.plan.budget", "at least 1000, not 10"),
    ({"skills": {"plan": {"implementation": True}}}, "skills.plan.implementation", "must be a whole number"),
    ({"skills": []}, "skills", "must be an object with the keys folders, builtin, plan"),
    ({"sessions": {"ttl": "2x"}}, "sessions.ttl", '"2x" is not a duration; write a duration like'),
    ({"sessions": {"ttl": 0}}, "sessions.ttl", "is not a duration"),
    ({"history": {"runs": 0}}, "history.runs", "at least 1, not 0"),
    ({"history": {"days": -3}}, "history.days", "must be a positive number, not -3"),
    ({"history": {"days": "7"}}, "history.days", 'must be a positive number, not "7"'),
]


def write(root: Path, document) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / FILE_NAME
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_a_sound_file_sets_every_value_and_has_no_problem(tmp_path: Path) -> None:
    settings = read(write(tmp_path, GOOD))
    assert settings.problems == []
    assert settings.get("skills.plan.budget") == 5000 and settings.get("sessions.ttl") == "30m"
    assert settings.get("skills.folders") == ["docs/skills", "~/team-skills"]


@pytest.mark.parametrize(("document", "field", "words"), BAD, ids=[b[1] + ":" + str(b[0]) for b in BAD])
def test_each_problem_names_the_field_and_the_fix_and_the_rest_still_counts(tmp_path, document, field, words) -> None:
    settings = read(
        write(
            tmp_path,
            {**document, "history": {**document.get("history", {}), "runs": 9}}
            if "history" not in document
            else document,
        )
    )
    [(where, message)] = [p for p in settings.problems if p[0] == field]
    assert words in message
    if "history" not in document:
        assert settings.get("history.runs") == 9  # a sound value beside a broken one is used


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("[" * 100_000, "is not valid JSON"),
        ("x" * 300_000, "is larger than"),
    ],
)
def test_a_file_that_is_not_a_settings_object_says_so(tmp_path: Path, text: str, words: str) -> None:
    [(field, message)] = read(write(tmp_path, text)).problems
    assert field == "" and words in message


def test_a_fifo_in_place_of_the_file_is_named_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / FILE_NAME)
    [(_, message)] = read(tmp_path / FILE_NAME).problems
    assert "a FIFO, not a regular file" in message


@pytest.mark.parametrize("document", [GOOD, *[b[0] for b in BAD], {}, {"$schema": "x"}])
def test_the_json_schema_and_the_reader_agree(tmp_path: Path, document) -> None:
    schema_ok = jsonschema.Draft202012Validator(json_schema()).is_valid(document)
    reader_ok = read(write(tmp_path, document)).problems == []
    assert schema_ok == reader_ok


def test_the_cli_prints_the_schema_and_validate_reports_the_file(tmp_path: Path) -> None:
    root = tmp_path / "project"
    write(root, {"skills": {"bultin": False}})
    schema = subprocess.run(cli(root, "schema", "settings"), capture_output=True, text=True, timeout=60)
    assert json.loads(schema.stdout) == json_schema()
    done = subprocess.run(cli(root, "validate"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"ERROR settings  {FILE_NAME}" in done.stdout
    assert "skills.bultin: unknown key 'bultin'; did you mean 'builtin'?" in done.stdout


def test_the_file_names_the_skill_folders_and_their_order(tmp_path: Path) -> None:
    root, home = tmp_path / "project", tmp_path / "home"
    for folder, name in [(root / "docs" / "skills", "team"), (home / "team-skills", "mine"), (root / "skills", "x")]:
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill.\n---\n\nBody.\n")
    write(root, {"skills": {"folders": ["docs/skills", "~/team-skills"]}})
    project = Project(root, tmp_path / "state", home=home, config_home=home / ".config")
    skills = SkillSet(project).refresh().skills
    assert {n: s.scope for n, s in skills.items()} == {"team": "project", "mine": "user"}  # skills/ is not listed


def test_built_in_skills_follow_the_file_unless_the_environment_says(tmp_path, monkeypatch) -> None:
    root = tmp_path / "project"
    project = Project(root, tmp_path / "state", home=tmp_path / "home", config_home=tmp_path / "home" / ".config")
    monkeypatch.delenv("ABILITIES_BUILTIN_SKILLS")
    write(root, {"skills": {"builtin": False}})
    assert SkillSet(project).refresh().skills == {}
    write(root, {"skills": {"builtin": True}})
    assert SkillSet(project).refresh().skills
    monkeypatch.setenv("ABILITIES_BUILTIN_SKILLS", "0")
    assert SkillSet(project).refresh().skills == {}


def test_plan_limits_and_budget_come_from_the_file_when_the_call_leaves_them(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for name in ("xlsx-one", "xlsx-two", "xlsx-three"):
        (root / "skills" / name).mkdir(parents=True)
        (root / "skills" / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Edit xlsx spreadsheets.\n---\n\n{'z' * 3000}\n"
        )
    write(root, {"skills": {"plan": {"implementation": 1, "budget": 1000}}})
    skillset = SkillSet(Project(root, tmp_path / "s", home=tmp_path / "home", config_home=tmp_path / "c"))
    task = "edit the sheet (skills: xlsx-one, xlsx-two, xlsx-three)"
    step = for_step(skillset, task=task)
    assert [c.name for c in step.selection.skills] == ["xlsx-one"]
    assert step.selection.budget == 1000 and step.selection.truncated == ["xlsx-one"]
    assert len(for_step(skillset, task=task, limit=3).selection.skills) == 3


def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default(tmp_path, monkeypatch) -> None:
    root = tmp_path / "project"
    write(root, {"sessions": {"ttl": "30m"}})
    monkeypatch.delenv("ABILITIES_SESSION_TTL", raising=False)
    assert _ttl(Project.resolve(root)) == 1800
    monkeypatch.setenv("ABILITIES_SESSION_TTL", "2h")
    assert _ttl(Project.resolve(root)) == 7200
    assert chosen(root, "sessions.ttl", 5.0, "ABILITIES_SESSION_TTL", float, 1.0) == 5.0
    assert chosen(tmp_path / "elsewhere", "sessions.ttl", None, None, float, 1.0) == 1.0


def test_a_bad_environment_value_stops_the_cli_with_the_variable_named(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    done = subprocess.run(
        cli(root, "history"),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ABILITIES_HISTORY_DAYS": "-1"},
    )
    assert done.returncode == 2 and "$ABILITIES_HISTORY_DAYS: '-1' must be a positive number" in done.stderr
    assert "Traceback" not in done.stderr
