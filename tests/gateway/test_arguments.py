"""The quick check of a tool's arguments (gateway/arguments.py): it says "fits" only where the JSON Schema validator
agrees, and anything else reaches the validator, which names what is wrong."""

from __future__ import annotations

import itertools
from typing import Any

from jsonschema import Draft202012Validator

from abilities_mcp.gateway.arguments import _plain_fit_of, schema_problems

PLAIN = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "SQL"},
        "limit": {"type": "integer", "default": 10},
        "ratio": {"type": "number"},
        "dry": {"type": "boolean"},
        "tags": {"type": "array"},
        "extra": {"type": "object"},
        "anything": {"description": "no type: any value"},
    },
    "required": ["query"],
}
CLOSED = {**PLAIN, "additionalProperties": False}
# Schemas the quick check must leave to the validator: a keyword it does not know, anywhere.
NOT_PLAIN = [
    {**PLAIN, "properties": {"query": {"type": "string", "minLength": 3}}},
    {**PLAIN, "properties": {"query": {"type": ["string", "null"]}}},
    {**PLAIN, "properties": {"query": {"enum": ["a"]}}},
    {**PLAIN, "additionalProperties": {"type": "string"}},
    {**PLAIN, "anyOf": [{"required": ["limit"]}]},
    {"type": "array"},
]
VALUES: list[Any] = ["text", "", 3, 0, 1.0, 2.5, True, False, None, [], [1], {}, {"a": 1}]


def test_the_quick_check_never_accepts_what_the_validator_refuses() -> None:
    names = ["query", "limit", "ratio", "dry", "tags", "extra", "anything", "unknown"]
    accepted = 0
    for schema in (PLAIN, CLOSED):
        fits, validator = _plain_fit_of(schema), Draft202012Validator(schema)
        assert fits is not None
        for first, second in itertools.product(names, names):
            for a, b in itertools.product(VALUES, VALUES):
                arguments = {first: a, second: b}
                if fits(arguments):
                    accepted += 1
                    assert validator.is_valid(arguments), (schema, arguments)
    assert accepted > 100  # it does vouch for the usual calls


def test_a_schema_with_any_other_keyword_goes_to_the_validator() -> None:
    for schema in NOT_PLAIN:
        assert _plain_fit_of(schema) is None, schema


def test_arguments_the_quick_check_cannot_vouch_for_get_the_validators_words() -> None:
    assert schema_problems(PLAIN, {"query": "SELECT 1", "limit": 5}) == []
    assert schema_problems(PLAIN, {"query": "SELECT 1", "limit": 5.0}) == []  # an integer to JSON Schema
    assert schema_problems(PLAIN, {"limit": "5"}) == [
        "at the top level: 'query' is a required property",
        "at 'limit': '5' is not of type 'integer'",
    ]
    assert schema_problems(CLOSED, {"query": "x", "nope": 1}) == [
        "at the top level: Additional properties are not allowed ('nope' was unexpected)"
    ]
