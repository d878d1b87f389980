"""A file format's validation errors in its author's words: the field path, and a message that says the fix.

Shared by every pydantic file format the project reads (ability files, workflows.json); each format adds its own
messages for what only it has (an ability's step types and name rules).
"""

from __future__ import annotations

import reprlib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import did_you_mean

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60


def _no_special(err: dict) -> str | None:
    return None


@dataclass(frozen=True)
class Format:
    """What the messages need to know about one file format beyond its root model."""

    root: type[BaseModel]
    # A tagged list's item models by tag, and the list's key (an ability's steps by type).
    variants: Mapping[str, type[BaseModel]] = field(default_factory=dict)
    variants_at: str = ""
    # The format's own message for an error, tried first; None falls through to the common ones.
    special: Callable[[dict], str | None] = _no_special


def explain(exc: ValidationError, fmt: Format) -> list[tuple[str, str]]:
    """Pydantic errors of a format's root model as (field path, message with the fix), each once."""
    seen, out = set(), []
    for err in exc.errors():
        item = (_format_loc(err["loc"], fmt), _message(err, fmt))
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def short(value: Any) -> str:
    """A value quoted in a message, cut short whatever its size or depth."""
    return _SHORT.repr(value)


def _format_loc(loc: tuple, fmt: Format) -> str:
    text = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
        elif _is_variant_tag(loc, i, fmt) or part == "[key]":
            continue
        else:
            text += ("." if text else "") + str(part)
    return text


def _is_variant_tag(loc: tuple, i: int, fmt: Format) -> bool:
    return i >= 2 and loc[i] in fmt.variants and isinstance(loc[i - 1], int) and loc[i - 2] == fmt.variants_at


def _message(err: dict, fmt: Format) -> str:
    special = fmt.special(err)
    if special is not None:
        return special
    kind, loc = err["type"], err["loc"]
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1], fmt)
        close = did_you_mean(str(key), allowed)
        hint = f"did you mean {close!r}?" if close else f"allowed keys: {', '.join(sorted(allowed))}"
        return f"unknown key {key!r}; {hint}"
    if kind == "missing":
        return f"missing required key {key!r}; add it"
    if kind == "literal_error":
        close = did_you_mean(str(err["input"])[:100], _literal_choices(err))
        hint = f"did you mean {close!r}? " if close else ""
        return f"{short(err['input'])} is not allowed; {hint}{err['msg'].replace('Input should be', 'use')}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{msg} (got {short(err['input'])})" if kind != "value_error" else msg


def _literal_choices(err: dict) -> list[str]:
    expected = str(err.get("ctx", {}).get("expected", ""))
    return [part.strip(" '") for part in expected.replace(" or ", ",").split(",") if part.strip(" '")]


def _allowed_keys(loc: tuple, fmt: Format) -> set[str]:
    model = _model_at(loc, fmt)
    return {info.alias or name for name, info in model.model_fields.items()}


def _model_at(loc: tuple, fmt: Format) -> type[BaseModel]:
    """The model class that holds the keys at a pydantic error location."""
    model = fmt.root
    for i, part in enumerate(loc):
        if isinstance(part, int) or part == "[key]":
            continue
        if _is_variant_tag(loc, i, fmt):
            model = fmt.variants[part]
            continue
        info = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if info is not None:
            model = _inner_model(info.annotation) or model
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = [m for arg in typing.get_args(annotation) if (m := _inner_model(arg))]
    return found[0] if len(found) == 1 else None
