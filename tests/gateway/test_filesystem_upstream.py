"""The gateway in front of the real @modelcontextprotocol/server-filesystem (npm, pinned), serving one folder:
routing a task to its tools, a batch of reads with one missing file, a chain that finds a file and reads it, a write
outside its folder refused by the upstream, and arguments that break its schema refused before anything is sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from test_batch_chain import text, tool_batch, tool_chain
from test_everything_upstream import tool_call

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from upstream_servers import filesystem_server


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """The one folder the upstream may touch, with a few files."""
    folder = tmp_path / "served"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "todo.md").write_text("- ship the gateway\n")
    (folder / "a.txt").write_text("alpha\n")
    (folder / "b.txt").write_text("beta\n")
    return folder.resolve()


@pytest.fixture
async def client(project: Project, served: Path) -> AsyncIterator[Client]:
    entry = {"command": str(filesystem_server()), "args": [str(served)]}
    (project.root / "gateway.json").write_text(json.dumps({"mcpServers": {"fs": entry}}))
    async with Client(create_server(project)) as c:
        yield c


async def search(client: Client, task: str) -> list[str]:
    found = await client.call_tool("tool_search", {"task": task, "limit": 3})
    assert not found.is_error, text(found)
    return [t["tool"] for t in found.structured_content["tools"]]


@pytest.mark.parametrize(
    ("task", "tool"),
    [
        ("read the contents of notes/todo.md", "fs__read_text_file"),
        ("list the files in the project directory", "fs__list_directory"),
        ("search for files matching *.md", "fs__search_files"),
        ("move a file to another folder", "fs__move_file"),
        ("create a new directory for the reports", "fs__create_directory"),
    ],
)
async def test_tool_search_finds_the_filesystem_tool_for_a_task(client: Client, task: str, tool: str) -> None:
    assert tool in await search(client, task)


@pytest.mark.parametrize(
    ("task", "tool"),
    [
        ("make a folder called reports", "fs__create_directory"),  # "make", "folder": create_directory's words
        ("save my notes to notes.txt", "fs__write_file"),  # "save": write_file's
        ("show the first 5 lines of a.txt", "fs__read_text_file"),  # "show": read's; "head" is its parameter
    ],
)
async def test_tool_search_reaches_a_tool_through_everyday_words_for_its_name(
    client: Client, task: str, tool: str
) -> None:
    assert (await search(client, task))[0] == tool


async def test_a_batch_of_reads_keeps_going_past_a_missing_file_and_answers_in_order(
    client: Client, served: Path
) -> None:
    calls = [
        {"tool": "fs__read_text_file", "arguments": {"path": str(served / name)}}
        for name in ("a.txt", "missing.txt", "b.txt")
    ]

    result = await tool_batch(client, calls)

    assert not result.is_error, text(result)
    results = result.structured_content["results"]
    assert [r["status"] for r in results] == ["ok", "error", "ok"]
    assert results[0]["result"] == {"content": "alpha\n"} and results[2]["result"] == {"content": "beta\n"}
    assert "missing.txt" in results[1]["error"] or "ENOENT" in results[1]["error"]
    assert all(r["bytes"] > 0 and r["duration_ms"] >= 0 for r in results)


async def test_a_chain_finds_a_file_then_reads_what_it_found(client: Client, served: Path) -> None:
    steps = [
        {"tool": "fs__search_files", "arguments": {"path": str(served), "pattern": "**/*.md"}, "output_as": "found"},
        {"tool": "fs__read_text_file", "arguments": {"path": "$found.content"}},
    ]

    result = await tool_chain(client, steps)

    assert not result.is_error, text(result)
    chain = result.structured_content
    assert chain["failed_step"] is None, chain
    assert chain["variables"]["found"] == {"content": str(served / "notes" / "todo.md")}
    assert chain["results"][1]["result"] == {"content": "- ship the gateway\n"}


async def test_a_chain_naming_an_unknown_result_is_refused_before_anything_is_sent(
    client: Client, served: Path, tmp_path: Path
) -> None:
    target = served / "made-by-the-chain"
    steps = [
        {"tool": "fs__create_directory", "arguments": {"path": str(target)}},
        {"tool": "fs__read_text_file", "arguments": {"path": "$nowhere.content"}},
    ]

    result = await tool_chain(client, steps)

    assert "nowhere" in text(result)
    assert not target.exists(), "a chain refused for a later step must send nothing, not even its first step"


async def test_a_write_outside_the_served_folder_comes_back_as_the_upstreams_error(
    client: Client, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"

    result = await tool_call(client, "fs__write_file", {"path": str(outside), "content": "x"})

    assert result.is_error or result.structured_content["is_error"], text(result)
    assert "outside allowed directories" in text(result) or "Access denied" in text(result)
    assert not outside.exists()


async def test_arguments_that_break_the_schema_are_refused_and_nothing_is_written(client: Client, served: Path) -> None:
    result = await tool_call(client, "fs__write_file", {"path": str(served / "new.txt"), "content": 42})
    bare: Any = await tool_call(client, "fs__write_file", {"path": str(served / "new.txt")})

    assert result.is_error and "content" in text(result), text(result)
    assert bare.is_error and "content" in text(bare), text(bare)
    assert not (served / "new.txt").exists()


async def test_a_tool_its_own_description_calls_deprecated_comes_after_its_replacement(client: Client) -> None:
    found = await search(client, "read the contents of notes/todo.md")

    assert found.index("fs__read_text_file") < found.index("fs__read_file") if "fs__read_file" in found else True
    assert found[0] != "fs__read_file"  # "DEPRECATED: Use read_text_file instead."
