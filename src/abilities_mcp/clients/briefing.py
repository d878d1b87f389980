"""What the hook tells the model at session start and with each prompt: which abilities fit the request, and a
short catalog of what the project offers.

Read from the files, not the server (the hook may run before the server has started): ability files are parsed
for their name, description and triggers only, with PyYAML; no pydantic. An ability that is broken in a way
only full validation finds may be suggested; `ability_run` then refuses it with the file's problems.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from ..files import Unreadable, read_text, yaml_problem
from ..phrases import compile_triggers, score
from ..prerequisites.workflows import WorkflowSet
from ..state.project import Project, discover_ability_files

# Abilities suggested for one prompt, best first.
MAX_SUGGESTIONS = 3
# Names listed in the session-start catalog per kind (the rest are counted): it is read at every session start.
MAX_LISTED = 12
# Ability files bigger than this are not read for their triggers (a real ability is a few kilobytes).
MAX_ABILITY_BYTES = 256_000


class Entry(NamedTuple):
    """What the hook knows of one ability."""

    name: str
    description: str
    keywords: tuple[str, ...]
    patterns: tuple[str, ...]


class Suggestion(NamedTuple):
    name: str
    description: str
    score: int
    matched: list[str]


def abilities(project: Project) -> list[Entry]:
    """Each ability's name, description and triggers; project before user, first of a name wins."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: dict[str, Entry] = {}
    for path, derived, _scope in discover_ability_files(project):
        data = _read(path, yaml, loader)
        if not isinstance(data, dict) or not isinstance(data.get("description"), str):
            continue
        name = data.get("name") if isinstance(data.get("name"), str) else derived
        triggers = data.get("triggers") if isinstance(data.get("triggers"), dict) else {}
        found.setdefault(
            name, Entry(name, data["description"], _strings(triggers, "keywords"), _strings(triggers, "patterns"))
        )
    return list(found.values())


def _read(path: os.PathLike[str], yaml: Any, loader: Any) -> Any:
    """An ability file's YAML, or None for any file the loader would refuse (the server says why, not the hook)."""
    try:
        text = read_text(path, MAX_ABILITY_BYTES)
        return None if yaml_problem(text) else yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except (OSError, Unreadable, yaml.YAMLError):
        return None


def _strings(triggers: dict[str, Any], key: str) -> tuple[str, ...]:
    values = triggers.get(key)
    return tuple(v for v in values if isinstance(v, str)) if isinstance(values, list) else ()


def suggest(entries: list[Entry], text: str, limit: int = MAX_SUGGESTIONS) -> list[Suggestion]:
    """The abilities whose triggers fit the text, best first (as ability_match ranks them)."""
    found = []
    for entry in entries:
        points, labels = score(compile_triggers(entry.keywords, entry.patterns), text)
        if labels:
            found.append(Suggestion(entry.name, entry.description, points, labels))
    return sorted(found, key=lambda s: (-s.score, s.name))[:limit]


def suggestions_text(found: list[Suggestion]) -> str:
    lines = [
        "abilities-mcp: abilities that fit this request (their steps are enforced; run one instead of "
        "doing the work freehand):"
    ]
    for s in found:
        lines.append(f"- {s.name}: {s.description} (matched {', '.join(s.matched)}) -> ability_run(name={s.name!r})")
    return "\n".join(lines)


def catalog(project: Project, entries: list[Entry], workflows: WorkflowSet) -> str:
    """A few lines on what the project offers and how to use it."""
    lines = ["abilities-mcp is connected."]
    if entries:
        lines.append(
            f"Abilities (enforced workflows; ability_match(text) finds one, ability_run(name) starts it): "
            f"{_listed(sorted(e.name for e in entries))}."
        )
    skills = skill_names(project)
    if skills:
        lines.append(f"Skills (skill_route(task) picks one, skill_load(name) loads it): {_listed(skills)}.")
    gating = [f"{w.name} ({w.mode})" for w in workflows.enabled()]
    if gating:
        lines.append(f"Workflow prerequisites apply to tool calls: {_listed(gating)}.")
    return "\n".join(lines)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")


def skill_names(project: Project) -> list[str]:
    """Skill folder names (a folder holding SKILL.md), project first, each name once."""
    names: dict[str, None] = {}
    for folder, _scope in project.skill_dirs():
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if (
                entry.is_dir()
                and not entry.name.startswith(".")
                and os.path.isfile(os.path.join(entry.path, "SKILL.md"))
            ):
                names.setdefault(entry.name)
    return list(names)
