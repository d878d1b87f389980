"""The project's settings file, abilities-mcp.json: skill folders, built-in skills, plan limits, session and history.

One table (SPEC) is the schema: it checks the file (every problem with its field path and the fix, unknown keys
with a did-you-mean) and is the JSON Schema editors get (`abilities-mcp schema settings`). What the file sets is
the default: a flag or an environment variable still wins. A file with problems is used for what is sound in it;
`validate` names the rest. Stdlib only: the hook reads the skill folders for its session briefing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..durations import FORMAT_HINT, parse_duration
from ..errors import did_you_mean
from ..files import Unreadable, read_text

FILE_NAME = "abilities-mcp.json"
MAX_BYTES = 256 * 1024

# A field's kind: "bool", "int>=N", "number>0", "duration", "folders", or a nested table.
SPEC: dict[str, Any] = {
    "$schema": "string",
    "skills": {
        "folders": "folders",
        "builtin": "bool",
        "plan": {"implementation": "int>=0", "review": "int>=0", "budget": "int>=1000", "references": "bool"},
    },
    "sessions": {"ttl": "duration"},
    "history": {"runs": "int>=1", "days": "number>0"},
}
DESCRIPTIONS = {
    "skills.folders": "Folders searched for skills, in precedence order (relative to the project, or ~/...). "
    "Default: skills, .agents/skills, .agent/skills, .claude/skills, .opencode/skills, then the same under ~",
    "skills.builtin": "Offer the skills abilities-mcp ships (default true; $ABILITIES_BUILTIN_SKILLS wins)",
    "skills.plan.implementation": "Skills skill_plan chooses for an implementation step (default 2)",
    "skills.plan.review": "Skills skill_plan chooses for a review step (default 1)",
    "skills.plan.budget": "Characters of each SKILL.md in skill_plan's prompt (default 20000)",
    "skills.plan.references": "skill_plan adds each chosen skill's references/ files (default false)",
    "sessions.ttl": "Workflow prerequisites recorded in a session expire this long after it started (default 24h)",
    "history.runs": "Finished runs kept (default 500)",
    "history.days": "Days finished runs are kept (default 30)",
}


class Settings:
    """What the file sets (None where it is silent or wrong) and what is wrong with it."""

    __slots__ = ("path", "values", "problems")

    def __init__(self, path: Path, values: dict[str, Any], problems: list[tuple[str, str]]):
        self.path, self.values, self.problems = path, values, problems

    def get(self, dotted: str) -> Any:
        """A value by its dotted name (`skills.plan.budget`), or None when the file does not set it soundly."""
        return self.values.get(dotted)


_cache: dict[Path, tuple[tuple[int, ...], Settings]] = {}


def load(root: Path) -> Settings:
    """The settings of the project at `root`, re-read when the file changes."""
    path = root / FILE_NAME
    try:
        st = path.stat()
        key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    except OSError:
        return Settings(path, {}, [])
    cached = _cache.get(path)
    if cached and cached[0] == key:
        return cached[1]
    found = read(path)
    _cache[path] = (key, found)
    return found


def read(path: Path) -> Settings:
    """Parse and check one settings file."""
    try:
        text = read_text(path, MAX_BYTES)
    except FileNotFoundError:
        return Settings(path, {}, [])
    except Unreadable as exc:
        return Settings(path, {}, [("", f"the file {exc}")])
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Settings(path, {}, [("", f"is not valid JSON ({exc}); fix the syntax")])
    if not isinstance(document, dict):
        return Settings(path, {}, [("", 'must be a JSON object, e.g. {"skills": {"builtin": false}}')])
    values: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    _check(document, SPEC, "", values, problems)
    return Settings(path, values, problems)


def _check(found: dict[str, Any], spec: dict[str, Any], prefix: str, values: dict, problems: list) -> None:
    for key, value in found.items():
        dotted = f"{prefix}{key}"
        if key not in spec:
            close = did_you_mean(key, spec)
            known = ", ".join(k for k in spec if k != "$schema")
            hint = f"did you mean {close!r}?" if close else f"known keys: {known}"
            problems.append((dotted, f"unknown key {key!r}; {hint}"))
        elif isinstance(spec[key], dict):
            if isinstance(value, dict):
                _check(value, spec[key], f"{dotted}.", values, problems)
            else:
                problems.append((dotted, f"must be an object with the keys {', '.join(spec[key])}"))
        else:
            problem = _problem(spec[key], value)
            if problem:
                problems.append((dotted, problem))
            else:
                values[dotted] = value


def _problem(kind: str, value: Any) -> str | None:
    if kind == "string":
        return None if isinstance(value, str) else "must be a string"
    if kind == "bool":
        return None if isinstance(value, bool) else f"must be true or false, not {json.dumps(value)}"
    if kind.startswith("int>="):
        least = int(kind[5:])
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= least
        return None if ok else f"must be a whole number, at least {least}, not {json.dumps(value)}"
    if kind == "number>0":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        return None if ok else f"must be a positive number, not {json.dumps(value)}"
    if kind == "duration":
        try:
            parse_duration(value)
        except ValueError:
            return f"{json.dumps(value)} is not a duration; {FORMAT_HINT}"
        return None
    if kind == "folders":
        ok = isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
        return None if ok else 'must be a list of folder paths, e.g. ["skills", ".claude/skills", "~/.claude/skills"]'
    raise AssertionError(kind)


def json_schema() -> dict[str, Any]:
    """The JSON Schema for editors, made from SPEC."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "abilities-mcp settings (abilities-mcp.json)",
        **_schema(SPEC, ""),
    }


def _schema(spec: dict[str, Any], prefix: str) -> dict[str, Any]:
    properties = {}
    for key, kind in spec.items():
        dotted = f"{prefix}{key}"
        node = _schema(kind, f"{dotted}.") if isinstance(kind, dict) else _kind_schema(kind)
        if dotted in DESCRIPTIONS:
            node["description"] = DESCRIPTIONS[dotted]
        properties[key] = node
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _kind_schema(kind: str) -> dict[str, Any]:
    if kind == "string":
        return {"type": "string"}
    if kind == "bool":
        return {"type": "boolean"}
    if kind.startswith("int>="):
        return {"type": "integer", "minimum": int(kind[5:])}
    if kind == "number>0":
        return {"type": "number", "exclusiveMinimum": 0}
    if kind == "duration":
        return {"type": ["string", "number"], "pattern": r"^(\d+(\.\d+)?(ms|s|m|h|d)?)+$", "exclusiveMinimum": 0}
    return {"type": "array", "items": {"type": "string", "minLength": 1}}


# --- what wins: a flag, then the environment, then the file, then the default ---------------------------------------


def chosen(root: Path, dotted: str, flag: Any, env: str | None, parse: Any, default: Any) -> Any:
    """The value in force for one setting: `flag` when given, else the environment variable (parsed), else the
    settings file, else `default`."""
    import os

    if flag is not None:
        return flag
    if env and (text := os.environ.get(env)):
        return parse(text)
    found = load(root).get(dotted)
    return parse(found) if found is not None else default
