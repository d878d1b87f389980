"""A stdio upstream's link (gateway/link.py): answers reach the calls that sent them, a line that is not a message
does not break the connection, and an upstream that will not stop is killed with its process group."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client

from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import sleeping, until

UPSTREAM = '''\
from mcp.server.mcpserver import MCPServer
import anyio

server = MCPServer("upstream")


@server.tool()
async def echo(text: str, seconds: float = 0) -> str:
    """Return the text, after `seconds`."""
    await anyio.sleep(seconds)
    return text


server.run("stdio")
'''


def configure(root: Path, shell: str) -> None:
    """An upstream started by `shell`, in which $UPSTREAM runs the one-tool server above."""
    script = root / "upstream.py"
    script.write_text(UPSTREAM)
    entry = {"command": "sh", "args": ["-c", shell], "env": {"UPSTREAM": f"{sys.executable} {script}"}}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"up": entry}}))


async def echo(client: Client, text: str, seconds: float = 0) -> Any:
    arguments = {"tool": "up__echo", "arguments": {"text": text, "seconds": seconds}}
    return await client.call_tool("tool_call", arguments, meta={"sessionID": "s1"})


async def test_concurrent_calls_each_get_their_own_answer_whatever_order_they_come_back_in(project: Project) -> None:
    configure(project.root, "exec $UPSTREAM")
    answers: dict[int, str] = {}

    async with Client(create_server(project)) as client:

        async def one(i: int) -> None:
            result = await echo(client, f"call {i}", seconds=(10 - i) / 100)  # the first sent comes back last
            answers[i] = result.content[0].text

        async with anyio.create_task_group() as tasks:
            for i in range(10):
                tasks.start_soon(one, i)

    assert answers == {i: f"call {i}" for i in range(10)}


async def test_a_line_that_is_not_a_message_goes_to_the_sdk_client_and_the_connection_goes_on(
    project: Project,
) -> None:
    configure(project.root, 'echo "this is not JSON-RPC"; exec $UPSTREAM')

    async with Client(create_server(project)) as client:
        first = await echo(client, "still here")
        second = await echo(client, "and again")

    assert [first.content[0].text, second.content[0].text] == ["still here", "and again"]


async def test_an_upstream_that_ignores_stdin_closing_and_sigterm_is_killed_with_its_group(project: Project) -> None:
    # After the server exits (its stdin closed), the shell goes on to a `sleep` that ignores TERM, as it does
    configure(project.root, "trap '' TERM; $UPSTREAM; exec sleep 607")

    async with Client(create_server(project)) as client:
        assert (await echo(client, "hello")).content[0].text == "hello"
        upstream = next(p for p in psutil.Process().children(recursive=True) if "sleep 607" in " ".join(p.cmdline()))

    await until(lambda: not sleeping(607), timeout=15)  # stdin closed, 2 s; TERM ignored, 2 s; then KILL
    assert not upstream.is_running() or upstream.status() == psutil.STATUS_ZOMBIE
