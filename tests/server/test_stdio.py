"""The real server as a subprocess: stdio framing, a killed server and its successor, a client that hangs up,
output floods, and input values that must never become shell code.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from support import raw_server, sleeping, stdio_params, stored_run, until

# The flood test's bound on the server's resident memory while a step prints hundreds of megabytes.
MAX_SERVER_RSS_BYTES = 250 * 1024 * 1024
FLOOD_BYTES = 300_000_000
LIVE_STATES = {"pending", "running", "awaiting_agent", "awaiting_approval", "awaiting_decision"}


# --- helpers ----------------------------------------------------------------------------------------------------


def server_process(root: Path) -> psutil.Process:
    """The server this test process spawned for `root` (a child running `-m abilities_mcp --root ROOT`)."""
    for child in psutil.Process().children(recursive=True):
        with suppress(psutil.Error):
            cmd = child.cmdline()
            if "abilities_mcp" in cmd and str(root) in cmd:
                return child
    raise AssertionError(f"no abilities_mcp server running for {root}")


def sleepy_ability(write: Callable[[str, str], Path], background: int, foreground: int) -> None:
    """An ability whose only step sleeps (with a background grandchild) on its first attempt, and is quick after."""
    write(
        "slow",
        f"""
        description: sleeps on the first attempt, answers at once on the next
        steps:
          - id: wait
            type: script
            run: |
              if [ -e attempted ]; then echo second attempt; exit 0; fi
              touch attempted
              sleep {background} &
              sleep {foreground}
        """,
    )


# --- framing ----------------------------------------------------------------------------------------------------


async def test_framing_stays_intact_while_a_step_prints_heavily_to_stdout_and_stderr(root: Path, write) -> None:
    write(
        "noisy",
        r"""
        description: prints a lot everywhere it can
        steps:
          - id: noise
            type: script
            run: |
              yes line | head -n 200000
              yes errline | head -n 200000 >&2
              echo "not json at all" > /proc/$PPID/fd/1 2>/dev/null || true
              echo "not json either" > /proc/$PPID/fd/2 2>/dev/null || true
              echo finished
        """,
    )
    unexpected: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            unexpected.append(message)

    params = stdio_params(root, "--log-level", "debug")
    async with Client(params, mode="legacy", message_handler=on_message) as client:
        result = await client.call_tool("ability_run", {"name": "noisy", "wait_seconds": 60})
        assert not result.is_error, result.content
        run = result.structured_content
        assert run["status"] == "completed"
        assert run["steps"][0]["output"].endswith("line\nline\nfinished")

        history = await client.call_tool("ability_history", {})
        assert [(r["run_id"], r["status"]) for r in history.structured_content["runs"]] == [
            (run["run_id"], "completed")
        ]
        listed = await client.call_tool("ability_list", {})
        assert [a["name"] for a in listed.structured_content["abilities"]] == ["noisy"]
    assert unexpected == []


async def test_a_line_longer_than_the_server_reads_is_refused_with_its_id_and_the_next_line_is_served(
    root: Path, tmp_path: Path
) -> None:
    from abilities_mcp.pipes import MAX_LINE_BYTES

    padding = b"a" * (MAX_LINE_BYTES + 1024 * 1024)
    async with raw_server(root, tmp_path / "server.log") as server:
        assert server.process.stdin is not None
        await server.process.stdin.send(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"' + padding + b'"}}\n')
        with anyio.fail_after(30):
            answer = json.loads(await server.stdout.receive_until(b"\n", 1 << 20))
        pong = await server.request("ping", {})
        rss = server_process(root).memory_info().rss

    assert answer["id"] == 7 and answer["error"]["code"] == -32600, answer
    assert "longer than 64 MiB" in answer["error"]["message"]
    assert pong == {}
    assert rss < MAX_LINE_BYTES * 3, f"the server kept the long line: {rss} bytes resident"  # read, then dropped


@pytest.mark.parametrize("stdin_kind", ["file", "devnull"])
def test_requests_read_from_a_file_or_the_null_device_are_answered_and_the_server_exits(
    root: Path, tmp_path: Path, stdin_kind: str
) -> None:
    """stdin need not be a pipe: a file of requests or /dev/null, which the event loop cannot wait on, is read
    directly."""
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    params = stdio_params(root)
    with (requests if stdin_kind == "file" else Path(os.devnull)).open("rb") as stdin:
        done = subprocess.run(
            [params.command, *params.args], env=params.env, stdin=stdin, capture_output=True, timeout=60
        )

    assert done.returncode == 0, done.stderr.decode()
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    if stdin_kind == "devnull":
        assert answers == []
    else:  # the end of the file is the client hanging up: requests still in flight then may go unanswered
        assert answers[0]["id"] == 1 and answers[0]["result"]["serverInfo"]["name"] == "abilities-mcp", answers
    assert b"Traceback" not in done.stderr


async def test_the_stdout_pipe_it_was_given_is_blocking_again_when_the_server_exits(root: Path) -> None:
    """The server writes without blocking on a pipe (a client slow to read never stalls it), a flag of the pipe
    itself, which whoever started it shares: it is put back when the server exits."""
    read_end, write_end = os.pipe()
    params = stdio_params(root)
    try:
        process = await anyio.open_process(
            [params.command, *params.args], env=params.env, stdout=write_end, stderr=subprocess.DEVNULL
        )
        async with process:
            assert process.stdin is not None
            request = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            await process.stdin.send(json.dumps(request).encode() + b"\n")
            with anyio.fail_after(30):
                answer = await anyio.to_thread.run_sync(os.read, read_end, 1 << 20)
            assert b'"id":1' in answer and not os.get_blocking(write_end)  # serving: non-blocking
            await process.stdin.aclose()
            with anyio.fail_after(30):
                assert await process.wait() == 0
        assert os.get_blocking(write_end)
    finally:
        os.close(read_end)
        os.close(write_end)


# --- a server killed mid-run, and the next one ------------------------------------------------------------------


async def test_a_server_killed_with_sigkill_takes_its_step_processes_with_it(
    root: Path, write, sleep_seconds, tmp_path: Path
) -> None:
    background, foreground = sleep_seconds(), sleep_seconds()
    sleepy_ability(write, background, foreground)

    async with raw_server(root, tmp_path / "server.log") as server:
        run_id = (await server.call_tool("ability_run", {"name": "slow", "wait_seconds": 0}))["run_id"]
        await until(lambda: len(sleeping(background, foreground)) == 2)
        await until(lambda: stored_run(root, run_id).steps[0].pgid)  # the server has taken charge of the group
        server.process.kill()
        with anyio.fail_after(10):
            await server.process.wait()
        await until(lambda: not sleeping(background, foreground), timeout=5)


async def test_a_run_whose_server_died_hard_is_interrupted_cleaned_up_and_resumable_by_a_new_server(
    root: Path, write, sleep_seconds, tmp_path: Path
) -> None:
    background, foreground = sleep_seconds(), sleep_seconds()
    sleepy_ability(write, background, foreground)

    async with raw_server(root, tmp_path / "first-server.log") as first:
        run_id = (await first.call_tool("ability_run", {"name": "slow", "wait_seconds": 0}))["run_id"]
        await until(lambda: len(sleeping(background, foreground)) == 2)
        pgid = await until(lambda: stored_run(root, run_id).steps[0].pgid)
        kill_all_but_the_step(psutil.Process(first.process.pid), pgid)
        with anyio.fail_after(10):
            await first.process.wait()
    assert len(sleeping(background, foreground)) == 2, "the dead server's step should be left over"

    async with Client(stdio_params(root), mode="legacy") as second:
        status = await second.call_tool("ability_status", {"run_id": run_id})
        assert not status.is_error, status.content
        assert status.structured_content["status"] == "interrupted"
        assert status.structured_content["steps"][0]["status"] == "cancelled"
        assert {"tool": "ability_resume", "arguments": {"run_id": run_id}} in status.structured_content["next_calls"]

        history = await second.call_tool("ability_history", {})
        assert (run_id, "interrupted") in [(r["run_id"], r["status"]) for r in history.structured_content["runs"]]

        await until(lambda: not sleeping(background, foreground), timeout=5)

        resumed = await second.call_tool("ability_resume", {"run_id": run_id, "wait_seconds": 30})
        assert not resumed.is_error, resumed.content
        assert resumed.structured_content["status"] == "completed"
        assert resumed.structured_content["steps"][0]["status"] == "completed"
        assert resumed.structured_content["steps"][0]["output"] == "second attempt"


async def test_a_run_waiting_for_the_agent_and_a_person_survives_a_sigkilled_server(
    root: Path, write, tmp_path: Path
) -> None:
    write(
        "gate",
        """
        description: an agent step, then a person's approval
        steps:
          - {id: build, type: script, run: echo built}
          - {id: review, type: agent, prompt: Review it, needs: [build]}
          - {id: approve, type: approval, prompt: Ship it?, needs: [review]}
          - {id: ship, type: script, run: echo shipped, needs: [approve]}
        """,
    )
    async with raw_server(root, tmp_path / "first.log") as first:
        run = await first.call_tool("ability_run", {"name": "gate"})
        assert run["status"] == "awaiting_agent"
        first.process.kill()
        with anyio.fail_after(10):
            await first.process.wait()

    async with Client(stdio_params(root), mode="legacy") as second:  # declares no elicitation: it will wait
        rid = {"run_id": run["run_id"]}
        assert (await second.call_tool("ability_status", rid)).structured_content["status"] == "interrupted"
        resumed = (await second.call_tool("ability_resume", rid)).structured_content
        assert resumed["status"] == "awaiting_agent" and resumed["current_step"]["id"] == "review"
        assert next(s for s in resumed["steps"] if s["id"] == "build")["attempts"] == 1  # not run again
        handed = {**rid, "step_id": "review", "output": "fine"}
        waiting = (await second.call_tool("ability_step_complete", handed)).structured_content
        assert waiting["status"] == "awaiting_approval"
        pid = server_process(root).pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    async with Client(stdio_params(root), mode="legacy") as third:
        assert (await third.call_tool("ability_status", rid)).structured_content["status"] == "interrupted"
        again = (await third.call_tool("ability_resume", rid)).structured_content
        assert again["status"] == "awaiting_approval" and again["current_step"]["prompt"] == "Ship it?"
        assert next(s for s in again["steps"] if s["id"] == "review")["status"] == "completed"
        await third.call_tool("ability_cancel", rid)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def kill_all_but_the_step(server: psutil.Process, step_pgid: int) -> None:
    """SIGKILL the server and every helper it started (a watchdog, say), sparing only the step's process group:
    the hardest death, where nothing of the server survives to clean up."""
    helpers = [p for p in server.children(recursive=True) if _pgid(p.pid) != step_pgid]
    for proc in [*helpers, server]:
        with suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(helpers, timeout=5)


# --- the client hangs up ----------------------------------------------------------------------------------------


async def test_closing_stdin_while_a_step_runs_kills_its_process_group_and_leaves_the_run_interrupted(
    root: Path, write, sleep_seconds, tmp_path: Path
) -> None:
    background, foreground = sleep_seconds(), sleep_seconds()
    sleepy_ability(write, background, foreground)

    async with raw_server(root, tmp_path / "server.log") as server:
        run_id = (await server.call_tool("ability_run", {"name": "slow", "wait_seconds": 0}))["run_id"]
        await until(lambda: len(sleeping(background, foreground)) == 2)
        await until(lambda: stored_run(root, run_id).steps[0].pgid)
        assert server.process.stdin is not None
        await server.process.stdin.aclose()
        with anyio.fail_after(15):
            exit_code = await server.process.wait()
        assert exit_code == 0, (tmp_path / "server.log").read_text()
        assert sleeping(background, foreground) == []

    record = stored_run(root, run_id)
    assert record.status == "interrupted"
    assert record.steps[0].status == "cancelled"
    assert "ability_resume" in (record.error or "")


# --- floods -----------------------------------------------------------------------------------------------------


async def test_a_step_printing_hundreds_of_megabytes_leaves_the_server_small_and_answering(root: Path, write) -> None:
    write(
        "flood",
        f"""
        description: floods both streams
        steps:
          - id: flood
            type: script
            run: |
              yes out | head -c {FLOOD_BYTES} &
              yes err | head -c {FLOOD_BYTES} >&2
              wait
        """,
    )
    peak_rss, samples = 0, 0

    def flooding() -> bool:
        for proc in server.children(recursive=True):
            with suppress(psutil.Error):
                if f"head -c {FLOOD_BYTES}" in " ".join(proc.cmdline()):
                    return True
        return False

    async def sample_rss() -> None:
        nonlocal peak_rss, samples
        while True:
            peak_rss = max(peak_rss, server.memory_info().rss)
            samples += 1
            await anyio.sleep(0.01)

    async with Client(stdio_params(root), mode="legacy") as client:
        server = server_process(root)
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample_rss)
            started = await client.call_tool("ability_run", {"name": "flood", "wait_seconds": 0})
            run_id = started.structured_content["run_id"]
            await until(flooding)

            history = await client.call_tool("ability_history", {})
            status = await client.call_tool("ability_status", {"run_id": run_id})
            assert run_id in [r["run_id"] for r in history.structured_content["runs"]]
            assert status.structured_content["steps"][0]["status"] == "running", "answered only after the flood"

            with anyio.fail_after(60):
                while status.structured_content["status"] in LIVE_STATES:
                    status = await client.call_tool("ability_status", {"run_id": run_id, "wait_seconds": 30})
            tg.cancel_scope.cancel()

    assert status.structured_content["status"] == "completed", status.structured_content
    assert status.structured_content["steps"][0]["output"].endswith("out\nout")
    assert samples > 10
    assert peak_rss < MAX_SERVER_RSS_BYTES, f"server peaked at {peak_rss / 2**20:.0f} MiB"


# --- input values are never shell code -------------------------------------------------------------------------

# Everything a shell would act on: command substitution both ways, quotes of both kinds, runs of spaces, globs,
# separators and a pipe.
HOSTILE = "$(touch PWNED) `touch PWNED` \"double\" 'single' two  spaces * ?.txt ; echo leaked | cat"
PLACEMENTS = {
    "bare": ("{{inputs.x}}", HOSTILE),
    "double-quoted": ('"{{inputs.x}}"', HOSTILE),
    "single-quoted": ("'{{inputs.x}}'", HOSTILE),
    "inside-a-word": ("--name={{inputs.x}}end", f"--name={HOSTILE}end"),
    "inside-single-quotes": ("'pre {{inputs.x}} post'", f"pre {HOSTILE} post"),
    "inside-double-quotes": ('"pre {{inputs.x}} post"', f"pre {HOSTILE} post"),
}


@pytest.mark.parametrize(("placement", "expected"), PLACEMENTS.values(), ids=PLACEMENTS.keys())
async def test_an_input_value_arrives_as_exactly_one_word_and_never_runs(
    root: Path, placement: str, expected: str
) -> None:
    (root / "abilities" / "echo.yaml").write_text(
        "description: prints each argument in brackets\n"
        "inputs: {x: {type: string, required: true}}\n"
        "steps:\n"
        "  - id: show\n"
        "    type: script\n"
        "    run: |\n" + textwrap.indent(f"printf '[%s]\\n' {placement}\n", " " * 6)
    )
    (root / "a.txt").write_text("a file a glob would find\n")

    async with Client(stdio_params(root), mode="legacy") as client:
        result = await client.call_tool("ability_run", {"name": "echo", "inputs": {"x": HOSTILE}})
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "completed", result.structured_content
    assert result.structured_content["steps"][0]["output"] == f"[{expected}]"
    assert not (root / "PWNED").exists()


async def test_answers_written_from_the_loops_callback_stay_whole_lines_in_order_when_the_pipe_is_full() -> None:
    import fcntl

    import mcp_types as types

    from abilities_mcp.server.stdio import Stdout

    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    out = Stdout(w, None)

    def answer(n: int) -> types.JSONRPCResponse:
        return types.JSONRPCResponse(jsonrpc="2.0", id=n, result={"text": str(n) * 20_000})

    out.write_now(answer(1))  # more than the pipe holds: the rest waits for room, written by a task
    writing = anyio.Event()

    async def write_more() -> None:
        writing.set()
        await out.write(answer(2))  # the server's writer: after the whole of 1
        out.write_now(answer(3))  # after 2

    received = bytearray()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(write_more)
        await writing.wait()
        os.set_blocking(r, False)
        while received.count(b"\n") < 3:
            await anyio.wait_readable(r)
            received += os.read(r, 65536)
        await out.flush()
    os.close(r)
    os.close(w)

    assert [json.loads(line)["id"] for line in received.splitlines()] == [1, 2, 3]
