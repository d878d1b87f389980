"""Agent steps: handed out with their instructions, checked when handed back, and refused when out of step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

DEPLOYISH = """
    description: build, review, ship
    inputs: {env: {type: string, default: staging}}
    steps:
      - {id: build, type: script, run: 'echo "built for {{inputs.env}}"'}
      - id: review
        type: agent
        agent: reviewer
        prompt: "Review the build for {{inputs.env}}. Answer APPROVED or list problems."
        needs: [build]
        tools: [Read, Grep]
        validation: {output_contains: APPROVED}
        on_failure: retry
        max_retries: 1
      - {id: ship, type: script, run: 'echo "shipping after {{steps.review.output}}"', needs: [review]}
"""


async def call(client: Client, tool: str, **arguments: Any):
    return await client.call_tool(tool, arguments)


async def start(
    client: Client, write, text: str = DEPLOYISH, name: str = "flow", wait: float = 20, **inputs: Any
) -> dict:
    write(name, text)
    result = await call(client, "ability_run", name=name, inputs=inputs, wait_seconds=wait)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def by_id(view: dict) -> dict[str, dict]:
    return {s["id"]: s for s in view["steps"]}


async def test_an_agent_step_pauses_the_run_and_hands_out_its_instructions(client, write) -> None:
    view = await start(client, write, env="production")
    assert view["status"] == "awaiting_agent"
    step = view["current_step"]
    assert step["id"] == "review" and step["type"] == "agent" and step["agent"] == "reviewer"
    assert step["prompt"] == "Review the build for production. Answer APPROVED or list problems."
    assert step["allowed_tools"] == ["Task", "Read", "Grep"]
    text = step["instructions"]
    assert "Delegate this step to the agent 'reviewer'" in text
    assert "## Context from prior steps" in text and "built for production" in text
    assert "must contain 'APPROVED'" in text
    assert f"ability_step_complete(run_id={view['run_id']!r}, step_id='review'" in text
    assert view["next_calls"][0] == {
        "tool": "ability_step_complete",
        "arguments": {"run_id": view["run_id"], "step_id": "review", "output": "<your result>"},
    }


async def test_a_valid_hand_back_completes_the_step_and_the_run_goes_on(client, write) -> None:
    view = await start(client, write)
    result = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="review", output="APPROVED: ok")
    assert not result.is_error, result.content[0].text
    done = result.structured_content
    assert done["status"] == "completed"
    assert by_id(done)["review"]["output"] == "APPROVED: ok"
    assert by_id(done)["ship"]["output"] == "shipping after APPROVED: ok"


async def test_a_hand_back_failing_validation_is_refused_counts_as_an_attempt_and_is_handed_out_again(
    client, write
) -> None:
    view = await start(client, write, DEPLOYISH.replace("max_retries: 1", "max_retries: 1\n        max_attempts: 2"))
    refused = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="review", output="looks fine")
    assert refused.is_error
    text = refused.content[0].text
    assert "does not contain 'APPROVED'" in text and "counted as an attempt" in text
    assert "ability_step_complete" in text and "attempt 2" in text
    status = (await call(client, "ability_status", run_id=view["run_id"])).structured_content
    assert status["status"] == "awaiting_agent" and by_id(status)["review"]["attempts"] == 2
    assert "previous hand-back was refused" in status["current_step"]["instructions"]
    for attempt in (2, 3):  # the last of max_attempts 2, then a second round (on_failure: retry, max_retries: 1)
        again = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="review", output="no")
        assert again.is_error and f"handed out again (attempt {attempt + 1})" in again.content[0].text
    last = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="review", output="still no")
    assert last.is_error and "the run is now failed" in last.content[0].text
    final = (await call(client, "ability_status", run_id=view["run_id"])).structured_content
    assert final["status"] == "failed" and by_id(final)["ship"]["status"] == "skipped"
    assert by_id(final)["review"]["attempts"] == 4


async def test_an_agent_reporting_failure_fails_the_step(client, write) -> None:
    text = DEPLOYISH.replace("on_failure: retry", "on_failure: stop")
    view = await start(client, write, text)
    result = await call(
        client, "ability_step_complete", run_id=view["run_id"], step_id="review", output="no access", success=False
    )
    assert result.is_error and "reported that the step failed: no access" in result.content[0].text
    assert (await call(client, "ability_status", run_id=view["run_id"])).structured_content["status"] == "failed"


async def test_output_schema_and_output_matches_check_the_hand_back(client, write) -> None:
    view = await start(
        client,
        write,
        """
        description: structured
        steps:
          - id: plan
            type: agent
            prompt: Plan it as JSON
            validation:
              output_matches: '^\\{'
              output_schema: {type: object, required: [steps], properties: {steps: {type: array}}}
        """,
    )
    bad = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="plan", output='{"step": 1}')
    assert (
        bad.is_error
        and "does not fit validation.output_schema" in bad.content[0].text
        and "steps" in bad.content[0].text
    )
    words = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="plan", output="plain words")
    assert words.is_error and "does not match '^\\\\{' (validation.output_matches)" in words.content[0].text
    await call(client, "ability_cancel", run_id=view["run_id"])  # one live strict run per session
    view = await start(
        client,
        write,
        """
        description: structured
        steps:
          - {id: plan, type: agent, prompt: Plan it, validation: {output_schema: {type: object, required: [steps]}}}
        """,
        name="structured2",
    )
    good = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="plan", output='{"steps": []}')
    assert not good.is_error and good.structured_content["status"] == "completed"


async def test_completing_a_step_that_is_not_current_is_refused_with_the_current_step_and_changes_nothing(
    client, write
) -> None:
    view = await start(client, write)
    before = (await call(client, "ability_status", run_id=view["run_id"])).structured_content
    refused = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="ship", output="APPROVED")
    text = refused.content[0].text
    assert refused.is_error
    assert "step 'ship' is not the current step" in text and "state: awaiting_agent" in text
    assert f"ability_step_complete(run_id={view['run_id']!r}, step_id='review'" in text
    after = (await call(client, "ability_status", run_id=view["run_id"])).structured_content
    assert after == before


async def test_completing_while_the_server_runs_a_script_is_refused_with_wait_as_the_next_call(
    client, write, root: Path
) -> None:
    view = await start(
        client,
        write,
        """
        description: slow then agent
        steps:
          - {id: slow, type: script, run: 'while [ ! -e go ]; do sleep 0.02; done'}
          - {id: think, type: agent, prompt: think, needs: [slow]}
        """,
        wait=0.2,
    )
    refused = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="think", output="x")
    text = refused.content[0].text
    assert refused.is_error and "running script step 'slow'" in text and "state: running" in text
    assert f"ability_status(run_id={view['run_id']!r}, wait_seconds=30)" in text
    (root / "go").touch()
    waited = (await call(client, "ability_status", run_id=view["run_id"], wait_seconds=10)).structured_content
    while waited["status"] == "running":
        waited = (await call(client, "ability_status", run_id=view["run_id"], wait_seconds=10)).structured_content
    assert waited["status"] == "awaiting_agent" and waited["current_step"]["id"] == "think"


async def test_completing_after_the_run_ended_is_refused(client, write) -> None:
    view = await start(client, write)
    await call(client, "ability_cancel", run_id=view["run_id"])
    refused = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="review", output="APPROVED")
    assert refused.is_error and "is cancelled; there is no step to hand back" in refused.content[0].text


async def test_prior_outputs_in_the_context_are_cut_at_the_limits_keeping_head_and_tail(client, write) -> None:
    view = await start(
        client,
        write,
        """
        description: big context
        steps:
          - {id: a, type: script, run: 'printf "A%.0s" $(seq 45000); printf "HEAD-TAIL-MARK"'}
          - {id: b, type: script, run: 'printf "B%.0s" $(seq 45000)'}
          - {id: use, type: agent, prompt: use them, needs: [a, b]}
          - {id: short, type: agent, prompt: short, needs: [a], summarize: true}
        """,
    )
    context = view["current_step"]["instructions"].split("## Context from prior steps", 1)[1]
    assert "### a (completed)" in context and "### b (completed)" in context
    assert "HEAD-TAIL-MARK" in context  # the tail of a cut output is kept
    assert "characters truncated" in context
    assert len(context) < 80_000 + 500
    result = await call(client, "ability_step_complete", run_id=view["run_id"], step_id="use", output="done")
    short = result.structured_content["current_step"]["instructions"].split("## Context from prior steps", 1)[1]
    assert len(short) < 4_000 + 300 and "characters truncated" in short


async def test_an_agent_step_that_is_not_handed_back_in_time_fails(client, write) -> None:
    view = await start(
        client,
        write,
        """
        description: impatient
        steps:
          - {id: quick, type: agent, prompt: be quick, timeout: 300ms}
        """,
    )
    assert view["status"] == "awaiting_agent"
    final = (await call(client, "ability_status", run_id=view["run_id"], wait_seconds=10)).structured_content
    while final["status"] not in ("failed", "completed"):
        final = (await call(client, "ability_status", run_id=view["run_id"], wait_seconds=10)).structured_content
    assert final["status"] == "failed" and "no hand-back within 300ms" in by_id(final)["quick"]["error"]
