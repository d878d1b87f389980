"""Tool names split whole into server and tool, in every spelling the clients, the gateway and workflows.json use."""

from __future__ import annotations

import pytest

from abilities_mcp.prerequisites.names import UNKNOWN_SERVER, Name, called, matches, opencode, through, wanted


@pytest.mark.parametrize(
    ("name", "server", "tool"),
    [
        ("mcp__db__list_tables", "db", "list_tables"),
        ("mcp__prod_db__list_tables", "prod_db", "list_tables"),
        ("mcp__abilities__sqlite__read_query", "abilities", "sqlite__read_query"),
        ("sqlite__read_query", "sqlite", "read_query"),
        ("Bash", None, "Bash"),
        ("list_tables", None, "list_tables"),
        ("mcp__list_tables", UNKNOWN_SERVER, "list_tables"),
    ],
    ids=[
        "claude-code",
        "server-with-underscore",
        "exposed-through-this-server",
        "gateway",
        "client-tool",
        "bare",
        "cursor-unknown-server",
    ],
)
def test_a_called_name_splits_into_its_server_and_its_whole_tool(name: str, server: str | None, tool: str) -> None:
    assert called(name)[:2] == (server, tool)


def test_a_known_server_holding_a_double_underscore_is_split_whole() -> None:
    assert called("mcp__team__db__list_tables", ["team__db"])[:2] == ("team__db", "list_tables")


@pytest.mark.parametrize(
    ("name", "server", "tool", "whole"),
    [
        ("abilities_ability_run", "abilities", "ability_run", True),
        ("pg_prod_list_tables", "pg_prod", "list_tables", True),
        ("bash", None, "bash", True),
        ("stranger_list_tables", None, "stranger_list_tables", False),
    ],
    ids=["known-server", "longest-known-server", "own-tool", "unknown-server"],
)
def test_opencode_names_split_only_at_a_server_its_config_knows(name, server, tool, whole) -> None:
    assert opencode(name, lambda: {"abilities", "pg", "pg_prod"}) == Name(server, tool, name, whole)


def test_a_workflow_name_with_a_server_in_either_spelling_names_that_servers_tool() -> None:
    assert wanted("mcp__db__list_tables")[:2] == wanted("db__list_tables")[:2] == ("db", "list_tables")
    assert wanted("list_tables")[:2] == (None, "list_tables")


def test_an_exposed_tool_of_this_server_stands_for_the_upstreams_own() -> None:
    exposed = called("mcp__abilities__sqlite__read_query")

    assert through(exposed, {"abilities"}, {"sqlite"})[:2] == ("sqlite", "read_query")
    assert through(exposed, {"gates"}, {"sqlite"}) is None  # another server's tool of that name
    assert through(exposed, {"abilities"}, {"db"}) is None  # not an upstream of this gateway


def test_an_unsplit_name_may_trigger_by_its_end_but_is_never_evidence() -> None:
    unsplit = opencode("stranger_execute_query", lambda: set())

    assert matches(unsplit, wanted("execute_query"), trigger=True)
    assert not matches(unsplit, wanted("execute_query"))


def test_another_gateways_upstream_tool_triggers_as_that_upstreams_but_is_never_evidence() -> None:
    elsewhere = called("mcp__other__sqlite__read_query")

    assert matches(elsewhere, wanted("mcp__sqlite__read_query"), trigger=True)
    assert not matches(elsewhere, wanted("read_query"))
