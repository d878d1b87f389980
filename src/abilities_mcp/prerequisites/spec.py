"""The workflows.json format as pydantic models: the schema (`abilities-mcp schema workflows`) and the checker
behind `abilities-mcp validate` / `ability_validate`. The gate itself reads the file with workflows.py (no
pydantic on the hook's path); tests hold both to the same verdict on every file. Also the warnings validate
gives for a file that works but says less than it should (`check_warnings`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    RootModel,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from ..durations import format_duration
from ..errors import Diagnostic, did_you_mean
from ..explain import Format, explain, short
from ..state.project import GATEWAY_FILE
from .commands import is_rule, rule_of
from .names import MCP_PREFIX, SEPARATOR, wanted
from .workflows import (
    DEFAULT_APPROVAL_SECONDS,
    MAX_APPROVAL_SECONDS,
    META_KEYS,
    PROMPT_FIELD,
    PROMPT_FIELDS,
    approval_seconds,
    cycle_problems,
    meta_problems,
    parse_workflow,
    read_json,
)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty; write the text")
    return value


# Not blank: the validator says it in words, the pattern tells editors.
Text = Annotated[StrictStr, AfterValidator(_not_blank), Field(json_schema_extra={"pattern": r"\S"})]


def _shell_rule(value: str) -> str:
    rule_of(value)  # a plain tool name is None; a malformed `Bash(...)` rule raises, naming the fix
    return value


# A trigger tool: a tool name, or a shell rule in Claude Code's permission spelling.
TriggerTool = Annotated[Text, AfterValidator(_shell_rule)]


def _expires(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f'{short(value)} is not a duration; write one such as "10m", "1h30m" or a number of seconds')
    seconds = approval_seconds(value)  # ValueError: the forms a duration takes
    if seconds > MAX_APPROVAL_SECONDS:
        limit = format_duration(MAX_APPROVAL_SECONDS)
        raise ValueError(
            f"{value!r} is longer than {limit}: a yes is for one call now, not for the days ahead; "
            f'write {limit} or less, e.g. "10m"'
        )
    return value


# A duration as abilities write them ("10m", "1h30m", "30s") or a number of seconds. The pattern and bounds tell
# editors the shape; _expires says the rest (a zero, more than a day) in words.
DURATION_PATTERN = r"^\s*(\d+(\.\d+)?\s*(ms|s|m|h|d)\s*)+$|^\s*\d+(\.\d+)?\s*$"
Expires = Annotated[
    str | int | float,
    PlainValidator(_expires),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_APPROVAL_SECONDS},
            ]
        }
    ),
]


def _prompt_fields(prompt: str) -> str:
    wrong = [f for f in PROMPT_FIELD.findall(prompt) if f not in PROMPT_FIELDS and not _argument_field(f)]
    if wrong:
        known = ", ".join(_braced(f) for f in PROMPT_FIELDS)
        raise ValueError(
            "; ".join(_not_a_field(f) for f in dict.fromkeys(wrong)) + f"; use {known} or {{{{args.NAME}}}}"
        )
    return prompt


def _argument_field(field: str) -> bool:
    return field.startswith("args.") and bool(field.removeprefix("args."))


def _not_a_field(field: str) -> str:
    close = did_you_mean(field, PROMPT_FIELDS)
    return f"{_braced(field)} is not a field of the call" + (f" (did you mean {_braced(close)}?)" if close else "")


def _braced(field: str) -> str:
    return "{{" + field + "}}"


Prompt = Annotated[StrictStr, AfterValidator(_prompt_fields)]


class Triggers(BaseModel):
    """Conditions that activate this workflow (OR logic - any match triggers)."""

    model_config = ConfigDict(extra="forbid")

    category: Text = Field(  # type: ignore[assignment]  # absent is fine, null is not (as the hook reads it)
        None, description="Tool belongs to this category in the tool-routing cache (.opencode/agent-skill-tools.json)"
    )
    tools: list[TriggerTool] = Field(
        default_factory=list,
        description="Tool names: bare (execute_query: that tool on any server) or with its server "
        "(mcp__db__execute_query or db__execute_query: server db's only), matched whole; or shell commands in "
        "Claude Code's rule spelling, matched on the parsed command: Bash(git push --force:*) for every command "
        "that starts with those words, Bash(npm run deploy) for that command exactly",
    )
    keywords: list[Text] = Field(
        default_factory=list,
        description="Task text contains these words (whole words, case-insensitive). A keyword alone can warn, never "
        "deny: ordinary words such as 'update' are too weak to block a tool",
    )


class Prerequisite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: StrictInt = Field(ge=1, description="Execution order (1-based)")
    tool: Text = Field(
        description="Tool name to execute: bare (list_tables: on the gated call's server, or a client's own tool) "
        "or with its server (mcp__db__list_tables or db__list_tables)"
    )
    description: Text = Field(description="Why this prerequisite is needed")
    required: StrictBool = Field(True, description="false: this step can be skipped")
    params: dict[str, Any] = Field(default_factory=dict, description="Default parameters for this tool")
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Arguments the gateway passes when it runs this step itself, over params; a string "
        '"$args.NAME" (or "$args.a.b") is that argument of the gated call, e.g. {"table_name": "$args.table"}',
    )


class Approval(BaseModel):
    """A person says yes to each call the workflow triggers, before it runs: in the client's own form, at a
    terminal (`abilities-mcp approve CALL`) or on the run page. A yes is for that one call (same session, tool and
    arguments), used once."""

    model_config = ConfigDict(extra="forbid")

    expires: Expires = Field(
        format_duration(DEFAULT_APPROVAL_SECONDS),
        description="How long a person's yes stays usable, and how long the call waits for one: a duration "
        f'("30s", "10m", "1h30m") or a number of seconds; at most {format_duration(MAX_APPROVAL_SECONDS)}',
    )
    prompt: Prompt = Field(
        "",
        description="What the person is asked (empty: the default wording). It may name the call: {{tool}}, "
        "{{command}} (a shell call's command line), {{arguments}} (its arguments as JSON), {{args.NAME}} (one "
        'argument), e.g. "Force-push {{command}}?"',
    )
    four_eyes: bool = Field(
        False,
        description="A yes only from a person signed in on a team server's run page who is not the caller whose "
        "agent made the call (on one machine, with nobody signed in, such a call cannot be approved)",
    )


# The one thing every workflow must have: a gate (said where the models cannot see which part is missing).
NO_GATE = (
    "a workflow needs prerequisites or an approval: list the tools that must run first under "
    '"prerequisites", or add "approval": {"expires": "10m"} so a person approves each call'
)


class Workflow(BaseModel):
    """Before any trigger tool runs, the prerequisite tools must have run in this session, in step order; with an
    approval, a person says yes to each call as well (or instead)."""

    model_config = ConfigDict(
        extra="forbid",
        # Prerequisites may be left out only when there is an approval (the same rule as NO_GATE, for editors).
        json_schema_extra={
            "anyOf": [
                {"required": ["approval"]},
                {"required": ["prerequisites"], "properties": {"prerequisites": {"minItems": 1}}},
            ]
        },
    )

    enabled: StrictBool = Field(True, description="Whether this workflow is active")
    name: StrictStr = Field(None, description="Templates carry their name; the key is what counts")  # type: ignore
    description: Text = Field(description="Human-readable description of the workflow")
    triggers: Triggers
    prerequisites: list[Prerequisite] = Field(
        default_factory=list,
        description="Steps to execute before the main action; may be left out when the workflow has an approval",
    )
    approval: Approval = Field(  # type: ignore[assignment]  # absent is fine, null is not (as the hook reads it)
        None, description="A person's yes to each call this workflow triggers, before it runs"
    )
    mode: Literal["enforce", "warn", "suggest"] = Field(
        "enforce",
        description="enforce: deny until every required prerequisite ran; warn: ask, listing what is missing; "
        "suggest: mention them",
    )
    created_at: StrictStr = Field(None, description="When this workflow was created (ISO 8601)")  # type: ignore

    @model_validator(mode="after")
    def _has_a_gate(self) -> Workflow:
        if not self.prerequisites and self.approval is None:
            raise ValueError(NO_GATE)
        return self


class WorkflowsFile(RootModel[dict[str, Workflow]]):
    """workflows.json: workflows keyed by name."""


def _special(err: dict) -> str | None:
    if err["type"] == "model_type" and err["loc"] == ("approval",):
        return (
            f'must be an object such as {{"expires": "10m", "prompt": "Run {{{{command}}}}?"}} (got '
            f"{short(err['input'])}); leave approval out for a workflow no person approves"
        )
    return None


WORKFLOW_FORMAT = Format(Workflow, special=_special)


def json_schema() -> dict[str, Any]:
    """The JSON Schema editors use for workflows.json (a "$schema" key is allowed at the top)."""
    schema = WorkflowsFile.model_json_schema()
    schema["title"] = "abilities-mcp workflows.json"
    schema["properties"] = {"$schema": {"type": "string", "description": "This schema, for editors"}}
    schema["propertyNames"] = {"minLength": 1}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def check_file(path: Path) -> list[Diagnostic]:
    """Every problem in a workflows.json, each with the workflow, the field and the fix."""
    data, problems = read_json(path)
    if data is None:
        return problems
    if not isinstance(data, dict):
        return [Diagnostic(str(path), "", 'must be a JSON object keyed by workflow name, e.g. {"db-safe": {...}}')]
    entries = [(name, entry) for name, entry in data.items() if name not in META_KEYS]
    found = problems + meta_problems(data, path)
    found += [d for name, entry in entries for d in _check_entry(path, name, entry)]
    parsed = [parse_workflow(name, entry, str(path))[0] for name, entry in entries]
    return found + cycle_problems([w for w in parsed if w is not None and w.enabled])


def _check_entry(path: Path, name: str, entry: Any) -> list[Diagnostic]:
    if not name.strip():
        return [Diagnostic(str(path), repr(name), "a workflow name must not be empty; name it")]
    meaning = parse_workflow(name, entry, str(path))[1]  # the hot path's verdict: what the schema cannot say too
    try:
        Workflow.model_validate(entry)
    except ValidationError as exc:
        named = [d for d in meaning if d.path == f"{name}.name"]
        return [
            Diagnostic(str(path), f"{name}.{p}" if p else name, m) for p, m in explain(exc, WORKFLOW_FORMAT)
        ] + named
    return meaning  # what the schema cannot say: no triggers, a step twice ...


# A trigger in the spelling of a client's permission rule, `Tool(...)`: only `Bash(...)` is read as a rule.
LOOKS_LIKE_A_RULE = re.compile(r"\s*\w+\s*\(")


def check_warnings(path: Path) -> list[Diagnostic]:
    """What a workflows.json that works should still say otherwise: a trigger written like a rule that is read as a
    tool name (`Bash(git push:*` unclosed, `Read(./.env)`), so it matches no call; a trigger or prerequisite naming a
    server the way a client calls it (`mcp__db__read_query`) when gateway.json now puts that server behind this
    server's gateway, where its tools are called `db__read_query` and the gateway gates them."""
    data, problems = read_json(path)
    if problems or not isinstance(data, dict):
        return []
    named = _named_tools(data)
    found = [
        Diagnostic(str(path), where, _not_a_rule(tool))
        for where, tool in named
        if ".triggers." in where and LOOKS_LIKE_A_RULE.match(tool) and not is_rule(tool)
    ]
    servers, _ = read_json(path.parent / GATEWAY_FILE)
    upstreams = servers.get("mcpServers") if isinstance(servers, dict) else None
    return found + [
        Diagnostic(str(path), where, _behind_gateway(tool))
        for where, tool in named
        if isinstance(upstreams, dict) and tool.lower().startswith(MCP_PREFIX) and wanted(tool).server in upstreams
    ]


def _not_a_rule(tool: str) -> str:
    return (
        f"{tool!r} is read as a tool name, not a rule, so it matches no call: the only rules read here are shell "
        "rules, written exactly Bash(PREFIX:*) or Bash(COMMAND) (capital B, closing parenthesis), as in "
        "'Bash(git push --force:*)'; to gate every call of a tool, name the tool alone"
    )


def _named_tools(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(field path, tool name) for every trigger tool and prerequisite of every workflow, in file order."""
    out = []
    for name, entry in data.items():
        if name in META_KEYS or not isinstance(entry, dict):
            continue
        triggers = entry.get("triggers")
        tools = triggers.get("tools") if isinstance(triggers, dict) else None
        for i, tool in enumerate(tools if isinstance(tools, list) else []):
            out.append((f"{name}.triggers.tools[{i}]", tool))
        steps = entry.get("prerequisites")
        for i, step in enumerate(steps if isinstance(steps, list) else []):
            out.append((f"{name}.prerequisites[{i}].tool", step.get("tool") if isinstance(step, dict) else None))
    return [(where, tool) for where, tool in out if isinstance(tool, str)]


def _behind_gateway(tool: str) -> str:
    name = wanted(tool)
    gateway_name = f"{name.server}{SEPARATOR}{name.tool}"
    return (
        f"{tool!r} names server {name.server!r} as a client calls it directly, but gateway.json puts {name.server!r} "
        f"behind this server's gateway now: the gateway gates its tools, called {gateway_name!r} there (the name "
        f"still matches them). Write {gateway_name!r}, or the bare {name.tool!r} for that tool on any server, so "
        "the file says where the gate is"
    )
