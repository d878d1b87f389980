"""settings.approval: checkpoint — a person approves each step the server runs itself (script, child run), before
each attempt; OpenAgents' plugin-abilities schema allows the value and gives it no behaviour, this is ours."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

from abilities_mcp.server.app import create_server
from support import TEST_RETRY_BASE

ERAS = ["legacy", "auto"]


class Person:
    """Answers each form with the next of `answers` (True approves), and remembers what it was shown."""

    def __init__(self, *answers: bool):
        self.answers = list(answers)
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, ctx, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        return ElicitResult(action="accept", content={"approve": self.answers.pop(0)})


async def run(project, mode: str, person: Person, name: str) -> dict[str, Any]:
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server, mode=mode, elicitation_callback=person) as client:
        return (await client.call_tool("ability_run", {"name": name})).structured_content


@pytest.fixture
def checkpointed(write):
    write("child", "description: child\nsteps:\n  - {id: inner, type: script, run: touch inner}\n")
    write(
        "guarded",
        """
        description: guarded
        settings: {approval: checkpoint}
        steps:
          - {id: one, type: script, run: touch one, description: First thing}
          - {id: sub, type: workflow, workflow: child, needs: [one]}
          - {id: last, type: script, run: touch last, needs: [sub]}
    """,
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_each_step_the_server_runs_waits_for_a_person_first(project, root, checkpointed, mode) -> None:
    person = Person(True, True, True)
    done = await run(project, mode, person, "guarded")
    assert done["status"] == "completed", done
    assert all((root / f).exists() for f in ("one", "inner", "last"))
    shown = [p.message for p in person.asked]
    assert len(shown) == 3  # one, sub, last; the child's own step has no checkpoint of its own
    assert "Checkpoint before step 'one' (First thing)" in shown[0] and "runs: touch one" in shown[0]
    assert "Checkpoint before step 'sub'" in shown[1] and "runs ability 'child' as a child run" in shown[1]
    assert all(done["run_id"] in m for m in shown)


async def test_a_rejected_checkpoint_fails_that_step_before_it_runs(project, root, checkpointed) -> None:
    person = Person(True, False)
    done = await run(project, "legacy", person, "guarded")
    assert done["status"] == "failed"
    sub = next(s for s in done["steps"] if s["id"] == "sub")
    assert sub["status"] == "failed" and "rejected at the checkpoint" in sub["error"]
    assert (root / "one").exists() and not (root / "inner").exists() and not (root / "last").exists()
    assert len(person.asked) == 2


async def test_under_on_failure_continue_a_rejected_step_is_passed_over(project, root, write) -> None:
    write(
        "optional",
        """
        description: optional
        settings: {approval: checkpoint, on_failure: continue}
        steps:
          - {id: cleanup, type: script, run: touch cleaned}
          - {id: report, type: script, run: touch reported}
          - {id: review, type: approval, prompt: Looks good?}
    """,
    )
    person = Person(False, True, True)
    done = await run(project, "legacy", person, "optional")
    assert not (root / "cleaned").exists() and (root / "reported").exists()
    steps = {s["id"]: s["status"] for s in done["steps"]}
    assert steps == {"cleanup": "failed", "report": "completed", "review": "completed"}
    assert len(person.asked) == 3  # the approval step asks once, as it always does: no checkpoint before it
    assert "Looks good?" in person.asked[2].message


async def test_a_retried_step_is_approved_again_before_each_attempt(project, root, write) -> None:
    write(
        "flaky",
        """
        description: flaky
        settings: {approval: checkpoint}
        steps:
          - {id: flaky, type: script, run: 'echo x >> tries; test $(wc -l < tries) -ge 2', on_failure: retry,
             max_retries: 1}
    """,
    )
    person = Person(True, True)
    done = await run(project, "legacy", person, "flaky")
    assert done["status"] == "completed"
    assert len((root / "tries").read_text().split()) == 2
    assert [m.message.count("Checkpoint before step 'flaky'") for m in person.asked] == [1, 1]
