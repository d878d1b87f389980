"""The gateway in front of the real @modelcontextprotocol/server-everything (npm, pinned): routing over its tools,
an upstream killed mid-call, one that stops answering, a long call past its timeout, a prerequisite that fails
every attempt, and a command that does not exist."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from abilities_mcp.gateway.upstreams import MAX_STDERR_BYTES
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from support import raw_server, stdio_params, until
from upstream_servers import everything_server

# Long enough that it is still running whenever the test acts on it; the test ends it sooner.
LONG_OPERATION = {"duration": 600, "steps": 600}


def configure(root: Path, timeout: str = "60s", workflows: dict[str, Any] | None = None, **more: Any) -> None:
    server = {"command": str(everything_server()), "args": ["stdio"], "timeout": timeout}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"everything": server, **more}}))
    if workflows is not None:
        (root / "workflows.json").write_text(json.dumps(workflows))


# In memory, tool_call goes the SDK's way; over stdio, down the lane (server/lane.py), where a call with nothing to
# wait for, once the upstream is up, is started from the loop's callback: each path meets every failure here.
PATHS = ["in memory", "over stdio"]


def open_client(project: Project, over: str) -> Client:
    if over == "in memory":
        return Client(create_server(project))
    return Client(stdio_params(project.root), mode="legacy")  # the handshake, as the clients do it


@pytest.fixture(params=PATHS)
def connect(project: Project, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """connect(timeout=..., workflows=...) → a client of a server whose gateway fronts server-everything."""

    def make(**config: Any) -> Client:
        configure(project.root, **config)
        return open_client(project, request.param)

    return make


@pytest.fixture
async def client(connect) -> AsyncIterator[Client]:
    async with connect() as c:
        yield c


async def tool_call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return await client.call_tool("tool_call", {"tool": tool, "arguments": arguments}, meta={"sessionID": "s1"})


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def upstream_processes() -> list[psutil.Process]:
    """The live server-everything processes this test started (descendants of the test process)."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and any("server-everything" in part for part in p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


def started_since(known: set[int]) -> psutil.Process | None:
    """The one server-everything process not in `known` (earlier tests' may still be exiting), or None."""
    found = [p for p in upstream_processes() if p.pid not in known]
    return found[0] if len(found) == 1 else None


def pids() -> set[int]:
    return {p.pid for p in upstream_processes()}


async def test_tool_search_ranks_the_upstream_tools_for_a_task_with_schema_and_reasons(client) -> None:
    found = await client.call_tool("tool_search", {"task": "echo back my message", "limit": 3})

    assert not found.is_error, text(found)
    result = found.structured_content
    top = result["tools"][0]
    assert top["tool"] == "everything__echo"
    assert top["server"] == "everything"
    assert top["description"] == "Echoes back the input string"
    assert top["input_schema"]["required"] == ["message"]
    assert any("echo" in reason for reason in top["reasons"])
    assert 0 < top["score"] <= 1
    assert len(result["tools"]) <= 3
    assert result["cache"]["refreshed_at"] and result["cache"]["stale"] is False

    summed = (await client.call_tool("tool_search", {"task": "the sum of two numbers"})).structured_content
    assert summed["tools"][0]["tool"] == "everything__get-sum"


async def test_a_found_tool_is_called_by_its_name_or_its_bare_name(client) -> None:
    qualified = await tool_call(client, "everything__get-sum", {"a": 2, "b": 40})
    bare = await tool_call(client, "echo", {"message": "hello upstream"})

    assert not qualified.is_error and "42" in text(qualified)
    assert qualified.structured_content["tool"] == "everything__get-sum"
    assert text(bare).startswith("Echo: hello upstream")


async def test_an_upstream_killed_mid_call_fails_that_call_naming_it_and_is_restarted_for_the_next(client) -> None:
    known = pids()
    assert not (await tool_call(client, "everything__echo", {"message": "warm up"})).is_error
    first = started_since(known)
    assert first is not None
    before = first.io_counters().read_chars
    outcome: list[Any] = []

    async def long_call() -> None:
        outcome.append(await tool_call(client, "everything__trigger-long-running-operation", LONG_OPERATION))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(long_call)
        await until(lambda: first.io_counters().read_chars > before)  # it has read the request: the call is live
        first.kill()
    failed = outcome[0]
    again = await tool_call(client, "everything__echo", {"message": "after the crash"})

    assert failed.is_error
    assert "Upstream server 'everything' failed while calling 'trigger-long-running-operation'" in text(failed)
    assert "Starting default (STDIO) server" in text(failed)  # the tail of its stderr
    assert "The next call starts it again" in text(failed)
    assert text(again).startswith("Echo: after the crash")
    second = started_since(known | {first.pid})
    assert second is not None


async def test_an_upstream_that_stops_answering_times_out_and_is_replaced_on_the_next_call(connect) -> None:
    async with connect(timeout="2s") as client:
        known = pids()
        assert not (await tool_call(client, "everything__echo", {"message": "warm up"})).is_error
        hung = started_since(known)
        assert hung is not None
        hung.send_signal(signal.SIGSTOP)  # alive, holding its pipes, answering nothing
        try:
            stuck = await tool_call(client, "everything__echo", {"message": "anyone?"})
            again = await tool_call(client, "everything__echo", {"message": "a fresh one"})
            replaced = started_since(known | {hung.pid})
        finally:
            hung.send_signal(signal.SIGCONT)

    assert stuck.is_error
    assert "Upstream server 'everything' did not answer within 2s while calling 'echo'" in text(stuck)
    assert text(again).startswith("Echo: a fresh one")
    assert replaced is not None  # a new process answered; the stopped one is being shut down


async def test_a_call_past_its_timeout_fails_and_the_live_upstream_keeps_serving(connect) -> None:
    async with connect(timeout="1s") as client:
        slow = await tool_call(client, "everything__trigger-long-running-operation", LONG_OPERATION)
        before = pids()
        after = await tool_call(client, "everything__echo", {"message": "still here"})
        now = pids()

    assert slow.is_error
    assert "did not answer within 1s while calling 'trigger-long-running-operation'" in text(slow)
    assert text(after).startswith("Echo: still here")
    assert before and not now - before  # it answered the probe: no new process


async def test_a_prerequisite_that_fails_three_times_aborts_naming_the_workflow_the_step_and_the_error(
    connect,
) -> None:
    workflows = {
        "slow-first": {
            "description": "A long operation must finish before any sum",
            "triggers": {"tools": ["get-sum"]},
            "prerequisites": [
                {"step": 1, "tool": "echo", "description": "Say hello", "params": {"message": "hello"}},
                {
                    "step": 2,
                    "tool": "trigger-long-running-operation",
                    "description": "Never finishes within the timeout",
                    "arguments": LONG_OPERATION,
                },
            ],
        }
    }
    async with connect(timeout="1s", workflows=workflows) as client:
        result = await tool_call(client, "everything__get-sum", {"a": 1, "b": 2})
        status = await client.call_tool("workflow_status", {}, meta={"sessionID": "s1"})

    assert result.is_error
    message = text(result)
    assert message.startswith(
        "Error executing tool tool_call: Workflow 'slow-first' failed at step 2 (trigger-long-running-operation): "
        "Upstream server 'everything' did not answer within 1s"
    )
    assert "Tried 3 times as everything__trigger-long-running-operation(duration=600, steps=600)" in message
    assert "the gated call was not sent" in message
    steps = status.structured_content["completed"]["slow-first"]
    assert [(s["step"], s["tool"], s["result"]) for s in steps] == [(1, "echo", "Echo: hello")]


async def test_a_command_that_does_not_exist_is_a_clear_error_and_the_other_upstreams_still_work(project) -> None:
    configure(project.root, nowhere={"command": "/nonexistent/mcp-server", "args": []})
    async with Client(create_server(project)) as client:
        missing = await tool_call(client, "nowhere__anything", {})
        search = await client.call_tool("tool_search", {"task": "echo a message"})
        echo = await tool_call(client, "everything__echo", {"message": "fine"})

    assert missing.is_error
    assert (
        "Upstream server 'nowhere' failed to start: cannot run '/nonexistent/mcp-server' (No such file or directory); "
        "fix `command` in gateway.json" in text(missing)
    )
    assert search.structured_content["tools"][0]["tool"] == "everything__echo"
    assert "Upstream server 'nowhere' failed to start" in search.structured_content["warnings"][0]
    assert text(echo).startswith("Echo: fine")


async def test_a_bare_name_two_upstreams_offer_must_be_qualified(project: Project) -> None:
    twin = {"command": str(everything_server()), "args": ["stdio"]}
    configure(project.root, twin=twin)
    async with Client(create_server(project)) as client:
        result = await tool_call(client, "echo", {"message": "which one?"})

    assert result.is_error
    assert "Tool 'echo' is offered by several upstream servers; name one: 'everything__echo', 'twin__echo'." in text(
        result
    )


async def test_over_stdio_the_upstreams_stderr_reaches_neither_our_stdout_nor_our_stderr(
    project: Project, tmp_path: Path
) -> None:
    configure(project.root)
    stderr_file = tmp_path / "server-stderr.txt"

    async with raw_server(project.root, stderr_file) as server:  # every stdout line must parse as JSON-RPC
        result = await server.request(
            "tools/call", {"name": "tool_call", "arguments": {"tool": "echo", "arguments": {"message": "clean"}}}
        )

    assert not result.get("isError"), result
    assert result["content"][0]["text"] == "Echo: clean"
    assert "Starting default (STDIO) server" not in stderr_file.read_text()  # kept in its own file


async def test_an_upstream_whose_entry_changes_on_disk_is_restarted_with_the_new_entry(project: Project) -> None:
    configure(project.root, timeout="60s")
    async with Client(create_server(project)) as client:
        known = pids()
        assert not (await tool_call(client, "echo", {"message": "first"})).is_error
        first = started_since(known)
        assert first is not None
        configure(project.root, timeout="61s")
        second = await tool_call(client, "echo", {"message": "second"})
        restarted = started_since(known | {first.pid})

    assert text(second).startswith("Echo: second")
    assert restarted is not None


async def test_a_streamable_http_upstream_is_reached_by_its_url_with_its_headers(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "http-upstream.log"
    env = {**os.environ, "PORT": str(port)}
    monkeypatch.setenv("UPSTREAM_TOKEN", "t0ken")
    with log.open("wb") as stderr:
        process = await anyio.open_process([str(everything_server()), "streamableHttp"], env=env, stderr=stderr)
    try:
        await until(lambda: f"listening on port {port}" in log.read_text(), timeout=30)
        web = {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"Authorization": "Bearer ${UPSTREAM_TOKEN}"}}
        (project.root / "gateway.json").write_text(json.dumps({"mcpServers": {"web": web}}))
        async with Client(create_server(project)) as client:
            result = await tool_call(client, "web__echo", {"message": "over http"})
    finally:
        process.kill()
        await process.aclose()

    assert not result.is_error, text(result)
    assert text(result).startswith("Echo: over http")


async def test_concurrent_first_calls_start_the_upstream_once(client) -> None:
    known = pids()
    results: list[Any] = []

    async def echo(n: int) -> None:
        results.append(await tool_call(client, "everything__echo", {"message": f"call {n}"}))

    async with anyio.create_task_group() as tasks:
        for n in range(3):
            tasks.start_soon(echo, n)

    assert sorted(text(r) for r in results) == ["Echo: call 0", "Echo: call 1", "Echo: call 2"]
    assert started_since(known) is not None  # exactly one new process served all three


async def test_the_upstreams_stop_when_the_server_does(connect) -> None:
    known = pids()
    async with connect() as client:
        assert not (await tool_call(client, "everything__echo", {"message": "hello"})).is_error
        upstream = started_since(known)
        assert upstream is not None

    await until(lambda: not upstream.is_running() or upstream.status() == psutil.STATUS_ZOMBIE)


def open_deleted_file_sizes() -> list[int]:
    """Sizes of the unlinked files this process holds open (the upstreams' stderr files among them)."""
    sizes = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}").endswith("(deleted)"):
                sizes.append(os.fstat(int(fd)).st_size)
    return sizes


async def test_a_flood_on_the_upstreams_stderr_is_cut_back_to_its_tail(project: Project) -> None:
    flood = f'head -c 3000000 /dev/zero | tr "\\0" x >&2; echo "last words" >&2; exec "{everything_server()}" stdio'
    (project.root / "gateway.json").write_text(
        json.dumps({"mcpServers": {"chatty": {"command": "sh", "args": ["-c", flood]}}})
    )
    async with Client(create_server(project)) as client:
        known = pids()
        first = await tool_call(client, "chatty__echo", {"message": "hi"})
        sizes = open_deleted_file_sizes()
        upstream = started_since(known)
        assert upstream is not None
        upstream.kill()  # so the next call fails and quotes what is left of its stderr
        failed = await tool_call(client, "chatty__echo", {"message": "again"})

    assert text(first).startswith("Echo: hi")
    assert sizes and max(sizes) <= MAX_STDERR_BYTES
    assert "last words" in text(failed) and "Starting default (STDIO) server" in text(failed)


async def test_the_upstreams_progress_notifications_reach_the_caller_of_tool_call(client) -> None:
    assert not (await tool_call(client, "everything__echo", {"message": "warm up"})).is_error  # the upstream is up
    seen: list[tuple[float, float | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))

    result = await client.call_tool(
        "tool_call",
        {"tool": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3}},
        progress_callback=progress,
        meta={"sessionID": "s1"},
    )

    assert not result.is_error, text(result)
    assert "Long running operation completed" in text(result)
    assert seen == [(1, 3), (2, 3), (3, 3)]  # each of the upstream's steps, as it sent them


RELAY = r"""
import subprocess, sys, threading
log = open(sys.argv[1], "ab", buffering=0)
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=sys.stdout.buffer)
for line in sys.stdin.buffer:  # what the gateway sends, recorded, then passed on
    log.write(line)
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
child.wait()
"""


@pytest.mark.parametrize("over", PATHS)
async def test_a_cancelled_tool_call_cancels_the_upstream_request_and_the_gateway_keeps_serving(
    project: Project, tmp_path: Path, over: str
) -> None:
    """The caller cancels tool_call (notifications/cancelled); the gateway sends the upstream notifications/cancelled
    for the request it made, seen by a relay that records what the upstream receives."""
    relay, sent = tmp_path / "relay.py", tmp_path / "sent.jsonl"
    relay.write_text(RELAY)
    entry = {"command": os.sys.executable, "args": [str(relay), str(sent), str(everything_server()), "stdio"]}
    (project.root / "gateway.json").write_text(json.dumps({"mcpServers": {"everything": entry}}))

    def received() -> list[dict[str, Any]]:
        return [json.loads(line) for line in sent.read_bytes().splitlines()] if sent.exists() else []

    async with open_client(project, over) as client:
        assert not (await tool_call(client, "everything__echo", {"message": "warm up"})).is_error
        with anyio.CancelScope() as scope:  # the SDK's client sends notifications/cancelled when its call is cancelled

            async def cancel_when_sent() -> None:
                await until(
                    lambda: any(
                        m.get("params", {}).get("name") == "trigger-long-running-operation" for m in received()
                    ),
                    timeout=30,
                )
                scope.cancel()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(cancel_when_sent)
                await tool_call(client, "everything__trigger-long-running-operation", LONG_OPERATION)
        long_id = next(
            m["id"] for m in received() if m.get("params", {}).get("name") == "trigger-long-running-operation"
        )
        cancelled = await until(
            lambda: [m for m in received() if m.get("method") == "notifications/cancelled"], timeout=30
        )
        after = await tool_call(client, "everything__echo", {"message": "after the cancel"})

    assert [m["params"]["requestId"] for m in cancelled] == [long_id]
    assert text(after).startswith("Echo: after the cancel")
