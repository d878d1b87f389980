"""What a live run lets the client's own tools do (docs/clients.md, the level table), and whether the agent may stop.

- strict: only this server's tools, read-only tools and the current step's tools; Stop is blocked while the agent
  or a script must act.
- normal: destructive tools (Bash, Write, Edit, ..., other servers' tools that change things) are blocked unless
  the step allows them; Stop is allowed.
- loose: nothing is blocked; the step is given to the model as context.

A step's tools by type: script, approval and decision: none (wait); agent: the subagent tools (Task, Agent,
invoke_agent, Codex's spawn_agent and its kin: DELEGATE) and the subagent's own calls; skill: the Skill tool; plus
the step's `tools:`; a workflow step: its child's step.
Pure functions, stdlib only: the hook runs them on every tool call.
"""

from __future__ import annotations

import re

from ..prerequisites.names import UNKNOWN_SERVER, Name, matches, name_of, wanted
from ..records import Record
from .position import Position

# This server's tools: always allowed (they are how the agent moves the run on), when the call is one of this
# server's by its whole name (the hook tells: clients/servers.py). A test holds this to the server.
OWN_TOOLS = (
    "ability_list",
    "ability_validate",
    "ability_match",
    "ability_run",
    "ability_status",
    "ability_step_complete",
    "ability_approve",
    "ability_decide",
    "ability_cancel",
    "ability_resume",
    "ability_history",
    "skill_list",
    "skill_route",
    "skill_load",
    "skill_read",
    "skill_plan",
    "workflow_list",
    "workflow_check",
    "workflow_record",
    "workflow_status",
    "workflow_reset",
)
# Client tools that change nothing (Claude Code's and OpenCode's names, compared case-insensitively).
READ_ONLY = {
    "read",
    "glob",
    "grep",
    "ls",
    "list",
    "notebookread",
    "webfetch",
    "websearch",
    "codesearch",
    "todoread",
    "todowrite",
    "bashoutput",
    "listmcpresourcestool",
    "readmcpresourcetool",
    "readmcpresourcedirtool",
    "list_mcp_resources",  # OpenCode's MCP resource tools (names with "_" would read as another server's)
    "read_mcp_resource",
    "list_mcp_resource_templates",
    "toolsearch",
    "askuserquestion",
    "question",
    "lsp",
    "taskoutput",  # Claude Code's task list and background-task output: bookkeeping, not changes
    "taskcreate",
    "taskupdate",
    "tasklist",
    "taskget",
    "enterplanmode",
    "exitplanmode",
    "read_file",  # Gemini CLI's (packages/core/src/tools/definitions/base-declarations.ts)
    "read_many_files",
    "list_directory",
    "grep_search",
    "google_web_search",
    "web_fetch",
    "write_todos",
    "ask_user",
    "get_internal_docs",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
}
# Client tools that change files or run commands: what `normal` blocks.
DESTRUCTIVE = {
    "bash",
    "write",
    "edit",
    "multiedit",
    "notebookedit",
    "patch",
    "apply_patch",  # Codex
    "killshell",
    "run_shell_command",  # Gemini CLI
    "write_file",
    "replace",
    "shell",  # Cursor
    "strreplace",
    "delete",
}
# Hands work to a subagent (Claude Code calls it Agent since 2.1.63, Task before; OpenCode task; Gemini CLI
# invoke_agent), and Codex's subagent tools: spawn_agent and those that talk to, wait for and close what it spawned
# (codex-rs multi_agent_tool, 0.169.0: v1 send_input, resume_agent; v2 send_message, followup_task,
# interrupt_agent, list_agents; both wait_agent, close_agent).
DELEGATE = {
    "task",
    "agent",
    "invoke_agent",
    "spawn_agent",
    "send_input",
    "resume_agent",
    "send_message",
    "followup_task",
    "interrupt_agent",
    "list_agents",
    "wait_agent",
    "close_agent",
}
SKILL = {"skill", "activate_skill"}
# Another server's tool is read-only when its name starts with one of these verbs (its annotations are not
# visible to a hook); any other tool of another server counts as one that changes things.
READ_VERBS = {"get", "list", "read", "search", "find", "describe", "inspect", "show", "view", "lookup", "count"}
# ... unless a word of its name says it also changes something (find_and_replace, get_or_create_user).
WRITE_WORDS = {
    "create",
    "update",
    "delete",
    "remove",
    "replace",
    "write",
    "set",
    "insert",
    "drop",
    "execute",
    "run",
    "send",
    "post",
    "put",
    "patch",
    "push",
    "merge",
    "move",
    "rename",
    "apply",
    "kill",
    "add",
    "edit",
    "modify",
    "upsert",
}
# The words of a tool's name (camelCase, snake_case); compiled by re on first use: a client's own tool never needs it.
_WORDS = r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])"


class Verdict(Record, fields="decision reason context", defaults=("", "")):
    """The hook's answer for one tool call: deny with a reason, or allow (with context for the model, maybe)."""

    __slots__ = ()

    decision: str  # allow | deny
    reason: str  # = ""; why it was denied
    context: str  # = ""; what the model should know even though the call goes ahead


ALLOW = Verdict("allow")


def kind(tool: str | Name) -> str:
    """read | delegate | skill | destructive | other: what a tool of the client (or of another server) can do.
    Whether a call is this server's own is the hook's question, answered by whole names (clients/servers.py)."""
    raw = tool.raw if isinstance(tool, Name) else tool
    name = raw.lower()
    for group, names in (("read", READ_ONLY), ("destructive", DESTRUCTIVE), ("delegate", DELEGATE), ("skill", SKILL)):
        if name in names:
            return group
    server_tool = tool.tool if isinstance(tool, Name) and tool.server is not None else _server_tool(raw)
    if server_tool is None:
        return "other"
    words = [w.lower() for w in re.findall(_WORDS, server_tool)]
    reads = bool(words) and words[0] in READ_VERBS and not WRITE_WORDS.intersection(words)
    return "read" if reads else "destructive"


def _server_tool(tool: str) -> str | None:
    """The tool's own name when it is another server's (Claude Code mcp__s__t, OpenCode s_t), else None."""
    if tool.startswith("mcp__"):
        return tool.split("__", 2)[-1]
    if "_" in tool:
        return tool.split("_", 1)[1]  # OpenCode <server>_<tool>: a server name with "_" in it reads as not read-only
    return None


def step_allows(position: Position, tool: str | Name, subagent: str | None = None, skill: str | None = None) -> bool:
    """Whether the current step itself lets this tool run (its type's tools, its `tools:`, its subagent, its skill).
    A skill tool call that does not say which skill it loads is given the benefit of the doubt."""
    if any(_tool_pattern(pattern, tool) for pattern in position.tools):
        return True
    if position.waits_for_person or not position.waits_for_agent:
        return False
    if position.step_type == "agent":
        if kind(tool) == "delegate":
            return True
        if subagent is None:
            return False
        wanted, name = (position.agent or "").lower(), _unqualified(subagent)
        return not wanted or name == wanted
    if position.step_type != "skill" or kind(tool) != "skill":
        return False
    return skill is None or not position.skill or _unqualified(skill) == position.skill.lower()


def _unqualified(name: str) -> str:
    """A subagent or skill name without its plugin's prefix (plugin:reviewer)."""
    return name.lower().rsplit(":", 1)[-1]


def _tool_pattern(pattern: str, tool: str | Name) -> bool:
    """A step's `tools:` entry: a name as workflows.json writes one (bare: that tool on any server; `mcp__db__t`
    or `db__t`: server db's), matched whole, or a glob like mcp__db__* over the name as called or as Claude Code
    and the gateway spell it."""
    name = name_of(tool)
    if "*" not in pattern:
        return matches(name, wanted(pattern))
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    spelled = {name.raw}
    if name.server is not None and name.server != UNKNOWN_SERVER:
        spelled |= {f"mcp__{name.server}__{name.tool}", f"{name.server}__{name.tool}"}
    return any(re.fullmatch(regex, s, re.IGNORECASE) is not None for s in spelled)


def tool_verdict(
    position: Position, tool: str | Name, subagent: str | None = None, skill: str | None = None
) -> Verdict:
    """May `tool` run while the run is where it is? (subagent: who calls it; skill: what a skill tool loads). This
    server's own tools never come here: the hook lets them through first."""
    tool_kind = kind(tool)
    raw = tool.raw if isinstance(tool, Name) else tool
    if not position.owner_alive:
        return Verdict("allow", context=interrupted(position))
    allowed = tool_kind == "read" or step_allows(position, tool, subagent, skill)
    if position.enforcement == "loose":
        return (
            ALLOW
            if allowed
            else Verdict("allow", context=f"{where(position)} {raw} is not part of it. " + next_move(position))
        )
    if allowed or (position.enforcement == "normal" and tool_kind != "destructive"):
        return ALLOW
    return Verdict("deny", reason=denial(position, raw))


def denial(position: Position, tool: str) -> str:
    """Why a tool is refused: the step, what it allows, and the legal next move."""
    level = "strict" if position.enforcement == "strict" else "normal"
    return (
        f"abilities-mcp: {tool} is not allowed now. {where(position)} Under {level} enforcement this step allows "
        f"{allowed_now(position)}. {next_move(position)}"
    )


def where(position: Position) -> str:
    run = position.run_id
    if position.inner_run != run:
        run += f" (child run {position.inner_run})"
    if position.step_id is None:
        return f"Run {run} of ability {position.ability!r} is between steps."
    what = f" - {position.description}" if position.description else ""
    return f"Run {run} of ability {position.ability!r} is at step {position.step_id!r} ({position.step_type}{what})."


def allowed_now(position: Position) -> str:
    parts = ["this server's ability_*/skill_*/workflow_* tools", "read-only tools"]
    if position.waits_for_agent and position.step_type == "agent":
        tool = "the subagent tool (Task, Agent, spawn_agent, invoke_agent)"
        parts.append(f"{tool} delegating to {position.agent!r} and that subagent's calls" if position.agent else tool)
    if position.waits_for_agent and position.step_type == "skill":
        parts.append(f"Skill (loading {position.skill!r})" if position.skill else "Skill")
    if position.tools:
        parts.append("the step's tools: " + ", ".join(position.tools))
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def next_move(position: Position) -> str:
    """The legal next call, said for the model."""
    rid = position.inner_run
    if position.waits_for_person:
        question = position.question or {}
        command = (
            f"abilities-mcp decide {rid} retry|continue|stop"
            if question.get("kind") == "decision" or position.status == "awaiting_decision"
            else f"abilities-mcp approve {rid}"
        )
        return (
            f"A person must answer first: ask the user to answer the form their client shows or to run `{command}` "
            f"in a terminal, then call ability_status(run_id={rid!r}, wait_seconds=60)."
        )
    if position.waits_for_agent and position.step_id:
        return (
            f"Do this step with the tools it allows, then call ability_step_complete(run_id={rid!r}, "
            f"step_id={position.step_id!r}, output=<your result>); or ability_cancel(run_id={position.run_id!r}). "
            "(The ability's author can allow more tools with `tools:` on the step.)"
        )
    return (
        f"The server is running it; call ability_status(run_id={rid!r}, wait_seconds=30) to wait for the next step, "
        f"or ability_cancel(run_id={position.run_id!r})."
    )


def interrupted(position: Position) -> str:
    return (
        f"abilities-mcp: run {position.run_id} of ability {position.ability!r} was interrupted (its server stopped); "
        f"resume it with ability_resume(run_id={position.run_id!r}) or cancel it with ability_cancel."
    )


class StopVerdict(Record, fields="block reason message", defaults=("", "")):
    """Whether the agent may end its turn, and what the model (reason) or the person (message) is told."""

    __slots__ = ()

    block: bool
    reason: str  # = ""; to the model, when blocked
    message: str  # = ""; to the person


def stop_verdict(position: Position | None, stop_hook_active: bool) -> StopVerdict:
    """Strict runs keep the agent working while it or a script must act; a person's turn lets it stop."""
    if position is None or not position.owner_alive:
        return StopVerdict(False)
    if position.waits_for_person:
        return StopVerdict(False, message=f"{where(position)} {next_move(position)}")
    if position.enforcement != "strict":
        return StopVerdict(False, message=f"{where(position)} The run is still open.")
    reason = f"{where(position)} The run is not finished. {next_move(position)}"
    if stop_hook_active:  # blocked once already: Claude Code would loop (and override after 8 blocks)
        return StopVerdict(False, message=reason)
    return StopVerdict(True, reason=reason)
