"""workflows.json: before tool X may run, tools A, B, C must have run in this session (DESIGN §2, §5, §6).

Read on every gate check, by the server and by the hook command, so this module is stdlib only. It reads the
file into `Workflow`s, strictly enough that a workflow it accepts is one `abilities-mcp validate` accepts (the
pydantic models in spec.py are the schema and give the editor-facing messages; a test holds the two
to the same verdicts). Also here: the built-in templates and the tool-routing cache that gives tools a category.
"""

from __future__ import annotations

import json
import re

from ..errors import Diagnostic, did_you_mean
from ..files import Unreadable, read_bytes
from ..records import Record
from .rules import ShellRule, is_rule, plain_rule

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

MODES = ("enforce", "warn", "suggest")
WORKFLOW_KEYS = {"enabled", "name", "description", "triggers", "prerequisites", "mode", "created_at", "approval"}
APPROVAL_KEYS = {"expires", "prompt", "four_eyes"}
# How long a person's yes to one call stays usable, and how long a request for one waits (approval.expires).
DEFAULT_APPROVAL_SECONDS = 600.0
MAX_APPROVAL_SECONDS = 86_400.0
# What an approval's prompt may name of the call: {{tool}}, {{command}} (a shell call's command line),
# {{arguments}} (the call's arguments as JSON) and {{args.NAME}} (one argument).
PROMPT_FIELD = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
PROMPT_FIELDS = ("tool", "command", "arguments")
TRIGGER_KEYS = {"category", "tools", "keywords"}
PREREQUISITE_KEYS = {"step", "tool", "description", "required", "params", "arguments"}
# Top-level keys that are not workflows: editors point "$schema" at `abilities-mcp schema workflows`.
META_KEYS = {"$schema"}
# workflows.json bigger than this is refused: it is read on every tool call.
MAX_FILE_BYTES = 1_000_000
# The tool-routing cache, relative to the project (text, not a Path: the hook imports no pathlib).
TOOL_CACHE = ".opencode/agent-skill-tools.json"


# Records here are records.Record subclasses and plain classes: the hook reads this module on every tool call. Not
# dataclasses (importing them pulls in inspect, a third of a bare Python start), nor typing.NamedTuple, which
# compiles every field's annotation into a ForwardRef (about 0.1 ms a field, 10 ms over the hook's records), nor
# collections.namedtuple, which compiles a __new__ for each class (0.1 ms a class; records.py).
# The annotations in each body are for readers; the fields and their defaults are the `fields=` and `defaults=`.
class Prerequisite(Record, fields="step tool description required params arguments", defaults=({},)):
    """One tool that must have run before the workflow's trigger tools may."""

    __slots__ = ()

    step: int
    tool: str
    description: str
    required: bool
    params: dict[str, Any]
    # The gateway's arguments when it runs this step itself: "$args.x" is the gated call's argument x.
    arguments: dict[str, Any]  # = {}; a shared default: never mutated


class Approval(Record, fields="expires prompt four_eyes", defaults=(False,)):
    """A person's yes that each call the workflow triggers needs (`approval` in workflows.json)."""

    __slots__ = ()

    expires: float  # seconds a yes stays usable, and a request waits for one
    prompt: str  # what the person is asked; "" for the default wording
    four_eyes: bool  # = False; a yes only from a signed-in approver other than the caller (a team server's page)


class Workflow(
    Record,
    fields="name description mode enabled category tools keywords prerequisites source approval commands",
    defaults=(None, ()),
):
    """One entry of workflows.json, read and checked; prerequisites in step order (none for a workflow whose gate is
    a person's approval alone)."""

    __slots__ = ()

    name: str
    description: str
    mode: str
    enabled: bool
    category: str | None
    tools: tuple[str, ...]
    keywords: tuple[str, ...]
    prerequisites: tuple[Prerequisite, ...]
    source: str  # the file it came from
    approval: Approval | None  # = None; each call it triggers needs a person's yes
    commands: tuple[ShellRule, ...]  # = (); the shell rules among `tools` (`Bash(git push --force:*)`), parsed

    def prerequisite(self, step: int) -> Prerequisite:
        return next(p for p in self.prerequisites if p.step == step)


class WorkflowSet:
    """Every usable workflow, the problems that kept others out, and the tool categories of the routing cache."""

    def __init__(
        self,
        workflows: dict[str, Workflow] | None = None,
        problems: list[Diagnostic] | None = None,
        categories: dict[str, frozenset[str]] | None = None,
    ):
        self.workflows = workflows or {}
        self.problems = problems or []
        self.categories = categories or {}  # tool id -> category names, lowercase
        self.pending: list[str] = []  # set when these are the trusted workflows an edit waits to replace

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkflowSet):
            return NotImplemented
        return (self.workflows, self.problems, self.categories) == (other.workflows, other.problems, other.categories)

    def __repr__(self) -> str:
        return f"WorkflowSet({list(self.workflows)}, problems={len(self.problems)})"

    def enabled(self) -> list[Workflow]:
        return [w for w in self.workflows.values() if w.enabled]

    def warnings(self) -> list[str]:
        """What a gate answer must mention: an edit waiting for a person's trust, and a broken workflow (it
        enforces nothing until it is fixed)."""
        return self.pending + [
            f"{p} ({'applied' if self._applies(p) else 'not applied'}; see `abilities-mcp validate`)"
            for p in self.problems
        ]

    def _applies(self, problem: Diagnostic) -> bool:
        path = problem.path.removeprefix("workflows.")
        return any(path == name or path.startswith((f"{name}.", f"{name}[")) for name in self.workflows)


class Source(Record, fields="path raw problems"):
    """One file's bytes as read once: what is parsed is what is compared with the version a person trusted."""

    __slots__ = ()

    path: str | Path
    raw: bytes | None  # None: there is no such file (or no trusted version of it)
    problems: list[Diagnostic]  # why it could not be read


def read_source(path: str | Path) -> Source:
    """A file's bytes, bounded; a missing file has none, an unreadable one a diagnostic (never an exception)."""
    try:
        raw = read_bytes(path, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return Source(path, None, [])
    except Unreadable as exc:
        return Source(path, None, [Diagnostic(str(path), "", f"the file {exc}")])
    if len(raw) > MAX_FILE_BYTES:
        return Source(path, None, [Diagnostic(str(path), "", f"the file is larger than {MAX_FILE_BYTES} bytes")])
    return Source(path, raw, [])


def read_workflows(workflows_file: str | Path | None, tool_cache: str | Path | None = None) -> WorkflowSet:
    """workflows.json, then the `workflows` key of the routing cache (workflows.json wins a name in both)."""
    return parse_workflows(
        read_source(workflows_file) if workflows_file is not None else None,
        read_source(tool_cache) if tool_cache is not None else None,
    )


def parse_workflows(workflows: Source | None, tool_cache: Source | None) -> WorkflowSet:
    """The workflows of these two files' bytes (either may be absent)."""
    found = WorkflowSet()
    if workflows is not None:
        data, problems = _json_of(workflows)
        found.problems += problems
        _add_entries(found, data, workflows.path)
    if tool_cache is not None:
        cache, problems = _json_of(tool_cache)
        found.problems += problems
        if cache is not None and not isinstance(cache, dict):
            found.problems.append(
                Diagnostic(str(tool_cache.path), "", "must be a JSON object (the tool-routing cache)")
            )
        if isinstance(cache, dict):
            found.categories = tool_categories(cache)
            _add_entries(found, cache.get("workflows"), tool_cache.path, key="workflows.")
    found.problems += cycle_problems(found.enabled())
    return found


def read_json(path: str | Path) -> tuple[Any, list[Diagnostic]]:
    """A JSON file's value; a missing file is None, an unreadable one a diagnostic (never an exception)."""
    return _json_of(read_source(path))


def _json_of(source: Source) -> tuple[Any, list[Diagnostic]]:
    if source.raw is None:
        return None, source.problems
    try:
        text = source.raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [
            Diagnostic(str(source.path), "", f"the file is not UTF-8 text (byte {exc.start}); save it as UTF-8")
        ]
    return parse_json(text, source.path)


def parse_json(text: str, path: str | Path) -> tuple[Any, list[Diagnostic]]:
    """JSON text's value, with a key written twice in one object (JSON silently keeps the last) as a problem."""
    twice: list[str] = []
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _pairs(pairs, twice))
    except json.JSONDecodeError as exc:
        return None, [Diagnostic(str(path), "", f"not valid JSON: {exc}; fix the syntax there")]
    except RecursionError:
        return None, [Diagnostic(str(path), "", "the JSON nests too deeply to read; flatten it")]
    if data is None:  # `null`: not the same as no file
        return None, [Diagnostic(str(path), "", "holds null; write a JSON object keyed by name, or delete the file")]
    why = "appears twice in one object; JSON keeps only the last, so merge or rename one"
    return data, [Diagnostic(str(path), key, why) for key in dict.fromkeys(twice)]


def _pairs(pairs: list[tuple[str, Any]], twice: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            twice.append(key)
        out[key] = value
    return out


def _add_entries(found: WorkflowSet, data: Any, path: str | Path, key: str = "") -> None:
    if data is None:
        return
    if not isinstance(data, dict):
        found.problems.append(Diagnostic(str(path), key.rstrip("."), "must be a JSON object keyed by workflow name"))
        return
    found.problems += meta_problems(data, path) if not key else []
    for name, entry in data.items():
        if name in META_KEYS and not key:
            continue
        if name in found.workflows:
            found.problems.append(
                Diagnostic(str(path), key + name, f"{name!r} is also in workflows.json, which wins; remove one")
            )
            continue
        workflow, problems = parse_workflow(name, entry, str(path), key)
        found.problems += problems
        if workflow is not None:
            found.workflows[name] = workflow


def meta_problems(data: dict[str, Any], path: str | Path) -> list[Diagnostic]:
    """The top-level keys that are not workflows ("$schema") must still be what they say."""
    return [
        Diagnostic(str(path), key, "must be a string (the path or URL of the JSON Schema)")
        for key in META_KEYS
        if key in data and not isinstance(data[key], str)
    ]


def parse_workflow(name: str, entry: Any, source: str, key: str = "") -> tuple[Workflow | None, list[Diagnostic]]:
    """One entry as a Workflow, or None with the reasons (the hot path's check; validate says it in more words)."""
    where = key + name
    problems = [Diagnostic(source, f"{where}{p}", m) for p, m in _structure_problems(name, entry)]
    if problems:
        return None, problems
    triggers = entry.get("triggers") or {}
    prerequisites = tuple(
        sorted(
            (
                Prerequisite(
                    p["step"],
                    p["tool"],
                    p["description"],
                    p.get("required", True),
                    p.get("params") or {},
                    p.get("arguments") or {},
                )
                for p in entry.get("prerequisites") or ()
            ),
            key=lambda p: p.step,
        )
    )
    workflow = Workflow(
        name=name,
        description=entry["description"],
        mode=entry.get("mode", "enforce"),
        enabled=entry.get("enabled", True),
        category=triggers.get("category"),
        tools=tuple(triggers.get("tools", ())),
        keywords=tuple(triggers.get("keywords", ())),
        prerequisites=prerequisites,
        source=source,
        approval=_approval(entry.get("approval")),
        commands=shell_rules(triggers.get("tools", ())),
    )
    problems = [Diagnostic(source, f"{where}{p}", m) for p, m in meaning_problems(workflow)]
    return (None if problems else workflow), problems


def _structure_problems(name: str, entry: Any) -> Iterator[tuple[str, str]]:
    """Types and keys, briefly (ordered as validate would report them; validate's own words are richer)."""
    if not name.strip():
        yield "", "a workflow name must not be empty"
    if not isinstance(entry, dict):
        yield "", "must be an object with description, triggers and prerequisites"
        return
    approval = "approval" in entry
    yield from _keys("", entry, WORKFLOW_KEYS, ("description", "triggers") + (() if approval else ("prerequisites",)))
    for key, kind in (("enabled", bool), ("name", str), ("created_at", str)):
        if key in entry and not isinstance(entry[key], kind):
            yield f".{key}", f"must be a {kind.__name__}"
    if "description" in entry and not _text(entry["description"]):
        yield ".description", "must be a non-empty string"
    if isinstance(entry.get("name"), str) and entry["name"] != name:
        yield ".name", f"{entry['name']!r} differs from the key {name!r}; the key names the workflow, so drop name"
    if entry.get("mode", "enforce") not in MODES:
        yield ".mode", f"must be one of {', '.join(MODES)}"
    yield from _trigger_problems(entry.get("triggers", {}))
    if approval:
        yield from _approval_problems(entry["approval"])
    prerequisites = entry.get("prerequisites", [])
    if not isinstance(prerequisites, list) or not (prerequisites or approval):
        why = (
            "must be a list of steps"
            if approval
            else "must be a non-empty list of steps (or give the workflow an approval)"
        )
        yield ".prerequisites", why
        return
    for i, item in enumerate(prerequisites):
        yield from _prerequisite_problems(f".prerequisites[{i}]", item)


def _trigger_problems(triggers: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(triggers, dict):
        yield ".triggers", "must be an object with category, tools and/or keywords"
        return
    yield from _keys(".triggers", triggers, TRIGGER_KEYS, ())
    if "category" in triggers and not _text(triggers["category"]):
        yield ".triggers.category", "must be a non-empty string"
    for key in ("tools", "keywords"):
        value = triggers.get(key, [])
        if not isinstance(value, list) or not all(_text(v) for v in value):
            yield f".triggers.{key}", "must be a list of non-empty strings"
        elif key == "tools":
            for i, tool in enumerate(value):
                try:
                    shell_rules([tool])
                except ValueError as exc:
                    yield f".triggers.tools[{i}]", str(exc)


def shell_rules(tools: Any) -> tuple[ShellRule, ...]:
    """The shell rules (`Bash(git push --force:*)`) among trigger tools; ValueError for a malformed one. A rule in
    plain words is read without the command-line parser (rules.py), which loads only for a rule that needs it: the
    hook reads this file on every tool call, and compiling the parser cost it more than the rest of the file."""
    texts = [t for t in tools if is_rule(t)]
    if not texts:
        return ()
    rules = [plain_rule(t) for t in texts]
    if None in rules:
        from .commands import rule_of

        rules = [rule or rule_of(text) for rule, text in zip(rules, texts, strict=True)]
    return tuple(rules)


def _approval_problems(approval: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(approval, dict):
        yield ".approval", 'must be an object, e.g. {"expires": "10m", "prompt": "Force-push {{command}}?"}'
        return
    yield from _keys(".approval", approval, APPROVAL_KEYS, ())
    if "expires" in approval:
        try:
            seconds = approval_seconds(approval["expires"])
        except ValueError as exc:
            yield ".approval.expires", str(exc)
        else:
            if seconds > MAX_APPROVAL_SECONDS:
                yield ".approval.expires", "must be at most 24h: a yes is for one call now, not for the days ahead"
    if not isinstance(approval.get("four_eyes", False), bool):
        yield ".approval.four_eyes", "must be true or false"
    prompt = approval.get("prompt", "")
    if not isinstance(prompt, str):
        yield ".approval.prompt", "must be a string"
        return
    for field in PROMPT_FIELD.findall(prompt):
        if field not in PROMPT_FIELDS and not (field.startswith("args.") and field[5:]):
            known = ", ".join(f"{{{{{f}}}}}" for f in PROMPT_FIELDS)
            yield ".approval.prompt", f"{{{{{field}}}}} is not a field of the call; use {known} or {{{{args.NAME}}}}"


def approval_seconds(value: Any) -> float:
    """approval.expires in seconds (a duration as abilities write them); ValueError says the accepted forms."""
    from ..durations import parse_duration

    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError('must be a duration such as "10m", "1h" or a number of seconds')
    return parse_duration(value)


def _approval(value: Any) -> Approval | None:
    if not isinstance(value, dict):
        return None
    expires = approval_seconds(value["expires"]) if "expires" in value else DEFAULT_APPROVAL_SECONDS
    return Approval(expires, value.get("prompt") or "", value.get("four_eyes") is True)


def _prerequisite_problems(where: str, item: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(item, dict):
        yield where, "must be an object with step, tool and description"
        return
    yield from _keys(where, item, PREREQUISITE_KEYS, ("step", "tool", "description"))
    step = item.get("step", 1)
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        yield f"{where}.step", "must be an integer >= 1"
    for key in ("tool", "description"):
        if key in item and not _text(item[key]):
            yield f"{where}.{key}", "must be a non-empty string"
    if not isinstance(item.get("required", True), bool):
        yield f"{where}.required", "must be true or false"
    if not isinstance(item.get("params", {}), dict):
        yield f"{where}.params", "must be an object of default arguments"
    if not isinstance(item.get("arguments", {}), dict):
        yield f"{where}.arguments", 'must be an object of arguments, e.g. {"table": "$args.table"}'


def _keys(where: str, data: dict, allowed: set[str], required: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    for key in data:
        if key not in allowed:
            close = did_you_mean(str(key), allowed)
            yield f"{where}.{key}", f"unknown key; did you mean {close!r}?" if close else "unknown key; remove it"
    for key in required:
        if key not in data:
            yield f"{where}.{key}", "missing required key"


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def meaning_problems(workflow: Workflow) -> Iterator[tuple[str, str]]:
    """What the schema cannot say: a workflow that can never apply, or never be satisfied."""
    if not (workflow.category or workflow.tools or workflow.keywords):
        yield ".triggers", "has no category, tools or keywords, so the workflow never applies; add one"
    steps = [p.step for p in workflow.prerequisites]
    for step in sorted({s for s in steps if steps.count(s) > 1}):
        yield ".prerequisites", f"step {step} is used twice; give each prerequisite its own step number"
    for tool in sorted(set(workflow.tools) & {p.tool for p in workflow.prerequisites}):
        yield ".triggers.tools", f"{tool!r} is both a trigger and a prerequisite, so it could never run; drop one"


def cycle_problems(workflows: list[Workflow]) -> list[Diagnostic]:
    """Enforced workflows that wait on each other (A's prerequisite is gated by B, whose prerequisite A gates)."""
    gates: dict[str, set[str]] = {}
    for w in workflows:
        if w.mode == "enforce":
            for tool in w.tools:
                gates.setdefault(tool, set()).update(p.tool for p in w.prerequisites if p.required)
    for start in sorted(gates):
        path = _cycle_from(start, gates, [start])
        if path:
            owner = next(w for w in workflows if w.mode == "enforce" and path[0] in w.tools)
            chain = " -> ".join(path)
            why = f"enforced prerequisites wait on each other ({chain}); break the loop"
            return [Diagnostic(owner.source, owner.name, why)]
    return []


def _cycle_from(tool: str, gates: dict[str, set[str]], path: list[str]) -> list[str] | None:
    for needed in sorted(gates.get(tool, ())):
        if needed == path[0]:
            return [*path, needed]
        if needed not in path:
            found = _cycle_from(needed, gates, [*path, needed])
            if found:
                return found
    return None


def tool_categories(cache: dict[str, Any]) -> dict[str, frozenset[str]]:
    """tool id -> its category names, from either layout of `.opencode/agent-skill-tools.json`.

    v2.0.0 (tools-template.json): categories.<id> = {name, tools: [tool id]} and tools.<id> = {category}.
    tool-execution.md: categories.<name> = {tools: [{id, prefix?}]}. Both ship together, so both are read.
    """
    found: dict[str, set[str]] = {}

    def add(tool_id: Any, *names: Any) -> None:
        if isinstance(tool_id, str) and tool_id:
            found.setdefault(tool_id, set()).update(str(n).lower() for n in names if isinstance(n, str) and n)

    categories = cache.get("categories")
    for key, category in categories.items() if isinstance(categories, dict) else ():
        if not isinstance(category, dict):
            continue
        tools = category.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict):
                tool_id, prefix = _text_or_none(tool.get("id")), _text_or_none(tool.get("prefix"))
                for full in (tool_id, prefix + tool_id if prefix and tool_id else None):
                    add(full, key, category.get("name"))
            else:
                add(tool, key, category.get("name"))
    tools = cache.get("tools")
    for tool_id, info in tools.items() if isinstance(tools, dict) else ():
        category = _text_or_none(info.get("category")) if isinstance(info, dict) else None
        if category is not None:
            named = categories.get(category) if isinstance(categories, dict) else None
            add(tool_id, category, named.get("name") if isinstance(named, dict) else None)
    return {tool: frozenset(names) for tool, names in found.items()}


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
