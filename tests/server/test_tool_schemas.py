"""The tools' schemas generated once per version (server/schema_data.py): equal to what the SDK generates live,
tools/list byte for byte the same, and every argument checked as strictly as a live-built tool checks it.

Regenerate schema_data.py after changing a tool or a result model: `.venv/bin/python tests/server/test_tool_schemas.py`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from pydantic import ValidationError

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.server import schemas
from abilities_mcp.server.app import create_server
from abilities_mcp.skills.skillset import SkillSet
from abilities_mcp.state.project import Project

DATA = Path(schemas.__file__).with_name("schema_data.py")
REGENERATE = ".venv/bin/python tests/server/test_tool_schemas.py"
# A value of the wrong type for any parameter: no tool takes an object of this shape for anything.
WRONG = {"not": ["what", {"any": "tool"}, "takes"]}


@contextmanager
def live_schemas() -> Iterator[None]:
    """Servers built meanwhile generate every schema through the SDK, as before schema_data.py."""
    generated = schemas.generated
    schemas.generated = lambda: None
    try:
        yield
    finally:
        schemas.generated = generated


def gateway_project(folder: Path) -> Project:
    """A project with a gateway.json, so the gateway's four tools are on the server too."""
    root = folder / "project"
    (root / "abilities").mkdir(parents=True)
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"up": {"command": "true"}}}))
    return Project.resolve(root, folder / "state", None)


def live_server(project: Project) -> MCPServer:
    with live_schemas():
        return create_server(project)


def wire(tools: list[Any]) -> str:
    """tools/list's tools as the SDK sends them."""
    return json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])


@asynccontextmanager
async def two_clients(project: Project) -> AsyncIterator[tuple[Client, Client]]:
    async with Client(live_server(project)) as live, Client(create_server(project)) as known:
        yield live, known


def test_the_generated_file_is_what_the_sdk_generates_live(tmp_path: Path) -> None:
    server = live_server(gateway_project(tmp_path))
    expected = schemas.render(server._tool_manager.list_tools())
    assert DATA.read_text() == expected, f"server/schema_data.py is stale: regenerate it with `{REGENERATE}`"


def test_every_tool_is_built_from_the_generated_schemas(tmp_path: Path) -> None:
    """A stale key would silently fall back to live generation: correct, but the start-up cost comes back."""
    tools = create_server(gateway_project(tmp_path))._tool_manager.list_tools()
    assert len(tools) == 25
    assert all(isinstance(t.fn_metadata, schemas.DeferredArguments) for t in tools), f"regenerate: `{REGENERATE}`"


async def test_tools_list_is_byte_for_byte_what_live_generation_sends(tmp_path: Path) -> None:
    async with two_clients(gateway_project(tmp_path)) as (live, known):
        assert wire((await known.list_tools()).tools) == wire((await live.list_tools()).tools)


async def test_a_project_without_a_gateway_lists_the_same_tools_either_way(project: Project) -> None:
    async with two_clients(project) as (live, known):
        listed = (await known.list_tools()).tools
        assert wire(listed) == wire((await live.list_tools()).tools)
        assert not any(t.name.startswith("tool_") for t in listed)


async def test_wrong_arguments_are_refused_in_the_same_words_by_every_tool(tmp_path: Path) -> None:
    project = gateway_project(tmp_path)
    async with two_clients(project) as (live, known):
        for tool in (await live.list_tools()).tools:
            for name in tool.input_schema.get("properties", {}):
                refused = [await c.call_tool(tool.name, {name: WRONG}) for c in (live, known)]
                assert all(r.is_error for r in refused), (tool.name, name)
                assert refused[0].content == refused[1].content, (tool.name, name)


def test_the_model_that_checks_a_call_is_the_one_the_schema_advertises(tmp_path: Path) -> None:
    for tool in create_server(gateway_project(tmp_path))._tool_manager.list_tools():
        with contextlib.suppress(ValidationError):
            tool.fn_metadata.validate_arguments({})  # builds the argument model, as the tool's first call does
        assert tool.fn_metadata.arg_model.model_json_schema(by_alias=True) == tool.parameters, tool.name


async def test_a_bound_is_enforced_on_the_first_call(project: Project) -> None:
    async with Client(create_server(project)) as client:
        refused = await client.call_tool("ability_status", {"wait_seconds": 601})
        assert refused.is_error and "less than or equal to 600" in refused.content[0].text
        assert (await client.call_tool("ability_list", {})).structured_content == {"abilities": []}


async def test_tools_list_is_answered_without_reading_an_ability_or_a_skill(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """500 abilities and 2,000 skills cost start-up nothing: the catalog is read on the first call that needs it."""
    reads: list[str] = []
    for cls in (Catalog, SkillSet):
        monkeypatch.setattr(cls, "refresh", lambda self, cls=cls: reads.append(cls.__name__))
    async with Client(create_server(project)) as client:
        assert (await client.list_tools()).tools
        assert reads == []
        await client.call_tool("skill_list", {})
    assert reads == ["SkillSet"]  # the check above would see a read


def write() -> None:
    """Regenerate server/schema_data.py from what the SDK generates live."""
    with tempfile.TemporaryDirectory() as tmp:
        server = live_server(gateway_project(Path(tmp)))
        DATA.write_text(schemas.render(server._tool_manager.list_tools()))
    print(f"wrote {DATA}", file=sys.stderr)


if __name__ == "__main__":
    write()
