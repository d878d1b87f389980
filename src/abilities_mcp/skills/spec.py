"""Agent Skills (agentskills.io): SKILL.md parsed leniently for use, validated strictly for authors.

Loading follows the client guide: a name/folder mismatch or an over-long field loads with a warning; a missing
description or frontmatter that does not parse skips the skill with a diagnostic; a value holding `: ` that
breaks YAML is quoted and parsed again. Validation gives the verdict and the messages of the `skills-ref`
reference validator, so authors see the same message here and in the ecosystem's own checker: its YAML is read
the way skills-ref's strictyaml reads it (no flow `[a, b]`, anchors, tags or duplicate keys; every scalar text),
with strictyaml's words. What the spec advises beyond skills-ref's checks (a short license, text metadata values)
is a warning, never a failed verdict (docs/skills.md lists each deliberate difference).
"""

from __future__ import annotations

import functools
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
# Advice only (warnings): skills-ref checks none of these, and real skills it passes go past them.
MAX_LICENSE_CHARS = 100
MAX_ALLOWED_TOOLS_CHARS = 1024
MAX_METADATA_VALUE_CHARS = 1024
# Refused beyond this (skills-ref 0.1.1 reads any size: a deliberate difference): more would only fill the context.
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


def parse_strict(text: str) -> dict[str, Any]:
    """Frontmatter read as skills-ref reads it (strictyaml), for validation: the same refusals, in its words."""
    import yaml

    fast = _plain_mapping(text)
    if fast is not None:
        return fast
    loader = _strict_loader()(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        raise SkillFileError(f"Invalid YAML in frontmatter: {_strictyaml_words(exc)}") from None
    except yaml.YAMLError as exc:
        raise SkillFileError(f"Invalid YAML in frontmatter: {exc}") from None
    except RecursionError:
        raise SkillFileError("Invalid YAML in frontmatter: it nests too deep to read; flatten it") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):  # strictyaml reads an empty or scalar document as text
        raise SkillFileError("SKILL.md frontmatter must be a YAML mapping")
    return data


def _plain_mapping(text: str) -> dict[str, Any] | None:
    """The frontmatter read by the C parser when it holds nothing strictyaml refuses (most files do not), else None:
    the pure-Python reader then finds the refusal and words it (it is ten times slower, so only then)."""
    import yaml

    loader = getattr(yaml, "CBaseLoader", None)
    if loader is None:
        return None
    root: Any = None
    stack: list[list[Any]] = []  # [container, key awaiting its value or None, column of its first mapping value]
    documents = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
            if (
                isinstance(event, yaml.AliasEvent)
                or getattr(event, "anchor", None)
                or getattr(event, "tag", None)
                or getattr(event, "flow_style", False)
                or documents > 1
            ):
                return None
            if isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
                continue
            if isinstance(event, yaml.ScalarEvent):
                value: Any = event.value
            elif isinstance(event, yaml.MappingStartEvent):
                value = {}
            elif isinstance(event, yaml.SequenceStartEvent):
                value = []
            else:
                continue
            if not stack:
                root = value
            elif isinstance(stack[-1][0], list):
                stack[-1][0].append(value)
            elif stack[-1][1] is None:  # a key
                if not isinstance(value, str) or value in stack[-1][0]:
                    return None  # a duplicate key, or a key that is not text
                stack[-1][1] = value
            else:
                frame = stack[-1]
                frame[0][frame[1]], frame[1] = value, None
                if isinstance(value, dict):  # strictyaml: mapping values of one mapping share one indentation
                    frame[2] = event.start_mark.column if frame[2] is None else frame[2]
                    if event.start_mark.column != frame[2]:
                        return None
            if isinstance(value, (dict, list)):
                stack.append([value, None, None])
    except yaml.YAMLError:
        return None
    return root if isinstance(root, dict) else None


def _strictyaml_words(exc: Any) -> str:
    """A YAML error as strictyaml (ruamel.yaml) prints it: PyYAML's text with `(line: N)` after each caret."""

    def mark(m: Any) -> str:
        return f"{m} (line: {m.line + 1})" if m.get_snippet() else str(m)

    lines = [exc.context] if exc.context is not None else []
    c, p = exc.context_mark, exc.problem_mark
    if c is not None and (exc.problem is None or p is None or (c.name, c.line, c.column) != (p.name, p.line, p.column)):
        lines.append(mark(c))
    lines += [exc.problem] if exc.problem is not None else []
    lines += [mark(p)] if p is not None else []
    lines += [exc.note] if exc.note is not None else []
    return "\n".join(lines)


@functools.cache
def _strict_loader() -> type:
    """PyYAML's pure-Python string-only loader with strictyaml's refusals (its scanner and constructor rules)."""
    import yaml
    from yaml.nodes import MappingNode

    refused = (
        (yaml.TagToken, "Found disallowed tag tokens (do not specify types in markup)", True),
        (yaml.FlowMappingStartToken, _FLOW, False),
        (yaml.FlowSequenceStartToken, _FLOW, False),
        (yaml.AnchorToken, "Found confusing disallowed anchor token " + _LITERALLY, False),
    )

    class StrictLoader(yaml.BaseLoader):  # the pure-Python classes: their marks carry the snippets strictyaml shows
        def check_token(self, *choices: Any) -> bool:
            while self.need_more_tokens():
                self.fetch_more_tokens()
            if not self.tokens:
                return False
            if not choices:
                return True
            token = self.tokens[0]
            if not any(isinstance(token, choice) for choice in choices):
                return False
            for kind, problem, reversed_marks in refused:
                if isinstance(token, kind):
                    first, second = (
                        (token.end_mark, token.start_mark) if reversed_marks else (token.start_mark, token.end_mark)
                    )
                    raise yaml.MarkedYAMLError("While scanning", first, problem, second)
            return True

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            mapping: dict = {}
            for key_node, value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                key = tuple(key) if isinstance(key, list) else key
                if isinstance(key, dict):
                    raise yaml.MarkedYAMLError(
                        "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
                    )
                value = self.construct_object(value_node, deep=True)
                if key in mapping:
                    raise yaml.MarkedYAMLError(
                        "While parsing", key_node.start_mark, f"Duplicate key '{key}' found", key_node.end_mark
                    )
                mapping[key] = value
            nested = [v for _, v in node.value if isinstance(v, MappingNode)]
            for value_node in nested[1:]:
                if value_node.start_mark.column != nested[0].start_mark.column:
                    raise yaml.MarkedYAMLError(
                        "While parsing",
                        value_node.start_mark,
                        "Found mapping with indentation inconsistent with previous mapping",
                        value_node.end_mark,
                    )
            return mapping

    return StrictLoader


_BAD_YAML = "Invalid YAML in frontmatter: "
_LITERALLY = "(surround with ' and ' to make text appear literally)"
_FLOW = "Found ugly disallowed JSONesque flow mapping " + _LITERALLY


# A YAML error's position in the validator's text: `  in "<unicode string>", line 4, column 11:`, then the line.
_MARK = re.compile(r'^  in "[^"]*", line (\d+), column \d+:$')
# What each refusal means and its fix, by the words of the validator's problem (skills-ref's strictyaml or PyYAML's).
# `{key}` and `{value}` are the offending line's, when it is a `key: value` line (`{items}`: a flow list's items).
_FIELD = re.compile(r"\{(key|value|items|problem)\}")
_YAML_FIXES = (
    (
        "JSONesque flow",
        "[",
        "flow lists `[…]` are refused (strict YAML, as skills-ref reads it)",
        "write `{key}: {items}` on one line without brackets (allowed-tools is one space-separated string), or "
        "one `- item` per line below `{key}:`",
    ),
    (
        "JSONesque flow",
        "{",
        "flow mappings `{…}` are refused (strict YAML, as skills-ref reads it)",
        "write one `name: value` per line, indented under `{key}:`",
    ),
    (
        "mapping values are not allowed",
        "",
        "a value containing ': ' must be quoted in YAML",
        'write `{key}: "{value}"`',
    ),
    ("Duplicate key", "", "{problem}", "keep one of them"),
    ("anchor token", "", "anchors (`&name`) are refused (strict YAML, as skills-ref reads it)", "write the value out"),
    ("alias", "", "aliases (`*name`) are refused", "write the value out"),
    ("tag tokens", "", "tags (`!!str`) are refused (strict YAML): every value is text", "remove the tag"),
    (
        "indentation inconsistent",
        "",
        "nested mappings are indented differently",
        "indent every nested mapping by the same number of spaces",
    ),
    ("'\\t'", "", "a tab indents this line", "indent with spaces"),
)


def for_authors(message: str) -> str:
    """A frontmatter YAML error as one line an author acts on: the line, what is wrong, the fix. The validator's
    text (skills-ref's words, kept by `strict_diagnostics` for parity) spans eight lines with the snippet twice;
    any other message is returned as it is."""
    if not message.startswith(_BAD_YAML) or "\n" not in message:
        return message
    lines = message[len(_BAD_YAML) :].splitlines()
    words = [line for line in lines if line and not line.startswith(" ")]
    marks = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _MARK.match(line))]
    source = lines[marks[0][0] + 1].strip() if marks and marks[0][0] + 1 < len(lines) else ""
    where = f" at line {marks[0][1]} (`{source}`)" if marks else ""
    problem = next((w for w in reversed(words) if any(f[0] in w for f in _YAML_FIXES)), words[-1] if words else "")
    key, _, value = source.partition(": ")
    what, fix = next(
        ((w, f) for needle, bracket, w, f in _YAML_FIXES if needle in problem and bracket in value[:1]),
        ("{problem}", "check the quoting and indentation on that line"),
    )
    items = " ".join(i.strip() for i in value.strip().removeprefix("[").removesuffix("]").split(","))
    fields = {"key": key, "value": value.replace('"', '\\"'), "items": items, "problem": problem}
    fill = functools.partial(_FIELD.sub, lambda m: fields[m.group(1)])  # not str.format: `{…}` is text here
    return f"{_BAD_YAML.rstrip(': ')}{where}: {fill(what)}; {fill(fix)}"


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
    """Every violation skills-ref reports, in its words and its order; the field is the diagnostic's path."""
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
    if "name" not in data:
        out.append(("name", "Missing required field in frontmatter: name"))
    else:
        out += [("name", m) for m in _name_problems(data["name"], directory)]
    if "description" not in data:
        out.append(("description", "Missing required field in frontmatter: description"))
    else:
        out += [("description", m) for m in _description_problems(data["description"])]
    if "compatibility" in data:
        out += [("compatibility", m) for m in _compatibility_problems(data["compatibility"])]
    file = str(directory / "SKILL.md") if directory else "SKILL.md"
    return [Diagnostic(file, path, message) for path, message in out]


def advice(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for what the spec recommends but skills-ref does not check: warnings, never errors."""
    out: list[tuple[str, str]] = []
    for key, what, limit in (
        ("license", "a license name or the name of a bundled license file", MAX_LICENSE_CHARS),
        ("allowed-tools", "a space-separated list such as `Read Grep Bash(git:*)`", MAX_ALLOWED_TOOLS_CHARS),
    ):
        value = data.get(key)
        if key in data and not isinstance(value, str):
            out.append((key, f"should be {what} as one string; write it on one line"))
        elif isinstance(value, str) and len(value) > limit:
            out.append((key, f"is {len(value)} characters; the spec asks for {what}, under {limit}; shorten it"))
    metadata = data.get("metadata")
    if "metadata" in data and not isinstance(metadata, dict):
        out.append(("metadata", "should be a mapping of keys to text values (`author: example-org`)"))
    for key, value in metadata.items() if isinstance(metadata, dict) else ():
        if not isinstance(value, str):
            out.append((f"metadata.{key}", "should be text (the spec's metadata is a string-to-string map); quote it"))
        elif len(value) > MAX_METADATA_VALUE_CHARS:
            out.append((f"metadata.{key}", f"is over {MAX_METADATA_VALUE_CHARS} characters; shorten it"))
    return out


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


def _compatibility_problems(value: Any) -> list[str]:
    if not isinstance(value, str):
        return ["Field 'compatibility' must be a string"]
    if len(value) > MAX_COMPATIBILITY_CHARS:
        return [f"Compatibility exceeds {MAX_COMPATIBILITY_CHARS} character limit ({len(value)} chars)"]
    return []


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
    found = strict
    if any(d.message.startswith(_BAD_YAML) for d in strict):  # strictly unreadable, leniently read: check the rest
        found = strict + validate_frontmatter(data, directory)
    warnings = parsed.notes + [f"{d.path or 'frontmatter'}: {for_authors(d.message)}" for d in found]
    warnings += [f"{key}: {message}" for key, message in advice(data)]
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
        return validate_frontmatter(parse_strict(split_frontmatter(content)[0]), directory)
    except SkillFileError as exc:
        return [Diagnostic(str(directory / "SKILL.md") if directory else "SKILL.md", "", str(exc))]


def _skipped(path: Path, why: str = "") -> list[Diagnostic]:
    reason = f": {why}" if why else ""
    return [Diagnostic(str(path), "", f"skill not loaded{reason}; fix SKILL.md so it parses and has a description")]
