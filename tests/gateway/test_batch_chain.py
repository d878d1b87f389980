"""tool_batch and tool_chain against the real upstreams: server-everything (npm) for order, failures that do not
abort a batch, the read-only retry budget, `$name` and `$name.field`; mcp-server-sqlite (PyPI) for the gates on
each call and for limits and unknown names that send nothing (its database shows what was written)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from test_everything_upstream import LONG_OPERATION, configure, pids, started_since
from test_sqlite_gates import SAFE_QUERY, recorded, write_project

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import until

BAD_GZIP = {"name": "x.gz", "data": "not a url"}  # an error result from a tool that is not read-only


async def tool_batch(client: Client, calls: list[dict[str, Any]]) -> Any:
    return await client.call_tool("tool_batch", {"calls": calls}, meta={"sessionID": "s1"})


async def tool_chain(client: Client, steps: list[dict[str, Any]]) -> Any:
    return await client.call_tool("tool_chain", {"steps": steps}, meta={"sessionID": "s1"})


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.fixture
async def everything(project: Project) -> AsyncIterator[Client]:
    configure(project.root)
    async with Client(create_server(project)) as c:
        yield c


@pytest.fixture
async def sqlite(project: Project) -> AsyncIterator[tuple[Client, Path]]:
    database = write_project(project.root, {"safe-query": SAFE_QUERY})
    async with Client(create_server(project)) as c:
        yield c, database


def rows(database: Path) -> list[str]:
    with sqlite3.connect(database) as db:
        return [name for (name,) in db.execute("SELECT name FROM users ORDER BY id")]


def insert(name: str) -> dict[str, Any]:
    return {"tool": "sqlite__write_query", "arguments": {"query": f"INSERT INTO users (name) VALUES ('{name}')"}}


async def test_a_batch_runs_in_order_and_a_failure_or_a_refusal_does_not_stop_the_rest(everything) -> None:
    result = await tool_batch(
        everything,
        [
            {"tool": "everything__echo", "arguments": {"message": "first"}},
            {"tool": "everything__gzip-file-as-resource", "arguments": BAD_GZIP},
            {"tool": "everything__nope", "arguments": {}},
            {"tool": "get-sum", "arguments": {"a": "two", "b": 40}},
            {"tool": "get-sum", "arguments": {"a": 2, "b": 40}},
            {"tool": "everything__get-structured-content", "arguments": {"location": "Chicago"}},
        ],
    )

    assert not result.is_error, text(result)
    results = result.structured_content["results"]
    assert [(r["tool"], r["status"]) for r in results] == [
        ("everything__echo", "ok"),
        ("everything__gzip-file-as-resource", "error"),
        ("everything__nope", "refused"),
        ("get-sum", "refused"),
        ("everything__get-sum", "ok"),
        ("everything__get-structured-content", "ok"),
    ]
    echo, gzip, unknown, bad, total, weather = results
    assert echo["result"] == "Echo: first" and echo["error"] is None
    assert echo["bytes"] == len(json.dumps("Echo: first")) and echo["duration_ms"] >= 0
    assert echo["gate"] == {"verdict": "allow", "ran_prerequisites": [], "warnings": []}
    assert "Invalid URL at data" in gzip["error"] and gzip["attempts"] == 1 and gzip["result"] is None
    assert "Unknown tool 'everything__nope'" in unknown["error"] and unknown["attempts"] == 0
    assert "do not fit its input schema; nothing was sent" in bad["error"]
    assert total["result"] == "The sum of 2 and 40 is 42."
    assert set(weather["result"]) == {"temperature", "conditions", "humidity"}  # structured content, as is


async def test_a_read_only_tool_has_three_attempts_a_tool_that_is_not_has_one(project: Project) -> None:
    configure(project.root, timeout="1s")
    async with Client(create_server(project)) as client:
        result = await tool_batch(
            client,
            [
                {"tool": "everything__trigger-long-running-operation", "arguments": LONG_OPERATION},
                {"tool": "everything__gzip-file-as-resource", "arguments": BAD_GZIP},
                {"tool": "everything__echo", "arguments": {"message": "after"}},
            ],
        )

    slow, gzip, echo = result.structured_content["results"]
    assert (slow["status"], slow["attempts"]) == ("error", 3)  # readOnlyHint: true
    assert "did not answer within 1s while calling 'trigger-long-running-operation'" in slow["error"]
    assert "Tried 3 times: a read-only tool." in slow["error"]
    assert (gzip["status"], gzip["attempts"]) == ("error", 1)  # readOnlyHint: false
    assert (echo["status"], echo["result"]) == ("ok", "Echo: after")


async def test_a_read_only_call_whose_upstream_dies_is_sent_again_and_succeeds(everything) -> None:
    known = pids()
    warm = await everything.call_tool("tool_call", {"tool": "echo", "arguments": {"message": "warm up"}})
    assert not warm.is_error, text(warm)
    first = started_since(known)
    assert first is not None
    before = first.io_counters().read_chars
    outcome: list[Any] = []

    async def run() -> None:
        call = {"tool": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 1}}
        outcome.append(await tool_batch(everything, [call]))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await until(lambda: first.io_counters().read_chars > before)  # the first attempt is live
        first.kill()

    (item,) = outcome[0].structured_content["results"]
    assert item["status"] == "ok", item
    assert item["attempts"] == 2
    assert "Long running operation completed" in item["result"]
    assert started_since(known | {first.pid}) is not None  # the second attempt went to a new process


async def test_each_batch_call_passes_the_gates_like_tool_call(sqlite) -> None:
    client, database = sqlite
    result = await tool_batch(
        client,
        [
            {"tool": "sqlite__read_query", "arguments": {"query": "SELECT name FROM users"}},
            {"tool": "sqlite__read_query", "arguments": {"query": "SELECT name FROM users", "table": "users"}},
            {"tool": "sqlite__write_query", "arguments": {"query": "INSERT INTO nowhere VALUES (1)"}},
        ],
    )

    blocked, query, broken = result.structured_content["results"]
    assert blocked["status"] == "refused"
    assert "$args.table is not an argument of this call" in blocked["error"]
    assert query["status"] == "ok" and "'name': 'ada'" in query["result"]
    assert [r["tool"] for r in query["gate"]["ran_prerequisites"]] == ["sqlite__list_tables", "sqlite__describe_table"]
    assert [s["tool"] for s in (await recorded(client))["safe-query"]] == ["list_tables", "describe_table"]
    # mcp-server-sqlite answers a database error as plain text, not as an error result: the gateway passes it on.
    assert (broken["status"], broken["result"]) == ("ok", "Database error: no such table: nowhere")


async def test_a_batch_of_eleven_is_refused_and_nothing_is_sent(sqlite) -> None:
    client, database = sqlite
    result = await tool_batch(client, [insert(f"user{n}") for n in range(11)])

    assert result.is_error
    assert (
        "tool_batch takes at most 10 calls; this one has 11. Split it into requests of 10 or fewer. Nothing was sent."
        in text(result)
    )
    assert rows(database) == ["ada", "grace"]
    ten = await tool_batch(client, [insert(f"user{n}") for n in range(10)])
    assert [r["status"] for r in ten.structured_content["results"]] == ["ok"] * 10
    assert len(rows(database)) == 12


async def test_a_chain_passes_a_whole_result_and_a_field_of_structured_content_or_of_json_text(everything) -> None:
    result = await tool_chain(
        everything,
        [
            {"tool": "get-structured-content", "arguments": {"location": "New York"}, "output_as": "weather"},
            {"tool": "get-sum", "arguments": {"a": "$weather.temperature", "b": 100}, "output_as": "total"},
            {"tool": "get-env", "arguments": {}, "output_as": "env"},
            {"tool": "echo", "arguments": {"message": "$env.HOME"}},
            {"tool": "echo", "arguments": {"message": "$total"}, "output_as": "said"},
        ],
    )

    assert not result.is_error, text(result)
    out = result.structured_content
    assert out["failed_step"] is None
    assert [r["status"] for r in out["results"]] == ["ok"] * 5
    weather = out["variables"]["weather"]
    assert (
        out["variables"]["total"] == f"The sum of {weather['temperature']} and 100 is {weather['temperature'] + 100}."
    )
    assert out["results"][3]["result"] == f"Echo: {json.loads(out['variables']['env'])['HOME']}"
    assert out["variables"]["said"] == f"Echo: {out['variables']['total']}"
    assert set(out["variables"]) == {"weather", "total", "env", "said"}


async def test_a_chain_stops_at_the_first_failure_and_says_which_step(everything) -> None:
    result = await tool_chain(
        everything,
        [
            {"tool": "echo", "arguments": {"message": "one"}, "output_as": "one"},
            {"tool": "gzip-file-as-resource", "arguments": BAD_GZIP, "output_as": "zipped"},
            {"tool": "echo", "arguments": {"message": "never"}},
        ],
    )

    out = result.structured_content
    assert out["failed_step"] == 2
    assert [(r["tool"], r["status"]) for r in out["results"]] == [
        ("everything__echo", "ok"),
        ("everything__gzip-file-as-resource", "error"),
    ]
    assert "Invalid URL at data" in out["results"][1]["error"]
    assert out["variables"] == {"one": "Echo: one"}


async def test_a_missing_field_stops_the_chain_at_that_step_without_sending_it(everything) -> None:
    result = await tool_chain(
        everything,
        [
            {"tool": "get-structured-content", "arguments": {"location": "Chicago"}, "output_as": "weather"},
            {"tool": "echo", "arguments": {"message": "$weather.wind"}},
            {"tool": "echo", "arguments": {"message": "$$weather is literal"}},
        ],
    )

    out = result.structured_content
    assert out["failed_step"] == 2
    step = out["results"][1]
    assert (step["status"], step["attempts"]) == ("refused", 0)
    assert step["error"] == "$weather.wind: no 'wind' there (its fields: temperature, conditions, humidity)"


async def test_literal_dollar_text_is_written_with_two_dollars(everything) -> None:
    result = await tool_chain(everything, [{"tool": "echo", "arguments": {"message": "$$HOME stays"}}])

    assert result.structured_content["results"][0]["result"] == "Echo: $HOME stays"


async def test_an_unknown_name_refuses_the_chain_naming_it_and_the_names_so_far_and_nothing_is_sent(sqlite) -> None:
    client, database = sqlite
    result = await tool_chain(
        client,
        [
            {**insert("first"), "output_as": "inserted"},
            {"tool": "sqlite__read_query", "arguments": {"query": "$rows", "table": "users"}},
        ],
    )

    assert result.is_error
    assert (
        "Step 2 (sqlite__read_query) refers to $rows, but no earlier step defines $rows; names defined so far: "
        "$inserted (step 1)." in text(result)
    )
    assert "Nothing was sent." in text(result)
    assert rows(database) == ["ada", "grace"]


async def test_a_chain_of_six_is_refused_and_nothing_is_sent(sqlite) -> None:
    client, database = sqlite
    result = await tool_chain(client, [insert(f"user{n}") for n in range(6)])

    assert result.is_error
    assert "tool_chain takes at most 5 steps; this one has 6." in text(result)
    assert rows(database) == ["ada", "grace"]


async def test_each_chain_step_passes_the_gates_and_its_prerequisites_run_first(sqlite) -> None:
    client, _ = sqlite
    result = await tool_chain(
        client,
        [
            {"tool": "list_tables", "arguments": {}, "output_as": "tables"},
            {"tool": "read_query", "arguments": {"query": "SELECT count(*) AS n FROM users", "table": "users"}},
        ],
    )

    out = result.structured_content
    assert out["failed_step"] is None, out
    assert "'name': 'users'" in out["variables"]["tables"]
    gate = out["results"][1]["gate"]
    assert [r["tool"] for r in gate["ran_prerequisites"]] == ["sqlite__describe_table"]  # list_tables already ran
    assert "'n': 2" in out["results"][1]["result"]
