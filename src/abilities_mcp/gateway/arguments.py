"""Arguments for upstream tools: checked against the tool's input schema before anything is sent, and filled from
the main call's (`{"table": "$args.table"}`) for the prerequisites the gateway runs itself."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from .memo import by_identity

log = logging.getLogger(__name__)

# A prerequisite's argument written as exactly this prefix and a dotted path takes the main call's value there.
TEMPLATE_PREFIX = "$args."
# Compiled validators kept, one per distinct input schema (the upstream tools called most).
VALIDATORS_KEPT = 512
# At most this many schema problems are named: the first few say what to fix.
MAX_PROBLEMS = 5


class Unfilled(Exception):
    """A `$args.` reference the main call has no value for."""

    def __init__(self, reference: str):
        self.reference = reference
        super().__init__(reference)


def schema_problems(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> list[str]:
    """What is wrong with `arguments` for a tool's input schema, each as "at PATH: message"; [] when they fit.

    An upstream whose schema is itself broken is not held to it (the upstream will judge the call).
    """
    if not isinstance(schema, dict):
        return []
    if surely_fits(schema, arguments):  # the usual case, settled without the validator
        return []
    validator = _validator_of(schema)
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    return [f"at {_path(e.absolute_path)}: {e.message}" for e in errors[:MAX_PROBLEMS]]


def surely_fits(schema: dict[str, Any], value: Any) -> bool:
    """True when `value` fits `schema` by a quick check that knows only the plain schema most tools have (an
    object of properties, each of one JSON type, some required); False when it does not fit, or when the check
    cannot tell (any keyword it does not know): then a validator must judge, and say what is wrong."""
    fits = _plain_fit_of(schema)
    return fits is not None and isinstance(value, dict) and fits(value)


@by_identity(VALIDATORS_KEPT)
def _validator_of(schema: dict[str, Any]) -> Any:
    """The validator of the schema object a listing holds (found without serialising it again on every call)."""
    try:
        return _validator(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError):  # not JSON at all: the upstream will judge the call
        return None


@functools.lru_cache(maxsize=VALIDATORS_KEPT)
def _validator(schema_json: str) -> Any:
    """The validator of one schema, checked against its metaschema once (that check costs more than a call's own
    validation); None for a schema that is itself broken. jsonschema is imported here, on the first call that needs
    it: with its referencing and attrs it is tens of milliseconds of the server's start otherwise."""
    from jsonschema import Draft202012Validator, SchemaError, validators

    schema = json.loads(schema_json)
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        log.info("an upstream tool's input schema is invalid, arguments not checked: %s", exc.message)
        return None
    return cls(schema)


# The JSON types a plain schema's properties may name, as Python checks them (bool is not a number in JSON).
_PLAIN_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
_PLAIN_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "title", "description", "$schema"})
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})


@by_identity(VALIDATORS_KEPT)
def _plain_fit_of(schema: dict[str, Any]) -> Any:
    """For the schema most tools have (an object of properties, each of one JSON type, some required), a check that
    says only "fits": a call it cannot vouch for goes to the validator, which names what is wrong. None for any
    other schema. It never accepts what the validator would refuse: every keyword it does not know sends the
    schema to the validator."""
    properties, required = schema.get("properties", {}), schema.get("required", [])
    closed = schema.get("additionalProperties", True) is False
    if (
        not schema.keys() <= _PLAIN_KEYS
        or schema.get("type") != "object"
        or schema.get("additionalProperties", True) not in (True, False)
        or not isinstance(properties, dict)
        or not isinstance(required, list)
        or not all(isinstance(name, str) for name in required)
    ):
        return None
    checks = {}
    for name, spec in properties.items():
        if not isinstance(spec, dict) or not spec.keys() <= _ANNOTATIONS | {"type"}:
            return None
        if "type" in spec and (not isinstance(spec["type"], str) or spec["type"] not in _PLAIN_TYPES):
            return None
        checks[name] = _PLAIN_TYPES[spec["type"]] if "type" in spec else None

    def fits(arguments: dict[str, Any]) -> bool:
        if closed and not arguments.keys() <= checks.keys():
            return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is not None and not check(value):
                return False
        return all(name in arguments for name in required)

    return fits


def _path(parts: Any) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return repr(text.lstrip(".")) if text else "the top level"


def fill(template: Any, arguments: dict[str, Any]) -> Any:
    """A prerequisite's `arguments` with every "$args.path" replaced by the main call's value there."""
    if isinstance(template, str) and template.startswith(TEMPLATE_PREFIX):
        value: Any = arguments
        for part in template.removeprefix(TEMPLATE_PREFIX).split("."):
            if not isinstance(value, dict) or part not in value:
                raise Unfilled(template)
            value = value[part]
        return value
    if isinstance(template, dict):
        return {key: fill(value, arguments) for key, value in template.items()}
    if isinstance(template, list):
        return [fill(value, arguments) for value in template]
    return template
