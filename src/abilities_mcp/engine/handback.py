"""Agent steps: the run pauses, hands the step out, and takes it back only in step and only when it passes."""

from __future__ import annotations

import time

import anyio

from ..abilities.templates import render_text, render_value
from ..errors import NextCall, Refused, UnknownName
from ..skills.skillset import SkillPathRefused
from ..state import skill_events
from ..state.skill_events import LOAD_FAILED, SELECTED
from ..state.store import RunRecord
from .handoff import agent_instructions, check_handback, cut, prior_context, skill_handout
from .live import LiveRun, seconds
from .machine import RunEvent, RunState, StepEvent, StepState
from .questions import Question

# Characters of an agent's hand-back kept in the store (head and tail), like a script's captured output.
HANDBACK_KEEP_CHARS = 96 * 1024


class AgentSteps:
    """Mixed into Engine: needs its _step_event, _run_event, _require and _refuse_if_owned_elsewhere."""

    async def _await_skill(self, live: LiveRun, step, rnd: int, rounds: int, previous: str | None) -> str | None:
        """A skill step: the agent gets the skill's SKILL.md body, folder and the step's inputs, then hands back."""
        try:
            skill = self.catalog.skillset.get(step.skill)
        except (UnknownName, SkillPathRefused) as exc:
            skill_events.record(
                self.store, LOAD_FAILED, {"name": step.skill, "error": str(exc)}, live.session_id, live.run_id
            )
            live.attempt = first_attempt(live, rnd)
            started = dict(attempts=live.attempt, started_at=time.time(), error=None)
            event = StepEvent.START if rnd == 1 else StepEvent.RETRY
            return self._fail_unstarted(live, step.id, event, started, f"{exc} Restore skills/{step.skill}/SKILL.md")
        if rnd == 1:  # the run's own choice of skill, for `abilities-mcp events --run`
            selection = {"step_kind": "skill step", "task_label": step.id, "strategy": "hint", "errors": []}
            chosen = [{"name": skill.name, "reason": f"step {step.id!r} of {live.name!r} names it"}]
            skill_events.record(self.store, SELECTED, {**selection, "skills": chosen}, live.session_id, live.run_id)
        inputs = {key: render_value(value, live.resolve) for key, value in step.inputs.items()}
        return await self._await_agent(live, step, rnd, rounds, previous, skill_handout(skill, inputs))

    async def _await_agent(
        self, live: LiveRun, step, rnd: int, rounds: int, previous: str | None, skill: str = ""
    ) -> str | None:
        """Hand the step to the calling agent for one round of up to `max_attempts` hand-backs (round `rnd` of
        `rounds`: on_failure retry or ask gives more); returns why the round failed, or None."""
        prompt = render_text(step.prompt, live.resolve) if step.prompt else ""
        context = prior_context(step, live.outputs)
        first = first_attempt(live, rnd)
        last = first + step.max_attempts - 1
        total = last + (rounds - rnd) * step.max_attempts  # the most this step may take, as things stand

        def instructions(attempt: int, problem: str | None) -> str:
            return agent_instructions(
                live.run_id, live.name, step, prompt, context, attempt, total, problem, skill=skill
            )

        if rnd > 1:
            self._step_event(live, step.id, StepEvent.RETRY)
        live.handback_problem, live.answered = None, anyio.Event()
        live.attempt, live.last_attempt, live.reissue = first, last, instructions
        self._step_event(
            live,
            step.id,
            StepEvent.AWAIT,
            attempts=first,
            started_at=time.time(),
            error=None,
            instructions=instructions(first, previous),
            prompt=prompt,
        )
        self._run_event(live, RunEvent.AWAIT_AGENT, f"step {step.id} waits for the agent")
        try:
            with anyio.move_on_after(seconds(step.timeout)) as deadline:  # the whole round: every attempt in it
                await live.answered.wait()
        finally:
            live.reissue = None
        if deadline.cancelled_caught:
            problem = f"no hand-back within {step.timeout}; the step timed out"
            self._step_event(live, step.id, StepEvent.FAIL, error=problem, finished_at=time.time())
            self._run_event(live, RunEvent.PROCEED, f"step {step.id} timed out")
            return problem
        return live.handback_problem

    def complete(self, run_id: str, step_id: str, output: str, success: bool) -> str | None:
        """Take the agent's hand-back for the awaited step; returns why it was refused, or None when accepted.

        A hand-back that fails the step's validation with attempts left in the round is refused and the step stays
        awaiting, handed out again with the reason; the last one of the round, or one with success=false (the agent
        says it cannot do the step: asking again would not help), fails the step and on_failure applies."""
        live = self._live_for_handback(run_id, step_id)
        step = live.ability.step(step_id)
        problem = check_handback(step, output, success)
        kept = cut(output, HANDBACK_KEEP_CHARS)
        handed_back = dict(output=kept, output_bytes=len(output.encode()), error=problem)
        if problem and success and live.reissue is not None and live.attempt < live.last_attempt:
            live.attempt += 1
            instructions = live.reissue(live.attempt, problem)
            self._step_event(
                live, step_id, StepEvent.REFUSE, attempts=live.attempt, instructions=instructions, **handed_back
            )
            return problem
        event = StepEvent.FAIL if problem else StepEvent.SUCCEED
        self._step_event(live, step_id, event, finished_at=time.time(), **handed_back)
        live.outputs[step_id]["output"] = kept
        self._run_event(live, RunEvent.PROCEED, f"step {step_id} handed back")
        live.handback_problem = problem
        live.answered.set()
        return problem

    def _live_for_handback(self, run_id: str, step_id: str) -> LiveRun:
        record = self._require(run_id)
        live = self.live.get(run_id)
        if live is None:
            self._refuse_if_owned_elsewhere(record, "hand the step back")
            raise Refused(
                f"run {run_id!r} is {record.status}; there is no step to hand back",
                record.status,
                [NextCall("ability_resume", {"run_id": record.parent_run or run_id})]  # a child resumes with its parent
                if record.status in (RunState.INTERRUPTED, RunState.FAILED)
                else [NextCall("ability_status", {"run_id": run_id})],
            )
        child = live.innermost()
        if child is not live and child.status == RunState.AWAITING_AGENT:
            awaited = next(s.step_id for s in self.store.get_run(child.run_id).steps if s.status == StepState.AWAITING)
            raise Refused(
                f"the step waiting for the agent, {awaited!r}, belongs to child run {child.run_id!r} (ability "
                f"{child.name!r}), which this run's workflow step started; hand it back there",
                live.status,
                [
                    NextCall(
                        "ability_step_complete", {"run_id": child.run_id, "step_id": awaited, "output": "<your result>"}
                    )
                ],
            )
        current = next((s.step_id for s in record.steps if s.status == StepState.AWAITING), None)
        if live.status != RunState.AWAITING_AGENT or current is None:
            raise Refused(*_not_awaiting_agent(record, live.status))
        if step_id != current:
            raise Refused(
                f"step {step_id!r} is not the current step; the run waits for {current!r}",
                live.status,
                [NextCall("ability_step_complete", {"run_id": run_id, "step_id": current, "output": "<your result>"})],
            )
        return live


def first_attempt(live: LiveRun, rnd: int) -> int:
    """The number of the first hand-back of round `rnd`: attempts count on across the rounds on_failure gives."""
    return 1 if rnd == 1 else live.attempt + 1


def _not_awaiting_agent(record: RunRecord, status: str) -> tuple[str, str, list[NextCall]]:
    """Why nothing can be handed back now, and what to do instead."""
    rid = {"run_id": record.run_id}
    running = next((s for s in record.steps if s.status == StepState.RUNNING), None)
    if status == RunState.RUNNING and running is not None:
        return (
            f"the server is running script step {running.step_id!r}; nothing is waiting for the agent",
            status,
            [NextCall("ability_status", {**rid, "wait_seconds": 30})],
        )
    if status in (RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION) and record.question:
        question = Question.from_json(record.question)
        wait = NextCall("ability_status", {**rid, "wait_seconds": 30})
        return (
            "the run waits for a person's answer, not for the agent; a person answers the form their client shows "
            f"or types {question.typed(record.run_id)} in a terminal",
            status,
            [question.relay_call(record.run_id), wait] if record.enforcement == "loose" else [wait],
        )
    return (f"the run is {status}; nothing is waiting for the agent", status, [NextCall("ability_status", rid)])
