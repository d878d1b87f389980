"""The project's settings file, abilities-mcp.json: skill folders, built-in skills, plan limits, session and history.

One table (SPEC) is the schema: it checks the file (every problem with its field path and the fix, unknown keys
with a did-you-mean) and is the JSON Schema editors get (`abilities-mcp schema settings`). What the file sets is
the default: a flag or an environment variable still wins. A file with problems is used for what is sound in it;
`validate` names the rest. Stdlib only: the hook reads the skill folders for its session briefing.
"""

from __future__ import annotations

import json
import math
import os

from ..durations import FORMAT_HINT, parse_duration
from ..errors import did_you_mean
from ..files import Unreadable, decode_text, read_bytes
from .trust import TrustStore, waiting_note

# typing's TYPE_CHECKING without importing typing: the hook reads sessions.ttl here when it checks a session.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

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


# The settings that guard something, which way loosens them, and their defaults (what an absent file means):
# fewer runs or days kept shortens the record of who answered what; a longer ttl lets a prerequisite recorded once
# count for longer. A project file may move them the other way at once; this way waits for a person's trust.
GUARDED = {
    "history.runs": ("smaller", 500),
    "history.days": ("smaller", 30.0),
    "sessions.ttl": ("larger", 24 * 3600.0),
}


class Settings:
    """What the file sets (None where it is silent or wrong) and what is wrong with it."""

    __slots__ = ("path", "values", "problems", "raw", "pending")

    def __init__(
        self, path: str | Path, values: dict[str, Any], problems: list[tuple[str, str]], raw: bytes | None = None
    ):
        self.path, self.values, self.problems, self.raw = path, values, problems, raw  # raw: the bytes read
        self.pending: str | None = None  # set when these are the trusted settings an edit waits to replace

    def get(self, dotted: str) -> Any:
        """A value by its dotted name (`skills.plan.budget`), or None when the file does not set it soundly."""
        return self.values.get(dotted)


_cache: dict[str, tuple[tuple[int, ...], Settings]] = {}


def load(root: str | Path) -> Settings:
    """The settings of the project at `root`, re-read when the file changes."""
    path = os.path.join(root, FILE_NAME)
    try:
        st = os.stat(path)
        key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    except OSError:
        return Settings(path, {}, [])
    cached = _cache.get(path)
    if cached and cached[0] == key:
        return cached[1]
    found = read(path)
    _cache[path] = (key, found)
    return found


def read(path: str | Path) -> Settings:
    """Parse and check one settings file."""
    try:
        raw = read_bytes(path, MAX_BYTES + 1)
    except FileNotFoundError:
        return Settings(path, {}, [])
    except Unreadable as exc:
        return Settings(path, {}, [("", f"the file {exc}")])
    return parse_settings(path, raw)


def in_force(root: str | Path, state_dir: str | Path) -> Settings:
    """The settings file as enforced: as written, unless an edit since a person trusted it loosens a guarded
    setting (GUARDED); then the trusted version (no file: the defaults), with a note naming the command."""
    path, trust = os.path.join(root, FILE_NAME), TrustStore(state_dir, root)
    current = read(path)
    trusted_raw = trust.trusted(path)
    if current.raw == trusted_raw:
        return current
    trusted = parse_settings(path, trusted_raw) if trusted_raw is not None else Settings(path, {}, [])
    reasons = lowerings(trusted, current)
    if not reasons:
        return current
    trusted.pending = waiting_note(trust.key(path), reasons)
    return trusted


def lowerings(trusted: Settings, current: Settings) -> list[str]:
    """Each guarded setting `current` moves the loose way from `trusted` (an unset one is its default)."""
    found = []
    for dotted, (looser, default) in GUARDED.items():
        then, now = trusted.get(dotted), current.get(dotted)
        then, now = default if then is None else then, default if now is None else now  # unset (or broken): default
        was, value = _number(then), _number(now)
        if (value < was) if looser == "smaller" else (value > was):
            found.append(f"{dotted} {json.dumps(then)} → {json.dumps(now)}")
    return found


def _number(value: Any) -> float:
    return parse_duration(value) if isinstance(value, str) else float(value)


def parse_settings(path: str | Path, raw: bytes) -> Settings:
    """A settings file's bytes, checked."""
    try:
        text = decode_text(raw, MAX_BYTES)
    except Unreadable as exc:
        return Settings(path, {}, [("", f"the file {exc}")], raw)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Settings(path, {}, [("", f"is not valid JSON ({exc}); fix the syntax")], raw)
    if not isinstance(document, dict):
        return Settings(path, {}, [("", 'must be a JSON object, e.g. {"skills": {"builtin": false}}')], raw)
    values: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    _check(document, SPEC, "", values, problems)
    return Settings(path, values, problems, raw)


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


def chosen(
    root: str | Path,
    dotted: str,
    flag: Any,
    env: str | None,
    parse: Any,
    default: Any,
    state_dir: str | Path | None = None,
) -> Any:
    """The value in force for one setting: `flag` when given, else the environment variable (parsed), else the
    settings file (for a GUARDED setting, as trust allows it, when `state_dir` is given), else `default`."""
    if flag is not None:
        return flag
    if env and (text := os.environ.get(env)):
        return parse(text)
    settings = in_force(root, state_dir) if state_dir is not None and dotted in GUARDED else load(root)
    found = settings.get(dotted)
    return parse(found) if found is not None else default
