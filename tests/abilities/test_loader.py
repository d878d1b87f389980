"""Loading one ability file: YAML and format errors become diagnostics naming the file, the field and the fix."""

import textwrap
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.abilities.loader import MAX_FILE_BYTES, load_definition


async def report_for(client: Client, path: Path) -> dict:
    """ability_validate's entry for one file."""
    result = await client.call_tool("ability_validate", {})
    assert not result.is_error, result.content
    [entry] = [f for f in result.structured_content["files"] if f["path"] == str(path)]
    return entry


async def errors_of(client: Client, path: Path) -> list[dict]:
    """The errors ability_validate reports for one file, which must be invalid."""
    entry = await report_for(client, path)
    assert entry["valid"] is False
    assert entry["kind"] == "ability"
    return entry["errors"]


def assert_error(errors: list[dict], path: str, *fragments: str) -> None:
    """One error at this field path whose message holds every fragment."""
    at_path = [e["message"] for e in errors if e["path"] == path]
    assert at_path, f"no error at {path!r}; got {errors}"
    assert any(all(f in m for f in fragments) for m in at_path), f"{fragments} not in {at_path}"


STEP = "{id: a, type: script, run: echo a}"


async def test_a_sound_file_is_valid_and_lists_its_inputs_and_steps(client: Client, write) -> None:
    path = write(
        "deploy",
        """
        description: Deploy with safety checks
        version: 1.0
        inputs:
          version: {type: string, required: true, pattern: '^v\\d+$', description: Version to deploy}
          environment: {type: string, enum: [staging, production], default: staging}
        steps:
          - {id: test, type: script, run: echo test, timeout: 10m, env: {RETRIES: 3}}
          - {id: ship, type: script, run: echo ship, needs: test, on_failure: retry, max_retries: 2}
    """,
    )
    entry = await report_for(client, path)
    assert (entry["name"], entry["valid"], entry["errors"]) == ("deploy", True, [])
    listed = (await client.call_tool("ability_list", {})).structured_content["abilities"]
    [ability] = listed
    assert ability["valid"] is True
    assert ability["inputs"]["version"]["required"] is True
    assert ability["inputs"]["environment"]["default"] == "staging"
    assert [(s["id"], s["needs"]) for s in ability["steps"]] == [("test", []), ("ship", ["test"])]


@pytest.mark.parametrize(
    ("body", "path", "fix"),
    [
        (
            f"description: d\nsteps:\n  - {STEP}\n  - {{id: b, type: script, run: x, need: [a]}}\n",
            "steps[1].need",
            "unknown key 'need'; did you mean 'needs'?",
        ),
        (
            "description: d\nsteps:\n  - {id: b, type: script, run: x, on-failure: stop}\n",
            "steps[0].on-failure",
            "unknown key 'on-failure'; did you mean 'on_failure'?",
        ),
        (
            "description: d\nsteps:\n  - {id: b, type: script, run: x, on_falure: stop}\n",
            "steps[0].on_falure",
            "unknown key 'on_falure'; did you mean 'on_failure'?",
        ),
        (
            f"description: d\nsettings: {{enforcment: strict}}\nsteps:\n  - {STEP}\n",
            "settings.enforcment",
            "unknown key 'enforcment'; did you mean 'enforcement'?",
        ),
        (
            f"description: d\ninputs:\n  version: {{type: string, requird: true}}\nsteps:\n  - {STEP}\n",
            "inputs.version.requird",
            "unknown key 'requird'; did you mean 'required'?",
        ),
        (
            f"description: d\ninputs:\n  name: {{minlenght: 2}}\nsteps:\n  - {STEP}\n",
            "inputs.name.minlenght",
            "unknown key 'minlenght'; did you mean 'minLength'?",
        ),
        (
            "description: d\nsteps:\n  - {id: a, type: script, run: x, validation: {stdout_contain: ok}}\n",
            "steps[0].validation.stdout_contain",
            "unknown key 'stdout_contain'; did you mean 'stdout_contains'?",
        ),
        (
            "description: d\nsteps:\n  - {id: a, type: agent, prompt: p, validation: {output_contain: ok}}\n",
            "steps[0].validation.output_contain",
            "unknown key 'output_contain'; did you mean 'output_contains'?",
        ),
        (
            f"description: d\ntriggers: {{keyword: [deploy]}}\nsteps:\n  - {STEP}\n",
            "triggers.keyword",
            "unknown key 'keyword'; did you mean 'keywords'?",
        ),
        (
            f"description: d\nhooks: {{befor: [x]}}\nsteps:\n  - {STEP}\n",
            "hooks.befor",
            "unknown key 'befor'; did you mean 'before'?",
        ),
        (
            "description: d\nsteps:\n  - {id: a, type: approval, prompt: p, options: [{lable: A, value: a}]}\n",
            "steps[0].options[0].lable",
            "unknown key 'lable'; did you mean 'label'?",
        ),
        (f"descripton: d\nsteps:\n  - {STEP}\n", "descripton", "unknown key 'descripton'; did you mean 'description'?"),
        (f"description: d\nfoo: 1\nsteps:\n  - {STEP}\n", "foo", "unknown key 'foo'; allowed keys: compatible_agents"),
        (
            "description: d\nsteps:\n  - {id: a, type: script, run: x, prompt: p}\n",
            "steps[0].prompt",
            "unknown key 'prompt'; allowed keys:",
        ),
    ],
    ids=[
        "need",
        "on-failure-with-a-dash",
        "on_falure",
        "enforcment-under-settings",
        "typo-inside-an-input",
        "alias-inside-an-input",
        "typo-inside-script-validation",
        "typo-inside-agent-validation",
        "typo-inside-triggers",
        "typo-inside-hooks",
        "typo-inside-approval-options",
        "top-level-typo",
        "nothing-close-lists-allowed-keys",
        "key-of-another-step-type",
    ],
)
async def test_an_unknown_key_is_an_error_at_its_path_with_a_did_you_mean(client: Client, root, body, path, fix):
    file = root / "abilities" / "typo.yaml"
    file.write_text(body)
    assert_error(await errors_of(client, file), path, fix)


@pytest.mark.parametrize(
    ("step", "path", "fix"),
    [
        (
            "{id: a, type: scirpt, run: x}",
            "steps[0]",
            "unknown step type 'scirpt'; did you mean 'script'? use one of script, agent, skill, approval, workflow",
        ),
        (
            "{id: a, type: http, run: x}",
            "steps[0]",
            "unknown step type 'http'; use one of script, agent, skill, approval, workflow",
        ),
        ("{id: a, run: x}", "steps[0]", "step has no type; add type: script | agent | skill | approval | workflow"),
        ("{id: a, type: script}", "steps[0].run", "missing required key 'run'; add it"),
        ("{id: a, type: agent}", "steps[0].prompt", "missing required key 'prompt'; add it"),
        ("{type: script, run: x}", "steps[0].id", "missing required key 'id'; add it"),
        ("{id: Build, type: script, run: x}", "steps[0].id", "'Build' is not a step id; use lowercase letters"),
        (
            "{id: a, type: script, run: x, on_failure: contnue}",
            "steps[0].on_failure",
            "'contnue' is not allowed; did you mean 'continue'?",
        ),
        ("{id: a, type: script, run: x, max_retries: 99}", "steps[0].max_retries", "less than or equal to 20"),
    ],
    ids=[
        "type-typo",
        "unknown-type",
        "missing-type",
        "missing-run",
        "missing-prompt",
        "missing-id",
        "uppercase-id",
        "on-failure-typo",
        "too-many-retries",
    ],
)
async def test_a_step_with_a_bad_shape_is_an_error_at_the_step(client: Client, root, step, path, fix) -> None:
    file = root / "abilities" / "shape.yaml"
    file.write_text(f"description: d\nsteps:\n  - {step}\n")
    assert_error(await errors_of(client, file), path, fix)


@pytest.mark.parametrize(
    ("body", "path", "fix"),
    [
        (f"steps:\n  - {STEP}\n", "description", "missing required key 'description'; add it"),
        ("description: d\n", "steps", "missing required key 'steps'; add it"),
        ("description: d\nsteps: []\n", "steps", "the ability has no steps; add at least one, e.g. steps:"),
        (
            f"description: d\nsettings: {{enforcement: strikt}}\nsteps:\n  - {STEP}\n",
            "settings.enforcement",
            "'strikt' is not allowed; did you mean 'strict'? use 'strict', 'normal' or 'loose'",
        ),
        (
            f"name: Deploy Prod\ndescription: d\nsteps:\n  - {STEP}\n",
            "name",
            "'Deploy Prod' is not an ability name; use lowercase letters, digits, - _ and / between parts",
        ),
        (
            f"description: d\ninputs: {{'bad name': {{}}}}\nsteps:\n  - {STEP}\n",
            "inputs.bad name",
            "'bad name' is not an input name",
        ),
        (
            f"description: d\ninputs: {{n: {{type: int}}}}\nsteps:\n  - {STEP}\n",
            "inputs.n.type",
            "'int' is not allowed; did you mean 'integer'?",
        ),
        (
            f"description: d\ntriggers: {{patterns: ['{'a' * 501}']}}\nsteps:\n  - {STEP}\n",
            "triggers.patterns",
            "pattern is 501 characters; keep it under 500",
        ),
    ],
    ids=[
        "missing-description",
        "missing-steps",
        "no-steps",
        "enforcement-typo",
        "bad-explicit-name",
        "bad-input-name",
        "input-type-typo",
        "overlong-trigger-pattern",
    ],
)
async def test_a_file_with_a_bad_top_level_field_is_an_error_at_that_field(client: Client, root, body, path, fix):
    file = root / "abilities" / "top.yaml"
    file.write_text(body)
    assert_error(await errors_of(client, file), path, fix)


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ("steps:\n  - {id: a, type: script, run: x, timeout: 5 minutes}\n", "steps[0].timeout"),
        ("settings: {timeout: soon}\nsteps:\n  - {id: a, type: script, run: x}\n", "settings.timeout"),
        ("steps:\n  - {id: a, type: approval, prompt: ok?, timeout: 1 hour}\n", "steps[0].timeout"),
    ],
    ids=["step-timeout", "run-timeout", "approval-timeout"],
)
async def test_a_duration_that_does_not_parse_says_how_to_write_one(client: Client, root, where, path) -> None:
    file = root / "abilities" / "slow.yaml"
    file.write_text("description: d\n" + where)
    assert_error(await errors_of(client, file), path, "is not a duration; write a duration like 500ms, 30s, 5m")


@pytest.mark.parametrize("value", [".nan", ".inf"], ids=["nan", "infinity"])
async def test_a_timeout_that_is_not_a_finite_number_is_an_error(client: Client, root, value) -> None:
    file = root / "abilities" / "forever.yaml"
    file.write_text(f"description: d\nsteps:\n  - {{id: a, type: script, run: x, timeout: {value}}}\n")
    errors = await errors_of(client, file)
    assert [e["path"] for e in errors] == ["steps[0].timeout"]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            "description: d\nsteps:\n  - id: a\n   type: script\n",
            ("YAML does not parse at line 4, column 4", "check the indentation and quoting there"),
        ),
        ("description: 'unclosed\nsteps: []\n", ("YAML does not parse at line",)),
        (
            f"description: d\nsteps:\n  - {STEP}\ndescription: e\n",
            ("at line 4, column 1", "key 'description' is written twice; keep one"),
        ),
        (
            "description: d\nsteps:\n  - {id: a, type: script, run: x, run: y}\n",
            ("key 'run' is written twice; keep one",),
        ),
        ("", ("the file is empty; an ability is a mapping with description: and steps:",)),
        ("# only a comment\n", ("the file is empty",)),
        ("- a\n- b\n", ("the file is a list; an ability is a mapping with description: and steps:",)),
        ("just text\n", ("the file is a str; an ability is a mapping",)),
        ("description: d\nsteps: !!python/object/apply:os.system ['touch pwned']\n", ("YAML does not parse",)),
    ],
    ids=[
        "bad-indentation",
        "unclosed-quote",
        "top-level-key-twice",
        "nested-key-twice",
        "empty",
        "only-comments",
        "top-level-list",
        "top-level-text",
        "python-tag",
    ],
)
async def test_a_file_that_is_not_a_yaml_mapping_is_one_error_for_the_whole_file(client: Client, root, text, fragments):
    file = root / "abilities" / "broken.yaml"
    file.write_text(text)
    errors = await errors_of(client, file)
    assert len(errors) == 1
    assert_error(errors, "", *fragments)
    assert not (root / "pwned").exists()


async def test_a_yaml_mapping_key_that_is_a_list_is_an_error_not_a_crash(client: Client, root, write) -> None:
    write("good", f"description: d\nsteps:\n  - {STEP}\n")
    file = root / "abilities" / "listkey.yaml"
    file.write_text(f"description: d\n? [a, b]\n: 1\nsteps:\n  - {STEP}\n")
    errors = await errors_of(client, file)
    assert errors and errors[0]["path"] == ""
    assert (await report_for(client, root / "abilities" / "good.yaml"))["valid"] is True


async def test_a_file_that_is_not_utf8_is_an_error_saying_to_save_it_as_utf8(client: Client, root) -> None:
    file = root / "abilities" / "latin1.yaml"
    file.write_bytes(b"description: caf\xe9\nsteps: []\n")
    assert_error(await errors_of(client, file), "", "the file is not UTF-8 text (byte 16)", "save it as UTF-8")


async def test_a_file_larger_than_the_limit_is_refused_unread(client: Client, root) -> None:
    file = root / "abilities" / "huge.yaml"
    file.write_text("description: d\n" + "# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    assert_error(await errors_of(client, file), "", f"the file is larger than {MAX_FILE_BYTES} bytes; split it")


async def test_a_file_whose_path_is_not_a_valid_name_must_be_renamed_or_named(client: Client, root) -> None:
    file = root / "abilities" / "Bad Name.yaml"
    file.write_text(f"description: d\nsteps:\n  - {STEP}\n")
    entry = await report_for(client, file)
    assert entry["name"] == "Bad Name"
    assert_error(
        entry["errors"], "name", "'Bad Name', which is not a valid ability name", "rename the file", "set name:"
    )


async def test_an_explicit_name_rescues_a_file_whose_path_is_not_a_valid_name(client: Client, root) -> None:
    file = root / "abilities" / "Bad Name.yaml"
    file.write_text(f"name: good-name\ndescription: d\nsteps:\n  - {STEP}\n")
    entry = await report_for(client, file)
    assert (entry["name"], entry["valid"]) == ("good-name", True)


async def test_every_problem_in_a_file_is_reported_at_once(client: Client, root) -> None:
    file = root / "abilities" / "many.yaml"
    file.write_text(
        textwrap.dedent("""
        descripton: d
        settings: {enforcment: strict}
        steps:
          - {id: a, type: scirpt, run: x}
          - {id: b, type: script, run: x, need: [a]}
    """)
    )
    errors = await errors_of(client, file)
    assert {e["path"] for e in errors} >= {
        "descripton",
        "description",
        "settings.enforcment",
        "steps[0]",
        "steps[1].need",
    }


def test_load_definition_never_raises_and_names_the_file_in_each_diagnostic(tmp_path: Path) -> None:
    file = tmp_path / "x.yaml"
    file.write_text("description: d\nsteps:\n  - {id: a, type: script, run: x, need: b}\n")
    definition = load_definition(file, "x", "project")
    assert not definition.valid
    assert [(d.file, d.path) for d in definition.diagnostics] == [(str(file), "steps[0].need")]
    assert str(definition.diagnostics[0]) == f"{file}: steps[0].need: unknown key 'need'; did you mean 'needs'?"


def test_load_definition_of_a_missing_file_is_a_diagnostic(tmp_path: Path) -> None:
    definition = load_definition(tmp_path / "gone.yaml", "gone", "project")
    assert definition.ability is None
    assert "cannot read the file" in definition.diagnostics[0].message


def test_needs_and_list_fields_accept_a_single_word(tmp_path: Path) -> None:
    file = tmp_path / "x.yaml"
    file.write_text(
        textwrap.dedent("""
        description: d
        triggers: {keywords: deploy, patterns: 'ship.*'}
        steps:
          - {id: a, type: script, run: x}
          - {id: b, type: agent, prompt: p, needs: a, tools: Read, context: src/}
    """)
    )
    ability = load_definition(file, "x", "project").ability
    assert ability is not None
    assert (ability.triggers.keywords, ability.triggers.patterns) == (["deploy"], ["ship.*"])
    assert (ability.steps[1].needs, ability.steps[1].tools, ability.steps[1].context) == (["a"], ["Read"], ["src/"])
