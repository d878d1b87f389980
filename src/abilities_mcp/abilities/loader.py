"""Loading one ability file, in layers: file → text → dict → model → checks. Never raises for a bad file."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import Diagnostic, did_you_mean
from ..explain import Format, explain, short
from ..files import Unreadable, decode_text, read_bytes, read_text, yaml_problem
from .checks import Problem, check_ability, warn_ability
from .models import ABILITY_NAME, Ability, AgentStep, ApprovalStep, ScriptStep, SkillStep, WorkflowStep
from .salvage import salvage

log = logging.getLogger(__name__)
STEP_MODELS: dict[str, type[BaseModel]] = {
    "script": ScriptStep,
    "agent": AgentStep,
    "skill": SkillStep,
    "approval": ApprovalStep,
    "workflow": WorkflowStep,
}
# Words authors reach for when they mean one of our step types.
STEP_TYPE_ALIASES = {
    "shell": "script",
    "bash": "script",
    "sh": "script",
    "command": "script",
    "run": "script",
    "cmd": "script",
    "subagent": "agent",
    "task": "agent",
    "prompt": "agent",
    "llm": "agent",
    "human": "approval",
    "approve": "approval",
    "confirm": "approval",
    "gate": "approval",
    "ability": "workflow",
    "call": "workflow",
    "subworkflow": "workflow",
    "nested": "workflow",
}
# An ability file larger than this is refused unread: nobody writes a 1 MiB workflow by hand.
MAX_FILE_BYTES = 1024 * 1024


@dataclass
class Definition:
    """One ability file as loaded: the model when it is sound, the diagnostics when it is not."""

    name: str
    path: Path
    scope: str  # "project" or "user"
    ability: Ability | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)  # loads, but deserves a look (checks.warn_ability)
    # Whether a person trusted this file as it is (catalog.py): trusted | tightened (edited, no gate lowered) |
    # new (nobody trusted it: the strictest reading runs) | waiting (an edit would lower a gate: the trusted
    # version runs until a person's `abilities-mcp trust`).
    trust: str = "trusted"
    trust_note: str | None = None  # what a run of it and its listing say, for new and waiting
    # A file the model refuses: what of it could be read (salvage.py), checked with the project (catalog.py) so
    # validate reports every problem at once. Never run.
    partial: Ability | None = None

    @property
    def valid(self) -> bool:
        return self.ability is not None and not self.diagnostics


def load_definition(path: Path, derived_name: str, scope: str, raw: bytes | None = None) -> Definition:
    """Load one file (from `raw`, its bytes already read, when given); every problem becomes a Diagnostic naming
    the file and field. Never raises."""
    try:
        return _load(path, derived_name, scope, raw)
    except RecursionError:
        why = "the file nests too deeply to read; flatten it"
    except Exception as exc:  # a bug in a check must not hide every other ability
        log.exception("loading %s failed", path)
        why = f"could not be checked ({exc!r}); this is a bug in abilities-mcp, please report it"
    return Definition(derived_name, path, scope, None, [Diagnostic(str(path), "", why)])


def read_raw(path: Path) -> bytes | str:
    """A file's bytes, bounded (one byte past the limit, so the loader can say it is too big), or why it cannot
    be read: the caller judges these bytes and no others (a file swapped for another between two reads)."""
    try:
        return read_bytes(path, MAX_FILE_BYTES + 1)
    except Unreadable as exc:
        return f"the file {exc}"
    except OSError as exc:
        return f"cannot read the file: {exc}"


def _load(path: Path, derived_name: str, scope: str, raw: bytes | None) -> Definition:
    shown = str(path)
    data, problems = _read_yaml(path, raw)
    name = derived_name
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        name = data["name"]
    if problems:
        return Definition(name, path, scope, None, [Diagnostic(shown, p, m) for p, m in problems])
    try:
        ability = Ability.model_validate(data)
    except ValidationError as exc:
        # Report every problem at once: the checks still run on what the model could read.
        refused = explain(exc, ABILITY_FORMAT)
        partial = salvage(data, exc.errors())
        found, warnings = _checked(partial, derived_name, refused) if partial is not None else (refused, [])
        definition = Definition(name, path, scope, None, _diagnostics(shown, found), _diagnostics(shown, warnings))
        definition.partial = partial
        return definition
    problems, warnings = _checked(ability, derived_name, [])
    return Definition(name, path, scope, ability, _diagnostics(shown, problems), _diagnostics(shown, warnings))


def _checked(ability: Ability, derived_name: str, refused: list[Problem]) -> tuple[list[Problem], list[Problem]]:
    """(problems, warnings) of a file: what the model refused, then what the checks find in the rest."""
    problems = list(refused)
    if ability.name is None and not re.match(ABILITY_NAME, derived_name):
        problems.append(
            (
                "name",
                f"the file's path gives the name {derived_name!r}, which is not a valid ability "
                "name; rename the file (lowercase letters, digits, - _) or set name:",
            )
        )
    problems += [p for p in check_ability(ability) if p not in refused]
    warnings = warn_ability(ability)
    if ability.name is not None and ability.name != derived_name:
        warnings.insert(0, ("name", renamed(ability.name, derived_name)))
    return problems, warnings


def renamed(name: str, derived_name: str) -> str:
    """The warning for a `name:` that differs from the name the file's path gives: the ability answers to it alone."""
    return (
        f"{name!r} differs from {derived_name!r}, the name the file's path gives: the ability is called {name!r} "
        f"everywhere (list, run, validate, ability_run); remove name: to call it {derived_name!r}, or move the file "
        f"to {name}.yaml under its abilities folder"
    )


def _diagnostics(shown: str, problems: list[Problem]) -> list[Diagnostic]:
    return [Diagnostic(shown, p, m) for p, m in problems]


def _read_yaml(path: Path, raw: bytes | None) -> tuple[Any, list[tuple[str, str]]]:
    try:
        text = read_text(path, MAX_FILE_BYTES) if raw is None else decode_text(raw, MAX_FILE_BYTES)
    except (Unreadable, OSError) as exc:
        return None, [("", f"the file {exc}" if isinstance(exc, Unreadable) else f"cannot read the file: {exc}")]
    import yaml

    try:
        problem = yaml_problem(text)
        if problem:
            return None, [("", problem)]
        data = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        return None, [("", _yaml_message(exc))]
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        return None, [("", f"the file is {kind}; an ability is a mapping with description: and steps:")]
    return data, []


def _yaml_message(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return f"YAML does not parse{where}: {problem}; check the indentation and quoting there"


@functools.cache
def _strict_loader() -> type:
    """Safe YAML (the C loader when available) that refuses a key written twice; built on first use."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def construct_mapping(loader, node, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeLoader's own construct_mapping reports the unhashable key
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice; keep one", key_node.start_mark
                )
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    strict = type("StrictLoader", (base,), {})
    strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return strict


def _ability_message(err: dict) -> str | None:
    """The messages only ability files need: step types and the name rules."""
    kind, loc = err["type"], err["loc"]
    if kind == "union_tag_not_found":
        return f"step has no type; add type: {' | '.join(STEP_MODELS)}"
    if kind == "union_tag_invalid":
        tag = str(err["ctx"].get("tag", ""))
        close = STEP_TYPE_ALIASES.get(tag.lower()) or did_you_mean(tag, STEP_MODELS)
        hint = f"did you mean {close!r}? " if close else ""
        return f"unknown step type {tag!r}; {hint}use one of {', '.join(STEP_MODELS)}"
    if kind == "string_pattern_mismatch":
        return f"{short(err['input'])} {_pattern_rule(loc)}"
    if kind == "too_short" and tuple(loc) == ("steps",):
        return "the ability has no steps; add at least one, e.g. steps: [{id: build, type: script, run: make}]"
    if loc and loc[-1] == "max_attempts":
        msg = err["msg"].removeprefix("Value error, ")
        return f"{msg} (got {short(err['input'])}); use a whole number from 1 to 20 (default 3), e.g. max_attempts: 3"
    return None


def _pattern_rule(loc: tuple) -> str:
    if loc and loc[-1] == "[key]":
        return "is not an input name; use letters, digits, _ and - (starting with a letter or _)"
    if loc and loc[-1] == "id":
        return "is not a step id; use lowercase letters, digits, - and _"
    return "is not an ability name; use lowercase letters, digits, - _ and / between parts"


ABILITY_FORMAT = Format(Ability, STEP_MODELS, "steps", _ability_message)
