"""Bad input and dead processes: each gets a clear answer, and nothing else is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mcp import Client

from abilities_mcp.state.store import RunRecord, StepRecord, Store
from support import state_db


async def validate(client: Client) -> dict[str, list[dict]]:
    files = (await client.call_tool("ability_validate", {})).structured_content["files"]
    return {Path(f["path"]).stem: f["errors"] for f in files}


async def test_yaml_aliases_are_refused_so_a_tiny_file_cannot_expand_to_gigabytes(client, write) -> None:
    write(
        "bomb",
        """
        description: bomb
        inputs:
          x: {type: array, default: &a [&b [1, 2], *b, *b]}
        steps:
          - {id: s, type: script, run: 'true'}
    """,
    )
    errors = (await validate(client))["bomb"]
    assert errors and "anchors and aliases" in errors[0]["message"]


async def test_a_file_nested_too_deeply_is_a_diagnostic_and_the_others_still_run(client, write, root: Path) -> None:
    (root / "abilities" / "deep.yaml").write_text("description: d\nsteps: " + "[" * 3000 + "]" * 3000 + "\n")
    write(
        "fine",
        """
        description: fine
        steps:
          - {id: s, type: script, run: echo ok}
    """,
    )
    errors = await validate(client)
    assert errors["deep"] and errors["fine"] == []
    run = await client.call_tool("ability_run", {"name": "fine"})
    assert not run.is_error and run.structured_content["status"] == "completed"


async def test_an_env_name_the_os_cannot_take_is_an_error_at_load_time(client, write) -> None:
    write(
        "envname",
        """
        description: env
        steps:
          - {id: s, type: script, run: 'true', env: {MODE=prod: '1'}}
    """,
    )
    errors = (await validate(client))["envname"]
    assert errors[0]["path"] == "steps[0].env.MODE=prod"


async def test_a_value_too_large_for_the_os_fails_the_step_with_what_to_do(client, write) -> None:
    write(
        "huge",
        """
        description: huge
        inputs: {notes: {type: string}}
        steps:
          - {id: s, type: script, run: 'echo {{inputs.notes}} > /dev/null'}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "huge", "inputs": {"notes": "x" * 300_000}})
    step = result.structured_content["steps"][0]
    assert step["status"] == "failed" and "too large for the OS" in step["error"] and "file path" in step["error"]


async def test_a_huge_numeric_text_in_a_condition_compares_as_text_instead_of_crashing(client, write) -> None:
    write(
        "digits",
        """
        description: digits
        inputs: {build: {type: string}}
        steps:
          - {id: s, type: script, run: echo ran, when: inputs.build == 5}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "digits", "inputs": {"build": "1" * 5000}})
    assert result.structured_content["status"] == "completed"
    assert result.structured_content["steps"][0]["status"] == "skipped"


async def test_an_unknown_name_with_nothing_close_says_where_to_look(client) -> None:
    result = await client.call_tool("ability_run", {"name": "zzzzzz"})
    assert result.is_error and "Call ability_list() to see what exists" in result.content[0].text


async def test_resuming_a_run_whose_before_hook_failed_runs_the_hook_again(client, write, root: Path) -> None:
    write(
        "gated",
        """
        description: gated
        hooks: {before: ['test -f ready.flag']}
        steps:
          - {id: deploy, type: script, run: echo DEPLOYED}
    """,
    )
    first = (await client.call_tool("ability_run", {"name": "gated"})).structured_content
    assert first["status"] == "failed" and "hooks.before[0]" in first["error"]
    again = (await client.call_tool("ability_resume", {"run_id": first["run_id"]})).structured_content
    assert again["status"] == "failed" and again["steps"][0]["status"] != "completed"
    (root / "ready.flag").touch()
    passed = (await client.call_tool("ability_resume", {"run_id": first["run_id"]})).structured_content
    assert passed["status"] == "completed" and passed["steps"][0]["output"] == "DEPLOYED"


async def test_a_run_left_live_by_a_dead_server_reads_as_interrupted_and_does_not_block_the_session(
    client, write, project
) -> None:
    write(
        "quick",
        """
        description: quick
        steps:
          - {id: s, type: script, run: echo ok}
    """,
    )
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = time.time()
    Store(project.state_db).create_run(
        RunRecord(
            run_id="run_dead",
            ability="quick",
            session_id="S",
            status="running",
            enforcement="strict",
            definition={"description": "quick", "steps": [{"id": "s", "type": "script", "run": "echo ok"}]},
            source_path=None,
            inputs={},
            parent_run=None,
            error=None,
            owner_pid=dead.pid,
            owner_start=1,
            started_at=now,
            finished_at=None,
            updated_at=now,
            steps=[StepRecord("s", 0, "script", status="running")],
        )
    )
    status = await client.call_tool("ability_status", {"run_id": "run_dead"})
    assert status.structured_content["status"] == "interrupted"
    assert status.structured_content["next_calls"][0]["tool"] == "ability_resume"
    fresh = await client.call_tool("ability_run", {"name": "quick"}, meta={"sessionID": "S"})
    assert not fresh.is_error and fresh.structured_content["status"] == "completed"


def test_sigterm_interrupts_a_live_run_and_the_server_exits(root: Path, write) -> None:
    write(
        "slow",
        """
        description: slow
        steps:
          - {id: a, type: script, run: sleep 617}
          - {id: b, type: script, run: echo b}
    """,
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    server.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "ability_run", "arguments": {"name": "slow", "wait_seconds": 0.5}},
        }
    )
    run_id = json.loads(json.loads(server.stdout.readline())["result"]["content"][0]["text"])["run_id"]
    server.send_signal(signal.SIGTERM)
    try:
        assert server.wait(timeout=30) == 0  # stdin is still open: the server leaves anyway
    finally:
        server.stdin.close()
        server.stdout.close()
    record = Store(state_db(root)).get_run(run_id)
    assert record.status == "interrupted"
    assert [s.status for s in record.steps] == ["cancelled", "pending"]
    # 617: a duration no other test's step sleeps, so a step of a parallel worker's test is not taken for this one
    assert not any("sleep 617" in " ".join(p) for p in _cmdlines())


def _cmdlines() -> list[list[str]]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"))
        except OSError:
            pass
    return out


async def test_stdout_contains_finds_text_in_the_middle_of_a_large_output(client, write) -> None:
    write(
        "mid",
        """
        description: mid
        steps:
          - id: t
            type: script
            run: "seq 1 20000; echo '5 passed'; seq 1 20000"
            validation: {stdout_contains: 5 passed}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "mid"})
    assert result.structured_content["status"] == "completed"


async def test_placeholders_where_a_value_would_be_parsed_again_as_code_are_refused_at_load_time(client, write) -> None:
    write(
        "reparse",
        """
        description: reparse
        inputs: {x: {type: string, default: a}}
        steps:
          - {id: nested, type: script, run: 'sh -c "echo {{inputs.x}}"'}
          - {id: arith, type: script, run: 'echo $(( {{inputs.x}} + 1 ))'}
          - {id: remote, type: script, run: 'ssh host ls {{inputs.x}}'}
          - {id: shift, type: script, run: "echo $((1 << 2)); printf '[%s]' {{inputs.x}}"}
    """,
    )
    errors = {e["path"]: e["message"] for e in (await validate(client))["reparse"]}
    assert "runs its argument as shell code" in errors["steps[0].run"] and "ABILITIES_INPUT_" in errors["steps[0].run"]
    assert "inside $(( ))" in errors["steps[1].run"]
    assert "steps[2].run" in errors
    assert "steps[3].run" not in errors  # an arithmetic shift is not a heredoc


async def test_inputs_are_exported_under_stable_names_for_commands_that_read_them_themselves(client, write) -> None:
    write(
        "exported",
        """
        description: exported
        inputs: {deploy-target: {type: string, default: 'a b; touch PWNED'}}
        steps:
          - id: s
            type: script
            run: sh -c 'printf "[%s]" "$ABILITIES_INPUT_DEPLOY_TARGET"'

    """,
    )
    result = await client.call_tool("ability_run", {"name": "exported"})
    assert result.structured_content["steps"][0]["output"] == "[a b; touch PWNED]"


async def test_inputs_that_are_not_an_object_are_refused_with_an_example(client, write) -> None:
    write(
        "typed",
        """
        description: typed
        steps:
          - {id: s, type: script, run: 'true'}
    """,
    )
    for bad in ([1], "[1]", "not json"):
        result = await client.call_tool("ability_run", {"name": "typed", "inputs": bad})
        assert result.is_error and 'e.g. {"version": "v1.2.3"}' in result.content[0].text
