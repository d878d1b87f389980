"""`abilities-mcp validate` for a person at a terminal: every problem of a file in one run, an unknown name answered
in the command line's words with a did-you-mean, a `name:` that renames an ability said out loud, a skill's YAML
error as one line with its fix, each file labelled as what it is, and an empty project described truly."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.errors import UnknownName
from abilities_mcp.server.views import validation_report
from abilities_mcp.state.project import Project
from support import cli

# One problem of each kind that took a round of validate each: a type, a need, a template, a condition.
ROUNDS = """
description: four rounds of validate, now one
inputs:
  name: {type: string, default: world}
settings: {parallel: maybe}
steps:
  - {id: build, type: script, run: 'echo hello {{inputs.nmae}}'}
  - {id: test, type: script, needs: [biuld], run: 'echo {{steps.build.outptu}}'}
  - {id: ship, type: script, needs: [test], when: 'inputs.name ==', run: echo ship}
"""
RENAMED = "name: ci\ndescription: CI checks\nsteps:\n  - {id: a, type: script, run: 'true'}\n"


def run(root: Path, *args: str, builtin_skills: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ABILITIES_BUILTIN_SKILLS": "1" if builtin_skills else "0"}
    return subprocess.run(cli(root, *args), capture_output=True, text=True, timeout=120, env=env)


def test_one_run_lists_every_problem_of_a_file(root: Path) -> None:
    (root / "abilities" / "rounds.yaml").write_text(ROUNDS)

    done = run(root, "validate")

    assert done.returncode == 1, done
    for words in (
        "settings.parallel: Input should be a valid boolean",
        "steps[1].needs[0]: unknown step 'biuld'; did you mean 'build'?",
        "steps[0].run: unknown input 'nmae'; did you mean inputs.name?",
        "steps[1].run: {{steps.build.outptu}} is not a reference",
        "steps[2].when: condition does not parse",
    ):
        assert words in done.stdout, done.stdout


def test_an_unknown_name_speaks_cli_and_a_renamed_file_is_the_did_you_mean(root: Path) -> None:
    (root / "abilities" / "gha.yaml").write_text(RENAMED)

    renamed, unknown = run(root, "validate", "gha"), run(root, "validate", "zzz")

    assert renamed.returncode == unknown.returncode == 2  # the command cannot do what was asked (docs/cli.md)
    assert "Did you mean 'ci'? (abilities/gha.yaml sets name: 'ci')" in renamed.stderr, renamed.stderr
    assert "`abilities-mcp list` shows the abilities, `abilities-mcp skills list` the skills" in unknown.stderr
    assert "ability_list()" not in renamed.stderr + unknown.stderr  # the MCP tool's words, not a person's


def test_a_name_that_differs_from_the_path_is_a_warning_in_validate_and_a_note_in_list(root: Path) -> None:
    (root / "abilities" / "gha.yaml").write_text(RENAMED)

    checked, listed = run(root, "validate"), run(root, "list")

    assert checked.returncode == 0, checked  # DESIGN §2: an explicit name: wins over the path; not an error
    assert "warn  name: 'ci' differs from 'gha', the name the file's path gives" in checked.stdout, checked.stdout
    assert "(name: 'ci' in " in listed.stdout and "its path alone would call it 'gha')" in listed.stdout


def test_a_skills_yaml_error_is_one_line_with_the_fix(root: Path) -> None:
    skill = root / "skills" / "demo" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: demo\ndescription: Use when: the user asks\nmetadata: {author: me}\n---\nBody\n")

    done = run(root, "validate", "--json")

    [report] = json.loads(done.stdout)["files"]
    [error] = report["errors"][:1]
    assert "\n" not in error["message"] and "unicode string" not in error["message"], error
    assert error["message"] == (
        "Invalid YAML in frontmatter at line 3 (`description: Use when: the user asks`): a value containing ': ' "
        'must be quoted in YAML; write `description: "Use when: the user asks"`'
    )


def test_the_tool_cache_is_labelled_as_the_tool_cache(root: Path) -> None:
    cache = root / ".opencode" / "agent-skill-tools.json"
    cache.parent.mkdir()
    cache.write_text(json.dumps({"workflows": {}}))
    (root / "workflows.json").write_text("{}")

    done = run(root, "validate")

    lines = done.stdout.splitlines()
    assert "ok    tool cache agent-skill-tools.json  (" in "\n".join(lines), done.stdout
    assert any(line.startswith("ok    workflows  workflows.json") for line in lines), done.stdout


def test_an_empty_project_says_what_validate_checked_and_counts_the_built_in_skills(root: Path) -> None:
    done = run(root, "validate", builtin_skills=True)

    assert done.returncode == 0, done
    assert "No abilities or skills found." not in done.stdout
    assert "No abilities, skills or workflows.json in " in done.stdout
    assert "The 3 built-in skill(s) (`abilities-mcp skills list`) are checked" in done.stdout, done.stdout


# (frontmatter lines, what validate says): the cases strict YAML refuses that authors write most.
SKILL_YAML = {
    "flow-list": (
        "allowed-tools: [Read, Grep]",
        "line 4 (`allowed-tools: [Read, Grep]`): flow lists `[…]` are refused (strict YAML, as skills-ref reads it); "
        "write `allowed-tools: Read Grep` on one line without brackets (allowed-tools is one space-separated "
        "string), or one `- item` per line below `allowed-tools:`",
    ),
    "flow-map": ("metadata: {author: me}", "line 4 (`metadata: {author: me}`): flow mappings `{…}` are refused"),
    "duplicate": ("name: demo", "line 4 (`name: demo`): Duplicate key 'name' found; keep one of them"),
    "tab": ("metadata:\n\tauthor: me", "line 5 (`author: me`): a tab indents this line; indent with spaces"),
}


@pytest.mark.parametrize("case", list(SKILL_YAML), ids=list(SKILL_YAML))
def test_each_skill_yaml_refusal_reads_as_one_line_with_its_fix(root: Path, case: str) -> None:
    line, says = SKILL_YAML[case]
    skill = root / "skills" / "demo" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f"---\nname: demo\ndescription: A demo\n{line}\n---\nBody\n")

    [report] = validation_report(Catalog(Project.resolve(root))).files

    message = report.errors[0].message
    assert message.startswith(f"Invalid YAML in frontmatter at {says}") and "\n" not in message, message


def test_running_a_renamed_ability_by_its_path_suggests_the_name_it_has(root: Path) -> None:
    (root / "abilities" / "gha.yaml").write_text(RENAMED)

    with pytest.raises(UnknownName) as refused:
        Catalog(Project.resolve(root)).get("gha")  # what `run gha` and ability_run(name="gha") ask

    assert str(refused.value) == "Unknown ability 'gha'. Did you mean 'ci'?"
