"""The hand-back rule: a hand-back that fails `validation` is refused and the step handed out again with the reason,
up to the step's `max_attempts` (default 3); only then does `on_failure` apply. `success=false` goes straight to it."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from mcp import Client
from test_approvals import Person, client_for

from abilities_mcp.abilities.models import DEFAULT_MAX_ATTEMPTS
from abilities_mcp.state.store import Store
from support import state_db


def review(on_failure: str = "stop", extra: str = "") -> str:
    """A script, an agent step that must say APPROVED, and a step after it that needs it."""
    return f"""
    description: build, review, ship
    steps:
      - {{id: build, type: script, run: 'echo built'}}
      - id: review
        type: agent
        prompt: Review the build. Answer APPROVED or list problems.
        needs: [build]
        validation: {{output_contains: APPROVED}}
        on_failure: {on_failure}
        {extra}
      - {{id: ship, type: script, run: 'echo "shipping after {{{{steps.review.output}}}}"', needs: [review]}}
      - {{id: report, type: script, run: 'echo reported', when: always()}}
    """


async def start(client: Client, write, text: str, name: str = "flow") -> dict:
    write(name, text)
    result = await client.call_tool("ability_run", {"name": name, "wait_seconds": 20})
    assert not result.is_error, result.content[0].text
    assert result.structured_content["status"] == "awaiting_agent", result.structured_content
    return result.structured_content


async def hand_back(client: Client, run: dict, output: str, step_id: str = "review", **more: Any):
    args = {"run_id": run["run_id"], "step_id": step_id, "output": output, **more}
    return await client.call_tool("ability_step_complete", args)


async def status(client: Client, run: dict) -> dict:
    return (await client.call_tool("ability_status", {"run_id": run["run_id"]})).structured_content


def step(view: dict, step_id: str = "review") -> dict:
    return next(s for s in view["steps"] if s["id"] == step_id)


def events(root, run_id: str) -> list[str]:
    store = Store(state_db(root))
    try:
        return [e["event"] for e in store.events(run_id) if e["step_id"] == "review"]
    finally:
        store.close()


async def refuse_until_exhausted(client: Client, run: dict, attempts: int) -> Any:
    """Hand back `attempts - 1` refused outputs (each handed out again), and return the last refusal."""
    for n in range(1, attempts):
        refused = await hand_back(client, run, f"looks fine {n}")
        assert refused.is_error and f"handed out again (attempt {n + 1})" in refused.content[0].text
    last = await hand_back(client, run, "still looks fine")
    assert last.is_error
    return last


async def test_a_hand_back_that_passes_on_the_first_try_completes_the_step_in_one_attempt(client, write) -> None:
    run = await start(client, write, review())
    assert "attempt 1 of 3" in run["current_step"]["instructions"]
    done = await hand_back(client, run, "APPROVED: nothing to fix")
    assert not done.is_error, done.content[0].text
    view = done.structured_content
    assert view["status"] == "completed"
    assert step(view)["status"] == "completed" and step(view)["attempts"] == 1 and step(view)["error"] is None
    assert step(view, "ship")["output"] == "shipping after APPROVED: nothing to fix"


async def test_a_refused_hand_back_keeps_the_step_awaiting_and_hands_it_out_again_with_the_reason(
    client, write, root
) -> None:
    run = await start(client, write, review())
    refused = await hand_back(client, run, "looks fine")

    assert refused.is_error
    text = refused.content[0].text
    # the rule, which attempt it was, what comes next and how many remain, the state, the legal next call
    assert "Hand-back refused: the output does not contain 'APPROVED' (validation.output_contains)" in text
    assert "It counted as an attempt (1 of 3)" in text
    assert "Step 'review' is handed out again (attempt 2) with the reason in current_step.instructions" in text
    assert "2 of its max_attempts 3 left before on_failure: stop applies" in text
    assert "the run stays awaiting_agent" in text
    assert f"Legal next call(s): ability_step_complete(run_id={run['run_id']!r}, step_id='review'" in text
    view = await status(client, run)
    assert view["status"] == "awaiting_agent" and view["current_step"]["id"] == "review"
    assert step(view)["status"] == "awaiting" and step(view)["attempts"] == 2
    assert step(view)["output"] == "looks fine" and "does not contain 'APPROVED'" in step(view)["error"]
    instructions = view["current_step"]["instructions"]
    assert "attempt 2 of 3" in instructions
    assert "The previous hand-back was refused: the output does not contain 'APPROVED'" in instructions
    assert "## Context from prior steps" in instructions and "built" in instructions  # the same hand-out otherwise
    assert step(view, "ship")["status"] == "pending"  # nothing ran on

    done = await hand_back(client, run, "APPROVED: fixed")
    assert not done.is_error, done.content[0].text
    final = done.structured_content
    assert final["status"] == "completed" and step(final)["attempts"] == 2 and step(final)["error"] is None
    assert step(final, "ship")["output"] == "shipping after APPROVED: fixed"
    assert events(root, run["run_id"]).count("refuse") == 1 and "fail" not in events(root, run["run_id"])


async def test_attempts_exhausted_under_on_failure_stop_fail_the_run(client, write) -> None:
    run = await start(client, write, review("stop"))
    last = await refuse_until_exhausted(client, run, DEFAULT_MAX_ATTEMPTS)

    text = last.content[0].text
    assert "the last of max_attempts 3 (3 of 3), so on_failure: stop applies" in text
    assert "Step 'review' is failed; the run is now failed" in text
    assert f"ability_resume(run_id={run['run_id']!r})" in text
    view = await status(client, run)
    assert view["status"] == "failed"
    assert step(view)["status"] == "failed" and step(view)["attempts"] == 3
    assert step(view, "ship")["status"] == "skipped"


async def test_attempts_exhausted_under_on_failure_continue_record_the_failure_and_the_run_goes_on(
    client, write
) -> None:
    run = await start(client, write, review("continue", "max_attempts: 2"))
    last = await refuse_until_exhausted(client, run, 2)

    text = last.content[0].text
    assert "the last of max_attempts 2 (2 of 2), so on_failure: continue applies" in text
    assert "Step 'review' is failed; the run is now completed" in text
    view = await status(client, run)
    assert view["status"] == "completed"
    assert step(view)["status"] == "failed" and step(view)["attempts"] == 2
    assert step(view, "ship")["status"] == "skipped"  # it needs the failed step
    assert step(view, "report")["output"] == "reported"  # always(): the run went on


async def test_attempts_exhausted_under_on_failure_retry_give_another_round_up_to_max_retries(
    client, write, root
) -> None:
    run = await start(client, write, review("retry", "max_attempts: 2\n        max_retries: 1"))
    assert "attempt 1 of 4" in run["current_step"]["instructions"]  # 2 rounds of 2
    end_of_round = await refuse_until_exhausted(client, run, 2)

    text = end_of_round.content[0].text
    assert "the last of max_attempts 2 (2 of 2), so on_failure: retry applies" in text
    assert "Step 'review' is handed out again (attempt 3) with the reason in current_step.instructions" in text
    assert "a new round of 2 attempts; the run is awaiting_agent" in text
    view = await status(client, run)
    assert step(view)["status"] == "awaiting" and step(view)["attempts"] == 3
    assert "attempt 3 of 4" in view["current_step"]["instructions"]
    assert "previous hand-back was refused" in view["current_step"]["instructions"]

    again = await hand_back(client, run, "no")
    assert "It counted as an attempt (3 of 4)" in again.content[0].text
    assert "handed out again (attempt 4)" in again.content[0].text
    last = await hand_back(client, run, "still no")
    assert "the last of max_attempts 2 (4 of 4), so on_failure: retry applies" in last.content[0].text
    assert "the run is now failed" in last.content[0].text
    final = await status(client, run)
    assert final["status"] == "failed" and step(final)["attempts"] == 4
    assert events(root, run["run_id"]).count("retry") == 1  # one more round, as max_retries says


async def test_a_later_round_under_on_failure_retry_can_still_succeed(client, write) -> None:
    run = await start(client, write, review("retry", "max_attempts: 1"))
    first = await hand_back(client, run, "nope")
    assert (
        "handed out again (attempt 2)" in first.content[0].text and "a new round of 1 attempts" in first.content[0].text
    )
    done = await hand_back(client, run, "APPROVED")
    assert done.structured_content["status"] == "completed" and step(done.structured_content)["attempts"] == 2


@pytest.mark.parametrize(
    ("decision", "run_status", "review_status"),
    [("retry", "completed", "completed"), ("continue", "completed", "failed"), ("stop", "failed", "failed")],
)
async def test_attempts_exhausted_under_on_failure_ask_let_a_person_choose(
    project, write, decision, run_status, review_status
) -> None:
    write("flow", review("ask", "max_attempts: 2"))
    person = Person(content={"decision": decision})
    async with client_for(project, "legacy", person) as client:
        run = (await client.call_tool("ability_run", {"name": "flow"})).structured_content
        first = await hand_back(client, run, "meh")
        assert "handed out again (attempt 2)" in first.content[0].text and person.asked == []  # not yet asked
        last = await hand_back(client, run, "meh again")
        text = last.content[0].text
        assert "the last of max_attempts 2 (2 of 2), so on_failure: ask applies" in text
        assert len(person.asked) == 1 and "Step 'review' failed" in person.asked[0].message
        if decision == "retry":
            assert "handed out again (attempt 3) with the reason" in text and "a new round of 2" in text
            refused = await hand_back(client, run, "meh, third")
            assert "(3 of 4)" in refused.content[0].text and "handed out again (attempt 4)" in refused.content[0].text
            await hand_back(client, run, "APPROVED")
        view = await status(client, run)
    assert view["status"] == run_status, view
    assert step(view)["status"] == review_status
    assert step(view)["attempts"] == (4 if decision == "retry" else 2)
    assert step(view, "report")["output"] == ("reported" if decision != "stop" else None)


async def test_attempts_exhausted_under_on_failure_ask_wait_for_a_person_when_no_form_is_shown(client, write) -> None:
    run = await start(client, write, review("ask", "max_attempts: 1"))
    refused = await hand_back(client, run, "meh")
    text = refused.content[0].text
    assert "A person now decides whether to retry (another 1 attempts), continue or stop" in text
    assert "the run is awaiting_decision" in text and "ability_status(" in text
    assert (await status(client, run))["status"] == "awaiting_decision"


async def test_max_attempts_1_restores_the_old_rule_one_refused_hand_back_fails_the_run(client, write) -> None:
    run = await start(client, write, review("stop", "max_attempts: 1"))
    refused = await hand_back(client, run, "looks fine")
    text = refused.content[0].text
    assert refused.is_error and "does not contain 'APPROVED'" in text
    assert "the last of max_attempts 1 (1 of 1), so on_failure: stop applies" in text
    assert "the run is now failed" in text
    view = await status(client, run)
    assert view["status"] == "failed" and step(view)["attempts"] == 1


@pytest.mark.parametrize(("on_failure", "run_status"), [("stop", "failed"), ("continue", "completed")])
async def test_success_false_uses_no_more_attempts_and_goes_straight_to_on_failure(
    client, write, on_failure, run_status
) -> None:
    run = await start(client, write, review(on_failure))
    failed = await hand_back(client, run, "no access to the build", success=False)
    text = failed.content[0].text
    assert failed.is_error
    assert "Step 'review' failed: the agent reported that the step failed: no access to the build" in text
    assert f"success=false uses no more attempts, so on_failure: {on_failure} applies" in text
    assert f"the run is now {run_status}" in text
    view = await status(client, run)
    assert view["status"] == run_status and step(view)["status"] == "failed" and step(view)["attempts"] == 1


async def test_success_false_under_on_failure_retry_starts_the_next_round(client, write) -> None:
    run = await start(client, write, review("retry"))
    failed = await hand_back(client, run, "tool crashed", success=False)
    assert "handed out again (attempt 2) with the reason" in failed.content[0].text
    view = await status(client, run)
    assert "attempt 2 of 4" in view["current_step"]["instructions"]  # 1 used, then a fresh round of 3


SKILL = """\
---
name: release-notes
description: Write release notes from a list of changes. Use for changelog entries.
---
# Release notes

Write a `## x.y.z` heading, then the changes.
"""


def notes(on_failure: str, max_attempts: int) -> str:
    return f"""
    description: notes
    steps:
      - id: notes
        type: skill
        skill: release-notes
        max_attempts: {max_attempts}
        on_failure: {on_failure}
        validation: {{output_matches: '^## \\d+\\.\\d+\\.\\d+'}}
    """


async def test_a_skill_steps_hand_back_is_refused_and_handed_out_again_the_same_way(client, write, root) -> None:
    folder = root / "skills" / "release-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    run = await start(client, write, notes("stop", 2), name="notes")

    refused = await hand_back(client, run, "Fixed the login", step_id="notes")
    text = refused.content[0].text
    assert "does not match '^## \\\\d+" in text and "(validation.output_matches)" in text
    assert "Step 'notes' is handed out again (attempt 2)" in text and "1 of its max_attempts 2 left" in text
    view = await status(client, run)
    assert step(view, "notes")["status"] == "awaiting" and step(view, "notes")["attempts"] == 2
    assert "Apply the skill 'release-notes'" in view["current_step"]["instructions"]  # the skill handed out again
    assert "previous hand-back was refused" in view["current_step"]["instructions"]

    last = await hand_back(client, run, "still no heading", step_id="notes")
    assert "the last of max_attempts 2 (2 of 2), so on_failure: stop applies" in last.content[0].text
    final = await status(client, run)
    assert final["status"] == "failed" and step(final, "notes")["attempts"] == 2

    again = await start(client, write, notes("stop", 2), name="notes")
    await hand_back(client, again, "nope", step_id="notes")
    done = await hand_back(client, again, "## 1.2.3\n- Fixed the login", step_id="notes")
    assert done.structured_content["status"] == "completed" and step(done.structured_content, "notes")["attempts"] == 2
    shutil.rmtree(folder)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0", "greater than or equal to 1"),
        ("'3'", "valid integer"),
        ("2.5", "valid integer"),
        ("true", "valid integer"),
        ("21", "less than or equal to 20"),
    ],
)
async def test_a_bad_max_attempts_is_a_load_error_naming_the_field_and_the_fix(client, write, value, says) -> None:
    write("bad", f"description: bad\nsteps:\n  - {{id: think, type: agent, prompt: p, max_attempts: {value}}}\n")
    report = (await client.call_tool("ability_validate", {"name": "bad"})).structured_content
    errors = report["files"][0]["errors"]
    assert report["valid"] is False and len(errors) == 1
    assert errors[0]["path"] == "steps[0].max_attempts" and says in errors[0]["message"]
    assert "a whole number from 1 to 20" in errors[0]["message"]  # the fix
    refused = await client.call_tool("ability_run", {"name": "bad"})
    assert refused.is_error and "max_attempts" in refused.content[0].text


async def test_a_misspelt_max_attempts_is_refused_with_a_did_you_mean(client, write) -> None:
    write("typo", "description: t\nsteps:\n  - {id: think, type: agent, prompt: p, max_attempt: 2}\n")
    report = (await client.call_tool("ability_validate", {"name": "typo"})).structured_content
    assert "did you mean 'max_attempts'?" in report["files"][0]["errors"][0]["message"]
