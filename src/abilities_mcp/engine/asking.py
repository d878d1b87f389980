"""Steps a person answers: approvals, the plan approval, checkpoints (before each step and hook command the server
runs), and the retry/continue/stop decision after a failure.

The run waits in awaiting_approval / awaiting_decision with the question stored on it. Whoever answers first —
an elicitation form, `abilities-mcp approve` in another process, or the agent under loose enforcement — wins a
compare-and-set in the store; the waiting run notices through an in-process event or, for other processes, by
reading the store every ANSWER_POLL_SECONDS.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict

import anyio

from .. import tracing
from ..abilities.checks import execution_order
from ..abilities.templates import render_text
from ..errors import NextCall, Refused
from ..state import audit
from ..state.identities import shown_key
from ..state.store import RunRecord, Store
from .live import LiveRun, seconds
from .machine import RunEvent, RunState, StepEvent
from .questions import PLAN_STEP, Answer, Question

logger = logging.getLogger(__name__)

# How often a waiting run reads the store for an answer written by another process (the terminal command).
ANSWER_POLL_SECONDS = 0.2
# Step types a checkpoint (settings.approval: checkpoint) asks about: the ones the server runs itself. Agent and
# skill steps run in the client, under its own permission prompts; approval steps ask a person already.
CHECKPOINTED = ("script", "workflow")
_AWAIT_EVENT = {
    "decision": RunEvent.AWAIT_DECISION,
    "approval": RunEvent.AWAIT_APPROVAL,
    "plan": RunEvent.AWAIT_APPROVAL,
}


class PersonSteps:
    """Mixed into Engine: needs its store, live runs, _run_event, _step_event, _require, _refuse_if_owned_elsewhere."""

    # --- asking (the run's side) ----------------------------------------------------------------------------

    async def _approval(self, live: LiveRun, step, attempt: int) -> str | None:
        """One attempt of an approval step; returns why it failed (rejected, timed out), or None when approved."""
        prompt = render_text(step.prompt, live.resolve)
        if attempt > 1:
            self._step_event(live, step.id, StepEvent.RETRY)
        limit = seconds(step.timeout)
        deadline = time.time() + limit if step.timeout else None
        self._step_event(
            live, step.id, StepEvent.AWAIT, attempts=attempt, started_at=time.time(), error=None, prompt=prompt
        )
        question = Question.approval(step.id, prompt, step.options, deadline, four_eyes=step.approval == "four-eyes")
        answer = await self._ask(live, question, step.timeout)
        problem = None if answer.approved else answer.summary()
        live.outputs[step.id]["output"] = answer.value
        self._step_event(
            live,
            step.id,
            StepEvent.SUCCEED if answer.approved else StepEvent.FAIL,
            output=answer.value + (f"\n{answer.note}" if answer.note else ""),
            error=problem,
            finished_at=time.time(),
        )
        return problem

    async def _approve_plan(self, live: LiveRun, resumed: bool) -> str | None:
        """settings.approval: plan — the person sees every step before the first one runs."""
        if live.ability.settings.approval != "plan":
            return None
        if resumed and any(e["event"] == "plan_approved" for e in self.store.events(live.run_id)):
            return None
        answer = await self._ask(live, Question.approval(PLAN_STEP, plan_text(live), None, None), None)
        if not answer.approved:
            return f"the plan was {answer.summary()}"
        self.store.update_run(live.run_id, "plan_approved", answer.summary())
        return None

    async def _checkpoint(self, live: LiveRun, step, attempt: int) -> str | None:
        """settings.approval: checkpoint — before each attempt of a step the server itself runs (a script, a child
        run), a person approves that step; returns why it failed when they reject it (the attempt is recorded)."""
        if live.ability.settings.approval != "checkpoint" or step.type not in CHECKPOINTED:
            return None
        answer = await self._ask(live, Question.approval(step.id, checkpoint_text(live, step), None, None), None)
        if answer.approved:
            return None
        problem = f"rejected at the checkpoint ({answer.summary()})"
        event = StepEvent.START if attempt == 1 else StepEvent.RETRY
        self._step_event(live, step.id, event, attempts=attempt, started_at=time.time(), error=None)
        self._step_event(live, step.id, StepEvent.FAIL, error=problem, finished_at=time.time())
        return problem

    async def _checkpoint_hook(self, live: LiveRun, which: str, index: int, command: str) -> str | None:
        """settings.approval: checkpoint — a person approves each hook command too, before it runs (an after-hook:
        before the run's end is recorded, to run once it is); returns why it may not run, recorded on the run."""
        if live.ability.settings.approval != "checkpoint":
            return None
        label = hook_label(which, index)
        text = hook_checkpoint_text(live, which, label, command)
        answer = await self._ask(live, Question.approval(label, text, None, None), None)
        if answer.approved:
            return None
        problem = f"{label} ({command!r}) rejected at the checkpoint ({answer.summary()})"
        self.store.update_run(live.run_id, f"hook_{which}_rejected", problem)
        return problem

    async def _approve_after_hooks(self, live: LiveRun) -> list[int]:
        """The after-hooks that may run once the run ends: all of them, or under checkpoint those a person approved
        now (a rejected one is recorded; after-hooks never fail a run)."""
        return [
            i
            for i, command in enumerate(live.ability.hooks.after)
            if await self._checkpoint_hook(live, "after", i, command) is None
        ]

    def _unasked_after_hooks(self, live: LiveRun) -> list[int]:
        """The after-hooks of a run that ended before they were asked about (cancelled, out of time, a crash): all
        of them, but none under checkpoint, where asking a person now would hold a finished run open; each one
        skipped is recorded with the reason."""
        hooks = live.ability.hooks.after
        if live.ability.settings.approval != "checkpoint":
            return list(range(len(hooks)))
        for i, command in enumerate(hooks):
            why = (
                f"{hook_label('after', i)} ({command!r}) not run: the run ended ({live.status}) before a person "
                "approved it, and under settings.approval: checkpoint no hook runs unapproved"
            )
            self.store.update_run(live.run_id, "hook_after_skipped", why)
        return []

    async def _decide(self, live: LiveRun, step_id: str, problem: str) -> str:
        """on_failure: ask — retry, continue or stop, as a person says."""
        answer = await self._ask(live, Question.decision(step_id, problem), None)
        return answer.value

    async def _ask(self, live: LiveRun, question: Question, limit: str | float | None) -> Answer:
        """Pause the run until a person answers; the answer is stored before the run acts on it."""
        async with live.asking:  # parallel steps ask one at a time
            question, carried = _carried(live, question)
            event = _AWAIT_EVENT[question.kind]
            message = f"step {question.step_id} waits for a person ({question.kind})"
            self._pose(live, question, event, message, keep_answer=carried)
            try:
                answer = await self._wait_for_answer(live, question, limit)
            except BaseException:
                live.question = None
                raise
            self._pose(live, None, RunEvent.PROCEED, f"step {question.step_id} {answer.summary()}")
            tracing.annotate({"abilities.verdict": answer.value, "abilities.answered_by": answer.by})  # the step's span
            return answer

    def _pose(
        self, live: LiveRun, question: Question | None, event: RunEvent, message: str, keep_answer: bool = False
    ) -> None:
        """Store the question (or clear it) in the same write as the run's change of state; `keep_answer`: a
        question carried over from a replica that died, whose answer may have come meanwhile."""
        live.question, live.question_answered = question, anyio.Event()
        fields = question_fields(question)
        if keep_answer:
            del fields["answer"]
        self._run_event(live, event, message, **fields)

    async def _wait_for_answer(self, live: LiveRun, question: Question, limit: str | float | None) -> Answer:
        with anyio.move_on_after(seconds(limit)):
            while True:
                stored = self.store.answer_to(live.run_id, question.id)
                if stored is not None and (found := Answer.stored(stored)) is not None:
                    return found
                if stored is not None:  # not written by this program: dropped, and the person can still answer
                    logger.warning("run %s: a malformed answer in the state file was ignored", live.run_id)
                    why = "a malformed answer in the state file (not written by abilities-mcp)"
                    self.store.discard_answer(live.run_id, question.id, question.step_id, why)
                with anyio.move_on_after(ANSWER_POLL_SECONDS):
                    await live.question_answered.wait()
        answer = question.timed_out(str(limit))
        if self.store.answer(live.run_id, question.id, asdict(answer), question.step_id):
            return answer
        late = Answer.stored(self.store.answer_to(live.run_id, question.id))  # answered in the very last moment
        return late if late is not None else answer

    # --- answering (the person's side, any process) ---------------------------------------------------------

    def pending_question(self, run_id: str, step_id: str | None, by: str) -> tuple[RunRecord, Question]:
        """The question a run waits on, if `by` may answer it; otherwise Refused saying who may and how."""
        record = self._require(run_id)
        if record.question is None or record.status not in (RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION):
            raise Refused(*_nothing_to_answer(record))
        question = Question.from_json(record.question)
        if by == "agent" and record.enforcement != "loose":
            raise Refused(*_person_only(record, question))
        if step_id is not None and step_id != question.step_id:
            raise Refused(
                f"step {step_id!r} is not waiting for an answer; the run asks about {question.step_id!r}",
                record.status,
                [question.relay_call(run_id) if record.enforcement == "loose" else _watch(run_id)[0]],
            )
        return record, question

    def relay(
        self, run_id: str, step_id: str, *, approved: bool = False, decision: str | None = None, note: str | None = None
    ) -> None:
        """The agent relays a person's answer: an approval, or (with `decision`) retry/continue/stop. Loose only."""
        record, question = self.pending_question(run_id, step_id, "agent")
        if (decision is not None) != (question.kind == "decision"):
            asked, given = (
                ("a decision", "an approval") if question.kind == "decision" else ("an approval", "a decision")
            )
            raise Refused(
                f"step {step_id!r} waits for {asked}, not {given}", record.status, [question.relay_call(run_id)]
            )
        answer = (
            question.from_choice(decision, "agent", note)
            if decision is not None
            else question.from_yes_no(approved, "agent", note)
        )
        self.record_answer(run_id, question, answer)

    def record_answer(self, run_id: str, question: Question, answer: Answer) -> None:
        """Store the answer (first one wins) and wake the run if this process drives it."""
        if answer.by == "terminal" and not answer.origin:
            # Only the person check (cli/terminal.py from_a_person) stamps a terminal answer's origin: one without
            # it skipped the check, and is a bug of the code that took it.
            raise ValueError(f"a terminal answer to {question.step_id!r} skipped the person check (no origin)")
        if self.team and answer.by in ("elicitation", "agent"):
            raise Refused(
                f"on a team server an approver answers {question.step_id!r} on the run page, signed in; a client's "
                f"form or its agent carries only the caller's token, and this {answer.by} answer does not count",
                self._require(run_id).status,
                _watch(run_id),
            )
        if question.four_eyes and answer.approved:
            self._refuse_same_eyes(self._require(run_id), question, answer)
        if not self.store.answer(run_id, question.id, asdict(answer), question.step_id):
            record = self._require(run_id)
            raise Refused(
                f"the question about {question.step_id!r} was answered already", record.status, _watch(run_id)
            )
        _audit_answer(self.store, self._require(run_id), question, answer)
        live = self.live.get(run_id)
        if live is not None:
            live.question_answered.set()

    def _refuse_same_eyes(self, record: RunRecord, question: Question, answer: Answer) -> None:
        """A four-eyes yes must name a signed-in person, and not the one who started the run (nor their agent, which
        holds their token). A no is anyone's to give: it only stops the run."""
        if answer.identity is None:
            raise Refused(
                f"step {question.step_id!r} needs four eyes: a yes from a person signed in on the team server's run "
                f"page, other than whoever started the run. This {answer.by} answer names nobody; the "
                "approver signs in on the page (`abilities-mcp serve --http` with --issuer) and approves there",
                record.status,
                _watch(record.run_id),
            )
        if answer.identity == record.started_by:
            raise Refused(
                f"step {question.step_id!r} needs four eyes: {shown_key(answer.identity)} started this run, so "
                "their yes does not count; another approver must approve it on the run page",
                record.status,
                _watch(record.run_id),
            )

    def question(self, run_id: str) -> Question | None:
        """The question a run this process drives is waiting on."""
        live = self.live.get(run_id)
        return live.question if live is not None else None


def _audit_answer(store: Store, record: RunRecord, question: Question, answer: Answer) -> None:
    """An answer to an approval or a decision in the audit trail (state/audit.py): who, through which channel."""
    who = answer.identity or answer.origin
    detail = {"run_id": record.run_id, "ability": record.ability, "question": question.id}
    fields = {"session_id": record.session_id, "tool": question.step_id, "reason": answer.note, "detail": detail}
    audit.append(store, "answer", verdict=answer.value, actor=who, channel=answer.by, **fields)


def _carried(live: LiveRun, question: Question) -> tuple[Question, bool]:
    """The question to ask: the one a run taken over from a dead replica waited on, when it is this one again
    (its id kept, so an answer given to it anywhere counts), else the new one."""
    carried, live.carried = live.carried, None
    if carried is not None and (carried.kind, carried.step_id) == (question.kind, question.step_id):
        return carried, True
    return question, False


def question_fields(question: Question | None) -> dict:
    """The run columns that hold a pending question."""
    return {
        "question": json.dumps(question.to_json()) if question else None,
        "question_id": question.id if question else None,
        "answer": None,
    }


def plan_text(live: LiveRun) -> str:
    """The steps in the order they will run, for a person to approve before the first one."""
    lines = [f"Run ability {live.name!r} with inputs {live.inputs or '{}'}? The steps, in order:"]
    for i, sid in enumerate(execution_order(live.ability), 1):
        step = live.ability.step(sid)
        when = f" (only when {step.when})" if step.when else ""
        lines.append(f"{i}. {sid} [{step.type}] {step.description or ''}{when}".rstrip())
    return "\n".join(lines)


def checkpoint_text(live: LiveRun, step) -> str:
    """What a person approves at a checkpoint: the step and what it will run."""
    what = f"runs: {step.run}" if step.type == "script" else f"runs ability {step.workflow!r} as a child run"
    about = f" ({step.description})" if step.description else ""
    return (
        f"Checkpoint before step {step.id!r}{about} of ability {live.name!r}: it {what}\n"
        "Approve to run it now; reject to fail this step (its on_failure applies)."
    )


def hook_label(which: str, index: int) -> str:
    """How a hook command is named in questions, answers and errors: `hooks.before[0]`."""
    return f"hooks.{which}[{index}]"


def hook_checkpoint_text(live: LiveRun, which: str, label: str, command: str) -> str:
    """What a person approves at a hook's checkpoint: the command, shown as a step's is."""
    if which == "before":
        when, outcome = "before the first step", "reject to fail the run before its first step"
    else:
        when, outcome = "once the run ends", "reject to skip it (an after-hook never fails the run)"
    what = f"Checkpoint before {label} of ability {live.name!r}: {when} it runs: {command}"
    return f"{what}\nApprove to run it; {outcome}."


def _watch(run_id: str) -> list[NextCall]:
    return [NextCall("ability_status", {"run_id": run_id, "wait_seconds": 30})]


def _person_only(record: RunRecord, question: Question) -> tuple[str, str, list[NextCall]]:
    return (
        f"under enforcement: {record.enforcement}, only a person answers {question.kind} questions. Ask the user "
        f"to answer the form their client shows or to type {question.typed(record.run_id)} in a "
        "terminal, then wait for the run",
        record.status,
        _watch(record.run_id),
    )


def _nothing_to_answer(record: RunRecord) -> tuple[str, str, list[NextCall]]:
    rid = {"run_id": record.run_id}
    if record.status == RunState.AWAITING_AGENT:
        step = next((s.step_id for s in record.steps if s.status == "awaiting"), "?")
        return (
            f"the run waits for the agent's hand-back of {step!r}, not for an approval",
            record.status,
            [NextCall("ability_step_complete", {**rid, "step_id": step, "output": "<your result>"})],
        )
    return (
        f"run {record.run_id!r} is {record.status}; no question is waiting",
        record.status,
        [NextCall("ability_status", rid)],
    )
