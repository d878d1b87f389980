"""The workflow tools through a client: verdicts, ordered recording, per-session state in SQLite, expiry, and the
seed's scenarios (skill-manager openspec: trigger, enforce, warn, suggest, multiple matches, sessions)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import stdio_client

from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import REPO, stdio_params

DATABASE = "database-safe-query"


def write_workflows(root: Path, *templates: str, extra: dict[str, Any] | None = None) -> None:
    data = {TEMPLATES[t]["name"]: {k: v for k, v in TEMPLATES[t].items() if k != "name"} for t in templates}
    (root / "workflows.json").write_text(json.dumps({**data, **(extra or {})}, indent=2))


async def call(client: Client, name: str, /, session: str = "s1", **arguments: Any) -> Any:
    result = await client.call_tool(name, arguments, meta={"sessionID": session})
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client: Client, name: str, /, session: str = "s1", **arguments: Any) -> str:
    result = await client.call_tool(name, arguments, meta={"sessionID": session})
    assert result.is_error, result.structured_content
    return result.content[0].text


@pytest.fixture
async def db_client(project: Project) -> AsyncIterator[Client]:
    write_workflows(project.root, "database", "graphql", "github-pr", "browser")
    async with Client(create_server(project)) as c:
        yield c


async def test_a_scripted_agent_is_denied_records_the_three_prerequisites_in_order_and_is_then_allowed(
    db_client,
) -> None:
    first = await call(db_client, "workflow_check", tool="mcp__db__execute_query", task="how many active users?")
    assert first["verdict"] == "deny"
    database = next(m for m in first["matched"] if m["workflow"] == DATABASE)
    assert database["missing"] == ["list_databases", "list_tables", "inspect_table"]
    assert [c["tool"] for c in first["next_calls"][:3]] == ["list_databases", "list_tables", "inspect_table"]
    for tool in ("list_databases", "list_tables", "inspect_table"):
        assert tool in first["message"]
        done = await call(db_client, "workflow_record", tool=f"mcp__db__{tool}", result=f"{tool} ok")
        assert {(r["workflow"], r["tool"]) for r in done["recorded"]} == {(DATABASE, tool)}
    after = await call(db_client, "workflow_check", tool="mcp__db__execute_query")
    assert next(m for m in after["matched"] if m["workflow"] == DATABASE)["verdict"] == "allow"
    # execute_query also triggers the graphql template, which only suggests: nothing holds the call back.
    assert after["verdict"] == "suggest"
    assert after["next_calls"] == [{"tool": "get_schema", "arguments": {}}]


async def test_with_only_the_database_workflow_the_call_is_plainly_allowed_once_recorded(project) -> None:
    write_workflows(project.root, "database")
    async with Client(create_server(project)) as client:
        for tool in ("list_databases", "list_tables", "inspect_table"):
            await call(client, "workflow_record", tool=tool)
        result = await call(client, "workflow_check", tool="execute_query")
    assert result["verdict"] == "allow"
    assert result["matched"][0]["done"] == ["list_databases", "list_tables", "inspect_table"]
    assert result["matched"][0]["optional"] == ["get_indexes"]


async def test_recording_out_of_order_is_refused_naming_the_missing_step_and_nothing_is_recorded(db_client) -> None:
    await call(db_client, "workflow_record", tool="list_databases")
    text = await refused(db_client, "workflow_record", tool="inspect_table")
    assert "'inspect_table' is step 3 of workflow 'database-safe-query'" in text
    assert "'list_tables' (step 2) must be recorded first" in text
    assert "list_tables()" in text and "workflow_record(tool='list_tables')" in text
    status = await call(db_client, "workflow_status")
    assert [c["tool"] for c in status["completed"][DATABASE]] == ["list_databases"]


async def test_recording_an_unrelated_tool_is_a_no_op_that_says_so(db_client) -> None:
    result = await call(db_client, "workflow_record", tool="read_file")
    assert result["recorded"] == []
    assert "not a prerequisite of any enabled workflow" in result["message"]
    assert (await call(db_client, "workflow_status"))["completed"] == {}


async def test_recording_twice_keeps_the_first_record_and_says_so(db_client) -> None:
    await call(db_client, "workflow_record", tool="list_databases", result="first")
    again = await call(db_client, "workflow_record", tool="list_databases", result="second")
    assert again["recorded"] == [] and again["already"][0]["tool"] == "list_databases"
    assert (await call(db_client, "workflow_status"))["completed"][DATABASE][0]["result"] == "first"


async def test_a_prerequisite_of_several_workflows_is_recorded_in_each(project) -> None:
    write_workflows(
        project.root,
        extra={
            name: {
                "description": name,
                "mode": mode,
                "triggers": {"tools": [f"act_{name}"]},
                "prerequisites": [{"step": 1, "tool": "whoami", "description": "know the user"}],
            }
            for name, mode in (("a", "enforce"), ("b", "warn"))
        },
    )
    async with Client(create_server(project)) as client:
        result = await call(client, "workflow_record", tool="mcp__auth__whoami")
        assert sorted(r["workflow"] for r in result["recorded"]) == ["a", "b"]
        only_a = await call(client, "workflow_reset", workflow="a")
        assert only_a["cleared"] == 1
        assert list((await call(client, "workflow_status"))["completed"]) == ["b"]


async def test_recording_for_one_named_workflow_and_a_misspelled_one(db_client) -> None:
    text = await refused(db_client, "workflow_record", tool="get_schema", workflow="graphql-schema-awar")
    assert "Did you mean 'graphql-schema-aware'?" in text
    result = await call(db_client, "workflow_record", tool="get_schema", workflow="graphql-schema-aware")
    assert [r["workflow"] for r in result["recorded"]] == ["graphql-schema-aware"]


async def test_a_long_result_is_kept_to_200_characters_and_a_short_one_in_full(db_client) -> None:
    await call(db_client, "workflow_record", tool="list_databases", result="x" * 5000)
    await call(db_client, "workflow_record", tool="list_tables", result="users, orders")
    completed = (await call(db_client, "workflow_status"))["completed"][DATABASE]
    assert [len(c["result"]) for c in completed] == [200, len("users, orders")]


async def test_reset_clears_the_session_so_the_gate_denies_again(db_client) -> None:
    for tool in ("list_databases", "list_tables", "inspect_table"):
        await call(db_client, "workflow_record", tool=tool)
    await call(db_client, "workflow_record", tool="take_snapshot")
    cleared = await call(db_client, "workflow_reset")
    assert cleared["cleared"] == 4 and cleared["workflow"] is None
    assert (await call(db_client, "workflow_check", tool="execute_query"))["verdict"] == "deny"
    assert "Unknown workflow 'nope'" in await refused(db_client, "workflow_reset", workflow="nope")


async def test_sessions_are_separate_and_a_session_reuses_its_records_across_restarts(project) -> None:
    write_workflows(project.root, "browser")
    async with Client(create_server(project)) as client:
        await call(client, "workflow_record", session="alpha", tool="mcp__chrome__take_snapshot")
        assert (await call(client, "workflow_check", session="alpha", tool="click"))["verdict"] == "allow"
        assert (await call(client, "workflow_check", session="beta", tool="click"))["verdict"] == "deny"
    async with Client(create_server(project)) as client:  # a new server process on the same state file
        assert (await call(client, "workflow_check", session="alpha", tool="click"))["verdict"] == "allow"


async def test_the_claude_code_session_id_wins_over_the_callers_meta(project, monkeypatch) -> None:
    write_workflows(project.root, "browser")
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "cc-1")
    async with Client(create_server(project)) as client:
        result = await call(client, "workflow_record", session="ignored", tool="take_snapshot")
    assert result["session_id"] == "cc-1"


def _age_session(project: Project, session: str, seconds: float) -> None:
    with sqlite3.connect(project.state_db) as db:
        db.execute("UPDATE prereq_sessions SET started_at = started_at - ? WHERE session_id=?", (seconds, session))


async def test_records_expire_after_the_configured_ttl_and_the_session_starts_over(project) -> None:
    write_workflows(project.root, "browser")
    async with Client(create_server(project, session_ttl=60)) as client:
        await call(client, "workflow_record", tool="take_snapshot")
        before = await call(client, "workflow_status")
        _age_session(project, "s1", 30)
        assert (await call(client, "workflow_check", tool="click"))["verdict"] == "allow"
        _age_session(project, "s1", 31)  # now 61 s old, past the 60 s TTL
        assert (await call(client, "workflow_check", tool="click"))["verdict"] == "deny"
        after = await call(client, "workflow_status")
    assert after["completed"] == {}
    assert after["started_at"] > before["started_at"]


async def test_the_default_ttl_is_24_hours(project) -> None:
    write_workflows(project.root, "browser")
    async with Client(create_server(project)) as client:
        await call(client, "workflow_record", tool="take_snapshot")
        status = await call(client, "workflow_status")
        _age_session(project, "s1", 23.9 * 3600)
        assert (await call(client, "workflow_check", tool="click"))["verdict"] == "allow"
        _age_session(project, "s1", 0.2 * 3600)
        assert (await call(client, "workflow_check", tool="click"))["verdict"] == "deny"
    from datetime import datetime

    started, expires = (datetime.fromisoformat(status[k]) for k in ("started_at", "expires_at"))
    assert (expires - started).total_seconds() == 24 * 3600


async def test_workflow_list_shows_the_workflows_and_what_kept_others_out(project) -> None:
    write_workflows(project.root, "database", extra={"broken": {"description": "no prerequisites"}})
    async with Client(create_server(project)) as client:
        listed = await call(client, "workflow_list")
        checked = await call(client, "workflow_check", tool="execute_query")
    assert [w["name"] for w in listed["workflows"]] == [DATABASE]
    assert [p["tool"] for p in listed["workflows"][0]["prerequisites"]][:3] == [
        "list_databases",
        "list_tables",
        "inspect_table",
    ]
    assert any("broken" in p and "not applied" in p for p in listed["problems"])
    assert checked["verdict"] == "deny" and checked["warnings"] == listed["problems"]


@pytest.mark.parametrize(
    "content",
    ["{ not json", "[1, 2]", ""],
    ids=["bad-json", "array", "empty-file"],
)
async def test_a_malformed_workflows_file_gives_a_diagnostic_never_a_crash(project, content: str) -> None:
    (project.root / "workflows.json").write_text(content)
    async with Client(create_server(project)) as client:
        checked = await call(client, "workflow_check", tool="execute_query")
        listed = await call(client, "workflow_list")
        report = await call(client, "ability_validate")
    assert checked["verdict"] == "allow" and listed["workflows"] == []
    assert checked["warnings"] and "workflows.json" in checked["warnings"][0]
    workflows_file = next(f for f in report["files"] if f["kind"] == "workflows")
    assert not workflows_file["valid"] and workflows_file["errors"]


async def test_no_workflows_file_means_an_empty_list(client) -> None:
    assert await call(client, "workflow_list") == {"workflows": [], "problems": []}
    assert (await call(client, "workflow_check", tool="execute_query"))["verdict"] == "allow"


async def test_an_edit_of_workflows_json_applies_without_a_restart(project) -> None:
    write_workflows(project.root, "browser")
    async with Client(create_server(project)) as client:
        assert (await call(client, "workflow_check", tool="click"))["verdict"] == "deny"
        data = json.loads((project.root / "workflows.json").read_text())
        data["browser-safe-interaction"]["mode"] = "suggest"
        (project.root / "workflows.json").write_text(json.dumps(data, indent=4))
        assert (await call(client, "workflow_check", tool="click"))["verdict"] == "suggest"


async def test_a_category_from_the_opencode_routing_cache_triggers_a_workflow(project) -> None:
    write_workflows(project.root, "database")
    cache = project.root / ".opencode" / "agent-skill-tools.json"
    cache.parent.mkdir()
    cache.write_text(json.dumps({"categories": {"database": {"tools": [{"id": "pg_run_sql", "description": "sql"}]}}}))
    async with Client(create_server(project)) as client:
        result = await call(client, "workflow_check", tool="pg_run_sql")
    assert result["verdict"] == "deny"
    assert result["matched"][0]["reasons"] == ["category database"]


# The openspec scenarios of the skill-manager (reference §1.11), each as a test.


@pytest.mark.parametrize(
    ("task", "expected"),
    [("query the users table", [DATABASE]), ("take a screenshot", [])],
    ids=["keyword-query-detected", "no-match-normal-execution"],
)
async def test_seed_trigger_scenarios(db_client, task: str, expected: list[str]) -> None:
    result = await call(db_client, "workflow_check", tool="run", task=task)
    assert [m["workflow"] for m in result["matched"]] == expected


async def test_seed_disabled_workflow_is_not_triggered(project) -> None:
    write_workflows(project.root, "database")
    data = json.loads((project.root / "workflows.json").read_text())
    data[DATABASE]["enabled"] = False
    (project.root / "workflows.json").write_text(json.dumps(data))
    async with Client(create_server(project)) as client:
        result = await call(client, "workflow_check", tool="execute_query", task="query the users table")
    assert (result["verdict"], result["matched"]) == ("allow", [])


async def test_seed_prerequisites_done_earlier_in_the_session_let_the_next_call_through_at_once(db_client) -> None:
    for tool in ("list_databases", "list_tables", "inspect_table"):
        await call(db_client, "workflow_record", tool=tool)
    for _ in range(2):  # a second query in the same session needs nothing again
        result = await call(db_client, "workflow_check", tool="select_query")
        assert result["verdict"] == "allow"


@pytest.mark.parametrize(
    ("tool", "verdict", "missing"),
    [
        ("merge_pull_request", "warn", ["get_pull_request", "get_pull_request_files", "get_pull_request_status"]),
        ("execute_mutation", "suggest", ["get_schema"]),
    ],
    ids=["warn-lists-missing", "suggest-mentions"],
)
async def test_seed_warn_and_suggest(db_client, tool: str, verdict: str, missing: list[str]) -> None:
    result = await call(db_client, "workflow_check", tool=tool)
    assert result["verdict"] == verdict
    assert result["matched"][0]["missing"] == missing
    assert all(m in result["message"] for m in missing)


async def test_seed_multiple_matches_list_every_workflow_not_just_the_first_defined(db_client) -> None:
    result = await call(db_client, "workflow_check", tool="execute_query", task="run a graphql query")
    assert {m["workflow"]: m["verdict"] for m in result["matched"]} == {
        DATABASE: "deny",
        "graphql-schema-aware": "suggest",
    }
    assert result["verdict"] == "deny"


# The process boundary: a real stdio server, and two processes recording into one state file at once.


async def test_the_done_when_flow_through_a_stdio_server_on_the_repos_own_workflows(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    shutil.copy(REPO / "workflows.json", root / "workflows.json")
    async with stdio_client(stdio_params(root, env={"HOME": str(tmp_path)})) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            denied = await session.call_tool("workflow_check", {"tool": "mcp__postgres__execute_query"})
            assert denied.structured_content["verdict"] == "deny"
            assert "list_databases (step 1" in denied.content[0].text
            early = await session.call_tool("workflow_record", {"tool": "list_tables"})
            assert early.is_error and "'list_databases' (step 1) must be recorded first" in early.content[0].text
            for tool in ("list_databases", "list_tables", "inspect_table"):
                done = await session.call_tool("workflow_record", {"tool": f"mcp__postgres__{tool}", "result": "ok"})
                assert not done.is_error, done.content
            allowed = await session.call_tool("workflow_check", {"tool": "mcp__postgres__execute_query"})
    assert allowed.structured_content["verdict"] in ("allow", "suggest")
    database = next(m for m in allowed.structured_content["matched"] if m["workflow"] == DATABASE)
    assert database["verdict"] == "allow" and database["missing"] == []


RECORDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from abilities_mcp.prerequisites.sessions import SessionState
    from abilities_mcp.state.store import Store
    from abilities_mcp.prerequisites.workflows import read_workflows

    db, workflows, start, end, go = sys.argv[1:]
    state = SessionState(Store(Path(db)))
    found = read_workflows(Path(workflows))
    while not Path(go).exists():  # both processes start recording together
        pass
    for i in range(int(start), int(end)):
        assert state.record("shared", found, f"tool_{i}", f"result {i}").record, i
    """
)


def test_two_processes_recording_at_once_lose_nothing(tmp_path: Path) -> None:
    count = 300
    workflows = {
        f"w{i}": {
            "description": f"w{i}",
            "triggers": {"tools": [f"act_{i}"]},
            "prerequisites": [{"step": 1, "tool": f"tool_{i}", "description": "d"}],
        }
        for i in range(count)
    }
    (tmp_path / "workflows.json").write_text(json.dumps(workflows))
    db, go = tmp_path / "state" / "state.db", tmp_path / "go"
    half = count // 2
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECORDER, str(db), str(tmp_path / "workflows.json"), str(a), str(b), str(go)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for a, b in ((0, half), (half, count))
    ]
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT workflow, tool FROM prereq_records WHERE session_id='shared'").fetchall()
    assert sorted(rows) == sorted((f"w{i}", f"tool_{i}") for i in range(count))


async def test_enforced_workflows_that_wait_on_each_other_are_reported_but_still_applied(project) -> None:
    def gated(tool: str, needs: str) -> dict[str, Any]:
        return {
            "description": f"{tool} after {needs}",
            "triggers": {"tools": [tool]},
            "prerequisites": [{"step": 1, "tool": needs, "description": "first"}],
        }

    write_workflows(project.root, extra={"x-first": gated("y", "x"), "y-first": gated("x", "y")})
    async with Client(create_server(project)) as client:
        result = await call(client, "workflow_check", tool="y")
    assert result["verdict"] == "deny"
    [warning] = result["warnings"]
    assert "wait on each other" in warning and "(applied;" in warning
