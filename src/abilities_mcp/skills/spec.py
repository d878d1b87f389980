"""Agent Skills (agentskills.io): SKILL.md parsed leniently for use, validated strictly for authors.

Loading follows the client guide: a name/folder mismatch or an over-long field loads with a warning; a missing
description or frontmatter that does not parse skips the skill with a diagnostic; a value holding `: ` that
breaks YAML is quoted and parsed again. Validation reports every violation in the words of the `skills-ref`
reference validator, so authors see the same message here and in the ecosystem's own checker.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic
from ..files import Unreadable, read_bytes, yaml_problem

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_COMPATIBILITY_CHARS = 500
MAX_LICENSE_CHARS = 100
MAX_ALLOWED_TOOLS_CHARS = 1024
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 1024
# skills-ref refuses bigger SKILL.md files; reading more would only fill the model's context.
MAX_SKILL_MD_BYTES = 1024 * 1024
ALLOWED_FIELDS = frozenset({"name", "description", "license", "allowed-tools", "metadata", "compatibility"})
# A top-level `key: value` line of frontmatter, for the colon-in-value fallback.
_KEY_LINE = re.compile(r"^([A-Za-z][\w-]*):[ \t]+(\S.*?)[ \t]*$")


class SkillFileError(Exception):
    """A SKILL.md that cannot be used at all (the message is the validator's)."""


@dataclass(frozen=True)
class Skill:
    """One loaded skill: its frontmatter, its body without frontmatter, and what was lenient about loading it."""

    name: str
    description: str
    directory: Path  # the folder as found (a symlinked folder keeps its link path)
    real_directory: Path  # where reads are confined to
    scope: str  # "project" | "user" | "builtin"
    frontmatter: dict[str, Any]
    body: str
    warnings: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return self.directory / "SKILL.md"

    @property
    def model_invocable(self) -> bool:
        """Claude Code's `disable-model-invocation: true` hides a skill from routing (the person invokes it)."""
        return str(self.frontmatter.get("disable-model-invocation", "")).lower() != "true"


@dataclass
class Frontmatter:
    """What parsing found: the mapping, the body, and notes on anything that needed leniency."""

    data: dict[str, Any]
    body: str
    notes: list[str] = field(default_factory=list)


def split_frontmatter(content: str) -> tuple[str, str]:
    """(frontmatter text, body) of SKILL.md; raises SkillFileError with skills-ref's message."""
    if not content.startswith("---"):
        raise SkillFileError("SKILL.md must start with YAML frontmatter (---)")
    parts = content.split("---", 2)
    if len(parts) < 3:
        raise SkillFileError("SKILL.md frontmatter not properly closed with ---")
    return parts[1], parts[2].strip()


def parse_yaml(text: str) -> dict[str, Any]:
    """Frontmatter as a mapping with every scalar a string, as skills-ref's strictyaml reads it (`1.0` stays text)."""
    import yaml  # here, not at the top: start-up does not read any file

    try:
        problem = yaml_problem(text)
        if problem:
            raise SkillFileError(f"Invalid YAML in frontmatter: {problem}")
        data = yaml.load(text, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))  # BaseLoader: strings only
    except yaml.YAMLError as exc:
        raise SkillFileError(f"Invalid YAML in frontmatter: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillFileError("SKILL.md frontmatter must be a YAML mapping")
    return data


def parse_lenient(content: str) -> Frontmatter:
    """Parse for use: when YAML fails on a plain value holding `: `, quote such values and try again."""
    text, body = split_frontmatter(content)
    try:
        return Frontmatter(parse_yaml(text), body)
    except SkillFileError as first:
        quoted, fields = _quote_colon_values(text)
        if not fields:
            raise
        try:
            data = parse_yaml(quoted)
        except SkillFileError:
            raise first from None
        note = f"{', '.join(fields)}: a value containing ': ' must be quoted in YAML; read it as quoted text"
        return Frontmatter(data, body, [note])


def _quote_colon_values(text: str) -> tuple[str, list[str]]:
    """The client guide's fallback: `description: Use when: x` becomes `description: "Use when: x"`."""
    lines, fields = [], []
    for line in text.splitlines():
        m = _KEY_LINE.match(line)
        if m and ": " in m.group(2) and m.group(2)[0] not in "'\"[{|>&*!":
            value = m.group(2).replace("\\", "\\\\").replace('"', '\\"')
            line = f'{m.group(1)}: "{value}"'
            fields.append(m.group(1))
        lines.append(line)
    return "\n".join(lines), fields


def validate_frontmatter(data: dict[str, Any], directory: Path | None) -> list[Diagnostic]:
    """Every spec violation, worded exactly as skills-ref words it; the field is the diagnostic's path."""
    out: list[tuple[str, str]] = []
    extra = set(data) - ALLOWED_FIELDS
    if extra:
        out.append(
            (
                "",
                f"Unexpected fields in frontmatter: {', '.join(sorted(extra))}. "
                f"Only {sorted(ALLOWED_FIELDS)} are allowed.",
            )
        )
    for required in ("name", "description"):
        if required not in data:
            out.append((required, f"Missing required field in frontmatter: {required}"))
    if "name" in data:
        out += [("name", m) for m in _name_problems(data["name"], directory)]
    if "description" in data:
        out += [("description", m) for m in _description_problems(data["description"])]
    for key, label, limit in (
        ("compatibility", "Compatibility exceeds", MAX_COMPATIBILITY_CHARS),
        ("license", "License exceeds", MAX_LICENSE_CHARS),
        ("allowed-tools", "Allowed tools exceed", MAX_ALLOWED_TOOLS_CHARS),
    ):
        if key in data:
            out += [(key, m) for m in _string_problems(key, data[key], label, limit)]
    if "metadata" in data:
        out += [("metadata", m) for m in _metadata_problems(data["metadata"])]
    file = str(directory / "SKILL.md") if directory else "SKILL.md"
    return [Diagnostic(file, path, message) for path, message in out]


def _name_problems(name: Any, directory: Path | None) -> list[str]:
    if not isinstance(name, str) or not name.strip():
        return ["Field 'name' must be a non-empty string"]
    name = unicodedata.normalize("NFKC", name.strip())
    problems = []
    if len(name) > MAX_NAME_CHARS:
        problems.append(f"Skill name '{name}' exceeds {MAX_NAME_CHARS} character limit ({len(name)} chars)")
    if name != name.lower():
        problems.append(f"Skill name '{name}' must be lowercase")
    if name.startswith("-") or name.endswith("-"):
        problems.append("Skill name cannot start or end with a hyphen")
    if "--" in name:
        problems.append("Skill name cannot contain consecutive hyphens")
    if not all(c.isalnum() or c == "-" for c in name):
        problems.append(
            f"Skill name '{name}' contains invalid characters. Only letters, digits, and hyphens are allowed."
        )
    if directory is not None and unicodedata.normalize("NFKC", directory.name) != name:
        problems.append(f"Directory name '{directory.name}' must match skill name '{name}'")
    return problems


def _description_problems(description: Any) -> list[str]:
    if not isinstance(description, str) or not description.strip():
        return ["Field 'description' must be a non-empty string"]
    if len(description) > MAX_DESCRIPTION_CHARS:
        return [f"Description exceeds {MAX_DESCRIPTION_CHARS} character limit ({len(description)} chars)"]
    return []


def _string_problems(key: str, value: Any, label: str, limit: int) -> list[str]:
    if not isinstance(value, str):
        return [f"Field '{key}' must be a string"]
    if len(value) > limit:
        return [f"{label} {limit} character limit ({len(value)} chars)"]
    return []


def _metadata_problems(metadata: Any) -> list[str]:
    if not isinstance(metadata, dict):
        return ["Field 'metadata' must be a dictionary"]
    problems = []
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY_CHARS:
            problems.append(f"Metadata key '{key}' exceeds {MAX_METADATA_KEY_CHARS} character limit")
        if not isinstance(value, str):
            problems.append(f"Metadata value for '{key}' must be a string")
        elif len(value) > MAX_METADATA_VALUE_CHARS:
            problems.append(f"Metadata value for '{key}' exceeds {MAX_METADATA_VALUE_CHARS} character limit")
    return problems


def read_skill_md(path: Path) -> str:
    """The text of a SKILL.md, or SkillFileError with skills-ref's wording."""
    folder = path.parent.name
    try:
        raw = read_bytes(path, MAX_SKILL_MD_BYTES + 1)
    except OSError as exc:
        raise SkillFileError(f"Failed to read SKILL.md in {folder}: {exc.strerror}") from None
    except Unreadable as exc:
        raise SkillFileError(f"Failed to read SKILL.md in {folder}: it {exc}") from None
    if len(raw) > MAX_SKILL_MD_BYTES:
        raise SkillFileError(f"SKILL.md in {folder} exceeds 1MB size limit")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFileError(f"SKILL.md in {folder} is not valid UTF-8") from None


def load_skill(directory: Path, real_directory: Path, scope: str) -> tuple[Skill | None, list[Diagnostic]]:
    """Load leniently: (the skill or None when it cannot be used, its strict validation diagnostics)."""
    path = directory / "SKILL.md"
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(real_directory):  # the rule skill_read applies to every file of a skill
        why = (
            f"skill not loaded: SKILL.md links to {str(real)!r}, outside the skill's folder "
            f"{str(real_directory)!r}, and a skill is read only inside its folder; copy the file into the folder, "
            "or link the whole folder (a folder link is followed when it leads inside the project or the home folder)"
        )
        return None, [Diagnostic(str(path), "", why)]
    try:
        content = read_skill_md(path)
    except SkillFileError as exc:
        return None, [Diagnostic(str(path), "", str(exc)), *_skipped(path)]
    strict = strict_diagnostics(content, directory)
    try:
        parsed = parse_lenient(content)
    except SkillFileError:
        return None, strict + _skipped(path)
    data = parsed.data
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        return None, strict + _skipped(path, "it has no description, which routing and the catalog need")
    name = data.get("name") if isinstance(data.get("name"), str) and data.get("name", "").strip() else None
    found = validate_frontmatter(data, directory) if parsed.notes else strict  # not the YAML error fixed above
    warnings = parsed.notes + [f"{d.path or 'frontmatter'}: {d.message}" for d in found]
    if name is None:
        warnings.append(f"no name in frontmatter; using the folder name {directory.name!r}")
    skill = Skill(
        name=(name or directory.name).strip(),
        description=" ".join(description.split()),
        directory=directory,
        real_directory=real_directory,
        scope=scope,
        frontmatter=data,
        body=parsed.body,
        warnings=tuple(warnings),
    )
    return skill, strict


def strict_diagnostics(content: str, directory: Path | None) -> list[Diagnostic]:
    """What skills-ref would report for this SKILL.md text."""
    try:
        return validate_frontmatter(parse_yaml(split_frontmatter(content)[0]), directory)
    except SkillFileError as exc:
        return [Diagnostic(str(directory / "SKILL.md") if directory else "SKILL.md", "", str(exc))]


def _skipped(path: Path, why: str = "") -> list[Diagnostic]:
    reason = f": {why}" if why else ""
    return [Diagnostic(str(path), "", f"skill not loaded{reason}; fix SKILL.md so it parses and has a description")]
