"""`{{...}}` interpolation: plain text for prompts, environment variables for shell commands.

In a script's `run`, a value is never spliced into the command text. Each placeholder becomes a reference to an
environment variable, written so that the shell expands it as exactly one word whatever quoting the author put
around the placeholder (bare, "double", 'single', or inside a larger word).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .expressions import STEP_FIELDS

PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
ENV_PREFIX = "ABILITIES_VALUE_"

Reference = tuple[str, ...]  # ("input", name) or ("step", id, field)
Resolver = Callable[[Reference], Any]


class TemplateError(ValueError):
    """A placeholder that is not a reference this format knows."""


def parse_reference(text: str) -> Reference:
    """`inputs.x` -> ("input", "x"); `steps.build.output` -> ("step", "build", "output")."""
    parts = text.split(".")
    if len(parts) == 2 and parts[0] == "inputs" and parts[1]:
        return ("input", parts[1])
    if len(parts) == 3 and parts[0] == "steps" and parts[2] in STEP_FIELDS:
        return ("step", parts[1], parts[2])
    raise TemplateError(
        f"{{{{{text}}}}} is not a reference; use {{{{inputs.<name>}}}} or "
        "{{steps.<id>.output}} / {{steps.<id>.exit_code}} / {{steps.<id>.status}}"
    )


def references(template: str) -> list[Reference]:
    """Every reference in a template; raises TemplateError on the first bad one."""
    return [parse_reference(m.group(1)) for m in PLACEHOLDER.finditer(template)]


def as_text(value: Any) -> str:
    """How a value reads once interpolated."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render_text(template: str, resolve: Resolver) -> str:
    """Interpolate for prompts and messages: values become plain text."""
    return PLACEHOLDER.sub(lambda m: as_text(resolve(parse_reference(m.group(1)))), template)


def render_shell(command: str, resolve: Resolver) -> tuple[str, dict[str, str]]:
    """Rewrite placeholders as quoted environment variable expansions; return the command and those variables."""
    out: list[str] = []
    env: dict[str, str] = {}
    stack: list[str] = ["plain"]
    i = 0
    while i < len(command):
        m = PLACEHOLDER.match(command, i)
        if m:
            name = f"{ENV_PREFIX}{len(env) + 1}"
            env[name] = as_text(resolve(parse_reference(m.group(1)))).replace("\0", "")
            out.append(_expansion(name, stack[-1]))
            i = m.end()
            continue
        i = _scan(command, i, stack, out)
    return "".join(out), env


def _expansion(var: str, context: str) -> str:
    if context == "double":
        return "${" + var + "}"
    if context == "single":
        return "'\"${" + var + "}\"'"  # close the single quotes, expand in double quotes, reopen
    return '"${' + var + '}"'


def _scan(command: str, i: int, stack: list[str], out: list[str]) -> int:
    """Copy one lexical unit of the command, tracking the quoting context; return the next index."""
    ch, top = command[i], stack[-1]
    if top == "single":
        if ch == "'":
            stack.pop()
        out.append(ch)
        return i + 1
    if ch == "\\" and i + 1 < len(command):
        out.append(command[i : i + 2])
        return i + 2
    if command.startswith("$(", i):
        stack.append("paren")
        out.append("$(")
        return i + 2
    if ch == "`":
        if top == "backtick":
            stack.pop()
        else:
            stack.append("backtick")
    elif top == "double":
        if ch == '"':
            stack.pop()
    elif ch == "'":
        stack.append("single")
    elif ch == '"':
        stack.append("double")
    elif ch == "(":
        stack.append("paren")
    elif ch == ")" and top == "paren":
        stack.pop()
    out.append(ch)
    return i + 1
