"""tool_search answers questions about the data in a database, asked in the user's words ("which users are in the
shop database"), whose other words are the user's own names that no tool's description has: they are searched with
the SQL words they ask for, over mcp-server-sqlite's real tool list alone and among the 118 tools of
benchmarks/tool_eval."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from abilities_mcp.gateway.directory import Entry, Listing, data_said, search
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import REPO
from upstream_servers import write_project

REAL = [
    Entry(server["server"], tool["name"], tool["description"], tool["inputSchema"])
    for server in json.loads((REPO / "benchmarks" / "tool_eval" / "tools.json").read_text())
    for tool in server["tools"]
]
SQLITE_ONLY = Listing([e for e in REAL if e.server == "sqlite"], 0.0, [], {})
EVERY = Listing(REAL, 0.0, [], {})
QUESTIONS = [
    ("which users are in the shop database", {"sqlite__read_query", "postgres__query"}),
    ("how many orders are in the db", {"sqlite__read_query", "postgres__query"}),
    ("show the latest 5 rows of the payments table", {"sqlite__read_query", "postgres__query"}),
    ("which customers live in berlin, check the db", {"sqlite__read_query", "postgres__query"}),
    ("add a user named bob to the database", {"sqlite__write_query"}),
    ("delete all rows older than a year from the logs table", {"sqlite__write_query"}),
    ("which tables does the database have", {"sqlite__list_tables"}),
    ("describe the schema of the invoices table", {"sqlite__describe_table"}),
    ("make a new table called invoices", {"sqlite__create_table"}),
]


@pytest.mark.parametrize(("task", "tools"), QUESTIONS, ids=[task for task, _ in QUESTIONS])
@pytest.mark.parametrize("listing", [SQLITE_ONLY, EVERY], ids=["sqlite-alone", "among-118-tools"])
def test_a_question_about_data_finds_the_tool_that_answers_it(task: str, tools: set[str], listing: Listing) -> None:
    found = search(listing, task, 5)

    assert found and found[0].entry.qualified in tools, [f.entry.qualified for f in found]


@pytest.mark.parametrize(
    ("task", "said"),
    [
        ("which users are in the shop database", "read query select"),
        ("remove inactive customers from the db", "write query delete"),
        ("add a row and rename the old one in the users table", "write query insert update"),
        ("what columns does the orders table have", ""),  # its structure: describe_table says so
        ("create a table for invoices", ""),
        ("what's the weather in paris tomorrow", ""),  # not about data: searched as written
    ],
)
def test_a_task_about_data_is_searched_with_the_sql_words_it_asks_for(task: str, said: str) -> None:
    assert data_said(task) == said


async def test_tool_search_finds_the_query_tool_for_the_issues_question(project: Project) -> None:
    write_project(project.root, {})

    async with Client(create_server(project)) as client:
        result = await client.call_tool("tool_search", {"task": "which users are in the shop database"})

    top = result.structured_content["tools"][0]
    assert top["tool"] == "sqlite__read_query"
    assert "a task about data: searched as 'read query select' too" in top["reasons"]
