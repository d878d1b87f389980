"""The shipped deploy/production ability, end to end through the real server over stdio: a child run sets up the
environment, scripts test and build, the agent hands the review back, a person approves (by the client's form in
either protocol era, or by `abilities-mcp approve` at a terminal), and the deploy runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import ElicitResult

from support import REPO, Terminal, cli, stdio_params

INPUTS = {"version": "v1.2.3", "environment": "production"}


@pytest.fixture
def shipped(root: Path) -> Path:
    """A project holding the repository's own abilities."""
    shutil.rmtree(root / "abilities")
    shutil.copytree(REPO / "abilities", root / "abilities")
    return root


async def _to_the_review(client: Client) -> dict:
    run = (await client.call_tool("ability_run", {"name": "deploy/production", "inputs": INPUTS})).structured_content
    assert run["status"] == "awaiting_agent", run
    step = run["current_step"]
    assert step["id"] == "review" and step["agent"] == "reviewer"
    assert "Review the build of v1.2.3 for production" in step["instructions"]
    assert (
        "## Context from prior steps" in step["instructions"]
        and "built v1.2.3 --env=production" in (step["instructions"])
    )
    setup = next(s for s in run["steps"] if s["id"] == "setup")
    assert setup["status"] == "completed" and setup["child_run"] and "ready production" in setup["output"]
    assert run["next_calls"][0] == {
        "tool": "ability_step_complete",
        "arguments": {"run_id": run["run_id"], "step_id": "review", "output": "<your result>"},
    }
    return run


def _hand_back(run: dict) -> dict:
    return {"run_id": run["run_id"], "step_id": "review", "output": "No findings. APPROVED"}


def _deployed(run: dict) -> None:
    assert run["status"] == "completed", run
    statuses = {s["id"]: s["status"] for s in run["steps"]}
    assert statuses == dict.fromkeys(["setup", "test", "build", "review", "approve", "deploy"], "completed")
    deploy = next(s for s in run["steps"] if s["id"] == "deploy")
    assert deploy["output"] == "deploying v1.2.3 to production"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_deploy_to_production_with_a_person_approving_by_the_form(shipped: Path, mode: str) -> None:
    asked = []

    async def person(ctx, params) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": True})

    async with Client(stdio_params(shipped), mode=mode, elicitation_callback=person) as client:
        run = await _to_the_review(client)
        done = (await client.call_tool("ability_step_complete", _hand_back(run))).structured_content
    _deployed(done)
    assert len(asked) == 1 and "Deploy v1.2.3 to production?" in asked[0]


async def test_deploy_to_production_with_a_person_approving_at_the_terminal(shipped: Path) -> None:
    async with Client(stdio_params(shipped), mode="legacy") as client:  # declares no elicitation
        run = await _to_the_review(client)
        waiting = (await client.call_tool("ability_step_complete", _hand_back(run))).structured_content
        assert waiting["status"] == "awaiting_approval"
        assert waiting["current_step"]["prompt"] == "Deploy v1.2.3 to production?"
        refused = await client.call_tool(
            "ability_approve", {"run_id": run["run_id"], "step_id": "approve", "approved": True}
        )
        assert refused.is_error and f"abilities-mcp approve {run['run_id']}" in refused.content[0].text

        term = Terminal(cli(shipped, "approve", run["run_id"]), shipped)
        assert "Deploy v1.2.3 to production?" in term.expect("[y/N]")
        term.type("y")
        assert term.wait() == 0
        for _ in range(20):  # each call returns at the run's next change; the deploy is a few changes away
            done = (
                await client.call_tool("ability_status", {"run_id": run["run_id"], "wait_seconds": 20})
            ).structured_content
            if done["status"] != "awaiting_approval" and done["status"] != "running":
                break
    _deployed(done)


def test_deploy_to_production_from_a_terminal_the_person_reviews_and_approves(shipped: Path) -> None:
    term = Terminal(
        cli(shipped, "run", "deploy/production", "-i", "version=v1.2.3", "-i", "environment=production"), shipped
    )
    shown = term.expect("end it with a line holding only '.'")
    assert "[ok] setup" in shown and "Review the build of v1.2.3 for production" in shown
    term.type("No findings. APPROVED")
    term.type(".")
    assert "Deploy v1.2.3 to production?" in term.expect("[y/N]")
    term.type("y")
    assert "completed  (6 of 6 steps ran)" in term.expect("steps ran)")
    assert term.wait() == 0
