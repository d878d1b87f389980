"""The gateway in front of the real mcp-server-sqlite (PyPI, its own mcp 1.x environment): an enforce workflow's
prerequisites run by the gateway itself, in order, recorded in the session; refusals that send nothing; warn and
suggest; arguments checked against the upstream's schema; unknown tools."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from upstream_servers import SAFE_QUERY, write_project


@pytest.fixture
def gated(project: Project) -> Callable[[dict[str, Any]], Any]:
    """gated(workflows) → a client of a server whose gateway fronts mcp-server-sqlite under those workflows."""

    def make(workflows: dict[str, Any]) -> Any:
        write_project(project.root, workflows)
        return Client(create_server(project))

    return make


@pytest.fixture
async def client(gated) -> AsyncIterator[Client]:
    async with gated({"safe-query": SAFE_QUERY}) as c:
        yield c


async def tool_call(client: Client, tool: str, arguments: dict[str, Any] | None = None, session: str = "s1") -> Any:
    return await client.call_tool("tool_call", {"tool": tool, "arguments": arguments}, meta={"sessionID": session})


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def recorded(client: Client, session: str = "s1") -> dict[str, list[dict[str, Any]]]:
    status = await client.call_tool("workflow_status", {}, meta={"sessionID": session})
    return status.structured_content["completed"]


async def test_enforce_runs_list_tables_then_describe_table_itself_before_the_query(client) -> None:
    result = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users", "table": "users"})

    assert not result.is_error, text(result)
    assert "'name': 'ada'" in text(result) and "'name': 'grace'" in text(result)
    # The same text in the structured content: a client that shows the model only that (Claude Code) loses nothing.
    assert result.structured_content["text"] == result.content[0].text
    gate = result.structured_content["gate"]
    assert gate["verdict"] == "deny"
    assert [(r["step"], r["tool"], r["arguments"]) for r in gate["ran_prerequisites"]] == [
        (1, "sqlite__list_tables", {}),
        (2, "sqlite__describe_table", {"table_name": "users"}),
    ]
    # What the upstream answered to each, in the order it answered, as the session keeps it.
    steps = (await recorded(client))["safe-query"]
    assert [(s["step"], s["tool"]) for s in steps] == [(1, "list_tables"), (2, "describe_table")]
    assert steps[0]["at"] <= steps[1]["at"]
    assert "'name': 'users'" in steps[0]["result"]
    assert "'name': 'id'" in steps[1]["result"] and "'type': 'INTEGER'" in steps[1]["result"]
    assert all(len(s["result"]) <= 200 for s in steps)


async def test_a_second_query_in_the_session_runs_no_prerequisite_again(client) -> None:
    first = await tool_call(client, "read_query", {"query": "SELECT 1", "table": "users"})
    assert len(first.structured_content["gate"]["ran_prerequisites"]) == 2, text(first)

    second = await tool_call(client, "read_query", {"query": "SELECT count(*) AS n FROM users"})

    assert not second.is_error, text(second)
    assert second.structured_content["gate"] == {"verdict": "allow", "ran_prerequisites": [], "warnings": []}
    assert "'n': 2" in text(second)


async def test_prerequisites_whose_arguments_cannot_be_filled_refuse_the_call_naming_them_and_send_nothing(
    client,
) -> None:
    result = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users"})

    assert result.is_error
    message = text(result)
    assert "step 2 (describe_table) of workflow 'safe-query'" in message
    assert "$args.table is not an argument of this call" in message
    assert "tool_call(tool='sqlite__describe_table'" in message
    assert "tool_call(tool='sqlite__read_query'" in message
    assert await recorded(client) == {}  # not even list_tables ran: nothing is sent before the whole plan holds


async def test_calling_the_prerequisites_through_the_gateway_records_them_and_then_the_query_runs(client) -> None:
    for tool, arguments in (("list_tables", {}), ("describe_table", {"table_name": "users"})):
        result = await tool_call(client, f"sqlite__{tool}", arguments)
        assert not result.is_error, text(result)
        assert result.structured_content["gate"]["verdict"] == "allow"

    query = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users WHERE id = 2"})

    assert not query.is_error, text(query)
    assert query.structured_content["gate"]["ran_prerequisites"] == []
    assert "grace" in text(query) and "ada" not in text(query)


async def test_records_belong_to_the_session(client) -> None:
    await tool_call(client, "read_query", {"query": "SELECT 1", "table": "users"}, session="one")

    other = await tool_call(client, "read_query", {"query": "SELECT 1", "table": "users"}, session="two")

    assert len(other.structured_content["gate"]["ran_prerequisites"]) == 2


@pytest.mark.parametrize(
    ("mode", "prefix"), [("warn", "Warning: workflow 'safe-query' (warn)"), ("suggest", "Note: workflow 'safe-query'")]
)
async def test_warn_and_suggest_run_the_call_and_say_what_was_missing(gated, mode: str, prefix: str) -> None:
    async with gated({"safe-query": {**SAFE_QUERY, "mode": mode}}) as client:
        result = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users"})
        steps = await recorded(client)

    assert not result.is_error, text(result)
    gate = result.structured_content["gate"]
    assert gate["verdict"] == mode
    assert gate["ran_prerequisites"] == []
    assert gate["warnings"][0].startswith(prefix)
    assert "list_tables (step 1), describe_table (step 2)" in gate["warnings"][0]
    assert f"[gateway] {gate['warnings'][0]}" in text(result)  # the model reads it beside the result
    assert "ada" in text(result)
    assert steps == {}


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({}, "'query' is a required property"),
        ({"query": 42}, "at 'query': 42 is not of type 'string'"),
    ],
    ids=["missing-required", "wrong-type"],
)
async def test_arguments_that_break_the_upstream_schema_are_refused_before_anything_is_sent(
    client, arguments: dict[str, Any], said: str
) -> None:
    result = await tool_call(client, "sqlite__read_query", arguments)

    assert result.is_error
    assert "do not fit its input schema; nothing was sent" in text(result)
    assert said in text(result)
    assert await recorded(client) == {}  # the gate's prerequisites did not run either


async def test_an_unknown_tool_gets_a_did_you_mean(client) -> None:
    result = await tool_call(client, "sqlite__read_querry", {"query": "SELECT 1"})

    assert result.is_error
    assert "Unknown tool 'sqlite__read_querry'" in text(result)
    assert "Did you mean 'sqlite__read_query'?" in text(result)


async def test_an_upstream_that_fails_to_start_is_named_with_the_tail_of_its_stderr(project: Project) -> None:
    not_a_folder = project.root / "plain-file"
    not_a_folder.write_text("")
    write_project(project.root, {"safe-query": SAFE_QUERY}, database=not_a_folder / "shop.db")

    async with Client(create_server(project)) as client:
        result = await tool_call(client, "sqlite__read_query", {"query": "SELECT 1", "table": "users"})
        workflows = await client.call_tool("workflow_list", {})  # our server is still up

    assert result.is_error
    assert "Upstream server 'sqlite' failed to start" in text(result)
    assert "Its stderr ends with:" in text(result)
    assert "FileExistsError" in text(result) and "plain-file" in text(result)  # its own words, from its stderr
    assert "TaskGroup" not in text(result)
    assert not workflows.is_error


async def test_a_refused_write_never_reaches_the_database(project: Project) -> None:
    guarded = {**SAFE_QUERY, "triggers": {"tools": ["write_query"]}}
    database = write_project(project.root, {"safe-write": guarded})

    async with Client(create_server(project)) as client:
        refused = await tool_call(client, "sqlite__write_query", {"query": "DELETE FROM users"})
        bad = await tool_call(client, "sqlite__write_query", {"query": ["DELETE FROM users"], "table": "users"})

    assert refused.is_error and "cannot run itself" in text(refused)
    assert bad.is_error and "nothing was sent" in text(bad)
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM users").fetchone() == (2,)


async def test_a_prerequisite_naming_another_upstream_runs_on_that_upstream(project: Project) -> None:
    from upstream_servers import everything_server

    cross = {
        "description": "Know the tables before adding numbers",
        "triggers": {"tools": ["get-sum"]},
        "prerequisites": [{"step": 1, "tool": "sqlite__list_tables", "description": "Which tables exist"}],
    }
    write_project(project.root, {"cross": cross})
    config = json.loads((project.root / "gateway.json").read_text())
    config["mcpServers"]["everything"] = {"command": str(everything_server()), "args": ["stdio"]}
    (project.root / "gateway.json").write_text(json.dumps(config))

    async with Client(create_server(project)) as client:
        result = await tool_call(client, "everything__get-sum", {"a": 20, "b": 22})

    assert not result.is_error, text(result)
    assert "42" in text(result)
    assert [r["tool"] for r in result.structured_content["gate"]["ran_prerequisites"]] == ["sqlite__list_tables"]


async def test_a_broken_entry_beside_it_does_not_stop_a_working_upstream(project: Project) -> None:
    write_project(project.root, {})
    config = json.loads((project.root / "gateway.json").read_text())
    config["mcpServers"]["broken"] = {"command": "x", "timeout": "soon"}
    (project.root / "gateway.json").write_text(json.dumps(config))

    async with Client(create_server(project)) as client:
        result = await tool_call(client, "sqlite__read_query", {"query": "SELECT count(*) AS n FROM users"})

    assert not result.is_error, text(result)
    assert "'n': 2" in text(result)


# --- evidence only from what the gateway saw, on the server it ran on (DESIGN §9) ---


async def test_a_self_report_does_not_stand_in_for_the_prerequisites_the_gateway_runs_itself(client) -> None:
    for tool in ("list_tables", "describe_table"):
        await client.call_tool("workflow_record", {"tool": tool}, meta={"sessionID": "s1"})

    result = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users", "table": "users"})

    assert not result.is_error, text(result)
    gate = result.structured_content["gate"]
    assert gate["verdict"] == "deny"
    assert [r["tool"] for r in gate["ran_prerequisites"]] == ["sqlite__list_tables", "sqlite__describe_table"]


async def test_workflow_record_of_an_upstream_tool_is_refused_under_enforce_naming_the_call_that_counts(
    client,
) -> None:
    named = await client.call_tool("workflow_record", {"tool": "sqlite__list_tables"}, meta={"sessionID": "s1"})
    await tool_call(client, "sqlite__list_tables")  # now the gateway has listed sqlite's tools
    bare = await client.call_tool("workflow_record", {"tool": "describe_table"}, meta={"sessionID": "s1"})

    assert named.is_error and "behind this server's gateway" in text(named)
    assert "tool_call(tool='sqlite__list_tables', arguments={})" in text(named)
    assert bare.is_error and "tool_call(tool='sqlite__describe_table', arguments={})" in text(bare)
    assert [s["how"] for s in (await recorded(client))["safe-query"]] == ["observed"]  # the gateway's own call


async def test_under_warn_a_self_report_of_an_upstream_tool_is_kept_as_such_and_the_gateway_still_warns(
    gated,
) -> None:
    async with gated({"safe-query": {**SAFE_QUERY, "mode": "warn"}}) as client:
        reported = await client.call_tool("workflow_record", {"tool": "sqlite__list_tables"}, meta={"sessionID": "s1"})
        steps = await recorded(client)
        query = await tool_call(client, "sqlite__read_query", {"query": "SELECT 1"})

    assert not reported.is_error and reported.structured_content["self_reported"] is True
    assert "counts only where nothing sees the tool run" in reported.structured_content["message"]
    assert [(s["server"], s["how"]) for s in steps["safe-query"]] == [("sqlite", "reported")]
    assert "list_tables (step 1)" in query.structured_content["gate"]["warnings"][0]


def two_sqlite_upstreams(project: Project) -> None:
    """gateway.json with the shop database as `sqlite` and a scratch one as `scratch`: same server, same tools."""
    write_project(project.root, {"safe-query": SAFE_QUERY})
    scratch = project.root / "scratch.db"
    with sqlite3.connect(scratch) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    config = json.loads((project.root / "gateway.json").read_text())
    config["mcpServers"]["scratch"] = {**config["mcpServers"]["sqlite"], "args": ["--db-path", str(scratch)]}
    (project.root / "gateway.json").write_text(json.dumps(config))


async def test_a_tool_of_the_same_name_on_another_upstream_does_not_satisfy_this_ones_prerequisite(
    project: Project,
) -> None:
    two_sqlite_upstreams(project)
    async with Client(create_server(project)) as client:
        await tool_call(client, "scratch__list_tables")
        await tool_call(client, "scratch__describe_table", {"table_name": "users"})
        result = await tool_call(client, "sqlite__read_query", {"query": "SELECT name FROM users", "table": "users"})

    assert not result.is_error, text(result)
    assert [r["tool"] for r in result.structured_content["gate"]["ran_prerequisites"]] == [
        "sqlite__list_tables",
        "sqlite__describe_table",
    ]


async def test_a_trigger_naming_the_server_as_the_client_called_it_still_gates_it_behind_the_gateway(gated) -> None:
    moved = {**SAFE_QUERY, "triggers": {"tools": ["mcp__sqlite__read_query"]}}
    async with gated({"safe-query": moved}) as client:
        result = await tool_call(client, "sqlite__read_query", {"query": "SELECT 1", "table": "users"})

    assert not result.is_error, text(result)
    assert result.structured_content["gate"]["verdict"] == "deny"
    assert len(result.structured_content["gate"]["ran_prerequisites"]) == 2
