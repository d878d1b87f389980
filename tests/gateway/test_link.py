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
from support import until

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
        upstream = child_running("sleep 607")

    # stdin closed: 2 s; TERM ignored: 2 s; then KILL
    await until(lambda: gone(upstream), timeout=15)


def child_running(text: str) -> psutil.Process:
    """The live child of this test process whose command line holds `text` (others' exiting children skipped)."""
    for process in psutil.Process().children(recursive=True):
        try:
            if text in " ".join(process.cmdline()):
                return process
        except psutil.Error:  # a zombie or one gone meanwhile: not the one
            continue
    raise AssertionError(f"no child process runs {text!r}")


def gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


STRINGIFY_IDS = r"""
import json, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

def forward():
    for line in sys.stdin.buffer:
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()

threading.Thread(target=forward, daemon=True).start()
for line in child.stdout:  # every answer's id written back as a string, as some servers do
    message = json.loads(line)
    if "id" in message and "method" not in message:
        message["id"] = str(message["id"])
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
"""


async def test_an_upstream_that_answers_with_the_id_as_a_string_is_still_understood(project: Project) -> None:
    (project.root / "relay.py").write_text(STRINGIFY_IDS)
    configure(project.root, f"exec {sys.executable} {project.root / 'relay.py'} $UPSTREAM")

    async with Client(create_server(project)) as client:
        with anyio.fail_after(20):  # not matched, the answer would never reach the call
            result = await echo(client, "seven")

    assert result.content[0].text == "seven"


# An upstream that answers `echo` at once, never answers `hold`, and records every line it reads.
RECORDER = r"""
import json, sys
log = open(sys.argv[1], "a", buffering=1)
for line in sys.stdin:
    log.write(line)
    message = json.loads(line)
    if message.get("method") == "tools/call" and message["params"]["name"] == "echo":
        text = message["params"]["arguments"]["text"]
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}}
        print(json.dumps(answer), flush=True)
"""


async def test_a_call_started_at_once_is_handed_its_answer_and_a_forgotten_one_is_cancelled_upstream(
    tmp_path: Path,
) -> None:
    from abilities_mcp.gateway.link import Link

    script, received = tmp_path / "recorder.py", tmp_path / "received.jsonl"
    script.write_text(RECORDER)
    got: list[Any] = []
    with (tmp_path / "stderr").open("wb") as errlog:
        link = Link(sys.executable, [str(script), str(received)], None, tmp_path, errlog)
        async with link.streams():
            assert link.start_call("echo", {"text": "hi"}, got.append) is not None
            await until(lambda: got)
            held = link.start_call("hold", {}, got.append)
            assert held is not None
            link.forget(held)
            lines = await until(
                lambda: [json.loads(line) for line in received.read_text().splitlines()][2:], timeout=10
            )
            assert link.start_call("echo", {"text": "x" * 5000}, got.append) is None  # not one atomic write
            last = link.start_call("hold", {}, got.append)
            assert last is not None
        # the upstream is stopped while `last` waits: it is told why
    assert got[0]["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert lines == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": held, "reason": "the gateway's caller cancelled the call"},
        }
    ]
    assert len(got) == 2 and isinstance(got[1], ConnectionError)


async def test_the_upstream_is_registered_as_this_servers_own_child_while_it_runs(project: Project) -> None:
    # The server reaps the orphans its steps leave (engine/process.py reap_adopted): an upstream's exit must be left
    # to its Popen (children.py), and forgotten once read, for its pid may be anyone's after.
    from abilities_mcp.children import started_here

    configure(project.root, "exec $UPSTREAM")
    async with Client(create_server(project)) as client:
        assert (await echo(client, "up")).content[0].text == "up"
        upstream = next(p for p in psutil.Process().children() if "upstream.py" in " ".join(p.cmdline()))

        assert started_here(upstream.pid)

    assert not started_here(upstream.pid) and not upstream.is_running()
