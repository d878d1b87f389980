"""Approval, plan and decision steps: a person answers through an elicitation form (both protocol eras), the
terminal command, or — under enforcement: loose only — the agent relaying it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

from abilities_mcp.server.app import create_server
from support import GATED, TEST_RETRY_BASE, state_db, stored_run, trust_project, until

ERAS = ["legacy", "auto"]  # auto negotiates 2026-07-28 against our server: forms travel in InputRequiredResult


class Person:
    """An elicitation callback that answers like a person would, and remembers what it was shown."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None):
        self.action, self.content = action, content if content is not None else {"approve": True}
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, ctx, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        return ElicitResult(action=self.action, content=self.content if self.action == "accept" else None)


def client_for(project, mode: str, person: Person | None) -> Client:
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    if person is None:
        return Client(server, mode=mode)
    return Client(server, mode=mode, elicitation_callback=person)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_person_approves_through_the_form_and_the_run_goes_on(project, write, root, mode) -> None:
    write("gated", GATED)
    person = Person()
    async with client_for(project, mode, person) as client:
        result = await client.call_tool("ability_run", {"name": "gated", "inputs": {"version": "v2.0.0"}})
    run = result.structured_content
    assert run["status"] == "completed", run
    assert (root / "deployed").exists()
    assert len(person.asked) == 1
    asked = person.asked[0]
    assert "Deploy v2.0.0?" in asked.message and run["run_id"] in asked.message
    assert asked.requested_schema["properties"]["approve"]["type"] == "boolean"  # one boolean field
    approve = next(s for s in run["steps"] if s["id"] == "approve")
    assert approve["status"] == "completed" and approve["output"] == "approved"
    events = [e["detail"] for e in _events(root, run["run_id"]) if e["event"] == "answered"]
    assert events == ["approved by elicitation (form shown by mcp 0.1.0)"]  # the client, as it introduced itself


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(
    ("action", "content", "why"),
    [
        ("accept", {"approve": False}, "rejected by elicitation"),
        ("decline", None, "form declined"),
        ("cancel", None, "form cancelled"),
    ],
)
async def test_a_rejected_declined_or_cancelled_form_fails_the_step_and_stops_the_run(
    project, write, root, mode, action, content, why
) -> None:
    write("gated", GATED)
    async with client_for(project, mode, Person(action, content)) as client:
        run = (await client.call_tool("ability_run", {"name": "gated"})).structured_content
    assert run["status"] == "failed"
    approve = next(s for s in run["steps"] if s["id"] == "approve")
    assert approve["status"] == "failed" and why in approve["error"]
    assert next(s for s in run["steps"] if s["id"] == "deploy")["status"] == "skipped"
    assert not (root / "deployed").exists()


@pytest.mark.parametrize("mode", ERAS)
async def test_without_the_capability_the_run_waits_and_says_how_a_person_answers(project, write, mode) -> None:
    write("gated", GATED)
    async with client_for(project, mode, None) as client:
        run = (await client.call_tool("ability_run", {"name": "gated"})).structured_content
        assert run["status"] == "awaiting_approval"
        step = run["current_step"]
        assert step["id"] == "approve" and step["type"] == "approval" and step["prompt"] == "Deploy v1.0.0?"
        assert f"abilities-mcp approve {run['run_id']}" in step["instructions"]
        assert "You cannot answer it" in step["instructions"]
        assert [c["tool"] for c in run["next_calls"]] == ["ability_status", "ability_cancel"]
        await client.call_tool("ability_cancel", {"run_id": run["run_id"]})


async def test_the_agent_cannot_approve_outside_loose_and_is_told_what_the_person_types(project, write) -> None:
    write("gated", GATED)
    async with client_for(project, "legacy", None) as client:
        run = (await client.call_tool("ability_run", {"name": "gated"})).structured_content
        rid = run["run_id"]
        result = await client.call_tool("ability_approve", {"run_id": rid, "step_id": "approve", "approved": True})
        assert result.is_error
        text = result.content[0].text
        assert "only a person answers" in text and f"abilities-mcp approve {rid}" in text
        assert "state: awaiting_approval" in text and "ability_status(" in text
        after = (await client.call_tool("ability_status", {"run_id": rid})).structured_content
        assert after["status"] == "awaiting_approval" and after["current_step"]["id"] == "approve"
        await client.call_tool("ability_cancel", {"run_id": rid})


async def test_under_loose_the_agent_relays_the_answer(project, write, root) -> None:
    write("gated", GATED + "settings: {enforcement: loose}\n")
    trust_project(project)  # loose as its author wrote it: a file nobody trusted runs strict
    async with client_for(project, "legacy", None) as client:
        run = (await client.call_tool("ability_run", {"name": "gated"})).structured_content
        assert run["next_calls"][0]["tool"] == "ability_approve"
        args = {"run_id": run["run_id"], "step_id": "approve", "approved": True, "note": "user said yes in chat"}
        done = (await client.call_tool("ability_approve", args)).structured_content
    assert done["status"] == "completed" and (root / "deployed").exists()
    answered = [e["detail"] for e in _events(root, run["run_id"]) if e["event"] == "answered"]
    assert answered == ["approved by agent"]


async def test_an_unanswered_approval_times_out_as_a_rejection(project, write, root) -> None:
    write(
        "quick",
        """
        description: quick
        steps:
          - {id: approve, type: approval, prompt: go?, timeout: 200ms}
          - {id: after, type: script, run: touch after, needs: [approve]}
    """,
    )
    async with client_for(project, "legacy", None) as client:
        run = (await client.call_tool("ability_run", {"name": "quick", "wait_seconds": 0})).structured_content
        done = await until(
            lambda: stored_run(root, run["run_id"]).status == "failed" and stored_run(root, run["run_id"])
        )
    approve = done.step("approve")
    assert approve.status == "failed" and "no answer within 200ms" in approve.error
    assert not (root / "after").exists()


@pytest.mark.parametrize("mode", ERAS)
async def test_settings_approval_plan_shows_every_step_before_the_first_runs(project, write, root, mode) -> None:
    write(
        "planned",
        """
        description: planned
        settings: {approval: plan}
        steps:
          - {id: one, type: script, run: touch one, description: First thing}
          - {id: two, type: script, run: echo two, needs: [one], when: inputs.x == 1}
        inputs: {x: {type: integer, default: 1}}
    """,
    )
    person = Person(content={"approve": False})
    async with client_for(project, mode, person) as client:
        run = (await client.call_tool("ability_run", {"name": "planned"})).structured_content
    assert run["status"] == "failed" and "plan was rejected" in run["error"]
    assert not (root / "one").exists()
    shown = person.asked[0].message
    assert "1. one [script] First thing" in shown and "2. two [script]" in shown and "only when inputs.x == 1" in shown


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(("decision", "status", "runs"), [("retry", "completed", 2), ("continue", "completed", 1)])
async def test_on_failure_ask_lets_a_person_retry_or_continue(project, write, root, mode, decision, status, runs):
    write(
        "flaky",
        """
        description: flaky
        steps:
          - {id: flaky, type: script, run: 'echo x >> tries; test $(wc -l < tries) -ge 2', on_failure: ask}
          - {id: after, type: script, run: touch after}
    """,
    )
    person = Person(content={"decision": decision})
    async with client_for(project, mode, person) as client:
        run = (await client.call_tool("ability_run", {"name": "flaky"})).structured_content
    assert run["status"] == status
    assert len((root / "tries").read_text().split()) == runs
    schema = person.asked[0].requested_schema["properties"]["decision"]
    assert [o["const"] for o in schema["oneOf"]] == ["retry", "continue", "stop"]
    assert "Step 'flaky' failed" in person.asked[0].message
    assert (root / "after").exists()


async def test_on_failure_ask_stop_fails_the_run(project, write, root) -> None:
    write(
        "broken",
        """
        description: broken
        steps:
          - {id: bad, type: script, run: 'exit 3', on_failure: ask}
          - {id: after, type: script, run: touch after}
    """,
    )
    async with client_for(project, "legacy", Person(content={"decision": "stop"})) as client:
        run = (await client.call_tool("ability_run", {"name": "broken"})).structured_content
    assert run["status"] == "failed" and not (root / "after").exists()


async def test_options_become_one_enum_field_and_the_chosen_value_is_the_output(project, write, root) -> None:
    write(
        "pick",
        """
        description: pick
        steps:
          - id: how
            type: approval
            prompt: How to roll out?
            options:
              - {label: All at once, value: all}
              - {label: Canary first, value: canary}
              - {label: Do not deploy, value: rejected}
          - {id: go, type: script, run: 'echo {{steps.how.output}} > chosen', needs: [how]}
    """,
    )
    person = Person(content={"answer": "canary"})
    async with client_for(project, "legacy", person) as client:
        run = (await client.call_tool("ability_run", {"name": "pick"})).structured_content
    assert run["status"] == "completed"
    assert (root / "chosen").read_text().strip() == "canary"
    field = person.asked[0].requested_schema["properties"]["answer"]
    assert [(o["const"], o["title"]) for o in field["oneOf"]] == [
        ("all", "All at once"),
        ("canary", "Canary first"),
        ("rejected", "Do not deploy"),
    ]


def _events(root, run_id: str) -> list[dict]:
    from abilities_mcp.state.store import Store

    store = Store(state_db(root))
    try:
        return store.events(run_id)
    finally:
        store.close()


async def test_a_refused_hand_back_under_on_failure_ask_lets_a_person_give_the_agent_another_try(project, write):
    write(
        "review",
        """
        description: review
        steps:
          - id: review
            type: agent
            prompt: Review
            on_failure: ask
            max_attempts: 1
            validation: {output_contains: APPROVED}
    """,
    )
    person = Person(content={"decision": "retry"})
    async with client_for(project, "legacy", person) as client:
        run = (await client.call_tool("ability_run", {"name": "review"})).structured_content
        args = {"run_id": run["run_id"], "step_id": "review"}
        refused = await client.call_tool("ability_step_complete", {**args, "output": "meh"})
        assert refused.is_error and "does not contain 'APPROVED'" in refused.content[0].text
        assert "handed out again (attempt 2)" in refused.content[0].text  # the person chose retry in the form
        assert len(person.asked) == 1 and "Step 'review' failed" in person.asked[0].message
        done = (await client.call_tool("ability_step_complete", {**args, "output": "APPROVED"})).structured_content
    assert done["status"] == "completed" and done["steps"][0]["attempts"] == 2


@pytest.mark.parametrize("mode", ERAS)
async def test_a_resumed_runs_approval_is_not_taken_from_a_form_but_from_a_terminal(project, write, root, mode) -> None:
    # The route of issue 15: kill the run's server, resume the run from a client of one's own whose form says yes.
    write("gated", GATED)
    async with client_for(project, mode, None) as first:
        run = (await first.call_tool("ability_run", {"name": "gated", "wait_seconds": 10})).structured_content
        assert run["status"] == "awaiting_approval"
    assert stored_run(root, run["run_id"]).status == "interrupted"  # its server stopped

    person = Person()
    async with client_for(project, mode, person) as second:
        resumed = await second.call_tool("ability_resume", {"run_id": run["run_id"], "wait_seconds": 10})

    assert resumed.structured_content["status"] == "awaiting_approval", resumed.structured_content
    assert person.asked == []  # no form: the answer must come from a person's terminal
    assert not (root / "deployed").exists()


async def test_a_terminal_answer_that_skipped_the_person_check_is_not_recorded(project, write, root) -> None:
    from abilities_mcp.abilities.catalog import Catalog
    from abilities_mcp.engine.core import Engine
    from abilities_mcp.state.store import Store

    write("gated", GATED)
    store = Store(project.state_db)
    engine = Engine(store, Catalog(project), retry_base=TEST_RETRY_BASE)
    try:
        async with engine.running():
            run_id = engine.start("gated", {}, "s")
            await until(lambda: engine.question(run_id))
            _, question = engine.pending_question(run_id, None, "terminal")
            unchecked = question.from_yes_no(True, "terminal")  # no origin: from_a_person never saw it

            with pytest.raises(ValueError, match="skipped the person check"):
                engine.record_answer(run_id, question, unchecked)

            assert stored_run(root, run_id).status == "awaiting_approval" and stored_run(root, run_id).answers == []
            await engine.cancel(run_id)
    finally:
        store.close()
