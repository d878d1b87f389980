"""Run inputs: coerced to their declared types, checked, and completed with defaults before anything runs."""

import pytest
from mcp import Client

from abilities_mcp.abilities.inputs import check_value, resolve_inputs
from abilities_mcp.abilities.models import InputSpec
from abilities_mcp.errors import InputError


def spec(**fields) -> InputSpec:
    return InputSpec.model_validate(fields)


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        ("integer", "5", 5),
        ("integer", " 7 ", 7),
        ("integer", "-3", -3),
        ("integer", "5.0", 5),
        ("integer", 5.0, 5),
        ("integer", 12, 12),
        ("number", "2.5", 2.5),
        ("number", "1e3", 1000.0),
        ("number", "-0.5", -0.5),
        ("number", 3, 3),
        ("boolean", "true", True),
        ("boolean", "FALSE", False),
        ("boolean", "yes", True),
        ("boolean", "no", False),
        ("boolean", "1", True),
        ("boolean", "0", False),
        ("boolean", " on ", True),
        ("boolean", "off", False),
        ("boolean", False, False),
        ("array", '["a", 1]', ["a", 1]),
        ("array", ["x"], ["x"]),
        ("object", '{"a": {"b": 1}}', {"a": {"b": 1}}),
        ("object", {"k": "v"}, {"k": "v"}),
        ("string", "text", "text"),
        ("string", 5, "5"),
        ("string", 2.5, "2.5"),
    ],
    ids=[
        "integer-text",
        "integer-text-with-spaces",
        "negative-integer-text",
        "whole-decimal-text",
        "whole-float",
        "integer",
        "number-text",
        "number-exponent",
        "negative-number-text",
        "number-from-integer",
        "true",
        "uppercase-false",
        "yes",
        "no",
        "one",
        "zero",
        "on-with-spaces",
        "off",
        "boolean",
        "array-json",
        "array",
        "object-json",
        "object",
        "string",
        "string-from-integer",
        "string-from-number",
    ],
)
def test_text_from_clients_is_coerced_to_the_declared_type(kind, given, expected) -> None:
    value = check_value(spec(type=kind), given)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("kind", "given", "message"),
    [
        ("integer", "5.5", "expected an integer, got 5.5"),
        ("integer", "abc", "expected an integer, got 'abc'"),
        ("integer", "", "expected an integer"),
        ("integer", 5.5, "expected an integer, got 5.5"),
        ("integer", True, "expected an integer, got a boolean"),
        ("number", False, "expected a number, got a boolean"),
        ("number", "nan", "expected a finite number"),
        ("number", "inf", "expected a finite number"),
        ("number", "-inf", "expected a finite number"),
        ("number", float("nan"), "expected a finite number"),
        ("integer", float("inf"), "expected a finite integer"),
        ("number", [1], "expected a finite number"),
        ("boolean", "maybe", "expected true or false, got 'maybe'"),
        ("boolean", 1, "expected true or false, got 1"),
        ("array", "a,b", "expected an array (JSON), got 'a,b'"),
        ("array", '{"a": 1}', "expected an array, got dict"),
        ("object", "[1]", "expected an object, got list"),
        ("object", "{bad", "expected an object (JSON)"),
        ("string", True, "expected a string, got bool"),
        ("string", ["a"], "expected a string, got list"),
        ("string", "a\0b", "may not contain a NUL character"),
    ],
    ids=[
        "fractional-integer",
        "word-for-integer",
        "empty-integer",
        "fractional-float-for-integer",
        "boolean-is-not-an-integer",
        "boolean-is-not-a-number",
        "nan-text",
        "infinity-text",
        "negative-infinity-text",
        "nan",
        "infinite-integer",
        "list-for-number",
        "word-for-boolean",
        "integer-is-not-a-boolean",
        "comma-list-for-array",
        "object-for-array",
        "array-for-object",
        "bad-json-object",
        "boolean-for-string",
        "list-for-string",
        "nul-in-string",
    ],
)
def test_a_value_that_does_not_fit_the_type_is_refused_saying_what_is_expected(kind, given, message) -> None:
    with pytest.raises(ValueError) as caught:
        check_value(spec(type=kind), given)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("rules", "given", "message"),
    [
        ({"enum": ["staging", "production"]}, "prod", "'prod' is not one of ['staging', 'production']"),
        ({"pattern": r"^v\d+\.\d+\.\d+$"}, "1.2.3", r"'1.2.3' does not match the pattern '^v\d+\.\d+\.\d+$'"),
        ({"type": "integer", "min": 1}, "0", "0 is below the minimum 1"),
        ({"type": "integer", "max": 10}, "11", "11 is above the maximum 10"),
        ({"type": "number", "min": 0.5}, "0.25", "0.25 is below the minimum 0.5"),
        ({"minLength": 3}, "ab", "length 2 is below minLength 3"),
        ({"maxLength": 3}, "abcd", "length 4 is above maxLength 3"),
        ({"type": "array", "minLength": 1}, "[]", "length 0 is below minLength 1"),
        ({"type": "array", "maxLength": 1}, "[1, 2]", "length 2 is above maxLength 1"),
    ],
    ids=[
        "enum",
        "pattern",
        "integer-min",
        "integer-max",
        "number-min",
        "min-length",
        "max-length",
        "array-min-length",
        "array-max-length",
    ],
)
def test_a_value_that_breaks_a_rule_is_refused_naming_the_rule(rules, given, message) -> None:
    with pytest.raises(ValueError) as caught:
        check_value(spec(**rules), given)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("rules", "given", "expected"),
    [
        ({"type": "integer", "enum": [1, 2, 3]}, "2", 2),
        ({"pattern": r"v\d"}, "release-v2", "release-v2"),
        ({"type": "integer", "min": 1, "max": 3}, "3", 3),
        ({"type": "number", "min": 1, "max": 3}, "1", 1.0),
        ({"minLength": 2, "maxLength": 2}, "ab", "ab"),
    ],
    ids=["enum-after-coercion", "pattern-is-searched", "max-is-inclusive", "min-is-inclusive", "exact-length"],
)
def test_a_value_within_its_rules_is_accepted(rules, given, expected) -> None:
    assert check_value(spec(**rules), given) == expected


SPECS = {
    "version": spec(type="string", required=True, description="Version to deploy"),
    "environment": spec(enum=["staging", "production"], default="staging"),
    "replicas": spec(type="integer", default=2),
    "note": spec(),
}


def test_defaults_fill_the_inputs_not_given_and_optional_ones_are_null() -> None:
    assert resolve_inputs(SPECS, {"version": "v1"}) == {
        "version": "v1",
        "environment": "staging",
        "replicas": 2,
        "note": None,
    }


def test_given_values_win_over_defaults_and_are_coerced() -> None:
    values = resolve_inputs(SPECS, {"version": "v1", "environment": "production", "replicas": "5"})
    assert (values["environment"], values["replicas"]) == ("production", 5)


@pytest.mark.parametrize("given", [{}, None, {"version": None}], ids=["absent", "no-inputs", "null"])
def test_a_required_input_that_is_missing_is_refused_with_its_type_and_description(given) -> None:
    with pytest.raises(InputError) as caught:
        resolve_inputs(SPECS, given)
    assert caught.value.problems == ["input 'version' is required (string: Version to deploy); pass it in inputs"]


def test_an_unknown_input_is_refused_with_a_did_you_mean() -> None:
    with pytest.raises(InputError) as caught:
        resolve_inputs(SPECS, {"version": "v1", "enviroment": "production"})
    assert caught.value.problems == ["unknown input 'enviroment'; did you mean 'environment'?"]


def test_an_unknown_input_with_nothing_close_lists_the_declared_inputs() -> None:
    with pytest.raises(InputError) as caught:
        resolve_inputs(SPECS, {"version": "v1", "zzz": 1})
    assert caught.value.problems == [
        "unknown input 'zzz'; declared inputs: ['environment', 'note', 'replicas', 'version']"
    ]


def test_an_ability_without_inputs_refuses_any_input() -> None:
    with pytest.raises(InputError, match="unknown input 'x'; declared inputs: none"):
        resolve_inputs({}, {"x": 1})


def test_every_problem_with_the_inputs_is_reported_at_once() -> None:
    with pytest.raises(InputError) as caught:
        resolve_inputs(SPECS, {"verison": "v1", "replicas": "many"})
    assert caught.value.problems == [
        "unknown input 'verison'; did you mean 'version'?",
        "input 'version' is required (string: Version to deploy); pass it in inputs",
        "input 'replicas': expected an integer, got 'many'",
    ]
    assert str(caught.value).startswith("Invalid inputs: unknown input 'verison'")


async def test_a_run_gets_inputs_coerced_from_text_and_defaults_filled(client: Client, write) -> None:
    write(
        "count",
        """
        description: print inputs
        inputs:
          n: {type: integer, required: true}
          mode: {type: string, enum: [fast, slow], default: fast}
        steps:
          - {id: show, type: script, run: 'echo "{{inputs.n}}-{{inputs.mode}}"'}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "count", "inputs": {"n": "5"}})
    assert not result.is_error, result.content
    assert result.structured_content["steps"][0]["output"] == "5-fast"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"n": "5", "nn": "1"}, "unknown input 'nn'; did you mean 'n'?"),
        ({}, "input 'n' is required"),
        ({"n": "five"}, "input 'n': expected an integer, got 'five'"),
        ({"n": "5", "mode": "medium"}, "input 'mode': 'medium' is not one of ['fast', 'slow']"),
    ],
    ids=["unknown", "missing", "wrong-type", "not-in-enum"],
)
async def test_a_run_with_bad_inputs_is_refused_before_any_step_runs(client: Client, write, root, inputs, message):
    write(
        "count",
        """
        description: leave a mark
        inputs:
          n: {type: integer, required: true}
          mode: {type: string, enum: [fast, slow], default: fast}
        steps:
          - {id: mark, type: script, run: touch ran}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "count", "inputs": inputs})
    assert result.is_error
    assert message in result.content[0].text
    assert not (root / "ran").exists()
