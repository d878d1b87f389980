"""`abilities-mcp hook`: recorded Claude Code and OpenCode payloads through the real command, against runs a real
server started and workflows.json, with every answer checked against the client's documented output shape."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from abilities_mcp.clients.enforcement import OWN_TOOLS, kind
from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.server.app import create_server
from support import REPO, TEST_RETRY_BASE, run_hook, state_db, trust_project

SESSION = "2f7c0a1e-claude-session"
# How long one hook process may take in a test before it counts as hung (a bound, not a speed check).
HOOK_TIMEOUT = 60

# Claude Code's hook output shapes (../shared/reference/clients.md §1.3), strict: a key we invent fails.
_SPECIFIC = {
    "type": "object",
    "required": ["hookEventName"],
    "properties": {
        "hookEventName": {"enum": ["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart"]},
        "permissionDecision": {"enum": ["allow", "deny", "ask", "defer"]},
        "permissionDecisionReason": {"type": "string", "maxLength": 10_000},
        "additionalContext": {"type": "string", "maxLength": 10_000},
    },
    "additionalProperties": False,
}
CLAUDE_OUTPUT = {
    "type": "object",
    "properties": {
        "hookSpecificOutput": _SPECIFIC,
        "decision": {"const": "block"},
        "reason": {"type": "string", "minLength": 1, "maxLength": 10_000},
        "systemMessage": {"type": "string", "maxLength": 10_000},
        "continue": {"type": "boolean"},
        "suppressOutput": {"type": "boolean"},
    },
    "dependentRequired": {"decision": ["reason"]},
    "additionalProperties": False,
}

SCRIPT_RUN = """
description: builds for a while
steps:
  - {id: build, type: script, run: "sleep %d"}
"""
APPROVAL_RUN = """
description: asks before it ships
steps:
  - {id: ask, type: approval, prompt: "Ship it?"}
  - {id: ship, type: script, run: "true", needs: [ask]}
settings: {enforcement: %s}
"""
AGENT_RUN = """
description: the agent writes the changelog
triggers: {keywords: [changelog]}
steps:
  - id: write
    type: agent
    agent: scribe
    prompt: Write the changelog
    tools: [Edit]
settings: {enforcement: %s}
"""


# The real command as the client runs it (shared with the guard tests).
hook = run_hook


def claude(root: Path, event: str, env: dict[str, str] | None = None, **payload: Any) -> dict[str, Any]:
    """A Claude Code event's answer (exit 0, stdout empty or one JSON object valid against the documented shape)."""
    payload = {"session_id": SESSION, "hook_event_name": event, "permission_mode": "default", **payload}
    done = hook(root, "claude", event, payload, env)
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return {}
    out = json.loads(done.stdout)
    jsonschema.validate(out, CLAUDE_OUTPUT)
    assert done.stdout.count("\n") == 1, "stdout carries the one answer and nothing else"
    return out


def pre(root: Path, tool: str, **payload: Any) -> dict[str, Any]:
    return claude(root, "PreToolUse", **{"tool_name": tool, "tool_input": {}, "tool_use_id": "toolu_01", **payload})


def decision(out: dict[str, Any]) -> str | None:
    return out.get("hookSpecificOutput", {}).get("permissionDecision")


def reason(out: dict[str, Any]) -> str:
    return out["hookSpecificOutput"]["permissionDecisionReason"]


def context(out: dict[str, Any]) -> str:
    return out.get("hookSpecificOutput", {}).get("additionalContext", "")


def use_workflows(root: Path, *templates: str) -> None:
    data = {TEMPLATES[t]["name"]: {k: v for k, v in TEMPLATES[t].items() if k != "name"} for t in templates}
    (root / "workflows.json").write_text(json.dumps(data, indent=2))


async def start(client: Client, name: str, session: str = SESSION) -> dict[str, Any]:
    """Start a run and return it once it is at a step (a script step running, or waiting for someone)."""
    meta = {"sessionID": session}
    result = await client.call_tool("ability_run", {"name": name, "wait_seconds": 0}, meta=meta)
    assert not result.is_error, result.content
    run_id = result.structured_content["run_id"]

    async def at_a_step() -> dict[str, Any] | None:
        status = await client.call_tool("ability_status", {"run_id": run_id}, meta=meta)
        return status.structured_content if status.structured_content["current_step"] else None

    with anyio.fail_after(10):
        while (run := await at_a_step()) is None:
            await anyio.sleep(0.02)
    return run


def trusted(project, write, name: str, text: str) -> None:
    """An ability a person trusted (one nobody trusted runs strict, whatever level it asks for)."""
    write(name, text)
    trust_project(project)


@pytest.fixture
async def server(project):
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE), mode="legacy") as c:
        yield c


# --- live runs: DESIGN §7 through the hook ---


async def test_bash_during_a_running_script_step_is_denied_naming_the_step_and_the_next_call(
    server, write, root, sleep_seconds
) -> None:
    write("build", SCRIPT_RUN % sleep_seconds())
    run = await start(server, "build")
    assert run["current_step"]["id"] == "build" and run["status"] == "running"

    out = pre(root, "Bash", tool_input={"command": "make build"})

    assert decision(out) == "deny"
    assert "Bash is not allowed now" in reason(out)
    assert "step 'build' (script" in reason(out)
    assert f"ability_status(run_id={run['run_id']!r}, wait_seconds=30)" in reason(out)
    await server.call_tool("ability_cancel", {"run_id": run["run_id"]}, meta={"sessionID": SESSION})


async def test_during_a_script_step_read_only_tools_and_this_servers_tools_still_run(
    server, write, root, sleep_seconds
) -> None:
    write("build", SCRIPT_RUN % sleep_seconds())
    run = await start(server, "build")

    for tool in ("Read", "Grep", "mcp__abilities__ability_status", "mcp__db__list_tables", "TodoWrite"):
        assert pre(root, tool) == {}, tool
    for tool in ("Write", "Edit", "Task", "mcp__db__execute_query", "WebSearchAndBuy"):
        assert decision(pre(root, tool)) == "deny", tool
    await server.call_tool("ability_cancel", {"run_id": run["run_id"]}, meta={"sessionID": SESSION})


async def test_an_edit_while_a_person_is_asked_is_denied_in_strict(server, write, root) -> None:
    write("ship", APPROVAL_RUN % "strict")
    run = await start(server, "ship")
    assert run["status"] == "awaiting_approval"

    out = pre(root, "Edit", tool_input={"file_path": "x.py"})

    assert decision(out) == "deny"
    assert "step 'ask' (approval" in reason(out)
    assert f"abilities-mcp approve {run['run_id']}" in reason(out)


async def test_an_edit_while_a_person_is_asked_is_allowed_in_loose_with_the_step_as_context(
    server, write, root, project
) -> None:
    trusted(project, write, "ship", APPROVAL_RUN % "loose")
    run = await start(server, "ship")
    assert run["status"] == "awaiting_approval"

    out = pre(root, "Edit", tool_input={"file_path": "x.py"})

    assert decision(out) is None  # not "allow": that would skip the person's own permission prompt
    assert "step 'ask' (approval" in context(out) and "Edit is not part of it" in context(out)


@pytest.mark.parametrize(
    ("level", "tool", "allowed"),
    [
        ("normal", "Bash", False),
        ("normal", "mcp__github__create_pull_request", False),
        ("normal", "WebFetch", True),
        ("normal", "Task", True),
        ("strict", "Task", False),
    ],
    ids=["normal-bash", "normal-other-servers-writer", "normal-webfetch", "normal-task", "strict-task"],
)
async def test_normal_blocks_only_what_changes_things_while_a_person_is_asked(
    server, write, root, project, level, tool, allowed
) -> None:
    trusted(project, write, "ship", APPROVAL_RUN % level)
    await start(server, "ship")

    out = pre(root, tool)

    assert (decision(out) != "deny") is allowed, out


async def test_an_agent_step_allows_its_tools_task_and_its_subagents_calls(server, write, root) -> None:
    write("notes", AGENT_RUN % "strict")
    run = await start(server, "notes")
    assert run["status"] == "awaiting_agent"

    assert pre(root, "Edit") == {}  # the step's `tools: [Edit]`
    assert pre(root, "Task") == {}
    assert pre(root, "Agent") == {}  # Claude Code's name for Task since 2.1.63
    assert pre(root, "Bash", agent_id="a1", agent_type="scribe") == {}  # the named subagent doing the step
    denied = pre(root, "Bash")
    assert decision(denied) == "deny"
    assert "ability_step_complete(run_id=" in reason(denied) and "step_id='write'" in reason(denied)
    assert decision(pre(root, "Bash", agent_id="a2", agent_type="intruder")) == "deny"
    assert decision(pre(root, "Bash", agent_type="scribe")) == "deny"  # `claude --agent scribe`: not a subagent


SKILL_RUN = """
description: release notes by the team's skill
steps:
  - {id: notes, type: skill, skill: release-notes, prompt: Write the notes}
settings: {enforcement: %s}
"""


@pytest.mark.parametrize(
    ("level", "denied"), [("strict", True), ("normal", False)], ids=["strict-denies", "normal-allows-a-read"]
)
async def test_a_skill_step_allows_loading_its_own_skill_and_strict_refuses_another(
    server, write, root, project, level, denied
) -> None:
    for name in ("release-notes", "pdf"):
        (root / "skills" / name).mkdir(parents=True, exist_ok=True)
        (root / "skills" / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name} work\n---\nbody\n")
    trusted(project, write, "notes", SKILL_RUN % level)
    run = await start(server, "notes")
    assert run["status"] == "awaiting_agent"

    assert pre(root, "Skill", tool_input={"skill": "release-notes"}) == {}
    assert pre(root, "Skill", tool_input={"skill": "team-plugin:release-notes"}) == {}  # a plugin's, namespaced
    assert pre(root, "Skill", tool_input={}) == {}  # says no name: the benefit of the doubt
    other = pre(root, "Skill", tool_input={"skill": "pdf", "args": "merge"})
    assert (decision(other) == "deny") is denied
    if denied:
        assert "step 'notes' (skill" in reason(other) and "Skill (loading 'release-notes')" in reason(other)
        assert "step_id='notes'" in reason(other)

    base = {"sessionID": SESSION, "callID": "c1"}
    opencode_own = hook(root, "opencode", "tool-before", {**base, "tool": "skill", "args": {"name": "release-notes"}})
    opencode_other = hook(root, "opencode", "tool-before", {**base, "tool": "skill", "args": {"name": "pdf"}})
    assert opencode_own.returncode == 0, opencode_own.stderr
    assert opencode_other.returncode == (2 if denied else 0), opencode_other.stderr
    if denied:
        assert "release-notes" in opencode_other.stderr
    await server.call_tool("ability_cancel", {"run_id": run["run_id"]}, meta={"sessionID": SESSION})


async def test_with_a_script_running_beside_it_the_waiting_agent_step_is_what_gates(
    server, write, root, sleep_seconds
) -> None:
    write(
        "par",
        f"""
description: build while the agent reviews
settings: {{parallel: true}}
steps:
  - {{id: build, type: script, run: "sleep {sleep_seconds()}"}}
  - {{id: review, type: agent, prompt: Review the diff, tools: [Edit]}}
""",
    )
    result = await server.call_tool("ability_run", {"name": "par", "wait_seconds": 5}, meta={"sessionID": SESSION})
    run = result.structured_content
    assert run["status"] == "awaiting_agent", run

    assert pre(root, "Edit") == {}
    denied = pre(root, "Bash")
    assert "step 'review' (agent" in reason(denied) and "step_id='review'" in reason(denied)
    await server.call_tool("ability_cancel", {"run_id": run["run_id"]}, meta={"sessionID": SESSION})


async def test_a_state_file_from_a_newer_version_is_still_read_by_the_hook(server, write, root) -> None:
    import sqlite3

    write("ship", APPROVAL_RUN % "strict")
    await start(server, "ship")
    with sqlite3.connect(state_db(root)) as db:
        db.execute("PRAGMA user_version=99")

    out = pre(root, "Edit")

    assert decision(out) == "deny" and "step 'ask'" in reason(out)


async def test_a_run_of_another_session_does_not_gate_this_one(server, write, root) -> None:
    write("ship", APPROVAL_RUN % "strict")
    await start(server, "ship", session="someone-else")

    assert pre(root, "Edit") == {}


async def test_a_run_whose_server_died_gates_nothing_and_says_how_to_resume(root) -> None:
    from abilities_mcp.state.store import RunRecord, StepRecord, Store

    store = Store(state_db(root))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    store.create_run(
        RunRecord(
            "r-dead",
            "ship",
            SESSION,
            "awaiting_agent",
            "strict",
            {"steps": [{"id": "w"}]},
            None,
            {},
            None,
            None,
            int(dead.stdout),
            None,
            1.0,
            None,
            1.0,
            steps=[StepRecord("w", 0, "agent", "awaiting")],
        )
    )
    store.close()

    out = pre(root, "Bash")

    assert decision(out) is None
    assert "was interrupted" in context(out) and "ability_resume(run_id='r-dead')" in context(out)


# --- Stop ---


async def test_stop_is_blocked_once_while_the_agent_owes_a_step_and_released_on_stop_hook_active(
    server, write, root
) -> None:
    write("notes", AGENT_RUN % "strict")
    run = await start(server, "notes")

    blocked = claude(root, "Stop", stop_hook_active=False, last_assistant_message="Done!")
    released = claude(root, "Stop", stop_hook_active=True)

    assert blocked["decision"] == "block"
    assert "step 'write'" in blocked["reason"] and "ability_step_complete" in blocked["reason"]
    assert "decision" not in released and run["run_id"] in released["systemMessage"]


async def test_stop_is_allowed_while_a_person_is_asked_saying_what_they_must_do(server, write, root) -> None:
    write("ship", APPROVAL_RUN % "strict")
    run = await start(server, "ship")

    out = claude(root, "Stop", stop_hook_active=False)

    assert "decision" not in out
    assert f"abilities-mcp approve {run['run_id']}" in out["systemMessage"]


async def test_stop_is_allowed_under_normal_enforcement_and_with_no_run(server, write, root, project) -> None:
    assert claude(root, "Stop", stop_hook_active=False) == {}
    trusted(project, write, "notes", AGENT_RUN % "normal")
    await start(server, "notes")

    out = claude(root, "Stop", stop_hook_active=False)

    assert "decision" not in out and "still open" in out["systemMessage"]


# --- workflows.json through Pre/PostToolUse ---


def test_execute_query_is_denied_until_the_three_prerequisites_ran_then_allowed(root) -> None:
    use_workflows(root, "database")
    query = "mcp__db__execute_query"

    first = pre(root, query, tool_input={"sql": "select 1"})
    assert decision(first) == "deny"
    assert all(t in reason(first) for t in ("list_databases", "list_tables", "inspect_table"))

    for tool in ("mcp__db__list_databases", "mcp__db__list_tables"):
        assert claude(root, "PostToolUse", tool_name=tool, tool_input={}, tool_response={"ok": [1, 2]}) == {}
        assert decision(pre(root, query)) == "deny"
    claude(root, "PostToolUse", tool_name="mcp__db__inspect_table", tool_input={}, tool_response="id int, name text")

    assert pre(root, query) == {}
    other_session = pre(root, query, session_id="another-session")
    assert decision(other_session) == "deny"


def test_a_prerequisite_run_out_of_order_does_not_count_and_the_model_is_told(root) -> None:
    use_workflows(root, "database")

    out = claude(root, "PostToolUse", tool_name="mcp__db__inspect_table", tool_input={}, tool_response="cols")

    assert "ran before mcp__db__list_databases" not in context(out)
    assert "ran before list_databases" in context(out) and "does not count yet" in context(out)
    assert decision(pre(root, "mcp__db__execute_query")) == "deny"


@pytest.mark.parametrize(
    "response",
    [
        [{"type": "text", "text": "main, analytics"}],
        '[{"type": "text", "text": "main, analytics"}]',
        {"content": [{"type": "text", "text": "main, analytics"}], "isError": False},
    ],
    ids=["content-list", "content-as-json-text", "result-object"],
)
def test_an_mcp_tools_content_is_recorded_as_its_text(root, response) -> None:
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.store import Store

    use_workflows(root, "database")

    claude(root, "PostToolUse", tool_name="mcp__db__list_databases", tool_input={}, tool_response=response)

    store = Store(state_db(root))
    try:
        [[recorded]] = SessionState(store).done(SESSION)["database-safe-query"].values()
    finally:
        store.close()
    assert recorded.result == "main, analytics"


def test_a_non_mcp_tools_output_is_recorded_as_it_came(root) -> None:
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.store import Store

    (root / "workflows.json").write_text(
        json.dumps(
            {
                "shell-first": {
                    "description": "Look before querying",
                    "triggers": {"tools": ["execute_query"]},
                    "prerequisites": [{"step": 1, "tool": "Bash", "description": "look"}],
                }
            }
        )
    )
    output = '[{"type": "text", "text": "printed by a script"}]'

    claude(root, "PostToolUse", tool_name="Bash", tool_input={"command": "cat x.json"}, tool_response=output)

    store = Store(state_db(root))
    try:
        [[recorded]] = SessionState(store).done(SESSION)["shell-first"].values()
    finally:
        store.close()
    assert recorded.result == output


def test_with_the_repos_workflows_a_suggest_workflow_only_adds_context_once_enforced_steps_ran(root) -> None:
    shutil.copy(REPO / "workflows.json", root / "workflows.json")
    for tool in ("list_databases", "list_tables", "inspect_table"):
        claude(root, "PostToolUse", tool_name=f"mcp__pg__{tool}", tool_input={}, tool_response="ok")

    out = pre(root, "mcp__pg__execute_query")

    assert decision(out) is None
    assert "graphql-schema-aware" in context(out) and "get_schema" in context(out)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("default", "ask"), ("bypassPermissions", None), ("dontAsk", None)],
    ids=["asks-the-person", "bypass-tells-the-model", "dont-ask-tells-the-model"],
)
def test_a_warn_workflow_asks_the_person_unless_the_session_never_asks(root, mode, expected) -> None:
    use_workflows(root, "github-pr")
    tool = TEMPLATES["github-pr"]["triggers"]["tools"][0]

    out = pre(root, f"mcp__github__{tool}", permission_mode=mode)

    assert decision(out) == expected
    assert "github-pr-review" in context(out)


def test_a_tool_no_workflow_mentions_is_answered_without_touching_the_state_file(root) -> None:
    use_workflows(root, "database")

    assert pre(root, "Edit") == {}
    assert claude(root, "PostToolUse", tool_name="Edit", tool_input={}, tool_response="ok") == {}
    assert not state_db(root).exists()


# --- prompts and session start ---


async def test_a_prompt_gets_the_live_step_the_abilities_that_fit_and_the_workflows_its_words_touch(
    server, write, root
) -> None:
    use_workflows(root, "database")
    write("notes", AGENT_RUN % "strict")
    write(
        "deploy",
        "description: ship to production\ntriggers: {keywords: [deploy]}\nsteps:\n  - {id: s, type: script, run: 'true'}\n",
    )
    await start(server, "notes")

    out = claude(root, "UserPromptSubmit", prompt="Please deploy, then update the changelog and run an SQL query")

    text = context(out)
    assert "a run is live" in text and "step 'write'" in text
    assert "ability_run(name='deploy')" in text and "ability_run(name='notes')" in text
    assert "database-safe-query (enforce): before execute_query, select_query, run list_databases" in text


def test_a_prompt_nothing_fits_gets_no_answer(root) -> None:
    assert claude(root, "UserPromptSubmit", prompt="hello there") == {}


async def test_session_start_after_compaction_gives_the_live_run_and_a_short_catalog(server, write, root) -> None:
    use_workflows(root, "database")
    write("ship", APPROVAL_RUN % "strict")
    (root / "skills" / "pdf").mkdir(parents=True)
    (root / "skills" / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: PDFs\n---\nbody\n")
    run = await start(server, "ship")

    out = claude(root, "SessionStart", source="compact")

    text = context(out)
    assert run["run_id"] in text and "a person must answer first" in text.lower()
    assert "Abilities" in text and "ship" in text and "Skills" in text and "pdf" in text
    assert "database-safe-query (enforce)" in text


# --- one state file: the server, the CLI and the hook find the same one (DESIGN §2) ---


async def test_a_run_a_server_started_through_a_linked_root_gates_the_hook_in_the_real_folder(
    root, write, tmp_path
) -> None:
    from support import stdio_params

    write("ship", APPROVAL_RUN % "strict")
    link = tmp_path / "linked-project"
    link.symlink_to(root)
    async with Client(stdio_params(link), mode="legacy") as client:
        run = await start(client, "ship")
        from_cwd = pre(root, "Bash", tool_input={"command": "ls"})
        from_env = pre(tmp_path, "Bash", tool_input={"command": "ls"}, env={"CLAUDE_PROJECT_DIR": str(link)})
        forged = pre(root, "Bash", tool_input={"command": f"sqlite3 {state_db(root)} 'UPDATE runs SET answer=1'"})
        await client.call_tool("ability_cancel", {}, meta={"sessionID": SESSION})

    assert run["status"] == "awaiting_approval"
    for out in (from_cwd, from_env):
        assert decision(out) == "deny" and run["run_id"] in reason(out), out
    assert decision(forged) == "deny" and "only a person" in reason(forged)
    assert state_db(root).is_file() and not (root / ".abilities").exists()


# --- session correlation after /clear (DESIGN §6) ---


async def test_after_clear_the_run_of_this_clients_server_still_gates_under_the_new_session_id(
    root, write, sleep_seconds
) -> None:
    from support import stdio_params

    write("build", SCRIPT_RUN % sleep_seconds())
    params = stdio_params(root, env={"CLAUDE_CODE_SESSION_ID": "before-clear"})
    async with Client(params, mode="legacy") as client:
        run = await start(client, "build")
        assert run["status"] == "running"

        out = pre(root, "Bash", session_id="after-clear")

        assert decision(out) == "deny" and "step 'build'" in reason(out)
        await client.call_tool("ability_cancel", {})


# --- failure policy ---


def test_an_unreadable_state_file_denies_with_exit_2_but_lets_read_only_tools_through(root) -> None:
    state_db(root).parent.mkdir(parents=True)
    state_db(root).write_bytes(b"this is not a database" * 100)
    payload = {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": "ls"}}

    denied = hook(root, "claude", "PreToolUse", payload)
    read = hook(root, "claude", "PreToolUse", {**payload, "tool_name": "Read"})

    assert denied.returncode == 2 and denied.stdout == ""
    assert "state.db" in denied.stderr and "cannot be read" in denied.stderr
    assert read.returncode == 0 and read.stdout == ""


@pytest.mark.parametrize("stdin", ["not json", "[1, 2]"], ids=["garbage", "not-an-object"])
def test_bad_input_fails_open_with_exit_1_and_a_reason_on_stderr(root, stdin) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "hook", "claude", "PreToolUse"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HOOK_TIMEOUT,
        cwd=root,
    )

    assert done.returncode == 1 and done.stdout == ""
    assert "the call was let through" in done.stderr


def test_an_unknown_event_names_the_known_ones(root) -> None:
    done = hook(root, "claude", "PreToolCall", {})

    assert done.returncode == 1 and done.stdout == ""
    assert "PreToolUse" in done.stderr and "tool-before" in done.stderr


def test_event_names_may_be_written_kebab_case(root) -> None:
    use_workflows(root, "database")
    payload = {"session_id": SESSION, "tool_name": "mcp__db__execute_query"}

    done = hook(root, "claude", "pre-tool-use", payload)

    assert json.loads(done.stdout)["hookSpecificOutput"]["hookEventName"] == "PreToolUse"


# --- OpenCode ---


def opencode_servers(root: Path, **servers: list[str]) -> None:
    """An opencode.json naming these local servers (OpenCode calls their tools SERVER_TOOL)."""
    mcp = {name: {"type": "local", "command": command, "enabled": True} for name, command in servers.items()}
    (root / "opencode.json").write_text(json.dumps({"mcp": mcp}))


def test_opencode_tool_before_blocks_with_exit_2_and_tool_after_records(root) -> None:
    use_workflows(root, "database")
    opencode_servers(root, pg=["npx", "pg-mcp"])
    base = {"sessionID": "ses_1", "callID": "c1", "args": {}}

    blocked = hook(root, "opencode", "tool-before", {**base, "tool": "pg_execute_query"})
    assert blocked.returncode == 2 and blocked.stdout == "" and "list_databases" in blocked.stderr

    for tool in ("pg_list_databases", "pg_list_tables", "pg_inspect_table"):
        after = hook(root, "opencode", "tool-after", {**base, "tool": tool, "output": "rows"})
        assert after.returncode == 0 and after.stdout == "", after.stderr
    allowed = hook(root, "opencode", "tool-before", {**base, "tool": "pg_execute_query"})

    assert allowed.returncode == 0 and allowed.stdout == ""


async def test_in_opencode_a_run_gates_only_its_own_session_even_from_the_same_process(
    root, write, sleep_seconds
) -> None:
    from support import stdio_params

    write("build", SCRIPT_RUN % sleep_seconds())
    async with Client(stdio_params(root), mode="legacy") as client:
        await start(client, "build", session="ses_A")

        same = hook(root, "opencode", "tool-before", {"sessionID": "ses_A", "tool": "bash", "args": {}})
        other = hook(root, "opencode", "tool-before", {"sessionID": "ses_B", "tool": "bash", "args": {}})
        await client.call_tool("ability_cancel", {}, meta={"sessionID": "ses_A"})

    assert same.returncode == 2 and "step 'build'" in same.stderr
    assert other.returncode == 0 and other.stdout == "", other.stderr


async def test_opencode_calls_to_this_servers_tools_are_filed_under_the_session_the_hook_announced(
    root, write, sleep_seconds
) -> None:
    """OpenCode sends no session id on tools/call: its plugin's tool-before announces the call, the server claims it."""
    from support import stdio_params

    write("build", SCRIPT_RUN % sleep_seconds())
    arguments = {"name": "build", "wait_seconds": 0}
    async with Client(stdio_params(root), mode="legacy") as client:
        announced = hook(
            root, "opencode", "tool-before", {"sessionID": "ses_A", "tool": "abilities_ability_run", "args": arguments}
        )
        assert announced.returncode == 0 and announced.stdout == "", announced.stderr
        run = (await client.call_tool("ability_run", dict(reversed(arguments.items())))).structured_content
        hook(root, "opencode", "tool-before", {"sessionID": "ses_A", "tool": "abilities_workflow_status", "args": {}})
        announced_status = (await client.call_tool("workflow_status", {})).structured_content
        unannounced_status = (await client.call_tool("workflow_status", {})).structured_content  # claimed already

        gated = hook(root, "opencode", "tool-before", {"sessionID": "ses_A", "tool": "bash", "args": {}})
        elsewhere = hook(root, "opencode", "tool-before", {"sessionID": "ses_B", "tool": "bash", "args": {}})
        hook(root, "opencode", "tool-before", {"sessionID": "ses_A", "tool": "abilities_ability_cancel", "args": {}})
        cancelled = (await client.call_tool("ability_cancel", {})).structured_content

    assert gated.returncode == 2 and run["run_id"] in gated.stderr, gated.stderr
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert cancelled["run_id"] == run["run_id"] and cancelled["status"] == "cancelled"  # ses_A's live run
    assert announced_status["session_id"] == "ses_A"
    assert unannounced_status["session_id"].startswith("mcp-")  # no announcement: the connection's own id


async def test_in_opencode_a_subagents_calls_count_for_the_session_that_started_it(server, write, root) -> None:
    write("notes", AGENT_RUN % "strict")
    run = await start(server, "notes", session="ses_parent")
    assert run["status"] == "awaiting_agent"

    def bash(**extra: Any) -> subprocess.CompletedProcess:
        return hook(root, "opencode", "tool-before", {"sessionID": "ses_parent", "tool": "bash", "args": {}, **extra})

    assert bash(subagent="scribe").returncode == 0  # the step's agent, working in its child session
    assert bash().returncode == 2
    assert bash(subagent="intruder").returncode == 2


def test_opencode_gets_advice_as_context_on_stdout(root) -> None:
    use_workflows(root, "graphql")
    tool = TEMPLATES["graphql"]["triggers"]["tools"][0]

    done = hook(root, "opencode", "tool-before", {"sessionID": "ses_1", "tool": f"api_{tool}", "args": {}})

    assert done.returncode == 0
    assert "get_schema" in json.loads(done.stdout)["context"]


# --- the hook's own rules ---


async def test_own_tools_are_exactly_the_servers_tools(client) -> None:
    listed = {t.name for t in (await client.list_tools()).tools}

    assert set(OWN_TOOLS) == listed


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("Read", "read"),
        ("read", "read"),
        ("mcp__db__list_tables", "read"),
        ("mcp__db__getSchema", "read"),
        ("db_describe_table", "read"),
        ("mcp__db__execute_query", "destructive"),
        ("mcp__db__listing_purge", "destructive"),
        ("Bash", "destructive"),
        ("apply_patch", "destructive"),
        ("Task", "delegate"),
        ("Skill", "skill"),
        ("SlashCommand", "other"),
        ("Agent", "delegate"),
        ("TaskOutput", "read"),
        ("TaskUpdate", "read"),
        ("mcp__sentry__list-issues", "read"),
        ("mcp__context7__get-library-docs", "read"),
        ("mcp__files__find_and_replace", "destructive"),
        ("mcp__crm__get_or_create_user", "destructive"),
        ("mcp__db__listTables", "read"),
    ],
)
def test_tools_are_sorted_by_what_they_can_do(tool, expected) -> None:
    assert kind(tool) == expected


def test_the_hook_path_imports_neither_mcp_nor_pydantic(root) -> None:
    use_workflows(root, "database")
    code = (
        "import sys, io; from abilities_mcp.__main__ import main; "
        "sys.stdin = io.StringIO(sys.argv[1]); main(['hook', 'claude', 'PreToolUse']); "
        "sys.stderr.write(' '.join(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic', 'yaml', "
        "'anyio', 'dataclasses', 'argparse', 'logging', 'hashlib')))"  # logging: 6 ms a call it never uses
    )
    payload = json.dumps({"session_id": SESSION, "tool_name": "mcp__db__execute_query", "cwd": str(root)})

    done = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, text=True, timeout=HOOK_TIMEOUT)

    assert '"permissionDecision": "deny"' in done.stdout
    assert done.stderr == ""


# --- the server and the hook on one state file at once ---


async def test_the_server_and_many_hook_processes_share_the_state_file_at_once_and_lose_nothing(
    root, write, sleep_seconds
) -> None:
    from support import stdio_params

    count = 24
    workflows = {
        f"w{i}": {
            "triggers": {"tools": [f"act{i}"]},
            "mode": "enforce",
            "description": f"w{i}",
            "prerequisites": [{"step": 1, "tool": f"prep{i}", "description": "first"}],
        }
        for i in range(count)
    }
    (root / "workflows.json").write_text(json.dumps(workflows))
    write("build", SCRIPT_RUN % sleep_seconds())
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ABILITIES_"))}
    async with Client(stdio_params(root, env={"CLAUDE_CODE_SESSION_ID": "server-side"}), mode="legacy") as server:
        await start(server, "build")  # the server writes the run's events while the hooks write theirs
        hooks = [
            subprocess.Popen(
                [sys.executable, "-m", "abilities_mcp", "hook", "claude", "PostToolUse"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=clean,
            )
            for _ in range(count)
        ]
        for i, proc in enumerate(hooks):
            proc.stdin.write(
                json.dumps(
                    {
                        "session_id": "hook-side",
                        "cwd": str(root),
                        "tool_name": f"mcp__x__prep{i}",
                        "tool_input": {},
                        "tool_response": f"result {i}",
                    }
                )
            )
            proc.stdin.close()
        for i in range(count):
            result = await server.call_tool("workflow_record", {"tool": f"prep{i}"})
            assert not result.is_error, result.content
        outcomes = [_finished(p) for p in hooks]
        status = (await server.call_tool("workflow_status", {})).structured_content
        await server.call_tool("ability_cancel", {})

    assert all(code == 0 and out == "" and err == "" for code, out, err in outcomes), outcomes
    assert sorted(status["completed"]) == sorted(workflows)
    for i in range(count):
        assert pre(root, f"mcp__x__act{i}", session_id="hook-side") == {}, i


def _finished(proc: subprocess.Popen) -> tuple[int, str, str]:
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read(), proc.stderr.read()
    return proc.wait(timeout=HOOK_TIMEOUT), out, err


# --- upstream tools the gateway lists directly (gateway.json `expose: "all"`): its gates, not the hook's ---


def expose_sqlite(root: Path, expose: str = "all") -> None:
    from upstream_servers import SAFE_QUERY, write_project

    write_project(root, {"safe-query": SAFE_QUERY}, expose=expose)


def test_claude_codes_call_of_an_exposed_tool_is_left_to_the_gateway_and_a_direct_one_is_gated(root) -> None:
    expose_sqlite(root)

    exposed = pre(root, "mcp__abilities__sqlite__read_query", tool_input={"query": "SELECT 1"})
    direct = pre(root, "mcp__sqlite__read_query", tool_input={"query": "SELECT 1"})  # configured straight in
    ran = claude(
        root, "PostToolUse", tool_name="mcp__abilities__sqlite__list_tables", tool_input={}, tool_response="[]"
    )

    assert exposed == {}  # the gateway will run list_tables first; a deny here would stop it from doing so
    assert decision(direct) == "deny" and "list_tables" in reason(direct)
    assert ran == {} and decision(pre(root, "mcp__sqlite__read_query")) == "deny"  # the gateway records its own calls


def test_a_server_gateway_json_does_not_expose_is_gated_by_the_hook(root) -> None:
    expose_sqlite(root, expose="none")

    assert decision(pre(root, "mcp__abilities__sqlite__read_query")) == "deny"  # not listed: nothing of ours


async def test_opencodes_call_of_an_exposed_tool_is_announced_and_the_gateway_runs_its_prerequisites_for_it(
    root,
) -> None:
    from support import stdio_params

    expose_sqlite(root)
    arguments = {"query": "SELECT count(*) FROM users", "table": "users"}
    async with Client(stdio_params(root), mode="legacy") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        before = hook(
            root,
            "opencode",
            "tool-before",
            {"sessionID": "ses_A", "tool": "abilities_sqlite__read_query", "args": arguments},
        )
        result = await client.call_tool("sqlite__read_query", arguments)  # OpenCode sends no session id
        recorded = (await client.call_tool("workflow_status", {}, meta={"sessionID": "ses_A"})).structured_content

    assert "sqlite__read_query" in tools
    assert before.returncode == 0 and before.stdout == "", before.stderr
    assert not result.is_error and "[gateway] ran first: sqlite__list_tables" in result.content[-1].text
    assert [r["tool"] for r in recorded["completed"]["safe-query"]] == ["list_tables", "describe_table"]  # under ses_A


# --- evidence only from what the hook saw succeed, on the server it ran on (DESIGN §9) ---


def recorded_steps(root: Path, session: str = SESSION) -> dict[str, list[tuple[int, str | None, str]]]:
    """What the state file holds for the session: workflow -> (step, server, how) per record."""
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.store import Store

    if not state_db(root).exists():
        return {}
    store = Store(state_db(root))
    try:
        done = SessionState(store).done(session)
    finally:
        store.close()
    return {w: [(c.step, c.server, c.how) for records in steps.values() for c in records] for w, steps in done.items()}


def test_an_mcp_tool_that_failed_is_not_recorded_and_the_model_is_told(root) -> None:
    use_workflows(root, "database")
    failed = {"content": [{"type": "text", "text": "connection refused"}], "isError": True}

    out = claude(root, "PostToolUse", tool_name="mcp__db__list_databases", tool_input={}, tool_response=failed)

    assert "failed, so it does not count as step 1 of database-safe-query" in context(out)
    assert recorded_steps(root) == {}


def test_prerequisites_run_on_another_server_do_not_count_for_this_ones_tool(root) -> None:
    use_workflows(root, "database")
    for tool in ("list_databases", "list_tables", "inspect_table"):
        claude(root, "PostToolUse", tool_name=f"mcp__scratch__{tool}", tool_input={}, tool_response="ok")

    assert decision(pre(root, "mcp__db__execute_query")) == "deny"
    assert pre(root, "mcp__scratch__execute_query") == {}


async def test_a_self_report_never_counts_in_the_hooks_gate(server, root) -> None:
    use_workflows(root, "database")
    for tool in ("list_databases", "list_tables", "inspect_table"):  # no hook saw this session call the server
        result = await server.call_tool("workflow_record", {"tool": f"mcp__db__{tool}"}, meta={"sessionID": SESSION})
        assert not result.is_error, result.content

    out = pre(root, "mcp__db__execute_query")

    assert decision(out) == "deny" and "list_databases" in reason(out)
    assert {how for _, _, how in recorded_steps(root)["database-safe-query"]} == {"reported"}


async def test_once_the_hook_saw_the_session_call_workflow_record_a_self_report_under_enforce_is_refused(
    server, root
) -> None:
    use_workflows(root, "database", "github-pr")
    assert pre(root, "mcp__abilities__workflow_record", tool_input={"tool": "list_databases"}) == {}

    enforced = await server.call_tool("workflow_record", {"tool": "list_databases"}, meta={"sessionID": SESSION})
    warned = await server.call_tool("workflow_record", {"tool": "get_pull_request"}, meta={"sessionID": SESSION})
    status = await server.call_tool("workflow_status", {}, meta={"sessionID": SESSION})

    assert enforced.is_error
    assert "hooks, which see every tool call" in enforced.content[0].text
    assert "Legal next call(s): list_databases()" in enforced.content[0].text
    assert warned.structured_content["self_reported"] is True
    assert "counts only where nothing sees the tool run" in warned.structured_content["message"]
    assert [(s["tool"], s["how"]) for s in status.structured_content["completed"]["github-pr-review"]] == [
        ("get_pull_request", "reported")
    ]
    assert "database-safe-query" not in status.structured_content["completed"]


def test_what_the_hook_saw_succeed_is_recorded_as_observed_on_its_server(root) -> None:
    use_workflows(root, "database")

    claude(root, "PostToolUse", tool_name="mcp__db__list_databases", tool_input={}, tool_response="main")

    assert recorded_steps(root) == {"database-safe-query": [(1, "db", "observed")]}


# --- whole names: this server's tools and the gateway's are told by whole names, never by how a name ends ---


def test_a_server_configured_straight_whose_name_ends_in_an_exposed_upstreams_is_gated_by_the_hook(root) -> None:
    expose_sqlite(root)

    out = pre(root, "mcp__prod_sqlite__read_query", tool_input={"query": "SELECT 1"})

    assert decision(out) == "deny" and "list_tables" in reason(out)


async def test_another_servers_tool_named_like_one_of_this_servers_is_gated_during_a_strict_run(
    server, write, root, sleep_seconds
) -> None:
    write("build", SCRIPT_RUN % sleep_seconds())
    run = await start(server, "build")

    for tool in ("mcp__db__purge_skill_list", "mcp__other__workflow_status", "mcp__x_abilities__ability_cancel"):
        assert decision(pre(root, tool)) == "deny", tool
    assert pre(root, "mcp__abilities__ability_status") == {}  # init's default name: no config names another
    opencode_other = hook(root, "opencode", "tool-before", {"sessionID": SESSION, "tool": "other_workflow_status"})
    assert opencode_other.returncode == 2, opencode_other.stderr
    await server.call_tool("ability_cancel", {"run_id": run["run_id"]}, meta={"sessionID": SESSION})


@pytest.mark.parametrize(
    ("file", "servers"),
    [
        (".mcp.json", lambda entry: {"mcpServers": {"gates": entry}}),
        ("home/.claude.json", lambda entry: {"projects": {"ROOT": {"mcpServers": {"gates": entry}}}}),
    ],
    ids=["project-mcp-json", "claude-mcp-add-local-scope"],
)
async def test_this_servers_name_comes_from_the_configs_init_and_claude_mcp_add_write(
    server, write, root, sleep_seconds, tmp_path, file, servers
) -> None:
    entry = {"type": "stdio", "command": "/opt/tools/bin/abilities-mcp", "args": ["serve"]}
    data = json.loads(json.dumps(servers(entry)).replace("ROOT", str(root)))
    path = tmp_path / file if file.startswith("home/") else root / file
    path.write_text(json.dumps(data))
    write("build", SCRIPT_RUN % sleep_seconds())
    run = await start(server, "build")

    ours = pre(root, "mcp__gates__ability_status", env={"HOME": str(tmp_path / "home")})
    default_name = pre(root, "mcp__abilities__ability_status", env={"HOME": str(tmp_path / "home")})

    assert ours == {}
    assert decision(default_name) == "deny"  # a config names this server "gates": "abilities" is another's
    await server.call_tool("ability_cancel", {"run_id": run["run_id"]}, meta={"sessionID": SESSION})
