"""tool_chain's variables: a step's `output_as` names its result, and a later step's argument written exactly
`$name` takes that whole result (keeping its type), `$name.field` (or `$name.a.0.b`) a field of it. `$$...` is the
literal string `$...`. Every reference is checked against the names defined before its step, before anything is
sent; a field is looked up when its step runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import AbilitiesError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A whole argument string `$name` or `$name.path.to.field` (a path part is a key or a list index).
REFERENCE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[^.]+)*)$")
ESCAPE = "$$"


class BadChain(AbilitiesError):
    """A chain that cannot run as written (an unknown `$name`, a bad `output_as`): nothing was sent."""


class Unresolved(AbilitiesError):
    """A `$name.field` whose field the earlier result does not have: the step is not sent."""


def references(template: Any) -> Iterator[tuple[str, str]]:
    """Every (name, reference) in a step's arguments, in order."""
    if isinstance(template, str):
        found = REFERENCE.match(template)
        if found and not template.startswith(ESCAPE):
            yield found.group(1), template
    elif isinstance(template, dict):
        for value in template.values():
            yield from references(value)
    elif isinstance(template, list):
        for value in template:
            yield from references(value)


def check(steps: Sequence[tuple[str, Any, str | None]]) -> None:
    """Refuse a chain (tool, arguments, output_as per step) that refers to a name no earlier step defines, or names
    an output badly; says which step, which name, and the names defined so far."""
    defined: dict[str, int] = {}
    for number, (tool, arguments, output_as) in enumerate(steps, start=1):
        for name, reference in references(arguments):
            if name not in defined:
                so_far = ", ".join(f"${n} (step {s})" for n, s in defined.items()) or "none"
                raise BadChain(
                    f"Step {number} ({tool}) refers to {reference}, but no earlier step defines ${name}; names defined "
                    f'so far: {so_far}. Give an earlier step "output_as": "{name}", or write $${reference[1:]} '
                    "for the literal text. Nothing was sent."
                )
        if output_as is not None:
            if not NAME.match(output_as):
                raise BadChain(
                    f"Step {number} ({tool}): output_as {output_as!r} is not a name (letters, digits and _, not "
                    "starting with a digit). Nothing was sent."
                )
            defined[output_as] = number


def substitute(template: Any, variables: dict[str, Any]) -> Any:
    """A step's arguments with every reference replaced by its value; Unresolved when a field is missing."""
    if isinstance(template, str):
        if template.startswith(ESCAPE):
            return template[1:]
        found = REFERENCE.match(template)
        if found:
            return _field(found.group(1), found.group(2), variables[found.group(1)], template)
        return template
    if isinstance(template, dict):
        return {key: substitute(value, variables) for key, value in template.items()}
    if isinstance(template, list):
        return [substitute(value, variables) for value in template]
    return template


def _field(name: str, path: str, value: Any, reference: str) -> Any:
    """The whole value for `$name`; for `$name.a.b`, that field of it (text is parsed as JSON first)."""
    if not path:
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise Unresolved(
                f"{reference}: ${name} is text, not JSON, so it has no fields (it begins {value[:80]!r}); "
                f"use ${name} for the whole text"
            ) from None
    for part in path[1:].split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            has = f"its fields: {', '.join(map(str, value))}" if isinstance(value, dict) else f"it is {_kind(value)}"
            raise Unresolved(f"{reference}: no {part!r} there ({has})")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"{type(value).__name__} {json.dumps(value)[:80]}"
