"""Workflow steps: another ability runs as a child run that the parent waits on, mirrors and answers for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

import abilities_mcp.server.app as server_module
from abilities_mcp.engine import nesting
from abilities_mcp.engine.core import Engine
from abilities_mcp.server.app import create_server
from abilities_mcp.state.store import Store
from support import TEST_RETRY_BASE, raw_server, sleeping, state_db, stdio_params, stored_run, trust_project, until

LIVE_STATES = {"pending", "running", "awaiting_agent", "awaiting_approval", "awaiting_decision"}

CHILD = """
description: prepares, asks the agent for a review, finishes
inputs:
  env: {type: string, enum: [staging, production], required: true}
steps:
  - {id: prep, type: script, run: 'echo "prepared {{inputs.env}}"'}
  - {id: review, type: agent, agent: reviewer, prompt: "Review {{inputs.env}}", needs: [prep], tools: [Read]}
  - {id: finish, type: script, run: 'echo "child done after {{steps.review.output}}"', needs: [review]}
"""

PARENT = """
description: runs the child between two scripts
inputs:
  target: {type: string, default: staging}
steps:
  - {id: before, type: script, run: echo before}
  - {id: sub, type: workflow, workflow: child, inputs: {env: "{{inputs.target}}"}, needs: [before]}
  - {id: after, type: script, run: 'echo "after: {{steps.sub.output}}"', needs: [sub]}
"""


async def call(client: Client, tool: str, **arguments: Any):
    return await client.call_tool(tool, arguments)


async def ok(client: Client, tool: str, **arguments: Any) -> dict:
    result = await call(client, tool, **arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def finished(client: Client, run_id: str) -> dict:
    """Wait (bounded) until a run leaves the live states; return it."""
    with anyio.fail_after(30):
        while True:
            view = await ok(client, "ability_status", run_id=run_id, wait_seconds=10)
            if view["status"] not in LIVE_STATES:
                return view


def by_id(view: dict) -> dict[str, dict]:
    return {s["id"]: s for s in view["steps"]}


def child_of(view: dict, step_id: str = "sub") -> str:
    child = by_id(view)[step_id]["child_run"]
    assert child, f"step {step_id!r} has no child run: {by_id(view)[step_id]}"
    return child


def state(project) -> Store:
    return Store(project.state_db)


# --- starting the child ------------------------------------------------------------------------------------------


async def test_a_workflow_step_starts_a_child_run_with_interpolated_inputs_in_the_same_session(
    client, write, project
) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    with anyio.fail_after(10):  # returns when the child waits, long before wait_seconds
        view = await ok(client, "ability_run", name="parent", inputs={"target": "production"}, wait_seconds=60)
    parent_id, child_id = view["run_id"], child_of(view)

    store = state(project)
    try:
        parent, child = store.get_run(parent_id), store.get_run(child_id)
        assert [r.run_id for r in store.children(parent_id)] == [child_id]
        top_level = [r.run_id for r in store.runs(limit=50)]
    finally:
        store.close()
    assert child.parent_run == parent_id and child.session_id == parent.session_id
    assert child.ability == "child" and child.inputs == {"env": "production"}
    assert top_level == [parent_id], "a child run is not a top-level run"
    assert by_id(view)["sub"]["status"] == "running"
    assert by_id(view)["before"]["status"] == "completed"

    child_view = await ok(client, "ability_status", run_id=child_id)
    assert child_view["parent_run"] == parent_id and view["parent_run"] is None
    assert child_view["status"] == "awaiting_agent"
    assert by_id(child_view)["prep"]["output"] == "prepared production"


async def test_while_the_child_waits_for_the_agent_the_parent_shows_the_childs_step_and_calls(client, write) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    view = await ok(client, "ability_run", name="parent", inputs={"target": "production"})
    parent_id, child_id = view["run_id"], child_of(view)

    assert view["status"] == "awaiting_agent"
    step = view["current_step"]
    assert step["id"] == "review" and step["type"] == "agent" and step["agent"] == "reviewer"
    assert step["prompt"] == "Review production"
    assert "Read" in step["allowed_tools"]
    assert f"Step 'sub' runs ability 'child' as child run {child_id}" in step["instructions"]
    assert f"ability_step_complete(run_id={child_id!r}, step_id='review'" in step["instructions"]
    assert view["next_calls"] == [
        {
            "tool": "ability_step_complete",
            "arguments": {"run_id": child_id, "step_id": "review", "output": "<your result>"},
        },
        {"tool": "ability_cancel", "arguments": {"run_id": parent_id}},
    ]


async def test_handing_the_step_back_to_the_child_lets_both_runs_finish_with_the_child_summary(client, write) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    view = await ok(client, "ability_run", name="parent")
    parent_id, child_id = view["run_id"], child_of(view)

    wrong_run = await call(client, "ability_step_complete", run_id=parent_id, step_id="review", output="LGTM")
    assert wrong_run.is_error, "the parent has no agent step of its own to hand back"
    text = wrong_run.content[0].text
    assert f"belongs to child run {child_id!r}" in text
    assert f"ability_step_complete(run_id={child_id!r}, step_id='review', output='<your result>')" in text

    child_done = await ok(client, "ability_step_complete", run_id=child_id, step_id="review", output="LGTM")
    assert child_done["status"] == "completed"
    assert by_id(child_done)["finish"]["output"] == "child done after LGTM"

    final = await finished(client, parent_id)
    assert final["status"] == "completed", final
    sub = by_id(final)["sub"]
    assert sub["status"] == "completed" and sub["child_run"] == child_id and sub["attempts"] == 1
    status_line, last_output = sub["output"].split("\n")
    assert status_line == f"run {child_id} of child completed (3 completed)"
    assert last_output == "child done after LGTM"
    assert by_id(final)["after"]["output"] == f"after: {sub['output']}"


async def test_ability_status_waiting_on_the_parent_wakes_when_the_child_starts_to_wait(
    project, write, root: Path, monkeypatch
) -> None:
    engines: list[Engine] = []

    class Recorded(Engine):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(server_module, "Engine", Recorded)
    write("child", CHILD.replace('echo "prepared {{inputs.env}}"', "while [ ! -e go ]; do sleep 0.02; done"))
    write("parent", PARENT)
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as client:
        parent_id = (await ok(client, "ability_run", name="parent", wait_seconds=0))["run_id"]
        child_id = await until(lambda: stored_run(root, parent_id).step("sub").child_run)
        await until(lambda: stored_run(root, child_id).step("prep").pgid)
        seen: dict[str, Any] = {}

        async def watch() -> None:
            seen["view"] = await ok(client, "ability_status", run_id=parent_id, wait_seconds=60)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                parent = engines[0].live[parent_id]
                await until(lambda: parent.changed.statistics().tasks_waiting)  # the call waits on the parent
                (root / "go").touch()
        assert seen["view"]["status"] == "awaiting_agent"
        assert seen["view"]["next_calls"][0]["arguments"]["run_id"] == child_id
        await call(client, "ability_cancel", run_id=parent_id)


@pytest.mark.parametrize(
    ("step_inputs", "target", "reason"),
    [
        ('{env: "{{inputs.target}}"}', "qa", "input 'env': 'qa' is not one of ['staging', 'production']"),
        ("{}", "staging", "input 'env' is required"),
    ],
    ids=["breaks-the-enum", "missing-required"],
)
async def test_inputs_the_child_refuses_fail_the_step_with_the_reason_and_start_no_child(
    client, write, project, step_inputs: str, target: str, reason: str
) -> None:
    write("child", CHILD)
    write("parent", PARENT.replace('{env: "{{inputs.target}}"}', step_inputs))
    view = await ok(client, "ability_run", name="parent", inputs={"target": target})
    assert view["status"] == "failed"
    sub = by_id(view)["sub"]
    assert sub["status"] == "failed" and reason in sub["error"] and sub["attempts"] == 1
    assert sub["child_run"] is None
    assert by_id(view)["after"]["status"] == "skipped"
    store = state(project)
    try:
        assert store.children(view["run_id"]) == []
    finally:
        store.close()


# --- depth -------------------------------------------------------------------------------------------------------


def chain(write, levels: int) -> None:
    """level0 → level1 → ... → level{levels}; the deepest asks the agent."""
    for i in range(levels):
        write(
            f"level{i}", f"description: level {i}\nsteps:\n  - {{id: down, type: workflow, workflow: level{i + 1}}}\n"
        )
    write(f"level{levels}", "description: the bottom\nsteps:\n  - {id: work, type: agent, prompt: do it}\n")


async def test_children_nest_five_deep_and_the_top_run_hands_out_the_deepest_step(client, write, project) -> None:
    chain(write, 5)
    view = await ok(client, "ability_run", name="level0")
    assert view["status"] == "awaiting_agent" and view["current_step"]["id"] == "work"
    [handback, cancel] = view["next_calls"]
    deepest = handback["arguments"]["run_id"]
    assert handback["tool"] == "ability_step_complete" and cancel["arguments"] == {"run_id": view["run_id"]}

    store = state(project)
    try:
        ids = [view["run_id"]]
        while children := store.children(ids[-1]):
            ids.append(children[0].run_id)
        assert [store.get_run(i).status for i in ids] == ["awaiting_agent"] * 6
    finally:
        store.close()
    assert ids[-1] == deepest and len(ids) == 6

    await ok(client, "ability_step_complete", run_id=deepest, step_id="work", output="done")
    final = await finished(client, view["run_id"])
    assert final["status"] == "completed"
    assert by_id(final)["down"]["output"].startswith(f"run {ids[1]} of level1 completed")


async def test_a_child_deeper_than_the_limit_fails_its_step_at_run_time(client, write, monkeypatch) -> None:
    monkeypatch.setattr(nesting, "MAX_NESTING", 2)
    chain(write, 3)  # valid for the catalog (limit 5), too deep for this engine
    view = await ok(client, "ability_run", name="level0")
    assert view["status"] == "failed"
    level1 = await ok(client, "ability_status", run_id=child_of(view, "down"))
    level2 = await ok(client, "ability_status", run_id=child_of(level1, "down"))
    down = by_id(level2)["down"]
    assert down["status"] == "failed" and down["child_run"] is None
    assert "workflow steps nest at most 2 deep; 'level3' would be deeper" in down["error"]
    assert [level2["status"], level1["status"]] == ["failed", "failed"]


# --- cancelling --------------------------------------------------------------------------------------------------


async def test_cancelling_the_parent_cancels_the_child_and_kills_its_processes(
    client, write, sleep_seconds, root: Path
) -> None:
    bg, fg = sleep_seconds(), sleep_seconds()
    write("child", f"description: sleeps\nsteps:\n  - {{id: nap, type: script, run: 'sleep {bg} & sleep {fg}'}}\n")
    # on_failure: retry must not start a second child when the parent itself is stopped
    write(
        "parent",
        "description: p\nsteps:\n  - {id: sub, type: workflow, workflow: child, on_failure: retry, max_retries: 2}\n",
    )
    parent_id = (await ok(client, "ability_run", name="parent", wait_seconds=0))["run_id"]
    child_id = await until(lambda: stored_run(root, parent_id).step("sub").child_run)
    await until(lambda: len(sleeping(bg, fg)) == 2)
    await until(lambda: stored_run(root, child_id).step("nap").pgid)

    with anyio.fail_after(15):
        cancelled = await ok(client, "ability_cancel", run_id=parent_id)

    assert sleeping(bg, fg) == []
    assert cancelled["status"] == "cancelled"
    sub = by_id(cancelled)["sub"]
    assert sub["status"] == "cancelled" and sub["child_run"] == child_id and sub["attempts"] == 1
    child = await ok(client, "ability_status", run_id=child_id)
    assert child["status"] == "cancelled" and by_id(child)["nap"]["status"] == "cancelled"
    store = Store(state_db(root))
    try:
        assert [r.run_id for r in store.children(parent_id)] == [child_id]
    finally:
        store.close()


async def test_cancelling_the_parent_while_the_child_waits_for_the_agent_ends_both(client, write) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    view = await ok(client, "ability_run", name="parent")
    child_id = child_of(view)
    cancelled = await ok(client, "ability_cancel", run_id=view["run_id"])
    assert cancelled["status"] == "cancelled" and by_id(cancelled)["after"]["status"] == "skipped"
    child = await ok(client, "ability_status", run_id=child_id)
    assert child["status"] == "cancelled" and by_id(child)["review"]["status"] == "cancelled"
    late = await call(client, "ability_step_complete", run_id=child_id, step_id="review", output="LGTM")
    assert late.is_error and "is cancelled" in late.content[0].text


@pytest.mark.parametrize(
    ("policy", "parent_status", "after_status"),
    [("stop", "failed", "skipped"), ("continue", "completed", "completed")],
    ids=["stop", "continue"],
)
async def test_cancelling_the_child_fails_the_parents_step_and_the_parents_on_failure_applies(
    client, write, policy: str, parent_status: str, after_status: str
) -> None:
    write("child", CHILD)
    write(
        "parent",
        PARENT.replace("needs: [before]}", f"needs: [before], on_failure: {policy}}}").replace(
            "needs: [sub]}", "needs: [sub], when: always()}"
        ),
    )
    view = await ok(client, "ability_run", name="parent")
    child_id = child_of(view)

    cancelled = await ok(client, "ability_cancel", run_id=child_id)
    assert cancelled["status"] == "cancelled"

    final = await finished(client, view["run_id"])
    assert final["status"] == parent_status
    sub = by_id(final)["sub"]
    assert sub["status"] == "failed" and f"child run {child_id} cancelled" in sub["error"]
    assert sub["output"].startswith(f"run {child_id} of child cancelled")
    assert by_id(final)["after"]["status"] == after_status


STOPPERS = {
    "parent-settings-timeout": "settings: {timeout: 2s}\nsteps:\n  - {id: sub, type: workflow, workflow: child}\n",
    "failing-parallel-sibling": (
        "settings: {parallel: true}\nsteps:\n  - {id: sub, type: workflow, workflow: child}\n"
        "  - {id: bad, type: script, run: 'while [ ! -e go ]; do sleep 0.02; done; exit 1'}\n"
    ),
}


@pytest.mark.parametrize("parent_text", STOPPERS.values(), ids=STOPPERS.keys())
async def test_a_child_its_parent_stops_is_cancelled_not_interrupted_and_runs_its_after_hooks(
    client, write, sleep_seconds, root: Path, parent_text: str
) -> None:
    fg = sleep_seconds()
    write(
        "child",
        f"description: c\nhooks: {{after: [touch child-after]}}\nsteps:\n  - {{id: nap, type: script, run: sleep {fg}}}\n",
    )
    write("parent", "description: p\n" + parent_text)
    parent_id = (await ok(client, "ability_run", name="parent", wait_seconds=0))["run_id"]
    child_id = await until(lambda: stored_run(root, parent_id).step("sub").child_run)
    await until(lambda: stored_run(root, child_id).step("nap").pgid)
    (root / "go").touch()

    final = await finished(client, parent_id)
    assert final["status"] == "failed" and by_id(final)["sub"]["status"] == "cancelled"
    child = await ok(client, "ability_status", run_id=child_id)
    assert child["status"] == "cancelled" and child["finished_at"] is not None
    assert by_id(child)["nap"]["status"] == "cancelled" and by_id(child)["nap"]["error"] == "cancelled"
    assert sleeping(fg) == []
    await until(lambda: (root / "child-after").exists())


async def test_a_workflow_step_timeout_cancels_the_child_and_fails_the_step(client, write, sleep_seconds) -> None:
    fg = sleep_seconds()
    write("child", f"description: c\nsteps:\n  - {{id: nap, type: script, run: sleep {fg}}}\n")
    write("parent", "description: p\nsteps:\n  - {id: sub, type: workflow, workflow: child, timeout: 500ms}\n")
    view = await ok(client, "ability_run", name="parent")
    final = await finished(client, view["run_id"])
    child_id = child_of(final)
    sub = by_id(final)["sub"]
    assert final["status"] == "failed" and sub["status"] == "failed"
    assert sub["error"] == f"child run {child_id} did not finish within 500ms; it was cancelled"
    assert (await ok(client, "ability_status", run_id=child_id))["status"] == "cancelled"
    assert sleeping(fg) == []


async def test_cancelling_the_parent_still_runs_the_childs_after_hooks(client, write, root: Path) -> None:
    write(
        "child",
        "description: c\nhooks: {after: [touch child-after]}\nsteps:\n  - {id: think, type: agent, prompt: x}\n",
    )
    write(
        "parent",
        "description: p\nhooks: {after: [touch parent-after]}\nsteps:\n  - {id: sub, type: workflow, workflow: child}\n",
    )
    view = await ok(client, "ability_run", name="parent")
    assert (await ok(client, "ability_cancel", run_id=view["run_id"]))["status"] == "cancelled"
    await until(lambda: (root / "parent-after").exists() and (root / "child-after").exists())


# --- a person answers the child ----------------------------------------------------------------------------------

GATED_CHILD = """
description: asks a person
steps:
  - {id: approve, type: approval, prompt: "Ship it?"}
  - {id: ship, type: script, run: echo shipped, needs: [approve]}
"""


class Person:
    """An elicitation callback that approves, and remembers what it was shown."""

    def __init__(self) -> None:
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, ctx, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        return ElicitResult(action="accept", content={"approve": True})


async def test_while_the_child_waits_for_a_person_the_parent_awaits_approval_and_names_the_child(client, write) -> None:
    write("child", GATED_CHILD)
    write("parent", "description: p\nsteps:\n  - {id: sub, type: workflow, workflow: child}\n")
    with anyio.fail_after(10):
        view = await ok(client, "ability_run", name="parent", wait_seconds=60)
    parent_id, child_id = view["run_id"], child_of(view)
    assert view["status"] == "awaiting_approval"
    step = view["current_step"]
    assert step["id"] == "approve" and step["type"] == "approval" and step["prompt"] == "Ship it?"
    assert f"child run {child_id}" in step["instructions"]
    assert f"abilities-mcp approve {child_id}" in step["instructions"]
    assert view["next_calls"] == [
        {"tool": "ability_status", "arguments": {"run_id": child_id, "wait_seconds": 60}},
        {"tool": "ability_cancel", "arguments": {"run_id": parent_id}},
    ]
    refused = await call(client, "ability_approve", run_id=parent_id, step_id="approve", approved=True)
    assert refused.is_error
    await ok(client, "ability_cancel", run_id=parent_id)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_person_answering_the_childs_form_through_the_parents_call_finishes_both(
    project, write, mode: str
) -> None:
    write("child", GATED_CHILD)
    write("parent", "description: p\nsteps:\n  - {id: sub, type: workflow, workflow: child}\n")
    person = Person()
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server, mode=mode, elicitation_callback=person) as client:
        with anyio.fail_after(20):
            view = await ok(client, "ability_run", name="parent", wait_seconds=15)
    assert view["status"] == "completed", view
    assert len(person.asked) == 1 and "Ship it?" in person.asked[0].message
    assert by_id(view)["sub"]["output"].endswith("shipped")


# --- sessions and history ----------------------------------------------------------------------------------------


async def test_a_strict_child_does_not_count_as_a_second_strict_run_of_the_session(client, write, project) -> None:
    write("child", CHILD)  # strict by default
    write("parent", PARENT + "settings: {enforcement: normal}\n")
    write("other", "description: o\nsteps:\n  - {id: think, type: agent, prompt: think}\n")
    trust_project(project)  # the parent is normal as its author wrote it
    parent = await ok(client, "ability_run", name="parent")
    assert parent["status"] == "awaiting_agent"

    other = await ok(client, "ability_run", name="other")
    assert other["status"] == "awaiting_agent"

    history = await ok(client, "ability_history")
    assert [r["run_id"] for r in history["runs"]] == [other["run_id"], parent["run_id"]]
    third = await call(client, "ability_run", name="other")
    assert third.is_error and other["run_id"] in third.content[0].text  # the strict top-level run still counts
    for run_id in (parent["run_id"], other["run_id"]):
        await ok(client, "ability_cancel", run_id=run_id)


async def test_resuming_a_live_child_is_refused(client, write) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    view = await ok(client, "ability_run", name="parent")
    refused = await call(client, "ability_resume", run_id=child_of(view))
    assert refused.is_error and "is live in this server" in refused.content[0].text
    await ok(client, "ability_cancel", run_id=view["run_id"])


FLAKY_CHILD = """
description: counts its first step; its second fails until the file `fixed` exists
steps:
  - {id: once, type: script, run: 'echo ran >> once-runs'}
  - {id: check, type: script, run: 'test -e fixed && echo fixed', needs: [once]}
"""


async def test_resuming_a_parent_that_failed_in_its_child_resumes_that_child_from_its_failed_step(
    client, write, root: Path
) -> None:
    write("child", FLAKY_CHILD)
    write("parent", PARENT.replace('inputs: {env: "{{inputs.target}}"}, ', ""))
    failed = await ok(client, "ability_run", name="parent")
    child_id = child_of(failed)
    assert failed["status"] == "failed" and f"child run {child_id} failed" in by_id(failed)["sub"]["error"]
    assert failed["next_calls"] == [{"tool": "ability_resume", "arguments": {"run_id": failed["run_id"]}}]
    child = await ok(client, "ability_status", run_id=child_id)
    assert child["next_calls"] == [], "a failed child is resumed through its parent, not on its own"

    (root / "fixed").touch()
    await ok(client, "ability_resume", run_id=failed["run_id"], wait_seconds=0)
    final = await finished(client, failed["run_id"])
    assert final["status"] == "completed"
    assert by_id(final)["sub"]["child_run"] == child_id and by_id(final)["sub"]["attempts"] == 1
    assert by_id(final)["sub"]["output"] == f"run {child_id} of child completed (2 completed)\nfixed"
    assert (root / "once-runs").read_text() == "ran\n"


async def test_a_server_that_stops_while_the_child_waits_leaves_both_interrupted_and_resumable(project, write) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as first:
        view = await ok(first, "ability_run", name="parent")
        parent_id, child_id = view["run_id"], child_of(view)
    store = state(project)
    try:
        assert [store.get_run(i).status for i in (parent_id, child_id)] == ["interrupted", "interrupted"]
    finally:
        store.close()

    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as second:
        resumed = await ok(second, "ability_resume", run_id=parent_id)
        assert resumed["status"] == "awaiting_agent" and child_of(resumed) == child_id
        assert resumed["next_calls"][0]["arguments"] == {
            "run_id": child_id,
            "step_id": "review",
            "output": "<your result>",
        }
        await ok(second, "ability_step_complete", run_id=child_id, step_id="review", output="LGTM")
        final = await finished(second, parent_id)
    assert final["status"] == "completed"
    assert by_id(final)["after"]["output"].endswith("child done after LGTM")


# --- a server killed while parent and child are live --------------------------------------------------------------


async def test_after_a_sigkill_both_runs_are_interrupted_and_resuming_the_parent_resumes_the_same_child(
    root: Path, write, sleep_seconds, tmp_path: Path
) -> None:
    fg = sleep_seconds()
    write(
        "child",
        f"""
        description: counts its first step, sleeps on the first attempt of the second
        steps:
          - {{id: once, type: script, run: 'echo ran >> once-runs'}}
          - id: nap
            type: script
            needs: [once]
            run: |
              if [ -e napped ]; then echo rested; exit 0; fi
              touch napped
              sleep {fg}
        """,
    )
    write("parent", PARENT.replace('inputs: {env: "{{inputs.target}}"}, ', ""))

    async with raw_server(root, tmp_path / "first.log") as first:
        parent_id = (await first.call_tool("ability_run", {"name": "parent", "wait_seconds": 0}))["run_id"]
        child_id = await until(lambda: stored_run(root, parent_id).step("sub").child_run)
        await until(lambda: stored_run(root, child_id).step("nap").pgid)
        first.process.kill()
        with anyio.fail_after(10):
            await first.process.wait()

    async with Client(stdio_params(root), mode="legacy") as second:
        parent = await ok(second, "ability_status", run_id=parent_id)
        child = await ok(second, "ability_status", run_id=child_id)
        assert (parent["status"], child["status"]) == ("interrupted", "interrupted")
        assert by_id(parent)["sub"]["status"] == "cancelled" and by_id(child)["nap"]["status"] == "cancelled"
        assert {"tool": "ability_resume", "arguments": {"run_id": parent_id}} in parent["next_calls"]
        assert {"tool": "ability_resume", "arguments": {"run_id": parent_id}} in child["next_calls"]
        await until(lambda: not sleeping(fg), timeout=5)

        refused = await call(second, "ability_resume", run_id=child_id)
        assert refused.is_error
        assert f"child of run {parent_id!r}" in refused.content[0].text
        assert f"ability_resume(run_id={parent_id!r})" in refused.content[0].text

        await ok(second, "ability_resume", run_id=parent_id, wait_seconds=0)
        final = await finished(second, parent_id)
        assert final["status"] == "completed", final
        assert by_id(final)["sub"]["child_run"] == child_id
        assert by_id(final)["sub"]["output"].endswith("rested")
        child = await ok(second, "ability_status", run_id=child_id)
        assert child["status"] == "completed" and by_id(child)["nap"]["output"] == "rested"
        history = await ok(second, "ability_history")
        assert [r["run_id"] for r in history["runs"]] == [parent_id]
    assert (root / "once-runs").read_text() == "ran\n", "the child's completed step ran again"


async def test_cancelling_an_interrupted_parent_cancels_its_interrupted_child(project, write, root) -> None:
    write("child", CHILD)
    write("parent", PARENT)
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as first:
        view = await ok(first, "ability_run", name="parent")
        parent_id, child_id = view["run_id"], child_of(view)
    assert stored_run(root, child_id).status == "interrupted"  # the server stopped under both
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as second:
        cancelled = await ok(second, "ability_cancel", run_id=parent_id)
    assert cancelled["status"] == "cancelled"
    assert stored_run(root, child_id).status == "cancelled"
