"""`abilities-mcp hook CLIENT EVENT`: the server's gates applied to the client's own tool calls (DESIGN §6, §7).

The client runs this before and after every tool call, on each prompt, at session start and when the agent would
stop. It reads the client's JSON on stdin, looks at the shared state file (the session's live run and recorded
prerequisites) and workflows.json, and answers on stdout in the client's format. Stdout carries nothing else.

    before: a live run's step gate (enforcement.py), then workflows.json (gates.py): deny, ask, or context;
            a call to this server's own tools is announced for the server (state/claims.py: OpenCode's calls
            reach the server without a session id), and one to workflow_record or workflow_check marks the
            session as one the hooks observe; an upstream tool this server's gateway lists directly
            (gateway.json `expose: "all"`) is announced too and left to the gateway's gates, which run its
            missing prerequisites themselves. Whose a tool is, is told by whole names: the server names this
            client's configs give this server (servers.py), the upstreams gateway.json exposes (names.py)
    after:  record a prerequisite that ran and succeeded (sessions.py), as observed, so calling it counts
            without workflow_record; a failed call never counts (the gateway records what went through it)
    prompt: the live run's step, the abilities that fit the prompt, the workflows its words point at
    start:  the live run (after compaction or resume) and a short catalog
    stop:   block while a strict run waits for the agent or a script; never twice in a row

Clients (Claude Code, Codex, Gemini CLI, Cursor, OpenCode) differ only in EVENTS/KINDS (their event names),
PARSERS (their payload as one Call) and RENDERERS (an Answer in their format); every gate above is shared.

Failure policy: a strict gate that cannot read its state refuses (exit 2, the reason on stderr: Claude Code gives
it to the model, the OpenCode plugin throws it); any other failure lets the call through (exit 1, the reason on
stderr). Stdlib only, no mcp and no pydantic: a Python starts for every tool call.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from typing import IO, Any, NamedTuple

from ..prerequisites.gates import RECORDED_BY_HOOK, Observer, check, tool_matches
from ..prerequisites.in_force import workflows_in_force
from ..prerequisites.names import MCP_PREFIX, SEPARATOR, UNKNOWN_SERVER, Name, called, opencode, same, through
from ..prerequisites.sessions import DEFAULT_TTL_SECONDS, TTL_ENV, SessionState
from ..prerequisites.workflows import TOOL_CACHE, WorkflowSet, read_json
from ..state.claims import announce, mark_observed
from ..state.database import Database
from ..state.owners import client_of
from ..state.project import GATEWAY_FILE, Project
from ..state.trust import TrustStore
from . import guards
from .enforcement import OWN_TOOLS, Verdict, kind, next_move, stop_verdict, tool_verdict, where
from .position import Position, find
from .servers import Entry, cursor_server, is_ours, known_names, runs_abilities_mcp

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
# Claude Code cuts hook output strings here.
MAX_OUTPUT_CHARS = 10_000
# Permission modes in which Claude Code asks the person; elsewhere a `warn` workflow only tells the model.
ASKING_MODES = {"default", "acceptEdits", "plan"}
# Clients whose before-tool answer can hand the call to the person (Codex refuses `ask`: output_parser.rs).
ASKING_CLIENTS = {"claude", "gemini", "cursor"}
# Exit codes: 2 makes the client refuse the call; 1 is an error the client reports and goes on from.
DENY_EXIT, FAIL_OPEN_EXIT = 2, 1
# Clients whose calls reach this server without a session id: their hook announces each call to the server.
# Codex and Gemini CLI send no session id with an MCP call either, and run the before-tool hook first
# (tests/clients/test_codex.py, test_gemini.py); so the server files their runs under the client's session too.
ANNOUNCING_CLIENTS = {"opencode", "codex", "gemini"}
# This server's tools whose answers depend on whether the session's hooks run (a self-report is refused where they
# do): the hook marks the session as observed when it sees one of them called (state/claims.py).
MARKING_TOOLS = {"workflow_record", "workflow_check"}
# The line Gemini CLI ends a shell command's result with when the command failed (packages/core/src/tools/shell.ts).
_GEMINI_EXIT = re.compile(r"^Exit Code: (-?\d+)$", re.M)


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


class StateUnreadable(Exception):
    """A strict gate could not read what it needs: the call is refused (exit 2) with this reason."""


class BadPayload(ValueError):
    """The client's JSON is not what its hook event sends: the call goes ahead (exit 1) with this reason."""


class Call(NamedTuple):
    """One hook event, in the same terms whichever client sent it."""

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
    skill: str | None = None  # the skill a skill tool call loads, when it says
    arguments: dict[str, Any] = {}  # the tool's arguments (a shell command, the file a write tool changes)
    failed: bool = False  # after: the tool failed (an MCP result with isError, a shell command's error)
    server: str | None = None  # the MCP server the payload names (Gemini CLI's mcp_context)
    origin: str = ""  # Cursor: the command or url of the MCP server called (it sends no server name)


class Answer(NamedTuple):
    """What the hook says; empty fields say nothing."""

    deny: str = ""  # refuse the tool call, telling the model why
    ask: str = ""  # let the person decide (Claude Code), telling them why
    context: str = ""  # for the model, the call going ahead
    block_stop: str = ""  # keep the agent working, telling it why
    message: str = ""  # for the person


def main(
    client: str,
    event: str,
    project: Project | None = None,
    session_ttl: float | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Answer one event; returns the exit code."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    name = event_name(client, event)
    if name is None:
        known = "; ".join(f"{c}: {', '.join(e)}" for c, e in EVENTS.items())
        print(f"abilities-mcp hook: unknown client or event {client!r} {event!r}; use {known}", file=stderr)
        return FAIL_OPEN_EXIT
    try:
        call = parse(client, KINDS[name], json.loads(stdin.read() or "{}"), name)
        hook = Hook(call, project or _project(call), session_ttl)
        answer = HANDLERS[call.kind](hook)
    except StateUnreadable as exc:
        print(exc, file=stderr)
        return DENY_EXIT
    except BadPayload as exc:
        print(f"abilities-mcp hook {client} {event}: {exc}; the call was let through", file=stderr)
        return FAIL_OPEN_EXIT
    except Exception as exc:  # noqa: BLE001 - the failure policy: anything else fails open, said on stderr
        print(
            f"abilities-mcp hook {client} {event}: {type(exc).__name__}: {exc}; the call was let through", file=stderr
        )
        return FAIL_OPEN_EXIT
    return render(client, name, answer, stdout, stderr)


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
    return tool == "run_shell_command" and isinstance(text, str) and any(c != "0" for c in _GEMINI_EXIT.findall(text))


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


def _project(call: Call) -> Project:
    """DESIGN §2's root, with the client's working directory where a server would use its own."""
    env = os.environ
    return Project.resolve(env.get("ABILITIES_ROOT") or env.get("CLAUDE_PROJECT_DIR") or call.cwd or None)


class Hook:
    """One event against the project's state, read lazily: most tool calls need no database at all."""

    def __init__(self, call: Call, project: Project, session_ttl: float | None = None):
        self.call = call
        self.project = project
        self._ttl = session_ttl  # worked out when a session's records are read: most calls never need it
        self._db: Database | None = None
        self._workflows: WorkflowSet | None = None
        self._name: Name | None = None
        self._entry: Entry | None = None  # Cursor: the configured server whose command the call came with
        self._ours: dict[str, bool] = {}
        self._servers: dict[str, Any] | None = None

    @property
    def workflows(self) -> WorkflowSet:
        if self._workflows is None:  # the trusted version where an edit would lower a gate (prerequisites/in_force.py)
            trust = TrustStore(self.project.state_dir, self.project.root)
            self._workflows = workflows_in_force(self.project.workflows_file, self.project.root / TOOL_CACHE, trust)
        return self._workflows

    def database(self) -> Database:
        if self._db is None:
            self._db = Database(self.project.state_db, accept_newer=True)
        return self._db

    def position(self) -> Position | None:
        """The session's live run; None when there is none (or no state file yet)."""
        if not self.project.state_db.exists():
            return None
        if self.call.client == "opencode":  # one OpenCode process hosts many sessions, each id stable: no fallback
            return find(self.database().db, [self.call.session_id])
        sessions = [self.call.session_id, os.environ.get("CLAUDE_CODE_SESSION_ID", "")]
        return find(self.database().db, sessions, os.getpid())

    @property
    def name(self) -> Name:
        """The tool called, split whole into its server and its own name (prerequisites/names.py): OpenCode's at a
        server its config knows, Cursor's by the server whose command the call came with, the rest as Claude Code
        spells them (Gemini CLI's from its mcp_context)."""
        if self._name is None:
            self._name = self._split()
        return self._name

    def _split(self) -> Name:
        call, root = self.call, self.project.root
        if call.client == "opencode":
            return opencode(call.tool, lambda: known_names("opencode", root))
        if call.client == "cursor" and call.origin:
            bare = call.tool.removeprefix(MCP_PREFIX)
            self._entry = cursor_server(root, call.origin)
            if self._entry is None:
                return Name(UNKNOWN_SERVER, bare, call.tool)
            return Name(self._entry.name, bare, f"{MCP_PREFIX}{self._entry.name}{SEPARATOR}{bare}")
        return called(call.tool, [call.server] if call.server else ())

    def ours(self) -> bool:
        """Whether the call is one of this server's own tools, by whole names: one of its tool names, on a server
        this client's configs say runs abilities-mcp (read only for a call that could be one)."""
        name = self.name
        return name.tool in OWN_TOOLS and self._is_ours(name.server)

    def _is_ours(self, server: str | None) -> bool:
        if server is None or server == UNKNOWN_SERVER:
            return False
        if server not in self._ours:
            if self.call.client == "cursor":
                self._ours[server] = self._entry is not None and runs_abilities_mcp(self._entry.argv)
            else:
                self._ours[server] = is_ours(self.call.client, self.project.root, server)
        return self._ours[server]

    def upstream(self) -> Name | None:
        """The upstream tool the call names through this server's gateway: Claude Code's
        `mcp__abilities__sqlite__read_query`, OpenCode's `abilities_sqlite__read_query` → server sqlite's read_query.
        Whole names: the call's server is this server, the tool's head a server of gateway.json; anything else is
        None, the same upstream configured straight in the client included (`mcp__sqlite__read_query`)."""
        name = self.name
        if name.server is None or SEPARATOR not in name.tool:
            return None
        upstream = through(name, [name.server], self._gateway_servers())
        return upstream if upstream is not None and self._is_ours(name.server) else None

    def gateway_tool(self) -> Name | None:
        """The upstream tool the call stands for when this server's gateway lists it directly (gateway.json
        `expose: "all"`): its gates are the gateway's."""
        upstream = self.upstream()
        return upstream if upstream is not None and same(upstream.server, self._exposed()) else None

    def _gateway_servers(self) -> dict[str, Any]:
        """gateway.json's servers (read with the standard library: the hook imports no pydantic); a missing or
        broken file has none."""
        if self._servers is None:
            data, _ = read_json(self.project.root / GATEWAY_FILE)
            servers = data.get("mcpServers") if isinstance(data, dict) else None
            self._servers = servers if isinstance(servers, dict) else {}
        return self._servers

    def _exposed(self) -> list[str]:
        """The upstreams gateway.json lists directly."""
        servers = self._gateway_servers()
        return [name for name, entry in servers.items() if isinstance(entry, dict) and entry.get("expose") == "all"]

    def session(self) -> SessionState:
        if self._ttl is None:
            self._ttl = _ttl(self.project)
        return SessionState(self.database(), self._ttl)


def _ttl(project: Project) -> float:
    """$ABILITIES_SESSION_TTL, else the settings file's sessions.ttl (as trust allows), else 24 hours."""
    from ..durations import parse_duration
    from ..state.settings import chosen

    return chosen(project.root, "sessions.ttl", None, TTL_ENV, parse_duration, DEFAULT_TTL_SECONDS, project.state_dir)


def before(hook: Hook) -> Answer:
    """A tool is about to run: the guards first (whatever the run), then the live run's step, then workflows.json."""
    tool = hook.call.tool
    if not tool:
        return Answer()
    if hook.ours():
        _announce(hook, hook.name.tool)
        _mark_observed(hook)
        return Answer()
    guarded = guards.refusal(tool, hook.call.arguments, hook.project.root, hook.project.state_db.parent)
    if guarded:
        return Answer(deny=guarded)
    verdict = _step_verdict(hook, hook.name)
    if verdict.decision == "deny":
        return Answer(deny=verdict.reason)
    served = hook.gateway_tool()
    if served is not None:  # the gateway gates it, running what is missing first: a deny here would stop that
        _announce(hook, served.raw)
        return Answer(context=verdict.context)
    gate = _workflow_answer(hook, hook.upstream() or hook.name)
    return gate._replace(context=_joined(verdict.context, gate.context))


def _announce(hook: Hook, name: str) -> None:
    """Tell the server which session this call to its tool `name` is from, when the client will not (claims.py)."""
    if hook.call.client not in ANNOUNCING_CLIENTS or not hook.call.session_id:
        return
    announce(hook.database(), hook.call.session_id, name, hook.call.arguments, client_of(os.getpid()))


def _mark_observed(hook: Hook) -> None:
    """This session's client runs the hooks: mark it so, for the server's workflow_record and workflow_check,
    before the call reaches the server (claims.py). A state file that cannot be written marks nothing: the call
    goes on, and the server then takes a self-report as one (the gates of the hook and the gateway still count only
    what they saw)."""
    if hook.name.tool not in MARKING_TOOLS or not hook.call.session_id:
        return
    try:
        mark_observed(hook.database(), hook.call.session_id, hook.call.client)
    except (sqlite3.Error, OSError, RuntimeError):
        return


def _step_verdict(hook: Hook, tool: Name) -> Verdict:
    try:
        position = hook.position()
    except (sqlite3.Error, OSError, RuntimeError) as exc:
        if kind(tool) == "read":
            return Verdict("allow")
        raise StateUnreadable(
            f"abilities-mcp: {tool.raw} refused: the state file {hook.project.state_db} cannot be read ({exc}), so "
            "the hook cannot tell whether a strict run is waiting. Read-only tools still work. Run "
            "`abilities-mcp status`, which moves a damaged file aside or says what to fix, then try again."
        ) from exc
    return Verdict("allow") if position is None else tool_verdict(position, tool, hook.call.subagent, hook.call.skill)


# The hook sees every tool call of its session: a self-report (workflow_record) never counts in its gate.
HOOKS_SEE = Observer(hooks=True)


def _workflow_answer(hook: Hook, tool: Name) -> Answer:
    """workflows.json for this tool: deny for enforce, ask (or tell) for warn, tell for suggest."""
    found = hook.workflows
    unrecorded = check(found, tool, "", {})
    if not unrecorded.matched:
        return Answer()  # no workflow triggers on this tool: no state needed
    try:
        done = hook.session().done(hook.call.session_id)
    except (sqlite3.Error, OSError, RuntimeError) as exc:
        if unrecorded.verdict == "deny":
            raise StateUnreadable(
                f"abilities-mcp: {tool.raw} refused: an enforced workflow needs this session's recorded steps, "
                f"and {hook.project.state_db} cannot be read ({exc}). Fix or move the file, then try again."
            ) from exc
        raise
    result = check(found, tool, "", done, how=RECORDED_BY_HOOK, observer=HOOKS_SEE)
    text = "\n".join([f"abilities-mcp: {result.message}", *found.pending])  # an edit waiting for trust, named
    if result.verdict == "deny":
        return Answer(deny=text)
    if result.verdict == "warn":
        asks = hook.call.client in ASKING_CLIENTS and hook.call.permission_mode in ASKING_MODES
        return Answer(ask=text, context=text) if asks else Answer(context=text)
    return Answer(context=text) if result.verdict == "suggest" else Answer()


def after(hook: Hook) -> Answer:
    """A tool ran: if a workflow lists it and it succeeded, record it for this session as seen (in order, where
    the workflow enforces); a failed call never counts, and the model is told so."""
    name = hook.name
    listed = [(w, p) for w in hook.workflows.enabled() for p in w.prerequisites if tool_matches(name, p.tool)]
    if not listed or not hook.call.session_id or hook.ours() or hook.upstream() is not None:
        return Answer()  # this server's calls, and the gateway's, which records what it saw itself
    if hook.call.failed:
        return Answer(context="\n".join(_failed_note(name, w, p) for w, p in listed))
    plan = hook.session().record(hook.call.session_id, hook.workflows, name, hook.call.result, None, HOOKS_SEE)
    notes = [
        f"abilities-mcp: {name.raw} ran before {earlier.tool} (step {earlier.step} of {workflow.name}, which is "
        f"enforced in order), so it does not count yet: call {earlier.tool}, then {name.raw} again."
        for workflow, _step, earlier in plan.refused
    ]
    return Answer(context="\n".join(notes))


def _failed_note(name: Name, workflow: Any, step: Any) -> str:
    return (
        f"abilities-mcp: {name.raw} failed, so it does not count as step {step.step} of {workflow.name}; a "
        "prerequisite counts once a call of it succeeds."
    )


def prompt(hook: Hook) -> Answer:
    """A prompt was sent: the live run's step, the abilities that fit, the workflows its words point at."""
    from .briefing import abilities, suggest, suggestions_text

    parts = [_run_note(hook.position())]
    found = suggest(abilities(hook.project), hook.call.prompt) if hook.call.prompt.strip() else []
    if found:
        parts.append(suggestions_text(found))
    parts.append(_keyword_note(hook))
    return Answer(context=_joined(*parts))


def _keyword_note(hook: Hook) -> str:
    words = check(hook.workflows, "", hook.call.prompt, {})
    pending = [m for m in words.matched if m.missing]
    if not pending:
        return ""
    lines = ["abilities-mcp: this request touches tool prerequisites (workflows.json):"]
    for m in pending:
        steps = " -> ".join(p.tool for p in m.workflow.prerequisites if p.required)
        lines.append(
            f"- {m.workflow.name} ({m.workflow.mode}): before {', '.join(m.workflow.tools) or 'its tools'}, "
            f"run {steps}."
        )
    return "\n".join(lines)


def start(hook: Hook) -> Answer:
    """A session started, resumed, was cleared or compacted: where the live run is, and what there is."""
    from .briefing import abilities, catalog

    return Answer(
        context=_joined(_run_note(hook.position()), catalog(hook.project, abilities(hook.project), hook.workflows))
    )


def _run_note(position: Position | None) -> str:
    if position is None:
        return ""
    return f"abilities-mcp: a run is live in this session. {where(position)} {next_move(position)}"


def stop(hook: Hook) -> Answer:
    """The agent would end its turn: not while a strict run waits for it (or runs a script), and never twice."""
    verdict = stop_verdict(hook.position(), hook.call.stop_hook_active)
    return Answer(block_stop=verdict.reason if verdict.block else "", message=verdict.message)


HANDLERS = {"before": before, "after": after, "prompt": prompt, "start": start, "stop": stop}


def _joined(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


def render(client: str, event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """The answer in the client's format; returns the exit code."""
    return RENDERERS[client](event, answer, stdout, stderr)


def _render_claude(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    return _write(stdout, _claude_output(event, answer))


def _render_codex(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """Claude Code's shape; Codex refuses `ask` (output_parser.rs: "unsupported permissionDecision:ask"), so a
    warn workflow's question reaches the model as context."""
    if answer.ask:
        answer = answer._replace(ask="", context=answer.context or answer.ask)
    return _write(stdout, _claude_output(event, answer))


def _render_gemini(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """Gemini CLI: `decision` deny|ask with a `reason` (BeforeTool), deny to keep the agent going (AfterAgent),
    hookSpecificOutput.additionalContext where the event reads it (AfterTool, BeforeAgent, SessionStart);
    BeforeTool has no context for the model, so its advice goes to the person."""
    out: dict[str, Any] = {}
    if answer.deny:
        out |= {"decision": "deny", "reason": _cut(answer.deny)}
    elif answer.ask:
        out |= {"decision": "ask", "reason": _cut(answer.ask), "systemMessage": _cut(answer.ask)}
    elif answer.block_stop:
        out |= {"decision": "deny", "reason": _cut(answer.block_stop)}
    if answer.context and not (answer.deny or answer.ask):
        if event == "BeforeTool":
            out["systemMessage"] = _cut(answer.context)
        elif event != "AfterAgent":
            out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": _cut(answer.context)}
    if answer.message and "systemMessage" not in out:
        out["systemMessage"] = _cut(answer.message)
    return _write(stdout, out)


def _render_cursor(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """Cursor: `permission` deny|ask with a message for the person and one for the agent (before events; nothing
    on allow, so Cursor's own approval still decides), `followup_message` to keep the agent going (stop),
    `additional_context` (postToolUse, sessionStart); beforeSubmitPrompt and the after-execution events take
    nothing back."""
    out: dict[str, Any] = {}
    if answer.deny or answer.ask:
        text = _cut(answer.deny or answer.ask)
        out = {"permission": "deny" if answer.deny else "ask", "user_message": text, "agent_message": text}
    elif answer.block_stop:
        out = {"followup_message": _cut(answer.block_stop)}
    elif answer.context and event in ("postToolUse", "sessionStart"):
        out = {"additional_context": _cut(answer.context)}
    return _write(stdout, out)


def _write(stdout: IO[str], out: dict[str, Any]) -> int:
    if out:
        stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


def _claude_output(event: str, answer: Answer) -> dict[str, Any]:
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {"hookEventName": event}
    if answer.deny:
        specific |= {"permissionDecision": "deny", "permissionDecisionReason": _cut(answer.deny)}
    elif answer.ask:
        specific |= {"permissionDecision": "ask", "permissionDecisionReason": _cut(answer.ask)}
    if answer.context and not answer.deny and event != "Stop":
        specific["additionalContext"] = _cut(answer.context)
    if len(specific) > 1:
        out["hookSpecificOutput"] = specific
    if answer.block_stop:
        out |= {"decision": "block", "reason": _cut(answer.block_stop)}
    if answer.message:
        out["systemMessage"] = _cut(answer.message)
    return out


def _render_opencode(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    if answer.deny:
        print(answer.deny, file=stderr)
        return DENY_EXIT
    text = _joined(answer.context or answer.ask, answer.message)
    if text:
        stdout.write(json.dumps({"context": _cut(text)}, ensure_ascii=False) + "\n")
    return 0


RENDERERS = {
    "claude": _render_claude,
    "codex": _render_codex,
    "gemini": _render_gemini,
    "cursor": _render_cursor,
    "opencode": _render_opencode,
}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT_CHARS else text[: MAX_OUTPUT_CHARS - 20] + " [... truncated]"
