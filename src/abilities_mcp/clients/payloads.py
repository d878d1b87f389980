"""Each client's hook payload read as one Call: its event names, the fields it sends and their types, the tool it
names (whole: an MCP tool's server where the payload says it), what the tool returned and whether it failed.

Clients differ here and in answers.py only; every gate in hook.py is shared. Stdlib only (the hook's path).
"""

from __future__ import annotations

import json
import re

from ..prerequisites.names import MCP_PREFIX
from ..records import Record
from .enforcement import kind

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENTS = {
    "claude": ("PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop"),
    "opencode": ("tool-before", "tool-after"),
    # Codex: codex-rs/hooks/src/events/*.rs; Claude Code's payloads and answers, `ask` refused.
    "codex": ("PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop"),
    # Gemini CLI: packages/core/src/hooks/types.ts; AfterAgent is its Stop (deny: another turn).
    "gemini": ("BeforeTool", "AfterTool", "BeforeAgent", "SessionStart", "AfterAgent"),
    # Cursor: its hooks documentation (no source published); shell and MCP calls have events of their own.
    "cursor": (
        "beforeShellExecution",
        "beforeMCPExecution",
        "preToolUse",
        "afterShellExecution",
        "afterMCPExecution",
        "postToolUse",
        "beforeSubmitPrompt",
        "sessionStart",
        "stop",
    ),
}
# Each client's event names in our terms.
KINDS = {
    "PreToolUse": "before",
    "PostToolUse": "after",
    "UserPromptSubmit": "prompt",
    "SessionStart": "start",
    "Stop": "stop",
    "tool-before": "before",
    "tool-after": "after",
    "BeforeTool": "before",
    "AfterTool": "after",
    "BeforeAgent": "prompt",
    "AfterAgent": "stop",
    "beforeShellExecution": "before",
    "beforeMCPExecution": "before",
    "preToolUse": "before",
    "afterShellExecution": "after",
    "afterMCPExecution": "after",
    "postToolUse": "after",
    "beforeSubmitPrompt": "prompt",
    "sessionStart": "start",
    "stop": "stop",
}
# The line Gemini CLI ends a shell command's result with when the command failed (packages/core/src/tools/shell.ts).
# (Compiled by re on first use: only Gemini CLI's AfterTool of a shell command reads it.)
_GEMINI_EXIT = r"(?m)^Exit Code: (-?\d+)$"

# The payload fields each client sends that we read, and their JSON types (null counts as absent).
_CLAUDE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "session_id": str,
    "tool_name": str,
    "tool_input": dict,
    "prompt": str,
    "permission_mode": str,
    "source": str,
    "cwd": str,
    "stop_hook_active": bool,
    "agent_id": str,
    "agent_type": str,
}
FIELD_TYPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "claude": _CLAUDE_FIELDS,
    "codex": _CLAUDE_FIELDS,
    "gemini": {**_CLAUDE_FIELDS, "mcp_context": dict},
    "opencode": {"sessionID": str, "tool": str, "args": dict, "subagent": str, "cwd": str, "failed": bool},
    # beforeMCPExecution's tool_input is JSON text in some Cursor versions, an object in others.
    "cursor": {
        "conversation_id": str,
        "tool_name": str,
        "tool_input": (dict, str),
        "command": str,
        "url": str,
        "prompt": str,
        "cwd": str,
        "workspace_roots": list,
        "loop_count": int,
    },
}
JSON_TYPES: dict[Any, str] = {
    str: "a string",
    dict: "an object",
    bool: "true or false",
    list: "an array",
    int: "a number",
    (dict, str): "an object or a string",
}


class BadPayload(ValueError):
    """The client's JSON is not what its hook event sends: the call goes ahead (exit 1) with this reason."""


class Call(
    Record,
    fields=(
        "client kind session_id tool result prompt subagent stop_hook_active permission_mode source cwd skill "
        "arguments failed server origin"
    ),
    defaults=(None, {}, False, None, ""),
):
    """One hook event, in the same terms whichever client sent it."""

    __slots__ = ()

    client: str
    kind: str  # before | after | prompt | start | stop
    session_id: str
    tool: str
    result: str | None  # what the tool returned (after)
    prompt: str
    subagent: str | None  # the subagent making the call, if one is
    stop_hook_active: bool
    permission_mode: str
    source: str  # SessionStart: startup | resume | clear | compact
    cwd: str
    skill: str | None  # = None; the skill a skill tool call loads, when it says
    arguments: dict[str, Any]  # = {}; the tool's arguments (a shell command, the file a write tool changes)
    failed: bool  # = False; after: the tool failed (an MCP result with isError, a shell command's error)
    server: str | None  # = None; the MCP server the payload names (Gemini CLI's mcp_context)
    origin: str  # = ""; Cursor: the command or url of the MCP server called (it sends no server name)


def event_name(client: str, event: str) -> str | None:
    """The event's canonical name; it may also be written kebab-case or in any case (pre-tool-use)."""
    wanted = event.replace("-", "").replace("_", "").lower()
    for known in EVENTS.get(client, ()):
        if known == event or known.replace("-", "").lower() == wanted:
            return known
    return None


def parse(client: str, kind: str, data: Any, event: str = "") -> Call:
    """The client's JSON in our terms."""
    _check_types(client, data)
    return PARSERS[client](client, kind, data, event)


def _parse_claude(client: str, kind: str, data: dict[str, Any], event: str) -> Call:
    """Claude Code, and Codex, which sends the same fields (codex-rs/hooks/src/schema.rs)."""
    return Call(
        client,
        kind,
        str(data.get("session_id") or ""),
        str(data.get("tool_name") or ""),
        _text(data.get("tool_response"), mcp=str(data.get("tool_name") or "").startswith("mcp__")),
        str(data.get("prompt") or ""),
        _subagent(data),
        bool(data.get("stop_hook_active")),
        str(data.get("permission_mode") or "default"),
        str(data.get("source") or ""),
        str(data.get("cwd") or ""),
        _skill(data, "tool_name", "tool_input", "skill"),  # Claude Code's Skill tool: {skill, args}
        _arguments(data.get("tool_input")),
        failed=_is_error(data.get("tool_response")),
    )


def _parse_opencode(client: str, kind: str, data: dict[str, Any], event: str) -> Call:
    # The plugin sends the session a subagent's child session belongs to, and the subagent's name.
    subagent = data.get("subagent")
    return Call(
        client,
        kind,
        str(data.get("sessionID") or ""),
        str(data.get("tool") or ""),
        _text(data.get("output")),
        "",
        str(subagent) if subagent is not None else None,
        False,
        "",
        "",
        str(data.get("cwd") or ""),
        _skill(data, "tool", "args", "name"),  # OpenCode's skill tool: {name}
        _arguments(data.get("args")),
        failed=data.get("failed") is True,  # the plugin's reading of the result (opencode_plugin.js `failed`)
    )


def _parse_gemini(client: str, kind: str, data: dict[str, Any], event: str) -> Call:
    """Gemini CLI: Claude Code's field names; an MCP tool is named by its mcp_context as Claude Code would name it
    (mcp__SERVER__TOOL), since Gemini's own mcp_SERVER_TOOL cannot be split when a name holds "_"."""
    tool, server = str(data.get("tool_name") or ""), None
    context = data.get("mcp_context")
    if isinstance(context, dict) and context.get("server_name") and context.get("tool_name"):
        server = str(context["server_name"])
        tool = f"mcp__{server}__{context['tool_name']}"
    response = data.get("tool_response")
    failed = _gemini_failed(tool, response)
    if isinstance(response, dict) and "llmContent" in response:  # {llmContent, returnDisplay, error}
        response = response["llmContent"]
    if isinstance(response, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in response):
        response = "\n".join(p["text"] for p in response)  # an MCP tool's content as Gemini's text parts
    return Call(
        client,
        kind,
        str(data.get("session_id") or ""),
        tool,
        _text(response, mcp=tool.startswith("mcp__")),
        str(data.get("prompt") or ""),
        None,
        bool(data.get("stop_hook_active")),
        "default",
        str(data.get("source") or ""),
        str(data.get("cwd") or ""),
        _skill({**data, "tool_name": tool}, "tool_name", "tool_input", "name"),  # activate_skill: {name}
        _arguments(data.get("tool_input")),
        failed=failed,
        server=server,
    )


def _gemini_failed(tool: str, response: Any) -> bool:
    """Gemini CLI's AfterTool for a call that failed: `error` set (an MCP result with isError, a tool that threw;
    packages/core/src/core/coreToolHookTriggers.ts), or a shell command whose result ends with a non-zero exit code
    (Gemini sets no `error` for one)."""
    if not isinstance(response, dict):
        return False
    if response.get("error"):
        return True
    text = response.get("llmContent")
    if tool != "run_shell_command" or not isinstance(text, str):
        return False
    return any(c != "0" for c in re.findall(_GEMINI_EXIT, text))


def _parse_cursor(client: str, kind: str, data: dict[str, Any], event: str) -> Call:
    """Cursor: the conversation is the session; a shell command is the Shell tool. An MCP call names the bare tool
    and, instead of its server's name, the server's command or url (`origin`): the hook finds the server whose
    command that is in .cursor/mcp.json (Hook.name); the tool is `mcp__TOOL` until then."""
    roots = [r for r in data.get("workspace_roots") or [] if isinstance(r, str) and r]
    cwd = roots[0] if roots else str(data.get("cwd") or "")
    tool, arguments, result = str(data.get("tool_name") or ""), data.get("tool_input"), data.get("tool_output")
    origin = ""
    if event in ("beforeShellExecution", "afterShellExecution"):
        tool, arguments, result = "Shell", {"command": data.get("command"), "cwd": data.get("cwd")}, data.get("output")
    elif event in ("beforeMCPExecution", "afterMCPExecution"):
        tool, result = MCP_PREFIX + tool.removeprefix(MCP_PREFIX), data.get("result_json")
        origin = str(data.get("command") or data.get("url") or "")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    return Call(
        client,
        kind,
        str(data.get("conversation_id") or ""),
        tool,
        _text(result, mcp=tool.startswith("mcp__")),
        str(data.get("prompt") or ""),
        None,
        bool(data.get("loop_count")),  # stop: a follow-up already ran this loop
        "default",
        "",
        cwd,
        None,
        _arguments(arguments),
        failed=_is_error(result),
        origin=origin,
    )


PARSERS = {
    "claude": _parse_claude,
    "codex": _parse_claude,
    "gemini": _parse_gemini,
    "cursor": _parse_cursor,
    "opencode": _parse_opencode,
}


def _check_types(client: str, data: Any) -> None:
    """Refuse a payload whose fields have the wrong JSON types, naming the field: read as text, `tool_name: 5` or
    `tool_input: "x"` would slip past every gate as a tool nobody configured."""
    if not isinstance(data, dict):
        raise BadPayload(
            f"the hook input is {_json_type(data)}, not a JSON object; the client sends one object per event "
            "(a wrapper script that changes stdin is the usual cause)"
        )
    for key, wanted in FIELD_TYPES[client].items():
        value = data.get(key)
        if value is not None and not isinstance(value, wanted):
            shown = json.dumps(value, ensure_ascii=True)
            raise BadPayload(
                f"the hook input's {key!r} is {_json_type(value)} ({shown[:60]}), not {JSON_TYPES[wanted]}; the "
                "client sends it as one (a wrapper script that changes stdin is the usual cause)"
            )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return "a number"
    return JSON_TYPES.get(type(value), type(value).__name__)


def _arguments(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _skill(data: dict[str, Any], tool_key: str, arguments_key: str, name_key: str) -> str | None:
    """The skill a skill tool call loads, when the call is one and says which."""
    arguments = data.get(arguments_key)
    if kind(str(data.get(tool_key) or "")) != "skill" or not isinstance(arguments, dict):
        return None
    value = arguments.get(name_key)
    return value if isinstance(value, str) and value else None


def _subagent(data: dict[str, Any]) -> str | None:
    """The subagent making the call: Claude Code sends agent_id only from inside one (agent_type alone means the
    whole session runs as that agent, `claude --agent X`)."""
    if not data.get("agent_id"):
        return None
    return str(data.get("agent_type") or "")


def _text(value: Any, mcp: bool = False) -> str | None:
    """What a tool returned, as text; an MCP tool's content blocks as the text the model reads."""
    if value is None:
        return None
    if mcp:
        blocks = _content_blocks(value)
        if blocks is not None:
            return "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_error(value: Any) -> bool:
    """An MCP tool's result that says it failed (`isError: true`), as an object or as its JSON text (Codex's
    PostToolUse, Cursor's result_json, a Claude Code version that sent a failed call's PostToolUse)."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, dict) and value.get("isError") is True


def _content_blocks(value: Any) -> list[dict[str, Any]] | None:
    """An MCP result's content ([{type, text}, ...], or {content: [...]}, or either as JSON text); None otherwise."""
    if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        value = value.get("content")
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in value):
        return None
    if not any(b["type"] == "text" for b in value):
        return None
    return value
