"""A scripted agent that tries every out-of-step move, under each enforcement level.

strict and normal refuse the move with a tool error that names the rule, the state and the legal next call;
loose answers it with a warning. Either way the run's stored state does not change. The exception is the second
`ability_run` (only strict allows one live run per session) and the agent relaying a person's answer (only loose
accepts it).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.errors import NextCall
from abilities_mcp.server.app import create_server
from abilities_mcp.state.project import Project
from abilities_mcp.state.store import Store, process_start
from support import TEST_RETRY_BASE, sleeping, state_db, stored_run, trust_project, until

LEVELS = ["strict", "normal", "loose"]

HANDBACK = """
  - {id: build, type: script, run: echo built}
  - {id: review, type: agent, prompt: Review the build, needs: [build]}
  - {id: ship, type: script, run: echo shipped, needs: [review]}
"""
GATED = """
  - {id: approve, type: approval, prompt: Ship it?}
  - {id: ship, type: script, run: echo shipped, needs: [approve]}
"""
ASKS = """
  - {id: bad, type: script, run: 'exit 3', on_failure: ask}
  - {id: after, type: script, run: echo after}
"""
WAITS = {
    "approval": ("gated", GATED, "awaiting_approval", "approve"),
    "decision": ("asks", ASKS, "awaiting_decision", "bad"),
}


def ability(level: str, steps: str) -> str:
    """An ability file with the given step lines, at this enforcement level."""
    head = f"description: a target for a misbehaving agent\nsettings: {{enforcement: {level}}}\nsteps:\n"
    return head + steps.strip("\n") + "\n"


def calls(*next_calls: NextCall) -> str:
    """The refusal's 'Legal next call(s)' part, rendered as the server renders it."""
    return "Legal next call(s): " + "; ".join(c.render() for c in next_calls) + "."


def status_call(run_id: str, **extra: Any) -> NextCall:
    return NextCall("ability_status", {"run_id": run_id, **extra})


def relay(kind: str, run_id: str, step_id: str) -> NextCall:
    """The call an agent relays a person's answer with (legal under loose only)."""
    if kind == "approval":
        return NextCall("ability_approve", {"run_id": run_id, "step_id": step_id, "approved": "<true|false>"})
    return NextCall("ability_decide", {"run_id": run_id, "step_id": step_id, "decision": "<retry|continue|stop>"})


def person_types(kind: str, run_id: str) -> str:
    """What a person types in a terminal to answer."""
    return (
        f"abilities-mcp approve {run_id}"
        if kind == "approval"
        else f"abilities-mcp decide {run_id} retry|continue|stop"
    )


def snapshot(root: Path, run_id: str) -> dict[str, Any]:
    """Everything a refused call must leave alone: the run, each step, the question, and the event log's length."""
    run = stored_run(root, run_id)
    store = Store(state_db(root))
    try:
        events = len(store.events(run_id))
    finally:
        store.close()
    return {
        "status": run.status,
        "error": run.error,
        "session": run.session_id,
        "owner": (run.owner_pid, run.owner_start),
        "question": run.question,
        "answer": run.answer,
        "steps": [(s.step_id, s.status, s.attempts, s.output, s.error) for s in run.steps],
        "events": events,
    }


@dataclass
class MisbehavingAgent:
    """Drives one client like an agent that ignores next_calls."""

    client: Client
    root: Path
    write: Any
    level: str

    async def call(self, tool: str, **arguments: Any):
        return await self.client.call_tool(tool, arguments)

    async def start(self, name: str, steps: str, wait: float = 20) -> dict[str, Any]:
        self.write(name, ability(self.level, steps))
        trust_project(Project.resolve(self.root))  # its author's level: a file nobody trusted runs strict
        result = await self.call("ability_run", name=name, wait_seconds=wait)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    async def misbehave(self, tool: str, *, rule: str, state: str, legal: str, **arguments: Any) -> str:
        """An out-of-step call: refused (warned under loose) naming rule, state and next call; nothing changes."""
        run_id = arguments["run_id"]
        before = snapshot(self.root, run_id)
        result = await self.call(tool, **arguments)
        if self.level == "loose":
            assert not result.is_error, result.content[0].text
            view = result.structured_content
            assert view["run_id"] == run_id and view["status"] == state
            assert len(view["warnings"]) == 1, view["warnings"]
            text = view["warnings"][0]
            assert text.startswith("Not done (enforcement: loose, so this is a warning): Refused: ")
        else:
            assert result.is_error, result.structured_content
            text = result.content[0].text
            assert "Refused: " in text
        assert rule in text
        assert f"(state: {state})" in text
        assert legal in text
        assert snapshot(self.root, run_id) == before
        return text


@pytest.fixture(params=LEVELS)
def agent(request, client, root, write) -> MisbehavingAgent:
    return MisbehavingAgent(client, root, write, request.param)


def answered(root: Path, run_id: str) -> list[str]:
    store = Store(state_db(root))
    try:
        return [e["detail"] for e in store.events(run_id) if e["event"] == "answered"]
    finally:
        store.close()


# --- 1. completing a step that is not the current one ---------------------------------------------------------


@pytest.mark.parametrize("step_id", ["build", "ship", "no-such-step"], ids=["finished", "later", "unknown"])
async def test_completing_a_step_that_is_not_current_is_refused_and_names_the_current_step(agent, step_id) -> None:
    run = await agent.start("handback", HANDBACK)
    rid = run["run_id"]
    assert run["status"] == "awaiting_agent" and run["current_step"]["id"] == "review"
    handback = NextCall("ability_step_complete", {"run_id": rid, "step_id": "review", "output": "<your result>"})
    await agent.misbehave(
        "ability_step_complete",
        rule=f"step {step_id!r} is not the current step; the run waits for 'review'",
        state="awaiting_agent",
        legal=calls(handback),
        run_id=rid,
        step_id=step_id,
        output="done",
    )
    done = await agent.call("ability_step_complete", run_id=rid, step_id="review", output="looks good")
    assert not done.is_error and done.structured_content["status"] == "completed"  # the legal call still works


# --- 2. completing while the server runs a script -------------------------------------------------------------


async def test_completing_while_the_server_runs_a_script_is_refused_with_wait_as_the_next_call(
    agent, root, sleep_seconds
) -> None:
    seconds = sleep_seconds()
    steps = f"""
  - {{id: slow, type: script, run: sleep {seconds}}}
  - {{id: think, type: agent, prompt: Think, needs: [slow]}}
"""
    rid = (await agent.start("slow", steps, wait=0))["run_id"]
    await until(lambda: stored_run(root, rid).step("slow").status == "running" and sleeping(seconds))
    await agent.misbehave(
        "ability_step_complete",
        rule="the server is running script step 'slow'; nothing is waiting for the agent",
        state="running",
        legal=calls(status_call(rid, wait_seconds=30)),
        run_id=rid,
        step_id="think",
        output="I did it myself",
    )
    cancelled = await agent.call("ability_cancel", run_id=rid)
    assert cancelled.structured_content["status"] == "cancelled" and not sleeping(seconds)


# --- 3. completing while the run waits for a person -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["approval", "decision"])
async def test_completing_while_a_person_must_answer_is_refused_and_says_what_the_person_types(agent, kind) -> None:
    name, steps, state, step_id = WAITS[kind]
    run = await agent.start(name, steps)
    rid = run["run_id"]
    assert run["status"] == state
    legal = [status_call(rid, wait_seconds=30)]
    if agent.level == "loose":  # the agent may relay the person's answer
        legal.insert(0, relay(kind, rid, step_id))
    text = await agent.misbehave(
        "ability_step_complete",
        rule="the run waits for a person's answer, not for the agent; a person answers",
        state=state,
        legal=calls(*legal),
        run_id=rid,
        step_id=step_id,
        output="approved",
    )
    assert f"`{person_types(kind, rid)}" in text


# --- 4. completing after the run ended ------------------------------------------------------------------------


async def end_run(agent: MisbehavingAgent, ending: str) -> str:
    """A run of HANDBACK that ended `ending` (completed, failed or cancelled)."""
    rid = (await agent.start(f"ends-{ending}", HANDBACK))["run_id"]
    if ending == "cancelled":
        result = await agent.call("ability_cancel", run_id=rid)
    else:
        result = await agent.call(
            "ability_step_complete", run_id=rid, step_id="review", output="done", success=ending == "completed"
        )
        if ending == "failed":  # a failed hand-back is refused (it counts as an attempt) and fails the run
            assert result.is_error
            result = await agent.call("ability_status", run_id=rid)
    assert result.structured_content["status"] == ending
    return rid


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
async def test_completing_after_the_run_ended_is_refused(agent, ending) -> None:
    rid = await end_run(agent, ending)
    next_call = NextCall("ability_resume", {"run_id": rid}) if ending == "failed" else status_call(rid)
    await agent.misbehave(
        "ability_step_complete",
        rule=f"run {rid!r} is {ending}; there is no step to hand back",
        state=ending,
        legal=calls(next_call),
        run_id=rid,
        step_id="review",
        output="done",
    )


# --- 5. a second run while this session has a live strict run -------------------------------------------------


async def test_a_second_run_is_refused_only_while_this_session_has_a_live_strict_run(agent, root) -> None:
    first = (await agent.start("first", HANDBACK))["run_id"]
    before = snapshot(root, first)
    second = await agent.call("ability_run", name="first")
    history = (await agent.call("ability_history")).structured_content["runs"]
    if agent.level == "strict":
        assert second.is_error
        text = second.content[0].text
        assert "Refused: " in text
        assert f"this session already has a live strict run {first!r} of 'first'" in text
        assert "(state: awaiting_agent)" in text
        legal = calls(status_call(first, wait_seconds=30), NextCall("ability_cancel", {"run_id": first}))
        assert legal in text
        assert [r["run_id"] for r in history] == [first]
    else:
        assert not second.is_error, second.content[0].text
        started = second.structured_content
        assert started["run_id"] != first and started["status"] == "awaiting_agent" and not started["warnings"]
        assert {r["run_id"] for r in history} == {first, started["run_id"]}
    assert snapshot(root, first) == before


# --- 6. the agent answering a person's question ---------------------------------------------------------------


RELAY = {"approval": ("ability_approve", {"approved": True}), "decision": ("ability_decide", {"decision": "continue"})}


@pytest.mark.parametrize("kind", ["approval", "decision"])
async def test_the_agent_answering_for_a_person_is_refused_outside_loose_and_relayed_under_loose(
    agent, root, kind
) -> None:
    name, steps, state, step_id = WAITS[kind]
    rid = (await agent.start(name, steps))["run_id"]
    tool, answer = RELAY[kind]
    if agent.level == "loose":
        result = await agent.call(tool, run_id=rid, step_id=step_id, **answer)
        assert not result.is_error, result.content[0].text
        assert result.structured_content["status"] == "completed" and not result.structured_content["warnings"]
        assert answered(root, rid) == ["approved by agent" if kind == "approval" else "continue by agent"]
        return
    text = await agent.misbehave(
        tool,
        rule=f"under enforcement: {agent.level}, only a person answers {kind} questions",
        state=state,
        legal=calls(status_call(rid, wait_seconds=30)),
        run_id=rid,
        step_id=step_id,
        **answer,
    )
    assert f"`{person_types(kind, rid)}" in text
    assert answered(root, rid) == []


@pytest.mark.parametrize("kind", ["approval", "decision"])
async def test_answering_with_the_wrong_tool_is_refused_naming_the_right_one(agent, kind) -> None:
    name, steps, state, step_id = WAITS[kind]
    rid = (await agent.start(name, steps))["run_id"]
    wrong, answer = RELAY["decision" if kind == "approval" else "approval"]
    if agent.level == "loose":
        waits_for = "an approval, not a decision" if kind == "approval" else "a decision, not an approval"
        rule, legal = f"step {step_id!r} waits for {waits_for}", calls(relay(kind, rid, step_id))
    else:  # only a person answers at all: the refusal names the person's command for this kind of question
        rule, legal = f"only a person answers {kind} questions", f"`{person_types(kind, rid)}"
    await agent.misbehave(wrong, rule=rule, state=state, legal=legal, run_id=rid, step_id=step_id, **answer)


async def test_approving_a_step_that_is_not_the_one_asked_about_is_refused(agent) -> None:
    name, steps, state, _ = WAITS["approval"]
    rid = (await agent.start(name, steps))["run_id"]
    if agent.level == "loose":
        rule = "step 'ship' is not waiting for an answer; the run asks about 'approve'"
        legal = calls(relay("approval", rid, "approve"))
    else:
        rule, legal = "only a person answers approval questions", calls(status_call(rid, wait_seconds=30))
    await agent.misbehave(
        "ability_approve", rule=rule, state=state, legal=legal, run_id=rid, step_id="ship", approved=True
    )


async def test_approving_while_the_run_waits_for_the_agent_is_refused_naming_the_hand_back(agent) -> None:
    rid = (await agent.start("handback", HANDBACK))["run_id"]
    handback = NextCall("ability_step_complete", {"run_id": rid, "step_id": "review", "output": "<your result>"})
    await agent.misbehave(
        "ability_approve",
        rule="the run waits for the agent's hand-back of 'review', not for an approval",
        state="awaiting_agent",
        legal=calls(handback),
        run_id=rid,
        step_id="review",
        approved=True,
    )


# --- 7. resuming (or handing back, or cancelling) a run another live server owns -------------------------------


@pytest.mark.parametrize("level", LEVELS)
async def test_a_run_live_in_another_server_is_not_resumed_handed_back_or_cancelled_here(
    project, root, write, sleep_seconds, level
) -> None:
    async with server_client(project) as first:
        rid = (await MisbehavingAgent(first, root, write, level).start("owned", HANDBACK))["run_id"]
    # That server is now another live process, waiting for the agent (faked: a `sleep` owns the run).
    owner = subprocess.Popen(["sleep", str(sleep_seconds())])
    try:
        store = Store(state_db(root))
        try:
            store.update_step(rid, "review", "test", status="awaiting")
            store.update_run(
                rid, "test", owner_pid=owner.pid, owner_start=process_start(owner.pid), status="awaiting_agent"
            )
        finally:
            store.close()
        async with server_client(project) as second:
            agent = MisbehavingAgent(second, root, write, level)
            for tool, verb, extra in [
                ("ability_resume", "resume", {}),
                ("ability_step_complete", "hand the step back", {"step_id": "review", "output": "done"}),
                ("ability_cancel", "cancel", {}),
            ]:
                await agent.misbehave(
                    tool,
                    rule=f"run {rid!r} is live in another server process (pid {owner.pid}); {verb} it there",
                    state="awaiting_agent",
                    legal=calls(status_call(rid)),
                    run_id=rid,
                    **extra,
                )
            owner.kill()
            owner.wait()
            # Once that server is gone the run is interrupted, and this server may take it over.
            resumed = await agent.call("ability_resume", run_id=rid)
            assert not resumed.is_error, resumed.content[0].text
            assert (
                resumed.structured_content["status"] == "awaiting_agent" and not resumed.structured_content["warnings"]
            )
            assert stored_run(root, rid).owner_pid == os.getpid()
    finally:
        owner.kill()
        owner.wait()


def server_client(project) -> Client:
    return Client(create_server(project, retry_base=TEST_RETRY_BASE))


# --- 8. resuming a finished run, cancelling a finished run -----------------------------------------------------


@pytest.mark.parametrize("ending", ["completed", "cancelled"])
async def test_resuming_a_completed_or_cancelled_run_is_refused_naming_a_new_run(agent, ending) -> None:
    rid = await end_run(agent, ending)
    await agent.misbehave(
        "ability_resume",
        rule=f"only interrupted or failed runs resume; {rid!r} is {ending}",
        state=ending,
        legal=calls(NextCall("ability_run", {"name": f"ends-{ending}"})),
        run_id=rid,
    )


async def test_resuming_a_run_this_server_is_driving_is_refused(agent) -> None:
    rid = (await agent.start("handback", HANDBACK))["run_id"]
    await agent.misbehave(
        "ability_resume",
        rule=f"run {rid!r} is live in this server",
        state="awaiting_agent",
        legal=calls(status_call(rid, wait_seconds=30)),
        run_id=rid,
    )


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
async def test_cancelling_a_finished_run_is_refused(agent, ending) -> None:
    rid = await end_run(agent, ending)
    await agent.misbehave(
        "ability_cancel",
        rule=f"run {rid!r} already ended",
        state=ending,
        legal=calls(status_call(rid)),
        run_id=rid,
    )
