"""The workflows.json format as pydantic models: the schema (`abilities-mcp schema workflows`) and the checker
behind `abilities-mcp validate` / `ability_validate`. The gate itself reads the file with workflows.py (no
pydantic on the hook's path); tests hold both to the same verdict on every file. Also the warnings validate
gives for a file that works but says less than it should (`check_warnings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from ..errors import Diagnostic
from ..explain import Format, explain
from ..state.project import GATEWAY_FILE
from .names import MCP_PREFIX, SEPARATOR, wanted
from .workflows import META_KEYS, cycle_problems, meta_problems, parse_workflow, read_json


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty; write the text")
    return value


# Not blank: the validator says it in words, the pattern tells editors.
Text = Annotated[StrictStr, AfterValidator(_not_blank), Field(json_schema_extra={"pattern": r"\S"})]


class Triggers(BaseModel):
    """Conditions that activate this workflow (OR logic - any match triggers)."""

    model_config = ConfigDict(extra="forbid")

    category: Text = Field(  # type: ignore[assignment]  # absent is fine, null is not (as the hook reads it)
        None, description="Tool belongs to this category in the tool-routing cache (.opencode/agent-skill-tools.json)"
    )
    tools: list[Text] = Field(
        default_factory=list,
        description="Tool names: bare (execute_query: that tool on any server) or with its server "
        "(mcp__db__execute_query or db__execute_query: server db's only), matched whole",
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


class Workflow(BaseModel):
    """Before any trigger tool runs, the prerequisite tools must have run in this session, in step order."""

    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(True, description="Whether this workflow is active")
    name: StrictStr = Field(None, description="Templates carry their name; the key is what counts")  # type: ignore
    description: Text = Field(description="Human-readable description of the workflow")
    triggers: Triggers
    prerequisites: list[Prerequisite] = Field(min_length=1, description="Steps to execute before the main action")
    mode: Literal["enforce", "warn", "suggest"] = Field(
        "enforce",
        description="enforce: deny until every required prerequisite ran; warn: ask, listing what is missing; "
        "suggest: mention them",
    )
    created_at: StrictStr = Field(None, description="When this workflow was created (ISO 8601)")  # type: ignore


class WorkflowsFile(RootModel[dict[str, Workflow]]):
    """workflows.json: workflows keyed by name."""


WORKFLOW_FORMAT = Format(Workflow)


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


def check_warnings(path: Path) -> list[Diagnostic]:
    """What a workflows.json that works should still say otherwise: a trigger or prerequisite naming a server the
    way a client calls it (`mcp__db__read_query`) when gateway.json now puts that server behind this server's
    gateway, where its tools are called `db__read_query` and the gateway gates them."""
    data, problems = read_json(path)
    servers, _ = read_json(path.parent / GATEWAY_FILE)
    upstreams = servers.get("mcpServers") if isinstance(servers, dict) else None
    if problems or not isinstance(data, dict) or not isinstance(upstreams, dict):
        return []
    return [
        Diagnostic(str(path), where, _behind_gateway(tool))
        for where, tool in _named_tools(data)
        if tool.lower().startswith(MCP_PREFIX) and wanted(tool).server in upstreams
    ]


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
