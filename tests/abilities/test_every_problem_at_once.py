"""A file's problems are reported in one pass: a key or type the model refuses, a broken needs graph, a template or
a condition, an unknown input: none hides the others (validate used to report them in four rounds)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.abilities.checks import check_ability
from abilities_mcp.abilities.loader import load_definition
from abilities_mcp.abilities.models import Ability
from abilities_mcp.state.project import Project

# One problem of each kind the issue met, one round each before: a type, a need, a template, a condition, an input.
EVERY_KIND = """
    description: four rounds of validate, now one
    inputs:
      name: {type: string, default: world}
    settings: {parallel: maybe}
    steps:
      - id: build
        type: script
        run: echo hello {{inputs.nmae}}
      - id: test
        type: script
        needs: [biuld]
        run: echo {{steps.build.outptu}}
      - id: ship
        type: script
        needs: [test]
        when: inputs.name ==
        run: echo ship
"""
EVERY_KIND_PROBLEMS = [
    ("settings.parallel", "valid boolean"),
    ("steps[1].needs[0]", "unknown step 'biuld'; did you mean 'build'?"),
    ("steps[0].run", "unknown input 'nmae'; did you mean inputs.name?"),
    ("steps[1].run", "{{steps.build.outptu}} is not a reference"),
    ("steps[2].when", "condition does not parse"),
]


def load(tmp_path: Path, text: str, name: str = "file"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return load_definition(path, name, "project")


def found(definition) -> list[tuple[str, str]]:
    return [(d.path, d.message) for d in definition.diagnostics]


def assert_reported(definition, expected: list[tuple[str, str]]) -> None:
    problems = found(definition)
    for path, words in expected:
        assert any(p == path and words in m for p, m in problems), f"no {path}: {words!r} in {problems}"
    assert len(problems) == len(expected), problems


def test_a_file_with_one_problem_of_each_kind_reports_all_of_them_in_one_load(tmp_path: Path) -> None:
    definition = load(tmp_path, EVERY_KIND)

    assert definition.ability is None  # it still cannot run
    assert_reported(definition, EVERY_KIND_PROBLEMS)


async def test_ability_validate_lists_every_problem_of_the_file_at_once(client: Client, write) -> None:
    write("rounds", EVERY_KIND)

    result = await client.call_tool("ability_validate", {"name": "rounds"})

    [report] = result.structured_content["files"]
    assert not report["valid"]
    for path, words in EVERY_KIND_PROBLEMS:
        assert any(e["path"] == path and words in e["message"] for e in report["errors"]), report["errors"]


def test_a_step_the_model_cannot_read_keeps_its_id_so_references_to_it_are_not_reported(tmp_path: Path) -> None:
    definition = load(
        tmp_path,
        """
        description: one step of an unknown type
        steps:
          - {id: build, type: shell, run: make}
          - {id: test, type: script, needs: [build], run: 'echo {{steps.build.output}} {{steps.nope.output}}'}
        """,
    )

    assert_reported(
        definition,
        [("steps[0]", "unknown step type 'shell'; did you mean 'script'?"), ("steps[1].run", "unknown step 'nope'")],
    )


def test_a_step_id_the_model_refuses_still_answers_to_its_needs_and_keeps_every_index(tmp_path: Path) -> None:
    definition = load(
        tmp_path,
        """
        description: a step id in capitals
        steps:
          - {id: Build, type: script, run: make}
          - {id: test, type: script, needs: [Build, tset], run: 'true'}
        """,
    )

    assert_reported(
        definition,
        [("steps[0].id", "is not a step id"), ("steps[1].needs[1]", "unknown step 'tset'; did you mean 'test'?")],
    )


def test_an_input_declared_as_something_else_than_a_mapping_is_still_declared(tmp_path: Path) -> None:
    definition = load(
        tmp_path,
        """
        description: shorthand inputs
        inputs: {who: string}
        steps:
          - {id: a, type: script, run: 'echo {{inputs.who}} {{inputs.whom}}'}
        """,
    )

    problems = found(definition)
    assert [p for p, _ in problems] == ["inputs.who", "steps[0].run"], problems
    assert "unknown input 'whom'" in problems[1][1]


def test_a_file_with_no_steps_to_check_reports_what_the_model_refused_only(tmp_path: Path) -> None:
    definition = load(tmp_path, "description: nothing to run\nsettings: {parallel: maybe}\nsteps: []\n")

    assert sorted(p for p, _ in found(definition)) == ["settings.parallel", "steps"]
    assert definition.partial is None


@pytest.mark.parametrize(
    ("need", "graph_problem"),
    [("sytnax", "unknown step 'sytnax'"), ("report", "needs form a cycle")],
    ids=["unknown-need", "cycle"],
)
def test_a_broken_needs_graph_does_not_hide_the_references(need: str, graph_problem: str) -> None:
    ability = Ability.model_validate(
        {
            "description": "graph and references",
            "inputs": {"path": {"default": "src"}},
            "steps": [
                {"id": "syntax", "type": "script", "run": "true"},
                {"id": "count", "type": "script", "needs": [need], "run": "echo {{inputs.paht}}"},
                {
                    "id": "report",
                    "type": "script",
                    "needs": ["count"],
                    "when": "steps.cuont.status == 'x'",
                    "run": "true",
                },
            ],
        }
    )

    problems = check_ability(ability)

    assert any(graph_problem in m for _, m in problems), problems
    assert ("steps[1].run", "unknown input 'paht'; did you mean inputs.path?") in problems
    assert any(p == "steps[2].when" and "unknown step 'cuont'" in m for p, m in problems), problems
    assert not any("does not run before" in m for _, m in problems), problems  # its order is a guess: not judged


def test_a_step_that_truly_runs_later_is_still_reported_beside_a_broken_need() -> None:
    ability = Ability.model_validate(
        {
            "description": "one broken need, one real ordering problem",
            "settings": {"parallel": True},
            "steps": [
                {"id": "a", "type": "script", "run": "echo {{steps.b.output}}"},
                {"id": "b", "type": "script", "run": "true"},
                {"id": "c", "type": "script", "needs": ["nope"], "run": "true"},
            ],
        }
    )

    problems = check_ability(ability)

    assert [p for p, _ in problems] == ["steps[2].needs[0]", "steps[0].run"], problems
    assert "step 'b' does not run before 'a'" in problems[1][1]


def test_the_project_checks_run_on_a_refused_file_too(root: Path, write) -> None:
    write(
        "deploy",
        """
        description: a type error and an unknown skill
        settings: {timeout: soon}
        steps:
          - {id: docs, type: skill, skill: changelog-writr}
        """,
    )

    catalog = Catalog(Project.resolve(root)).refresh()
    [definition] = catalog.definitions

    paths = [d.path for d in catalog.diagnostics(definition)]
    assert paths == ["settings.timeout", "steps[0].skill"], catalog.diagnostics(definition)
    assert not catalog.is_valid(definition) and definition.ability is None
