"""settings.approval: checkpoint — a person approves each step the server runs itself (script, child run), before
each attempt, and each hook command before it runs; OpenAgents' plugin-abilities schema allows the value and gives
it no behaviour, this is ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

from abilities_mcp.server.app import create_server
from abilities_mcp.state.store import Store
from support import TEST_RETRY_BASE, until

ERAS = ["legacy", "auto"]


class Person:
    """Answers each form with the next of `answers` (True approves), and remembers what it was shown."""

    def __init__(self, *answers: bool, watch: Path | None = None):
        self.answers = list(answers)
        self.asked: list[ElicitRequestParams] = []
        self.watch = watch
        self.seen: list[set[str]] = []  # the files in `watch` when each question came

    async def __call__(self, ctx, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        if self.watch is not None:
            self.seen.append({p.name for p in self.watch.iterdir()})
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


# An ability under checkpoint with a hook of each kind (each leaves a file behind when it runs) and one step.
HOOKED = """
description: hooked
settings: {approval: checkpoint}
hooks: {before: ['touch before-ran'], after: ['touch after-ran', 'touch after-two']}
steps:
  - {id: one, type: script, run: touch one}
"""


async def run_hooked(project, person: Person, root: Path, last_file: str = "after-two") -> dict[str, Any]:
    """Run `hooked` with `person` answering, and keep the server up until its last after-hook ran (a server that
    stops cancels after-hooks)."""
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server, mode="legacy", elicitation_callback=person) as client:
        done = (await client.call_tool("ability_run", {"name": "hooked"})).structured_content
        await until(lambda: (root / last_file).exists())
    return done


def _events(project, run_id: str) -> list[dict[str, Any]]:
    store = Store(project.state_db)
    try:
        return store.events(run_id)
    finally:
        store.close()


async def test_under_checkpoint_no_hook_command_runs_before_a_person_approves_it(project, root, write) -> None:
    write("hooked", HOOKED)
    person = Person(True, True, True, True, watch=root)

    done = await run_hooked(project, person, root)

    assert done["status"] == "completed", done
    shown = [p.message for p in person.asked]
    assert len(shown) == 4, shown  # the before-hook, the step, each after-hook
    first = "Checkpoint before hooks.before[0] of ability 'hooked': before the first step it runs: touch before-ran"
    assert first in shown[0]
    assert "before-ran" not in person.seen[0]  # asked before it ran
    assert "hooks.after[0]" in shown[2] and "once the run ends it runs: touch after-ran" in shown[2]
    assert "hooks.after[1]" in shown[3] and "touch after-two" in shown[3]
    assert (root / "before-ran").exists() and (root / "after-ran").exists()
    answered = [a["step"] for a in done["answers"]]
    assert answered == ["hooks.before[0]", "one", "hooks.after[0]", "hooks.after[1]"]


async def test_a_before_hook_rejected_at_the_checkpoint_fails_the_run_before_its_first_step(
    project, root, write
) -> None:
    write("hooked", HOOKED)
    person = Person(False, True, True)

    done = await run_hooked(project, person, root)

    assert done["status"] == "failed"
    assert "hooks.before[0] ('touch before-ran') rejected at the checkpoint (rejected by elicitation)" in done["error"]
    assert done["steps"][0]["status"] == "skipped"
    assert not (root / "before-ran").exists() and not (root / "one").exists()
    assert ["hooks.after[0]" in p.message for p in person.asked] == [False, True, False]  # after-hooks still asked


async def test_an_after_hook_rejected_at_the_checkpoint_is_skipped_and_recorded_and_the_run_stands(
    project, root, write
) -> None:
    write("hooked", HOOKED)
    person = Person(True, True, False, True)

    done = await run_hooked(project, person, root)

    assert done["status"] == "completed"
    assert not (root / "after-ran").exists()  # after-hooks run in order, and the second one ran
    rejected = [e["detail"] for e in _events(project, done["run_id"]) if e["event"] == "hook_after_rejected"]
    assert rejected == ["hooks.after[0] ('touch after-ran') rejected at the checkpoint (rejected by elicitation)"]


async def test_a_run_cancelled_under_checkpoint_skips_its_after_hooks_and_records_why(project, root, write) -> None:
    write(
        "waits",
        """
        description: waits
        settings: {approval: checkpoint}
        hooks: {after: ['touch after-ran']}
        steps:
          - {id: think, type: agent, prompt: Think}
    """,
    )
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server) as client:
        started = (await client.call_tool("ability_run", {"name": "waits"})).structured_content
        assert started["status"] == "awaiting_agent"
        await client.call_tool("ability_cancel", {"run_id": started["run_id"]})

        def skipped() -> list[str]:
            return [e["detail"] for e in _events(project, started["run_id"]) if e["event"] == "hook_after_skipped"]

        await until(lambda: skipped() or (root / "after-ran").exists())  # one or the other, once the run ended
        why = skipped()

    assert why == [
        "hooks.after[0] ('touch after-ran') not run: the run ended (cancelled) before a person approved it, and "
        "under settings.approval: checkpoint no hook runs unapproved"
    ]
    assert not (root / "after-ran").exists()
