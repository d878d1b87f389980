"""The OpenCode plugin `init opencode` writes, driven by Node the way OpenCode calls it: before and after each tool."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from abilities_mcp.prerequisites.sessions import SessionState
from abilities_mcp.state.store import Store
from support import REPO, start_strict_run, state_db

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not on PATH: the OpenCode plugin is JavaScript and needs it to run"
)

WORKFLOWS = REPO / "workflows.json"
# One Node run drives a few tool calls, each a hook process; a run that takes this long hung.
NODE_TIMEOUT_S = 60
PREREQUISITES = ("pg_list_databases", "pg_list_tables", "pg_inspect_table")
# Imports the written plugin, calls its factory as OpenCode does, then for each call: tool.execute.before, and
# (unless before threw, which is how OpenCode refuses a call) tool.execute.after with the tool's output: for
# OpenCode's own tools {title, output, metadata}; for an MCP tool (`mcp: true`) the MCP result, {content: [...]},
# which is what OpenCode 1.18 passes (`isError` when the tool failed; bash's exit code is `metadata.exit`). An entry
# with `event` is a bus event OpenCode hands the plugin instead;
# `sessions` are what OpenCode's client answers about a session the plugin saw no event for.
DRIVER = """
import { pathToFileURL } from "node:url"

const [plugin, directory, callsJson, sessionsJson] = process.argv.slice(2)
const { AbilitiesMcp } = await import(pathToFileURL(plugin).href)
// OpenCode's client, as far as the plugin uses it: the sessions OpenCode knows (id -> Session).
const known = JSON.parse(sessionsJson || "{}")
const client = { session: { get: async ({ path }) => ({ data: known[path.id] ?? { id: path.id } }) } }
const hooks = await AbilitiesMcp({ directory, client })
const results = []
for (const call of JSON.parse(callsJson)) {
  if (call.event) {
    await hooks.event({ event: call.event })
    results.push({ event: call.event.type })
    continue
  }
  const input = { tool: call.tool, sessionID: call.sessionID, callID: call.callID }
  try {
    await hooks["tool.execute.before"](input, { args: call.args ?? {} })
  } catch (error) {
    results.push({ tool: call.tool, threw: error instanceof Error, error: String(error?.message ?? error) })
    continue
  }
  const output = call.mcp
    ? { content: [{ type: "text", text: call.output }], ...(call.isError ? { isError: true } : {}) }
    : { title: call.tool, output: call.output, metadata: call.exit === undefined ? {} : { exit: call.exit } }
  await hooks["tool.execute.after"](input, output)
  results.push({ tool: call.tool, threw: false, output: call.mcp ? output.content : output.output })
}
console.log(JSON.stringify(results))
"""


def abilities_command() -> str:
    """The console script next to this interpreter, as a person would pass it; else `python -m abilities_mcp`."""
    script = Path(sys.executable).parent / "abilities-mcp"
    return str(script) if script.is_file() else shlex.join([sys.executable, "-m", "abilities_mcp"])


def init_opencode(root: Path, command: str) -> Path:
    """`abilities-mcp init opencode --command COMMAND` in a project holding the repo's workflows.json."""
    shutil.copy(WORKFLOWS, root / "workflows.json")
    done = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), "init", "opencode", "--command", command],
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    plugin = root / ".opencode" / "plugins" / "abilities-mcp.js"
    assert plugin.is_file(), done.stdout
    config = json.loads((root / "opencode.json").read_text())  # the database the pg_* tools are OpenCode's names of
    config["mcp"]["pg"] = {"type": "local", "command": ["npx", "pg-mcp"], "enabled": True}
    (root / "opencode.json").write_text(json.dumps(config))
    return plugin


def call(tool: str, session: str, n: int, output: str = "ok", mcp: bool = False) -> dict[str, Any]:
    return {"tool": tool, "sessionID": session, "callID": f"call_{n}", "output": output, "mcp": mcp}


def recorded(root: Path, session: str) -> dict[int, Any]:
    """What the state file holds for the database workflow in `session`: step -> its one Completion."""
    store = Store(state_db(root))
    try:
        steps = SessionState(store).done(session).get("database-safe-query", {})
    finally:
        store.close()
    assert all(len(records) == 1 for records in steps.values()), steps
    return {step: records[0] for step, records in steps.items()}


def drive(
    tmp_path: Path,
    plugin: Path,
    root: Path,
    calls: list[dict[str, Any]],
    sessions: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Run the calls through the plugin in one Node process; returns one result per call, and Node's stderr."""
    driver = tmp_path / "drive.mjs"
    driver.write_text(DRIVER)
    done = subprocess.run(
        ["node", str(driver), str(plugin), str(root), json.dumps(calls), json.dumps(sessions or {})],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=NODE_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.fixture
def plugin(root: Path) -> Path:
    return init_opencode(root, abilities_command())


def prerequisites_then(session: str, *tail: dict[str, Any]) -> list[dict[str, Any]]:
    """The database workflow's three prerequisites in `session`, in step order, then `tail`."""
    return [call(tool, session, n) for n, tool in enumerate(PREREQUISITES)] + list(tail)


def test_a_query_with_nothing_recorded_throws_an_error_naming_the_missing_prerequisites(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    [result], _ = drive(tmp_path, plugin, root, [call("pg_execute_query", "ses_a", 1)])
    assert result["threw"] is True, result
    for prerequisite in ("list_databases", "list_tables", "inspect_table"):
        assert prerequisite in result["error"]


def test_after_the_prerequisites_ran_the_query_goes_through_with_the_suggest_note_appended_to_its_output(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    calls = prerequisites_then("ses_a", call("pg_execute_query", "ses_a", 9, output="3 rows"))
    results, _ = drive(tmp_path, plugin, root, calls)
    assert [r["threw"] for r in results] == [False] * 4, results
    assert [r["output"] for r in results[:3]] == ["ok"] * 3  # nothing to say about the prerequisites
    query = results[3]["output"]
    head, note = query.split("\n\n", 1)
    assert head == "3 rows"
    assert note.startswith("abilities-mcp:") and "graphql-schema-aware" in note and "get_schema" in note


def test_prerequisites_recorded_in_one_session_leave_another_session_blocked(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    calls = prerequisites_then("ses_a", call("pg_execute_query", "ses_b", 9))
    results, _ = drive(tmp_path, plugin, root, calls)
    assert [r["threw"] for r in results[:3]] == [False] * 3, results
    assert results[3]["threw"] is True and "list_databases" in results[3]["error"], results[3]


def test_a_command_that_cannot_start_lets_the_call_through_and_says_so_on_the_console(
    tmp_path: Path, root: Path
) -> None:
    missing = tmp_path / "nowhere" / "abilities-mcp"
    plugin = init_opencode(root, str(missing))
    [result], stderr = drive(tmp_path, plugin, root, [call("pg_execute_query", "ses_a", 1, output="3 rows")])
    assert result == {"tool": "pg_execute_query", "threw": False, "output": "3 rows"}
    assert "abilities-mcp hook opencode tool-before failed" in stderr and "allowed" in stderr
    assert "abilities-mcp hook opencode tool-after failed" in stderr
    assert "ENOENT" in stderr


def test_a_gate_that_does_not_answer_in_time_refuses_the_call_it_was_asked_about(tmp_path: Path, root: Path) -> None:
    hang = tmp_path / "hang.sh"  # a hook that never answers (the hook refuses by itself within its budget)
    hang.write_text("#!/bin/sh\nexec tail -f /dev/null\n")
    hang.chmod(0o755)
    plugin = init_opencode(root, str(hang))
    text = plugin.read_text()
    assert "const TIMEOUT_MS = 10_000" in text
    plugin.write_text(text.replace("const TIMEOUT_MS = 10_000", "const TIMEOUT_MS = 300"))  # the test's patience

    [result], _ = drive(tmp_path, plugin, root, [call("pg_execute_query", "ses_a", 1, output="3 rows")])

    assert result["threw"], "before the fix a hung gate let the call through"
    assert "did not answer within 0.3 s; the call is refused" in result["error"], result


def test_a_strict_run_at_a_running_script_step_blocks_bash_but_not_read_in_its_session(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    start_strict_run(state_db(root), session="ses_live", run_id="run_live")
    calls = [call("bash", "ses_live", 1), call("read", "ses_live", 2), call("bash", "ses_other", 3)]
    blocked, read, elsewhere = drive(tmp_path, plugin, root, calls)[0]
    assert blocked["threw"] is True, blocked
    assert "bash is not allowed now" in blocked["error"] and "run_live" in blocked["error"]
    assert read == {"tool": "read", "threw": False, "output": "ok"}
    assert elsewhere == {"tool": "bash", "threw": False, "output": "ok"}


def test_opencode_started_in_a_subfolder_still_gates_with_the_projects_files(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    subfolder = root / "src" / "deep"
    subfolder.mkdir(parents=True)

    [result], _ = drive(tmp_path, plugin, subfolder, [call("pg_execute_query", "ses_a", 1)])

    assert result["threw"] is True and "list_databases" in result["error"], result
    assert not state_db(subfolder).exists()


def test_the_hook_is_pinned_to_the_plugins_project_over_the_environment(
    tmp_path: Path, root: Path, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"  # a folder without workflows.json: a hook that went there would let all through
    elsewhere.mkdir()
    monkeypatch.setenv("ABILITIES_ROOT", str(elsewhere))
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(elsewhere))

    [result], _ = drive(tmp_path, plugin, root, [call("pg_execute_query", "ses_a", 1)])

    assert result["threw"] is True and "list_databases" in result["error"], result
    assert '"hook", "opencode", event, "--root", root, ...HOOK_OPTIONS]' in plugin.read_text()


def test_an_mcp_tools_result_is_recorded_as_its_text_and_a_note_reaches_the_model_as_a_text_part(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    calls = [
        call("pg_list_tables", "ses_a", 1, output="users, orders", mcp=True),  # out of order: a note comes back
        call("pg_list_databases", "ses_a", 2, output="main, analytics", mcp=True),
    ]
    early, first = drive(tmp_path, plugin, root, calls)[0]

    assert early["output"][0] == {"type": "text", "text": "users, orders"}
    [note] = early["output"][1:]
    assert note["type"] == "text" and "does not count yet" in note["text"], early
    assert first["output"] == [{"type": "text", "text": "main, analytics"}]
    assert {step: c.result for step, c in recorded(root, "ses_a").items()} == {1: "main, analytics"}


def test_a_subagents_child_session_counts_as_the_session_that_started_it(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    child = {"id": "ses_child", "parentID": "ses_a", "agent": "general", "title": "look (@general subagent)"}
    calls = [
        {"event": {"type": "session.created", "properties": {"sessionID": "ses_child", "info": child}}},
        *prerequisites_then("ses_child"),
        call("pg_execute_query", "ses_a", 9, output="3 rows"),
        call("pg_execute_query", "ses_b", 10),
    ]
    results, _ = drive(tmp_path, plugin, root, calls)

    assert [r["threw"] for r in results[1:5]] == [False] * 4, results
    assert results[5]["threw"] is True and "list_databases" in results[5]["error"], results[5]
    assert set(recorded(root, "ses_a")) == {1, 2, 3} and recorded(root, "ses_child") == {}


def test_a_child_session_the_plugin_saw_no_event_for_is_looked_up_through_opencodes_client(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    sessions = {
        "ses_grandchild": {"id": "ses_grandchild", "parentID": "ses_child", "agent": "explore"},
        "ses_child": {"id": "ses_child", "parentID": "ses_a", "agent": "general"},
    }
    calls = [*prerequisites_then("ses_grandchild"), call("pg_execute_query", "ses_a", 9, output="3 rows")]

    results, _ = drive(tmp_path, plugin, root, calls, sessions)

    assert [r["threw"] for r in results] == [False] * 4, results
    assert set(recorded(root, "ses_a")) == {1, 2, 3}


def test_a_call_that_failed_is_not_recorded_an_mcp_error_or_a_shell_commands_exit_code(
    tmp_path: Path, root: Path, plugin: Path
) -> None:
    shell_first = {
        "description": "The tests pass before a query",
        "triggers": {"tools": ["execute_query"]},
        "prerequisites": [{"step": 1, "tool": "bash", "description": "run the tests"}],
    }
    workflows = json.loads((root / "workflows.json").read_text())
    (root / "workflows.json").write_text(json.dumps({**workflows, "shell-first": shell_first}))
    calls = [
        {**call("pg_list_databases", "ses_a", 1, output="connection refused", mcp=True), "isError": True},
        {**call("bash", "ses_a", 2, output="3 failed"), "exit": 1},
        {**call("bash", "ses_b", 3, output="12 passed"), "exit": 0},
    ]

    mcp_failed, shell_failed, _ = drive(tmp_path, plugin, root, calls)[0]

    assert "failed, so it does not count as step 1 of database-safe-query" in mcp_failed["output"][-1]["text"]
    assert "failed, so it does not count as step 1 of shell-first" in shell_failed["output"]
    assert recorded(root, "ses_a") == {}
    store = Store(state_db(root))
    try:
        assert list(SessionState(store).done("ses_a")) == []
        assert list(SessionState(store).done("ses_b")) == ["shell-first"]
    finally:
        store.close()
