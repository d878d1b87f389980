"""Run inputs: coerced to their declared types, checked, and completed with defaults before anything runs."""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import InputError, did_you_mean
from ..patterns import PatternTooSlow, search
from .models import InputSpec

_TRUE, _FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


def resolve_inputs(specs: dict[str, InputSpec], given: dict[str, Any] | None) -> dict[str, Any]:
    """The inputs a run gets: given values coerced and checked, defaults filled; raises InputError."""
    given = dict(given or {})
    problems = [_unknown(name, specs) for name in given if name not in specs]
    values: dict[str, Any] = {}
    for name, spec in specs.items():
        if name in given and given[name] is not None:
            try:
                values[name] = check_value(spec, given[name])
            except ValueError as exc:
                problems.append(f"input {name!r}: {exc}")
        elif spec.default is not None:
            values[name] = spec.default
        elif spec.required:
            problems.append(f"input {name!r} is required ({_describe(spec)}); pass it in inputs")
        else:
            values[name] = None
    if problems:
        raise InputError(problems)
    return values


def check_value(spec: InputSpec, value: Any) -> Any:
    """The value coerced to the spec's type; raises ValueError saying what is allowed."""
    value = _coerce(spec.type, value)
    if spec.enum is not None and value not in spec.enum:
        raise ValueError(f"{value!r} is not one of {spec.enum!r}")
    if spec.type in ("integer", "number"):
        _check_range(spec, value)
    if isinstance(value, str | list):
        _check_length(spec, value)
    if spec.pattern is not None and isinstance(value, str) and not _fits(spec.pattern, value):
        raise ValueError(f"{value!r} does not match the pattern '{spec.pattern}'")  # as written: no doubled backslashes
    return value


def _fits(pattern: str, value: str) -> bool:
    try:
        return search(pattern, value)
    except PatternTooSlow as exc:
        raise ValueError(str(exc)) from None


def _coerce(kind: str, value: Any) -> Any:
    if kind == "string":
        if isinstance(value, str):
            if "\0" in value:
                raise ValueError("a string may not contain a NUL character")
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise ValueError(f"expected a string, got {type(value).__name__}")
    if kind == "boolean":
        return _coerce_bool(value)
    if kind in ("integer", "number"):
        return _coerce_number(kind, value)
    return _coerce_json(kind, value)


def _coerce_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected true or false, got {value!r}")


def _coerce_number(kind: str, value: Any) -> int | float:
    if isinstance(value, bool):
        raise ValueError(f"expected {'an integer' if kind == 'integer' else 'a number'}, got a boolean")
    if isinstance(value, str):
        try:
            value = float(value.strip()) if kind == "number" or "." in value else int(value.strip())
        except ValueError:
            raise ValueError(f"expected {'an integer' if kind == 'integer' else 'a number'}, got {value!r}") from None
    if not isinstance(value, int | float) or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"expected a finite {'integer' if kind == 'integer' else 'number'}, got {value!r}")
    if kind == "integer":
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"expected an integer, got {value!r}")
        return int(value)
    return value


def _coerce_json(kind: str, value: Any) -> Any:
    expected = list if kind == "array" else dict
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(
                f"expected {'an array' if kind == 'array' else 'an object'} (JSON), got {value!r}"
            ) from None
    if not isinstance(value, expected):
        raise ValueError(f"expected {'an array' if kind == 'array' else 'an object'}, got {type(value).__name__}")
    return value


def _check_range(spec: InputSpec, value: float) -> None:
    if spec.min is not None and value < spec.min:
        raise ValueError(f"{value!r} is below the minimum {spec.min:g}")
    if spec.max is not None and value > spec.max:
        raise ValueError(f"{value!r} is above the maximum {spec.max:g}")


def _check_length(spec: InputSpec, value: str | list) -> None:
    if spec.min_length is not None and len(value) < spec.min_length:
        raise ValueError(f"length {len(value)} is below minLength {spec.min_length}")
    if spec.max_length is not None and len(value) > spec.max_length:
        raise ValueError(f"length {len(value)} is above maxLength {spec.max_length}")


def _unknown(name: str, specs: dict[str, InputSpec]) -> str:
    close = did_you_mean(name, specs)
    hint = f"; did you mean {close!r}?" if close else f"; declared inputs: {sorted(specs) or 'none'}"
    return f"unknown input {name!r}{hint}"


def _describe(spec: InputSpec) -> str:
    text = spec.type
    if spec.enum:
        text += f", one of {spec.enum!r}"
    if spec.description:
        text += f": {spec.description}"
    return text
