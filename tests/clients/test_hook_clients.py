"""`abilities-mcp hook codex|gemini|cursor EVENT`: each client's payloads through the real command, against runs a
real server started and workflows.json, every answer checked against the shape that client reads.

Where the shapes come from:
- Codex (openai/codex, codex-rs/hooks): events and stdin in src/events/pre_tool_use.rs (`command_input_json`:
  session_id, turn_id, cwd, hook_event_name, model, permission_mode, tool_name, tool_input, tool_use_id; "Shell-like
  tools pass { "command": ... } as tool_input; MCP tools pass their resolved JSON arguments"), the answers in
  src/engine/output_parser.rs (`parse_pre_tool_use`: hookSpecificOutput.permissionDecision deny + a reason; `ask`
  and `allow` without updatedInput are "unsupported"; `parse_stop`: decision block + reason) and
  src/events/pre_tool_use.rs `parse_completed` (exit 2 blocks with stderr as the reason); hooks.json in the
  config folder (.codex/ or ~/.codex/) or [hooks] in config.toml: src/engine/discovery.rs `load_hooks_json`,
  `load_toml_hooks_from_layer`. Shell tool_name "Bash"; MCP tools mcp__SERVER__TOOL; apply_patch names its
  files in the patch text.
- Gemini CLI (google-gemini/gemini-cli @5411f11): packages/core/src/hooks/types.ts (HookInput: session_id,
  transcript_path, cwd, hook_event_name, timestamp; BeforeToolInput: tool_name, tool_input, mcp_context
  {server_name, tool_name}; AfterToolInput: tool_response {llmContent, returnDisplay}; AfterAgentInput:
  stop_hook_active; HookDecision ask|block|deny|approve|allow), packages/core/src/scheduler/hook-utils.ts
  (deny blocks the tool, `ask` asks), packages/core/src/hooks/hookRunner.ts:347-366 (the command runs in a shell
  with GEMINI_PROJECT_DIR, GEMINI_SESSION_ID and CLAUDE_PROJECT_DIR set to cwd), docs/hooks/reference.md (exit 2
  blocks with stderr as the reason). Tools: run_shell_command, write_file, replace, read_file
  (packages/core/src/tools/definitions/base-declarations.ts); MCP tools mcp_SERVER_TOOL
  (packages/core/src/tools/mcp-tool.ts:32-37).
- Cursor: no published source and no CLI in the registries: its hooks documentation (cursor.com/docs/agent/hooks,
  as quoted by cupcake.eqtylab.io/reference/harnesses/cursor): .cursor/hooks.json {"version": 1, "hooks": {...}};
  stdin conversation_id, generation_id, workspace_roots, hook_event_name; beforeShellExecution {command, cwd},
  beforeMCPExecution {tool_name, tool_input (an object, or JSON text in some versions), command|url},
  afterShellExecution {output}, afterMCPExecution {result_json}, stop {status, loop_count}; answers
  {"permission": "allow|deny|ask", "user_message", "agent_message"} and stop {"followup_message"}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.server.app import create_server
from support import TEST_RETRY_BASE, run_hook

SESSION = "019a7c2e-codex-thread"
GEMINI_SESSION = "b5c1e0d2-gemini-session"
CURSOR_CONVERSATION = "conv-7f3a"

AGENT_RUN = """
description: the agent writes the changelog
steps:
  - id: write
    type: agent
    agent: scribe
    prompt: Write the changelog
    tools: [Edit]
settings: {enforcement: strict}
"""

# Codex's PreToolUse answer (codex-rs/hooks/schema/generated/pre-tool-use.command.output.schema.json), without the
# `ask` its parser refuses; Stop's and PostToolUse's answers (decision block + reason, or context).
CODEX_OUTPUT = {
    "type": "object",
    "properties": {
        "hookSpecificOutput": {
            "type": "object",
            "required": ["hookEventName"],
            "properties": {
                "hookEventName": {"enum": ["PreToolUse", "PostToolUse", "SessionStart", "UserPromptSubmit"]},
                "permissionDecision": {"const": "deny"},
                "permissionDecisionReason": {"type": "string", "minLength": 1},
                "additionalContext": {"type": "string"},
            },
            "dependentRequired": {"permissionDecision": ["permissionDecisionReason"]},
            "additionalProperties": False,
        },
        "decision": {"const": "block"},
        "reason": {"type": "string", "minLength": 1},
        "systemMessage": {"type": "string"},
    },
    "dependentRequired": {"decision": ["reason"]},
    "additionalProperties": False,
}
GEMINI_OUTPUT = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["deny", "ask"]},
        "reason": {"type": "string", "minLength": 1},
        "systemMessage": {"type": "string"},
        "hookSpecificOutput": {
            "type": "object",
            "required": ["hookEventName", "additionalContext"],
            "properties": {
                "hookEventName": {"enum": ["AfterTool", "BeforeAgent", "SessionStart"]},
                "additionalContext": {"type": "string"},
            },
            "additionalProperties": False,
        },
    },
    "dependentRequired": {"decision": ["reason"]},
    "additionalProperties": False,
}
CURSOR_OUTPUT = {
    "type": "object",
    "properties": {
        "permission": {"enum": ["deny", "ask"]},
        "user_message": {"type": "string", "minLength": 1},
        "agent_message": {"type": "string", "minLength": 1},
        "followup_message": {"type": "string", "minLength": 1},
        "additional_context": {"type": "string"},
    },
    "dependentRequired": {"permission": ["user_message", "agent_message"]},
    "additionalProperties": False,
}
SCHEMAS = {"codex": CODEX_OUTPUT, "gemini": GEMINI_OUTPUT, "cursor": CURSOR_OUTPUT}


def answer(root: Path, client: str, event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The client's answer: exit 0, stdout empty or one JSON object of the shape that client reads."""
    done = run_hook(root, client, event, payload)
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return {}
    assert done.stdout.count("\n") == 1, f"stdout carries the one answer and nothing else: {done.stdout!r}"
    out = json.loads(done.stdout)
    jsonschema.validate(out, SCHEMAS[client])
    return out


def codex(root: Path, event: str, **payload: Any) -> dict[str, Any]:
    base = {
        "session_id": SESSION,
        "turn_id": "turn-1",
        "transcript_path": None,
        "hook_event_name": event,
        "model": "gpt-5.3-codex",
        "permission_mode": "default",
    }
    if event in ("PreToolUse", "PostToolUse"):
        base |= {"tool_use_id": "call_1", "tool_input": {}}
    return answer(root, "codex", event, {**base, **payload})


def gemini(root: Path, event: str, **payload: Any) -> dict[str, Any]:
    base = {
        "session_id": GEMINI_SESSION,
        "transcript_path": "/tmp/chat.json",
        "hook_event_name": event,
        "timestamp": "2026-11-24T08:00:00.000Z",
    }
    if event in ("BeforeTool", "AfterTool"):
        base["tool_input"] = {}
    return answer(root, "gemini", event, {**base, **payload})


def gemini_mcp(server: str, tool: str) -> dict[str, Any]:
    """How Gemini CLI names another server's tool, and the mcp_context it sends with it."""
    return {
        "tool_name": f"mcp_{server}_{tool}",
        "mcp_context": {"server_name": server, "tool_name": tool, "command": "npx", "args": [server]},
    }


def cursor(root: Path, event: str, **payload: Any) -> dict[str, Any]:
    base = {
        "conversation_id": CURSOR_CONVERSATION,
        "generation_id": "gen-1",
        "hook_event_name": event,
        "workspace_roots": [str(root)],
        "cursor_version": "2.0.77",
    }
    return answer(root, "cursor", event, {**base, **payload})


def cursor_servers(root: Path, **servers: dict[str, Any]) -> None:
    """.cursor/mcp.json with these servers (Cursor sends an MCP call's server as its command, not its name)."""
    (root / ".cursor").mkdir(exist_ok=True)
    (root / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def use_workflows(root: Path, *templates: str) -> None:
    data = {TEMPLATES[t]["name"]: {k: v for k, v in TEMPLATES[t].items() if k != "name"} for t in templates}
    (root / "workflows.json").write_text(json.dumps(data, indent=2))


@pytest.fixture
async def server(project):
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE), mode="legacy") as c:
        yield c


async def start_agent_step(server: Client, write, session: str) -> str:
    """A strict run at its agent step, filed under the client's session; its run id."""
    write("notes", AGENT_RUN)
    result = await server.call_tool("ability_run", {"name": "notes", "wait_seconds": 5}, meta={"sessionID": session})
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "awaiting_agent", result.structured_content
    return result.structured_content["run_id"]


# --- Codex ---


def test_codex_an_everyday_shell_call_with_no_run_is_let_through_silently(root) -> None:
    assert codex(root, "PreToolUse", tool_name="Bash", tool_input={"command": "pytest -q"}) == {}


async def test_codex_a_strict_agent_steps_out_of_step_shell_call_is_denied_with_the_step_and_the_next_call(
    server, write, root
) -> None:
    run_id = await start_agent_step(server, write, SESSION)

    out = codex(root, "PreToolUse", tool_name="Bash", tool_input={"command": "touch pwned"})

    why = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "Bash is not allowed now" in why and "step 'write'" in why
    assert f"ability_step_complete(run_id={run_id!r}" in why
    assert codex(root, "PreToolUse", tool_name="mcp__abilities__ability_status", tool_input={"run_id": run_id}) == {}
    stop = codex(root, "Stop", stop_hook_active=False, last_assistant_message="done")
    assert stop["decision"] == "block" and "step 'write'" in stop["reason"]
    assert "decision" not in codex(root, "Stop", stop_hook_active=True)


async def test_codex_a_strict_agent_step_lets_codexs_subagent_tools_through_and_then_the_named_subagents_calls(
    server, write, root
) -> None:
    await start_agent_step(server, write, SESSION)
    calls = [  # Codex 0.169.0's subagent tools, as the step's instructions ask ("your Task/subagent tool")
        ("spawn_agent", {"agent_type": "scribe", "message": "Write the changelog"}),
        ("wait_agent", {"targets": ["019a7c2e-agent-1"], "timeout_ms": 60000}),
        ("send_input", {"target": "019a7c2e-agent-1", "message": "shorter, please"}),
        ("close_agent", {"target": "019a7c2e-agent-1"}),
    ]

    for tool, arguments in calls:
        assert codex(root, "PreToolUse", tool_name=tool, tool_input=arguments) == {}, tool

    scribe = {"agent_id": "019a7c2e-agent-1", "agent_type": "scribe"}  # a call from inside the spawned agent
    assert codex(root, "PreToolUse", tool_name="Bash", tool_input={"command": "git log"}, **scribe) == {}
    stranger = {"agent_id": "019a7c2e-agent-2", "agent_type": "explorer"}
    denied = codex(root, "PreToolUse", tool_name="Bash", tool_input={"command": "git log"}, **stranger)
    why = denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "spawn_agent" in why and "delegating to 'scribe'" in why


async def test_codex_subagent_tools_wait_like_any_other_tool_while_the_server_runs_a_script(
    server, write, root, sleep_seconds
) -> None:
    step = f"{{id: build, type: script, run: 'sleep {sleep_seconds()}'}}"
    write("slow", f"description: d\nsteps:\n  - {step}\nsettings: {{enforcement: strict}}\n")
    result = await server.call_tool("ability_run", {"name": "slow", "wait_seconds": 0}, meta={"sessionID": SESSION})
    run_id = result.structured_content["run_id"]
    try:
        out = codex(root, "PreToolUse", tool_name="spawn_agent", tool_input={"message": "build it yourself"})
        why = out["hookSpecificOutput"]["permissionDecisionReason"]
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert "spawn_agent is not allowed now" in why and f"Run {run_id} of ability 'slow'" in why
    finally:
        await server.call_tool("ability_cancel", {"run_id": run_id}, meta={"sessionID": SESSION})


def test_codex_a_workflow_denies_until_its_prerequisites_ran_recorded_by_post_tool_use(root) -> None:
    use_workflows(root, "database")
    query = "mcp__db__execute_query"

    first = codex(root, "PreToolUse", tool_name=query, tool_input={"sql": "select 1"})
    assert first["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "list_databases" in first["hookSpecificOutput"]["permissionDecisionReason"]
    for tool in ("list_databases", "list_tables", "inspect_table"):
        response = {"content": [{"type": "text", "text": "ok"}], "isError": False}
        assert codex(root, "PostToolUse", tool_name=f"mcp__db__{tool}", tool_response=response) == {}

    assert codex(root, "PreToolUse", tool_name=query, tool_input={"sql": "select 1"}) == {}


def test_codex_a_warn_workflow_tells_the_model_since_codex_refuses_ask(root) -> None:
    use_workflows(root, "github-pr")
    tool = TEMPLATES["github-pr"]["triggers"]["tools"][0]

    out = codex(root, "PreToolUse", tool_name=f"mcp__github__{tool}")

    assert "permissionDecision" not in out["hookSpecificOutput"]
    assert "github-pr-review" in out["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("Bash", {"command": "abilities-mcp approve run_1"}, "a person's answer"),
        ("Bash", {"command": "cat evil.json > .codex/hooks.json"}, ".codex/hooks.json"),
        ("apply_patch", {"command": "*** Begin Patch\n*** Add File: .codex/hooks.json\n+{}\n*** End Patch\n"}, ""),
        (
            "apply_patch",
            {"command": "*** Begin Patch\n*** Update File: .codex/config.toml\n@@\n-a\n+b\n*** End Patch"},
            "",
        ),
        ("Bash", {"command": "sqlite3 .abilities/state.db .dump"}, ".abilities"),
    ],
    ids=["approve", "hooks-json-by-shell", "hooks-json-by-patch", "config-toml-by-patch", "state-dir"],
)
def test_codex_the_guards_hold_with_no_run(root, tool, arguments, named) -> None:
    out = codex(root, "PreToolUse", tool_name=tool, tool_input=arguments)

    why = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny" and f"{tool} refused" in why
    assert named in why


def test_codex_a_patch_to_an_ordinary_file_passes_the_guards(root) -> None:
    patch = "*** Begin Patch\n*** Add File: src/app.py\n+print('hi')\n*** End Patch\n"
    assert codex(root, "PreToolUse", tool_name="apply_patch", tool_input={"command": patch}) == {}


# --- Gemini CLI ---


def test_gemini_an_everyday_shell_call_with_no_run_is_let_through_silently(root) -> None:
    assert gemini(root, "BeforeTool", tool_name="run_shell_command", tool_input={"command": "pytest -q"}) == {}


async def test_gemini_a_strict_agent_steps_out_of_step_shell_call_is_denied_and_after_agent_keeps_it_going(
    server, write, root
) -> None:
    run_id = await start_agent_step(server, write, GEMINI_SESSION)

    out = gemini(root, "BeforeTool", tool_name="run_shell_command", tool_input={"command": "touch pwned"})

    assert out["decision"] == "deny"
    assert "run_shell_command is not allowed now" in out["reason"] and f"run_id={run_id!r}" in out["reason"]
    assert gemini(root, "BeforeTool", tool_name="read_file", tool_input={"file_path": "README.md"}) == {}
    own = gemini_mcp("abilities", "ability_status")
    assert gemini(root, "BeforeTool", **own, tool_input={"run_id": run_id}) == {}
    again = gemini(root, "AfterAgent", prompt="go", prompt_response="done", stop_hook_active=False)
    assert again["decision"] == "deny" and "step 'write'" in again["reason"]
    assert "decision" not in gemini(root, "AfterAgent", prompt="go", prompt_response="done", stop_hook_active=True)


async def test_gemini_a_strict_agent_step_lets_invoke_agent_through(server, write, root) -> None:
    await start_agent_step(server, write, GEMINI_SESSION)

    delegated = gemini(
        root, "BeforeTool", tool_name="invoke_agent", tool_input={"agent_name": "scribe", "prompt": "go"}
    )

    assert delegated == {}
    shell = gemini(root, "BeforeTool", tool_name="run_shell_command", tool_input={"command": "touch pwned"})
    assert shell["decision"] == "deny" and "invoke_agent" in shell["reason"]


def test_gemini_a_workflow_denies_until_its_prerequisites_ran_recorded_by_after_tool(root) -> None:
    use_workflows(root, "database")

    first = gemini(root, "BeforeTool", **gemini_mcp("db", "execute_query"), tool_input={"sql": "select 1"})
    assert first["decision"] == "deny" and "list_databases" in first["reason"]
    for tool in ("list_databases", "list_tables", "inspect_table"):
        response = {"llmContent": [{"text": "ok"}], "returnDisplay": "ok"}
        assert gemini(root, "AfterTool", **gemini_mcp("db", tool), tool_response=response) == {}

    assert gemini(root, "BeforeTool", **gemini_mcp("db", "execute_query"), tool_input={"sql": "select 1"}) == {}


@pytest.mark.parametrize(
    ("client", "event", "payload"),
    [
        (
            "gemini",
            "AfterTool",
            {  # what Gemini CLI 0.61.0 sent for an MCP tool (tests/clients/test_gemini.py)
                **gemini_mcp("db", "list_databases"),
                "tool_response": {"llmContent": [{"text": "main, analytics"}], "returnDisplay": "main, analytics"},
            },
        ),
        (
            "codex",
            "PostToolUse",
            {  # what Codex 0.169.0 sent for an MCP tool (tests/clients/test_codex.py)
                "tool_name": "mcp__db__list_databases",
                "tool_response": {
                    "content": [{"type": "text", "text": "main, analytics"}],
                    "structuredContent": None,
                    "isError": False,
                },
            },
        ),
        (
            "cursor",
            "afterMCPExecution",
            {
                "tool_name": "list_databases",
                "result_json": '{"content": [{"type": "text", "text": "main, analytics"}]}',
            },
        ),
    ],
    ids=["gemini", "codex", "cursor"],
)
def test_an_mcp_tools_result_is_recorded_as_its_text(root, client, event, payload) -> None:
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.store import Store
    from support import state_db

    use_workflows(root, "database")
    session = {"codex": SESSION, "gemini": GEMINI_SESSION, "cursor": CURSOR_CONVERSATION}[client]
    assert {"codex": codex, "gemini": gemini, "cursor": cursor}[client](root, event, **payload) == {}

    store = Store(state_db(root))
    try:
        [[recorded]] = SessionState(store).done(session)["database-safe-query"].values()
    finally:
        store.close()
    assert recorded.result == "main, analytics"


def test_gemini_a_warn_workflow_asks_the_person(root) -> None:
    use_workflows(root, "github-pr")
    tool = TEMPLATES["github-pr"]["triggers"]["tools"][0]

    out = gemini(root, "BeforeTool", **gemini_mcp("github", tool))

    assert out["decision"] == "ask" and "github-pr-review" in out["reason"]


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("run_shell_command", {"command": "abilities-mcp decide run_1 continue"}, "a person's answer"),
        ("write_file", {"file_path": ".gemini/settings.json", "content": "{}"}, ".gemini/settings.json"),
        ("replace", {"file_path": ".gemini/settings.json", "old_string": "a", "new_string": "b"}, "settings.json"),
        ("run_shell_command", {"command": "rm -rf .abilities"}, ".abilities"),
    ],
    ids=["decide", "settings-by-write", "settings-by-replace", "state-dir"],
)
def test_gemini_the_guards_hold_with_no_run(root, tool, arguments, named) -> None:
    out = gemini(root, "BeforeTool", tool_name=tool, tool_input=arguments)

    assert out["decision"] == "deny" and f"{tool} refused" in out["reason"] and named in out["reason"]


# --- Cursor (documented shapes: no CLI to drive) ---


def test_cursor_an_everyday_shell_command_with_no_run_leaves_the_decision_to_cursor(root) -> None:
    assert cursor(root, "beforeShellExecution", command="pytest -q", cwd=str(root)) == {}


async def test_cursor_a_strict_agent_steps_out_of_step_shell_command_is_denied_and_stop_follows_up(
    server, write, root
) -> None:
    run_id = await start_agent_step(server, write, CURSOR_CONVERSATION)

    out = cursor(root, "beforeShellExecution", command="touch pwned", cwd=str(root))

    assert out["permission"] == "deny" and "Shell is not allowed now" in out["agent_message"]
    assert f"run_id={run_id!r}" in out["agent_message"]
    cursor_servers(root, abilities={"command": "abilities-mcp", "args": ["serve", "--root", "${workspaceFolder}"]})
    own = cursor(
        root,
        "beforeMCPExecution",
        tool_name="ability_status",
        tool_input=json.dumps({"run_id": run_id}),
        command=f"abilities-mcp serve --root {root}",
    )
    assert own == {}
    follow = cursor(root, "stop", status="completed", loop_count=0)
    assert "step 'write'" in follow["followup_message"]
    assert cursor(root, "stop", status="completed", loop_count=1) == {}


def test_cursor_a_workflow_denies_until_its_prerequisites_ran_recorded_after_each_mcp_call(root) -> None:
    use_workflows(root, "database")
    query = {"tool_name": "execute_query", "tool_input": json.dumps({"sql": "select 1"}), "command": "npx db-mcp"}

    first = cursor(root, "beforeMCPExecution", **query)
    assert first["permission"] == "deny" and "list_databases" in first["agent_message"]
    for tool in ("list_databases", "list_tables", "inspect_table"):
        after = {"tool_name": tool, "tool_input": "{}", "result_json": '{"content": [{"type": "text", "text": "ok"}]}'}
        assert cursor(root, "afterMCPExecution", **after, duration=12) == {}

    assert cursor(root, "beforeMCPExecution", **query) == {}


def test_cursor_leaves_an_exposed_tool_of_this_servers_gateway_to_it_and_gates_the_same_tool_elsewhere(root) -> None:
    from upstream_servers import SAFE_QUERY, write_project

    write_project(root, {"safe-query": SAFE_QUERY}, expose="all")
    cursor_servers(
        root,
        abilities={"command": "/home/me/.venv/bin/abilities-mcp", "args": ["serve"]},
        other={"command": "npx", "args": ["some-other-gateway"]},
    )
    query = {"tool_name": "sqlite__read_query", "tool_input": json.dumps({"query": "SELECT 1", "table": "users"})}

    ours = cursor(root, "beforeMCPExecution", **query, command="/home/me/.venv/bin/abilities-mcp serve")
    theirs = cursor(root, "beforeMCPExecution", **query, command="npx some-other-gateway")

    assert ours == {}  # the gateway runs list_tables and describe_table first
    assert theirs["permission"] == "deny" and "list_tables" in theirs["agent_message"]


@pytest.mark.parametrize(
    ("event", "payload", "named"),
    [
        ("beforeShellExecution", {"command": "abilities-mcp approve run_1"}, "a person's answer"),
        ("beforeShellExecution", {"command": "echo '{}' > .cursor/hooks.json"}, ".cursor/hooks.json"),
        ("preToolUse", {"tool_name": "Write", "tool_input": {"file_path": ".cursor/hooks.json"}}, "hooks.json"),
        ("preToolUse", {"tool_name": "StrReplace", "tool_input": {"file_path": ".cursor/mcp.json"}}, "mcp.json"),
    ],
    ids=["approve", "hooks-json-by-shell", "hooks-json-by-write", "mcp-json-by-strreplace"],
)
def test_cursor_the_guards_hold_with_no_run(root, event, payload, named) -> None:
    out = cursor(root, event, **payload)

    assert out["permission"] == "deny" and named in out["agent_message"]


# --- a failed call never counts as a prerequisite, whatever shape the client gives it ---


def session_records(root: Path, session: str) -> dict[str, Any]:
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.store import Store
    from support import state_db

    if not state_db(root).exists():
        return {}
    store = Store(state_db(root))
    try:
        return SessionState(store).done(session)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("client", "event", "payload"),
    [
        (
            "codex",
            "PostToolUse",
            {  # Codex passes the MCP result as it came (codex-rs CallToolResult: content, isError)
                "tool_name": "mcp__db__list_databases",
                "tool_response": {"content": [{"type": "text", "text": "refused"}], "isError": True},
            },
        ),
        (
            "gemini",
            "AfterTool",
            {  # Gemini CLI's mcp-tool.ts sets `error` for an MCP result with isError
                **gemini_mcp("db", "list_databases"),
                "tool_response": {
                    "llmContent": "MCP tool 'list_databases' reported tool error",
                    "returnDisplay": "Error",
                    "error": {"message": "reported tool error", "type": "mcp_tool_error"},
                },
            },
        ),
        (
            "cursor",
            "afterMCPExecution",
            {
                "tool_name": "list_databases",
                "command": "npx db-mcp",
                "result_json": '{"content": [{"type": "text", "text": "refused"}], "isError": true}',
            },
        ),
    ],
    ids=["codex", "gemini", "cursor"],
)
def test_an_mcp_tool_that_failed_is_not_recorded(root, client, event, payload) -> None:
    use_workflows(root, "database")
    session = {"codex": SESSION, "gemini": GEMINI_SESSION, "cursor": CURSOR_CONVERSATION}[client]

    {"codex": codex, "gemini": gemini, "cursor": cursor}[client](root, event, **payload)

    assert session_records(root, session) == {}


def test_gemini_a_shell_command_that_exited_non_zero_is_not_recorded_and_one_that_succeeded_is(root) -> None:
    (root / "workflows.json").write_text(
        json.dumps(
            {
                "tests-first": {
                    "description": "Run the tests before a query",
                    "triggers": {"tools": ["execute_query"]},
                    "prerequisites": [{"step": 1, "tool": "run_shell_command", "description": "the tests"}],
                }
            }
        )
    )

    def shell(code: int) -> dict[str, Any]:
        text = "Output: 3 failed\nExit Code: 1" if code else "Output: 12 passed"
        return {"tool_name": "run_shell_command", "tool_response": {"llmContent": text, "returnDisplay": text}}

    gemini(root, "AfterTool", **shell(1), tool_input={"command": "pytest"})
    failed = session_records(root, GEMINI_SESSION)
    gemini(root, "AfterTool", **shell(0), tool_input={"command": "pytest"})

    assert failed == {}
    assert list(session_records(root, GEMINI_SESSION)) == ["tests-first"]


def test_opencode_a_call_its_plugin_saw_fail_is_not_recorded(root) -> None:
    use_workflows(root, "database")
    (root / "opencode.json").write_text(json.dumps({"mcp": {"pg": {"type": "local", "command": ["pg-mcp"]}}}))
    base = {"sessionID": "ses_1", "callID": "c1", "tool": "pg_list_databases", "output": "refused"}

    failed = run_hook(root, "opencode", "tool-after", {**base, "failed": True})

    assert failed.returncode == 0 and "failed, so it does not count" in json.loads(failed.stdout)["context"]
    assert session_records(root, "ses_1") == {}


# --- whole names: this server's own, from each client's configs ---


async def test_codex_and_gemini_name_this_server_as_their_configs_do(server, write, root, tmp_path) -> None:
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text('[mcp_servers.gates]\ncommand = "abilities-mcp"\nargs = ["serve"]\n')
    (tmp_path / "home" / ".gemini").mkdir()
    (tmp_path / "home" / ".gemini" / "settings.json").write_text(
        json.dumps({"mcpServers": {"ab": {"command": "uvx", "args": ["--from", "abilities-mcp", "abilities-mcp"]}}})
    )
    await start_agent_step(server, write, SESSION)
    await start_agent_step(server, write, GEMINI_SESSION)

    def denied(out: dict[str, Any]) -> bool:
        return out.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" or out.get("decision") == "deny"

    assert codex(root, "PreToolUse", tool_name="mcp__gates__ability_status") == {}
    assert denied(codex(root, "PreToolUse", tool_name="mcp__abilities__ability_status"))
    assert gemini(root, "BeforeTool", **gemini_mcp("ab", "ability_status")) == {}
    assert denied(gemini(root, "BeforeTool", **gemini_mcp("abilities_x", "ability_status")))


async def test_cursor_a_servers_command_is_matched_whole_not_by_what_it_contains(server, write, root) -> None:
    cursor_servers(
        root,
        abilities={"command": "abilities-mcp", "args": ["serve", "--root", "${workspaceFolder}"]},
        lookalike={"command": "/opt/abilities-mcp-tools/bin/server"},
    )
    await start_agent_step(server, write, CURSOR_CONVERSATION)
    status = {"tool_name": "ability_status", "tool_input": "{}"}

    ours = cursor(root, "beforeMCPExecution", **status, command=f"abilities-mcp serve --root {root}")
    lookalike = cursor(root, "beforeMCPExecution", **status, command="/opt/abilities-mcp-tools/bin/server")
    unknown = cursor(root, "beforeMCPExecution", **status, command="abilities-mcp-but-not serve")

    assert ours == {}
    assert lookalike["permission"] == "deny" and unknown["permission"] == "deny"
