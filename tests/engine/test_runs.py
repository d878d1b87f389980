"""Script-step semantics through the MCP tools: order, failure policies, conditions, data flow, time limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client


async def run(client: Client, name: str, inputs: dict[str, Any] | None = None, wait: float = 30) -> dict:
    result = await client.call_tool("ability_run", {"name": name, "inputs": inputs or {}, "wait_seconds": wait})
    assert not result.is_error, result.content[0].text
    return result.structured_content


def steps(view: dict) -> dict[str, dict]:
    return {s["id"]: s for s in view["steps"]}


async def test_steps_run_in_topological_order_with_yaml_order_breaking_ties(client, write, root: Path) -> None:
    write(
        "order",
        """
        description: order
        steps:
          - {id: c, type: script, run: echo c >> log, needs: [b]}
          - {id: a, type: script, run: echo a >> log}
          - {id: b, type: script, run: echo b >> log, needs: [a]}
          - {id: d, type: script, run: echo d >> log}
    """,
    )
    view = await run(client, "order")
    assert view["status"] == "completed"
    assert (root / "log").read_text().split() == ["a", "b", "c", "d"]
    assert [s["id"] for s in view["steps"]] == ["a", "b", "c", "d"]


async def test_a_nonzero_exit_fails_the_step_without_any_validation_block_and_stops_the_run(client, write) -> None:
    write(
        "fails",
        """
        description: fails
        steps:
          - {id: broken, type: script, run: 'echo oops >&2; exit 3'}
          - {id: after, type: script, run: echo never}
    """,
    )
    view = await run(client, "fails")
    assert view["status"] == "failed"
    broken, after = steps(view)["broken"], steps(view)["after"]
    assert broken["status"] == "failed" and broken["exit_code"] == 3
    assert "exit code 3, expected 0" in broken["error"] and "oops" in broken["error"]
    assert after["status"] == "skipped" and "not run" in after["error"]
    assert "broken" in view["error"]
    assert view["next_calls"] == [{"tool": "ability_resume", "arguments": {"run_id": view["run_id"]}}]


@pytest.mark.parametrize(
    ("validation", "run_cmd", "ok"),
    [
        ("{exit_code: 2}", "exit 2", True),
        ("{exit_code: 2}", "exit 0", False),
        ("{stdout_contains: passed}", "echo 12 passed", True),
        ("{stdout_contains: passed}", "echo 3 failed", False),
        ("{stderr_contains: warn}", "echo warn >&2", True),
        ("{stderr_contains: warn}", "echo warn", False),
        ("{file_exists: out/report.txt}", "mkdir -p out && touch out/report.txt", True),
        ("{file_exists: out/report.txt}", "true", False),
    ],
    ids=[
        "exit-code-match",
        "exit-code-mismatch",
        "stdout-has",
        "stdout-lacks",
        "stderr-has",
        "stderr-lacks",
        "file-made",
        "file-missing",
    ],
)
async def test_validation_rules_decide_whether_a_script_step_passed(client, write, validation, run_cmd, ok) -> None:
    write(
        "check",
        f"""
        description: check
        steps:
          - id: s
            type: script
            run: {run_cmd!r}
            validation: {validation}
    """,
    )
    view = await run(client, "check")
    assert steps(view)["s"]["status"] == ("completed" if ok else "failed")
    assert view["status"] == ("completed" if ok else "failed")


async def test_continue_records_the_failure_skips_dependents_and_runs_always_and_failure_steps(client, write) -> None:
    write(
        "cont",
        """
        description: continue
        settings: {on_failure: continue}
        steps:
          - {id: bad, type: script, run: exit 1}
          - {id: dependent, type: script, run: echo x, needs: [bad]}
          - {id: independent, type: script, run: echo y}
          - {id: cleanup, type: script, run: echo cleaned, needs: [dependent], when: always()}
          - {id: on-fail, type: script, run: echo noticed, needs: [bad], when: failure()}
          - {id: on-ok, type: script, run: echo fine, needs: [independent], when: failure()}
    """,
    )
    view = await run(client, "cont")
    got = {k: v["status"] for k, v in steps(view).items()}
    assert got == {
        "bad": "failed",
        "dependent": "skipped",
        "independent": "completed",
        "cleanup": "completed",
        "on-fail": "completed",
        "on-ok": "skipped",
    }
    assert "needs 'bad'" in steps(view)["dependent"]["error"]
    assert view["status"] == "completed"


async def test_retry_tries_again_up_to_max_retries_and_counts_attempts(client, write, root: Path) -> None:
    write(
        "flaky",
        """
        description: flaky
        steps:
          - id: flaky
            type: script
            run: 'echo x >> tries; test $(wc -l < tries) -ge 3'
            on_failure: retry
            max_retries: 2
    """,
    )
    view = await run(client, "flaky")
    assert view["status"] == "completed"
    assert steps(view)["flaky"]["attempts"] == 3
    (root / "tries").unlink()
    write(
        "flaky",
        """
        description: flaky
        steps:
          - {id: flaky, type: script, run: 'echo x >> tries; exit 1', on_failure: retry, max_retries: 1}
    """,
    )
    view = await run(client, "flaky")
    assert view["status"] == "failed" and steps(view)["flaky"]["attempts"] == 2


async def test_when_false_skips_the_step_with_the_reason_and_inputs_drive_it(client, write) -> None:
    write(
        "cond",
        """
        description: cond
        inputs:
          env: {type: string, enum: [staging, production], default: staging}
          count: {type: integer, default: 1}
        steps:
          - {id: prod-only, type: script, run: echo prod, when: 'inputs.env == "production"'}
          - {id: many, type: script, run: echo many, when: inputs.count > 3 and not (inputs.env == "production")}
    """,
    )
    view = await run(client, "cond", {"env": "staging", "count": "5"})
    assert steps(view)["prod-only"]["status"] == "skipped"
    assert steps(view)["prod-only"]["error"] == 'when: inputs.env == "production" was false'
    assert steps(view)["many"]["status"] == "completed"


async def test_a_step_output_and_exit_code_flow_into_later_steps_and_conditions(client, write) -> None:
    write(
        "flow",
        """
        description: flow
        steps:
          - {id: version, type: script, run: 'echo "1.2.3"'}
          - id: use
            type: script
            needs: [version]
            when: steps.version.output == "1.2.3" and steps.version.exit_code == 0
            run: echo "got {{steps.version.output}} ({{steps.version.status}})"
    """,
    )
    view = await run(client, "flow")
    assert steps(view)["use"]["output"] == "got 1.2.3 (completed)"


async def test_env_and_cwd_are_applied_and_values_in_env_are_interpolated(client, write, root: Path) -> None:
    (root / "pkg").mkdir()
    write(
        "envcwd",
        """
        description: env and cwd
        inputs: {name: {type: string, default: world}}
        steps:
          - {id: s, type: script, cwd: pkg, env: {GREETING: 'hello {{inputs.name}}', N: 5}, run: 'echo "$GREETING $N $(basename "$PWD")"'}
    """,
    )
    view = await run(client, "envcwd")
    assert steps(view)["s"]["output"] == "hello world 5 pkg"


async def test_a_step_timeout_fails_the_step_saying_it_timed_out(client, write) -> None:
    write(
        "slow",
        """
        description: slow
        steps:
          - {id: slow, type: script, run: sleep 30, timeout: 300ms}
    """,
    )
    view = await run(client, "slow")
    assert steps(view)["slow"]["status"] == "failed"
    assert "timed out after 300ms" in steps(view)["slow"]["error"]


async def test_settings_timeout_limits_the_whole_run(client, write) -> None:
    write(
        "slowrun",
        """
        description: slow run
        settings: {timeout: 500ms}
        steps:
          - {id: a, type: script, run: sleep 30}
          - {id: b, type: script, run: echo b}
    """,
    )
    view = await run(client, "slowrun")
    assert view["status"] == "failed"
    assert "settings.timeout" in view["error"]
    assert steps(view)["a"]["status"] == "cancelled" and steps(view)["b"]["status"] == "skipped"


async def test_parallel_runs_independent_steps_at_the_same_time(client, write) -> None:
    # Each step waits for the other's file: only concurrent execution can finish before the timeouts.
    write(
        "par",
        """
        description: parallel
        settings: {parallel: true}
        steps:
          - {id: left, type: script, run: 'touch left; for i in $(seq 100); do [ -e right ] && exit 0; sleep 0.05; done; exit 1'}
          - {id: right, type: script, run: 'touch right; for i in $(seq 100); do [ -e left ] && exit 0; sleep 0.05; done; exit 1'}
          - {id: join, type: script, run: echo joined, needs: [left, right]}
    """,
    )
    view = await run(client, "par")
    assert view["status"] == "completed", view
    assert steps(view)["join"]["output"] == "joined"


async def test_sequential_abilities_never_overlap_steps(client, write, root: Path) -> None:
    write(
        "seq",
        """
        description: sequential
        steps:
          - {id: left, type: script, run: 'touch left; sleep 0.2; [ ! -e right ]'}
          - {id: right, type: script, run: 'touch right; [ -e left ]'}
    """,
    )
    assert (await run(client, "seq"))["status"] == "completed"


async def test_inputs_are_coerced_validated_and_refused_with_the_reason(client, write) -> None:
    write(
        "typed",
        """
        description: typed
        inputs:
          n: {type: integer, min: 1, max: 10, required: true}
          flag: {type: boolean, default: false}
        steps:
          - {id: s, type: script, run: 'echo {{inputs.n}} {{inputs.flag}}'}
    """,
    )
    view = await run(client, "typed", {"n": "5", "flag": "true"})
    assert steps(view)["s"]["output"] == "5 true"
    for bad, text in [
        ({"n": "x"}, "expected an integer"),
        ({"n": 11}, "above the maximum"),
        ({}, "input 'n' is required"),
        ({"n": 1, "nn": 2}, "unknown input 'nn'"),
    ]:
        result = await client.call_tool("ability_run", {"name": "typed", "inputs": bad})
        assert result.is_error and text in result.content[0].text


async def test_inputs_sent_as_json_text_are_accepted(client, write) -> None:
    write(
        "typed",
        """
        description: typed
        inputs: {n: {type: integer}}
        steps:
          - {id: s, type: script, run: 'echo {{inputs.n}}'}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "typed", "inputs": '{"n": 7}'})
    assert steps(result.structured_content)["s"]["output"] == "7"


async def test_ability_run_returns_while_running_and_status_waits_for_the_end(client, write, root: Path) -> None:
    write(
        "wait",
        """
        description: wait
        steps:
          - {id: gate, type: script, run: 'while [ ! -e go ]; do sleep 0.02; done; echo through'}
    """,
    )
    view = await run(client, "wait", wait=0.2)
    assert view["status"] == "running"
    assert view["current_step"]["id"] == "gate"
    assert "do not run it yourself" in view["current_step"]["instructions"]
    assert view["current_step"]["deadline"] is not None
    assert view["next_calls"][0] == {
        "tool": "ability_status",
        "arguments": {"run_id": view["run_id"], "wait_seconds": 30},
    }
    (root / "go").touch()
    with anyio.fail_after(10):
        while view["status"] == "running":
            view = (
                await client.call_tool("ability_status", {"run_id": view["run_id"], "wait_seconds": 5})
            ).structured_content
    assert view["status"] == "completed" and steps(view)["gate"]["output"] == "through"


async def test_progress_notifications_follow_the_steps(client, write) -> None:
    write(
        "three",
        """
        description: three
        steps:
          - {id: one, type: script, run: echo 1}
          - {id: two, type: script, run: echo 2}
          - {id: three, type: script, run: echo 3}
    """,
    )
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    await client.call_tool("ability_run", {"name": "three"}, progress_callback=on_progress)
    assert seen, "no progress notifications arrived"
    assert all(total == 3 for _, total, _ in seen)
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
    assert seen[-1][0] == 3 and "completed" in seen[-1][2]


async def test_cancel_stops_the_run_and_marks_the_running_and_pending_steps(client, write) -> None:
    write(
        "long",
        """
        description: long
        steps:
          - {id: wait, type: script, run: sleep 60}
          - {id: next, type: script, run: echo next}
    """,
    )
    view = await run(client, "long", wait=0.2)
    result = await client.call_tool("ability_cancel", {"run_id": view["run_id"]})
    view = result.structured_content
    assert view["status"] == "cancelled"
    assert steps(view)["wait"]["status"] == "cancelled" and steps(view)["next"]["status"] == "skipped"
    again = await client.call_tool("ability_cancel", {"run_id": view["run_id"]})
    assert again.is_error and "already ended" in again.content[0].text


async def test_a_second_strict_run_in_the_session_is_refused_with_the_live_run_named(client, write) -> None:
    write(
        "long",
        """
        description: long
        steps:
          - {id: wait, type: script, run: sleep 60}
    """,
    )
    write(
        "loose",
        """
        description: loose
        settings: {enforcement: normal}
        steps:
          - {id: s, type: script, run: echo ok}
    """,
    )
    first = await run(client, "long", wait=0.1)
    refused = await client.call_tool("ability_run", {"name": "loose"})
    text = refused.content[0].text
    assert refused.is_error
    assert first["run_id"] in text and "state: running" in text
    assert f"ability_status(run_id={first['run_id']!r}" in text and "ability_cancel" in text
    await client.call_tool("ability_cancel", {})  # default: this session's live run
    assert (await run(client, "loose"))["status"] == "completed"


async def test_status_without_a_run_is_refused_with_the_calls_that_help(client) -> None:
    result = await client.call_tool("ability_status", {})
    assert result.is_error
    assert "no run" in result.content[0].text and "ability_list" in result.content[0].text
    result = await client.call_tool("ability_status", {"run_id": "run_nope"})
    assert result.is_error and "no run 'run_nope'" in result.content[0].text


async def test_an_invalid_ability_is_refused_with_its_diagnostics(client, write) -> None:
    write(
        "broken",
        """
        description: broken
        steps:
          - {id: a, type: script, run: echo, need: [b]}
    """,
    )
    result = await client.call_tool("ability_run", {"name": "broken"})
    assert result.is_error
    assert "broken.yaml" in result.content[0].text and "steps[0].need" in result.content[0].text
    assert "did you mean 'needs'" in result.content[0].text


async def test_hooks_run_before_and_after_and_a_failing_before_hook_fails_the_run(client, write, root) -> None:
    write(
        "hooked",
        """
        description: hooked
        hooks: {before: ['echo before >> log'], after: ['echo after >> log']}
        steps:
          - {id: s, type: script, run: echo step >> log}
    """,
    )
    assert (await run(client, "hooked"))["status"] == "completed"
    with anyio.fail_after(10):  # after-hooks run once the end is recorded, so the call may return first
        while (root / "log").read_text().split() != ["before", "step", "after"]:
            await anyio.sleep(0.02)
    write(
        "hooked",
        """
        description: hooked
        hooks: {before: ['exit 4'], after: ['echo after >> log2']}
        steps:
          - {id: s, type: script, run: echo step >> log2}
    """,
    )
    view = await run(client, "hooked")
    assert view["status"] == "failed" and "hooks.before[0]" in view["error"]
    with anyio.fail_after(10):
        while not (root / "log2").exists() or (root / "log2").read_text().split() != ["after"]:
            await anyio.sleep(0.02)


async def test_a_run_keeps_the_definition_it_started_with_when_the_file_changes(client, write, root) -> None:
    write(
        "edit",
        """
        description: edit
        steps:
          - {id: gate, type: script, run: 'while [ ! -e go ]; do sleep 0.02; done'}
          - {id: second, type: script, run: echo original}
    """,
    )
    view = await run(client, "edit", wait=0.1)
    write(
        "edit",
        """
        description: edit
        steps:
          - {id: gate, type: script, run: 'true'}
          - {id: second, type: script, run: echo changed}
    """,
    )
    (root / "go").touch()
    with anyio.fail_after(10):
        while view["status"] == "running":
            view = (
                await client.call_tool("ability_status", {"run_id": view["run_id"], "wait_seconds": 5})
            ).structured_content
    assert steps(view)["second"]["output"] == "original"
    assert steps(await run(client, "edit"))["second"]["output"] == "changed"


async def test_a_failed_run_resumes_from_the_failed_step_without_rerunning_completed_ones(client, write, root) -> None:
    write(
        "resumable",
        """
        description: resumable
        steps:
          - {id: first, type: script, run: echo once >> first.log}
          - {id: second, type: script, run: test -e fixed}
          - {id: third, type: script, run: echo done}
    """,
    )
    view = await run(client, "resumable")
    assert view["status"] == "failed"
    (root / "fixed").touch()
    result = await client.call_tool("ability_resume", {"run_id": view["run_id"]})
    assert not result.is_error, result.content[0].text
    view = result.structured_content
    assert view["status"] == "completed"
    assert (root / "first.log").read_text() == "once\n"
    assert steps(view)["third"]["output"] == "done"
    again = await client.call_tool("ability_resume", {"run_id": view["run_id"]})
    assert again.is_error and "only interrupted or failed runs resume" in again.content[0].text


async def test_history_lists_runs_newest_first(client, write) -> None:
    write(
        "quick",
        """
        description: quick
        steps:
          - {id: s, type: script, run: 'true'}
    """,
    )
    ids = [(await run(client, "quick"))["run_id"] for _ in range(3)]
    history = (await client.call_tool("ability_history", {"limit": 2})).structured_content["runs"]
    assert [r["run_id"] for r in history] == ids[::-1][:2]
    assert all(r["status"] == "completed" and r["finished_at"] for r in history)


async def test_step_results_are_in_the_store_before_the_call_returns(client, write, project) -> None:
    from abilities_mcp.state.store import Store

    write(
        "durable",
        """
        description: durable
        steps:
          - {id: s, type: script, run: echo stored}
    """,
    )
    view = await run(client, "durable")
    record = Store(project.state_db).get_run(view["run_id"])
    assert record.status == "completed" and record.steps[0].output == "stored"
    assert record.steps[0].exit_code == 0 and record.steps[0].attempts == 1


async def test_runs_belong_to_the_session_named_by_claude_code(project, write, monkeypatch) -> None:
    from abilities_mcp.server.app import create_server

    write(
        "long",
        """
        description: long
        steps:
          - {id: s, type: script, run: sleep 60}
    """,
    )
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "sess-1")
    server = create_server(project)
    async with Client(server) as one:
        first = await run(one, "long", wait=0.1)
        async with Client(server) as two:  # a second connection with the same session id sees the run as its own
            status = await two.call_tool("ability_status", {})
            assert status.structured_content["run_id"] == first["run_id"]
        await one.call_tool("ability_cancel", {"run_id": first["run_id"]})


async def test_opencode_session_ids_in_meta_separate_runs(client, write) -> None:
    write(
        "long",
        """
        description: long
        steps:
          - {id: s, type: script, run: sleep 60}
    """,
    )
    a = await client.call_tool("ability_run", {"name": "long", "wait_seconds": 0.1}, meta={"sessionID": "A"})
    b = await client.call_tool("ability_run", {"name": "long", "wait_seconds": 0.1}, meta={"sessionID": "B"})
    assert not a.is_error and not b.is_error  # one strict run per session, and these are two sessions
    mine = await client.call_tool("ability_status", {}, meta={"sessionID": "B"})
    assert mine.structured_content["run_id"] == b.structured_content["run_id"]
    for r in (a, b):
        await client.call_tool("ability_cancel", {"run_id": r.structured_content["run_id"]})


SKILL_TOOLS = ("skill_list", "skill_route", "skill_plan", "skill_load", "skill_read")


async def test_tools_are_listed_with_schemas_and_read_only_hints(client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "ability_step_complete",
        "ability_list",
        "ability_validate",
        "ability_match",
        "ability_approve",
        "ability_decide",
        "ability_run",
        "ability_status",
        "ability_cancel",
        "ability_resume",
        "ability_history",
        "skill_list",
        "skill_route",
        "skill_plan",
        "skill_load",
        "skill_read",
        "workflow_list",
        "workflow_check",
        "workflow_record",
        "workflow_status",
        "workflow_reset",
    }
    read_only = ("ability_list", "ability_validate", "ability_status", "ability_history", *SKILL_TOOLS)
    for name in (*read_only, "workflow_list", "workflow_check", "workflow_status"):
        assert tools[name].annotations.read_only_hint is True
    assert tools["workflow_record"].annotations.read_only_hint is False
    assert tools["ability_run"].output_schema["properties"]["next_calls"]
    assert tools["ability_run"].description


async def test_ability_list_shows_inputs_steps_and_validity_and_filters_by_agent(client, write) -> None:
    write(
        "only-deployer",
        """
        description: for the deployer
        exclusive_agent: deployer
        inputs: {v: {type: string, required: true, description: version}}
        steps:
          - {id: s, type: script, run: 'true'}
    """,
    )
    write(
        "anyone",
        """
        description: for anyone
        steps:
          - {id: s, type: script, run: 'true'}
    """,
    )
    listed = (await client.call_tool("ability_list", {})).structured_content["abilities"]
    info = {a["name"]: a for a in listed}
    assert info["only-deployer"]["inputs"]["v"] == {
        "type": "string",
        "required": True,
        "default": None,
        "description": "version",
        "enum": None,
    }
    assert info["only-deployer"]["steps"][0]["id"] == "s" and info["anyone"]["valid"]
    for_reviewer = (await client.call_tool("ability_list", {"agent": "reviewer"})).structured_content["abilities"]
    assert [a["name"] for a in for_reviewer] == ["anyone"]


async def test_a_large_output_reports_its_total_size_and_keeps_only_the_tail(client, write) -> None:
    write(
        "big",
        """
        description: big
        steps:
          - {id: s, type: script, run: 'seq 1 100000'}
    """,
    )
    step = steps(await run(client, "big"))["s"]
    assert step["output_bytes"] == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert step["output"].endswith("99999\n100000") and "characters truncated" in step["output"]
    assert len(step["output"]) < 4200
