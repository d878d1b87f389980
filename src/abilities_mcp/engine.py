"""The run engine: one task per live run, each transition checked by the state machine and written to the store
before anyone is told about it.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from .catalog import Catalog
from .checks import execution_order
from .durations import parse_duration
from .errors import DefinitionError, NextCall, Refused
from .flow import refuse_unsupported, skip_reason
from .handoff import agent_instructions, check_handback, cut, prior_context
from .inputs import resolve_inputs
from .machine import (
    FINISHED_STEP_STATES,
    LIVE_RUN_STATES,
    RunEvent,
    RunState,
    StepEvent,
    StepState,
    apply_run,
    apply_step,
)
from .models import DEFAULT_MAX_RETRIES, Ability, ScriptStep
from .process import KILL_GRACE_SECONDS, MARKER_VAR, SpawnError, run_script
from .reaper import Reaper
from .recovery import recover_orphans
from .scripts import check_result, needles, prepare_script, step_timeout
from .store import RunRecord, StepRecord, Store, owner_alive, process_start
from .templates import render_text

log = logging.getLogger(__name__)
AWAITING_STATES = (RunState.AWAITING_AGENT, RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION)
# Pause before retry n is RETRY_BASE_SECONDS * 2**(n-1), at most RETRY_MAX_SECONDS: a flaky command gets room.
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
# Concurrent steps under settings.parallel: true (each is a process; more would only contend for 2 cores).
MAX_PARALLEL_STEPS = 8
# Characters of an agent's hand-back kept in the store (head and tail), like a script's captured output.
HANDBACK_KEEP_CHARS = 96 * 1024
# How long cancel waits for a run's processes to be killed before it answers.
CANCEL_WAIT_SECONDS = 10.0


@dataclass
class LiveRun:
    """A run this process is executing."""

    run_id: str
    name: str
    ability: Ability
    inputs: dict[str, Any]
    outputs: dict[str, dict[str, Any]]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)
    reason: str | None = None  # why it is being stopped: "cancel" | "shutdown"
    halt_error: str | None = None  # set by a step whose failure stops the run
    message: str = ""
    status: str = RunState.PENDING
    # The agent's hand-back for the awaited step: (step id, problem or None), and the event that wakes the run.
    handback: tuple[str, str | None] | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    # The server's environment, copied once per run (reading os.environ per step costs more than the spawn's setup).
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def notify(self, message: str) -> None:
        """Wake everyone waiting for this run to change."""
        self.message = message
        self.changed.set()
        self.changed = anyio.Event()

    def resolve(self, ref: tuple[str, ...]) -> Any:
        """The value of a {{...}} reference in this run."""
        if ref[0] == "input":
            return self.inputs.get(ref[1])
        return self.outputs.get(ref[1], {}).get(ref[2])

    def finished_steps(self) -> int:
        return sum(o.get("status") in FINISHED_STEP_STATES for o in self.outputs.values())

    def stop(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.scope.cancel()


class Engine:
    """Starts, drives, cancels and resumes runs over a Store."""

    def __init__(self, store: Store, catalog: Catalog, *, retry_base: float = RETRY_BASE_SECONDS):
        self.store, self.catalog, self.retry_base = store, catalog, retry_base
        self.live: dict[str, LiveRun] = {}
        self.owner = (os.getpid(), process_start(os.getpid()))
        self._tg: anyio.abc.TaskGroup | None = None
        self.reaper = Reaper(KILL_GRACE_SECONDS)
        self._hook_scopes: set[anyio.CancelScope] = set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Engine]:
        """Own the run tasks; on exit every live run is stopped, its processes killed, and it is `interrupted`."""
        self.recover()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    yield self
                finally:
                    for live in list(self.live.values()):
                        live.stop("shutdown")
        finally:
            self.reaper.close()

    def recover(self) -> list[str]:
        """Mark runs left live by a dead process `interrupted`, killing their leftover step processes."""
        return recover_orphans(self.store)

    # --- starting -------------------------------------------------------------------------------------------

    def start(self, name: str, inputs: dict[str, Any] | None, session_id: str) -> str:
        """Check and start a run in the background; returns its id."""
        definition = self.catalog.get(name)
        if not self.catalog.is_valid(definition):
            raise DefinitionError(self.catalog.diagnostics(definition))
        ability = definition.ability
        assert ability is not None
        refuse_unsupported(name, ability)
        self.recover()  # a run a dead server left live must not block this session
        self._refuse_second_strict_run(session_id)
        values = resolve_inputs(ability.inputs, inputs)
        run_id = f"run_{time.strftime('%Y%m%d')}_{secrets.token_hex(4)}"
        now = time.time()
        order = execution_order(ability)
        record = RunRecord(
            run_id=run_id,
            ability=name,
            session_id=session_id,
            status=RunState.PENDING,
            enforcement=ability.settings.enforcement,
            definition=ability.model_dump(mode="json", by_alias=True, exclude_none=True),
            source_path=str(definition.path),
            inputs=values,
            parent_run=None,
            error=None,
            owner_pid=self.owner[0],
            owner_start=self.owner[1],
            started_at=now,
            finished_at=None,
            updated_at=now,
            steps=[StepRecord(sid, i, ability.step(sid).type) for i, sid in enumerate(order)],
        )
        self.store.create_run(record)
        self._launch(LiveRun(run_id, name, ability, values, {}), resumed=False)
        return run_id

    def _refuse_second_strict_run(self, session_id: str) -> None:
        for run in self.store.runs(session_id=session_id, live_only=True, limit=5):
            if run.enforcement == "strict":
                raise Refused(
                    f"this session already has a live strict run {run.run_id!r} of {run.ability!r}; one at a time "
                    "(use a workflow step to run one ability inside another)",
                    run.status,
                    [
                        NextCall("ability_status", {"run_id": run.run_id, "wait_seconds": 30}),
                        NextCall("ability_cancel", {"run_id": run.run_id}),
                    ],
                )

    def _launch(self, live: LiveRun, resumed: bool) -> None:
        if self._tg is None:
            raise RuntimeError("Engine.running() must be entered before runs start")
        self.live[live.run_id] = live
        self._tg.start_soon(self._drive, live, resumed)

    # --- driving --------------------------------------------------------------------------------------------

    async def _drive(self, live: LiveRun, resumed: bool) -> None:
        error: str | None = None
        try:
            with live.scope:
                self._run_event(live, RunEvent.RESUME if resumed else RunEvent.START, "run started")
                timeout = live.ability.settings.timeout
                with anyio.move_on_after(_seconds(timeout)) as limit:
                    error = await self._before_hooks(live, resumed)
                    if error is None:
                        error = await self._execute(live)
                if limit.cancelled_caught:
                    error = live.halt_error = f"the run exceeded settings.timeout ({timeout}); raise it or split it"
        except anyio.get_cancelled_exc_class():
            live.reason = live.reason or "shutdown"  # cancelled from outside: the server is stopping
            raise
        except Exception as exc:  # a bug: record it on the run and in the log, keep the server up
            log.exception("run %s crashed", live.run_id)
            error = f"internal error: {exc!r} (see the server log)"
        finally:
            with anyio.CancelScope(shield=True):
                ended = await self._finish_safely(live, error)
        if ended:
            await self._after_hooks(live)

    async def _before_hooks(self, live: LiveRun, resumed: bool) -> str | None:
        """Before-hooks gate the run; a resumed run passes the gate again unless it passed it already."""
        if resumed and any(e["event"] == "hooks_before_passed" for e in self.store.events(live.run_id)):
            return None
        error = await self._hooks(live, "before", fatal=True)
        if error is None and live.ability.hooks.before:
            self.store.update_run(live.run_id, "hooks_before_passed")
        return error

    async def _after_hooks(self, live: LiveRun) -> None:
        """After-hooks run once the run's end is recorded; stopping the server cancels them (and kills them)."""
        with anyio.CancelScope() as scope:
            self._hook_scopes.add(scope)
            try:
                await self._hooks(live, "after", fatal=False)
            except Exception:
                log.exception("after-hooks of run %s crashed", live.run_id)
            finally:
                self._hook_scopes.discard(scope)

    async def _finish_safely(self, live: LiveRun, error: str | None) -> bool:
        """Record the run's end; returns whether it ended (not interrupted). Never lets a failure escape."""
        try:
            return self._finish(live, error)
        except Exception:
            log.exception("could not record the end of run %s", live.run_id)
            return False
        finally:
            self.live.pop(live.run_id, None)
            live.done.set()
            live.notify(f"run {live.run_id} {live.status}")

    async def _execute(self, live: LiveRun) -> str | None:
        order = [live.ability.step(sid) for sid in execution_order(live.ability)]
        if live.ability.settings.parallel:
            await self._execute_parallel(live, order)
        else:
            for step in order:
                if live.halt_error:
                    break
                if live.outputs.get(step.id, {}).get("status") != StepState.COMPLETED:
                    await self._run_step(live, step)
        return live.halt_error

    async def _execute_parallel(self, live: LiveRun, order: list) -> None:
        finished = {step.id: anyio.Event() for step in order}
        limiter = anyio.CapacityLimiter(MAX_PARALLEL_STEPS)

        async def one(step) -> None:
            try:
                for need in step.needs:
                    await finished[need].wait()
                if live.outputs.get(step.id, {}).get("status") != StepState.COMPLETED:
                    async with limiter:
                        await self._run_step(live, step)
                if live.halt_error:
                    tg.cancel_scope.cancel()
            finally:
                finished[step.id].set()

        async with anyio.create_task_group() as tg:
            for step in order:
                tg.start_soon(one, step)

    async def _run_step(self, live: LiveRun, step: ScriptStep) -> None:
        skip = skip_reason(live.ability, step, live.inputs, live.outputs)
        if skip is not None:
            self._step_event(live, step.id, StepEvent.SKIP, error=skip)
            return
        policy = step.on_failure or live.ability.settings.on_failure
        retries = (
            (step.max_retries if step.max_retries is not None else DEFAULT_MAX_RETRIES) if policy == "retry" else 0
        )
        problem = None
        for attempt in range(1, retries + 2):
            if step.type == "agent":
                problem = await self._await_agent(live, step, attempt, retries + 1, problem)
            else:
                problem = await self._attempt(live, step, attempt)
            if problem is None:
                return
            if attempt <= retries and step.type == "script":
                await anyio.sleep(min(self.retry_base * 2 ** (attempt - 1), RETRY_MAX_SECONDS))
        if policy != "continue":
            live.halt_error = f"step {step.id!r} failed: {problem}"

    async def _await_agent(self, live: LiveRun, step, attempt: int, attempts: int, previous: str | None) -> str | None:
        """Hand the step to the calling agent and wait for ability_step_complete; returns why it failed, or None."""
        prompt = render_text(step.prompt, live.resolve)
        instructions = agent_instructions(
            live.run_id, live.name, step, prompt, prior_context(step, live.outputs), attempt, attempts, previous
        )
        if attempt > 1:
            self._step_event(live, step.id, StepEvent.RETRY)
        live.handback, live.answered = None, anyio.Event()
        self._step_event(
            live,
            step.id,
            StepEvent.AWAIT,
            attempts=attempt,
            started_at=time.time(),
            error=None,
            instructions=instructions,
            prompt=prompt,
        )
        self._run_event(live, RunEvent.AWAIT_AGENT, f"step {step.id} waits for the agent")
        with anyio.move_on_after(_seconds(step.timeout)) as deadline:
            await live.answered.wait()
        if deadline.cancelled_caught:
            problem = f"no hand-back within {step.timeout}; the step timed out"
            self._step_event(live, step.id, StepEvent.FAIL, error=problem, finished_at=time.time())
            self._run_event(live, RunEvent.PROCEED, f"step {step.id} timed out")
            return problem
        assert live.handback is not None
        return live.handback[1]

    def complete(self, run_id: str, step_id: str, output: str, success: bool) -> str | None:
        """Take the agent's hand-back for the awaited step; returns why it was refused, or None when accepted."""
        live = self._live_for_handback(run_id, step_id)
        step = live.ability.step(step_id)
        problem = check_handback(step, output, success)
        kept = cut(output, HANDBACK_KEEP_CHARS)
        event = StepEvent.FAIL if problem else StepEvent.SUCCEED
        self._step_event(
            live, step_id, event, output=kept, output_bytes=len(output.encode()), error=problem, finished_at=time.time()
        )
        live.outputs[step_id]["output"] = kept
        self._run_event(live, RunEvent.PROCEED, f"step {step_id} handed back")
        live.handback = (step_id, problem)
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
                [NextCall("ability_resume", {"run_id": run_id})]
                if record.status in (RunState.INTERRUPTED, RunState.FAILED)
                else [NextCall("ability_history", {})],
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

    async def _attempt(self, live: LiveRun, step: ScriptStep, attempt: int) -> str | None:
        """One attempt of a script step; returns the reason it failed, or None."""
        started = dict(attempts=attempt, started_at=time.time(), error=None)
        event = StepEvent.START if attempt == 1 else StepEvent.RETRY
        try:
            command, cwd, env = prepare_script(step, live, self.catalog.project.root)
        except ValueError as exc:
            self._step_event(live, step.id, event, **started)
            self._step_event(live, step.id, StepEvent.FAIL, error=str(exc), finished_at=time.time())
            return str(exc)
        env[MARKER_VAR] = f"{live.run_id}:{step.id}"

        def spawned(pgid: int) -> None:
            # The start and its process group in one write: recovery can always find what to kill.
            self.reaper.watch(pgid)
            self._step_event(live, step.id, event, pgid=pgid, **started)

        try:
            result = await run_script(
                command,
                cwd=cwd,
                env=env,
                timeout=step_timeout(step),
                on_start=spawned,
                on_end=self.reaper.release,
                **needles(step),
            )
        except SpawnError as exc:
            self._step_event(live, step.id, event, **started)
            self._step_event(live, step.id, StepEvent.FAIL, error=str(exc), finished_at=time.time())
            return str(exc)
        problem = check_result(step, result, cwd)
        output = result.stdout.rstrip("\n")
        fields = dict(
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            output=output,
            stderr=result.stderr,
            output_bytes=result.stdout_bytes,
            stderr_bytes=result.stderr_bytes,
            finished_at=time.time(),
            error=problem,
        )
        live.outputs[step.id].update(output=output, exit_code=result.exit_code)
        self._step_event(live, step.id, StepEvent.FAIL if problem else StepEvent.SUCCEED, **fields)
        return problem

    async def _hooks(self, live: LiveRun, which: str, fatal: bool) -> str | None:
        for i, command in enumerate(getattr(live.ability.hooks, which)):
            hook = ScriptStep(id=f"hook-{which}-{i}", type="script", run=command)
            try:
                command_text, cwd, env = prepare_script(hook, live, self.catalog.project.root)
                result = await run_script(
                    command_text,
                    cwd=cwd,
                    env=env,
                    timeout=step_timeout(hook),
                    on_start=self.reaper.watch,
                    on_end=self.reaper.release,
                )
                problem = check_result(hook, result, cwd)
            except (SpawnError, ValueError) as exc:
                problem = str(exc)
            if problem:
                self.store.update_run(live.run_id, f"hook_{which}_failed", f"hooks.{which}[{i}]: {problem}")
                if fatal:
                    return f"hooks.{which}[{i}] ({command!r}) failed: {problem}"
        return None

    def _finish(self, live: LiveRun, error: str | None) -> bool:
        """Close every unfinished step and record the run's final state; returns False when interrupted."""
        record = self.store.get_run(live.run_id)
        assert record is not None
        shutdown = live.reason == "shutdown"
        for step in record.steps:
            if step.status in (StepState.RUNNING, StepState.AWAITING):
                why = _stopped_because(live, shutdown)
                self._step_event(live, step.step_id, StepEvent.CANCEL, error=why, finished_at=time.time())
            elif step.status == StepState.PENDING and not shutdown:
                why = (
                    "not run: the run was cancelled" if live.reason == "cancel" else f"not run: {error or 'run ended'}"
                )
                self._step_event(live, step.step_id, StepEvent.SKIP, error=why)
        if shutdown:
            event, error = (
                RunEvent.INTERRUPT,
                f"the server stopped; continue with ability_resume(run_id={live.run_id!r})",
            )
        elif live.reason == "cancel":
            event, error = RunEvent.CANCEL, "cancelled"
        else:
            event = RunEvent.FAIL if error else RunEvent.SUCCEED
        finished = None if shutdown else time.time()
        self._run_event(live, event, error or "run completed", error=error, finished_at=finished)
        return not shutdown

    # --- recording ------------------------------------------------------------------------------------------

    def _run_event(self, live: LiveRun, event: RunEvent, message: str, **fields: Any) -> None:
        status = apply_run(live.status, event)
        self.store.update_run(live.run_id, event, message, status=status, **fields)
        live.status = status
        live.notify(message)

    def _step_event(self, live: LiveRun, step_id: str, event: StepEvent, **fields: Any) -> None:
        current = live.outputs.get(step_id, {}).get("status", StepState.PENDING)
        status = apply_step(current, event)
        self.store.update_step(live.run_id, step_id, event, fields.get("error"), status=status, **fields)
        live.outputs.setdefault(step_id, {})["status"] = status
        verb = {StepState.RUNNING: "started"}.get(status, status.value)
        live.notify(f"step {step_id} {verb}")

    def _store_step(self, run_id: str, step: StepRecord, event: StepEvent, **fields: Any) -> None:
        self.store.update_step(
            run_id, step.step_id, event, fields.get("error"), status=apply_step(step.status, event), **fields
        )

    # --- waiting, cancelling, resuming ----------------------------------------------------------------------

    async def wait(
        self,
        run_id: str,
        seconds: float,
        on_change: Callable[[LiveRun], Awaitable[None]] | None = None,
        *,
        first_change: bool = False,
    ) -> None:
        """Wait until the run ends or waits for someone (or, with first_change, changes at all), at most `seconds`."""
        live = self.live.get(run_id)
        if live is None or seconds <= 0:
            return
        with anyio.move_on_after(seconds):
            while not live.done.is_set() and (first_change or live.status not in AWAITING_STATES):
                await live.changed.wait()
                if on_change is not None:
                    await on_change(live)
                if first_change:
                    return

    async def cancel(self, run_id: str) -> None:
        """Stop a run: its processes are killed before this returns."""
        record = self._require(run_id)
        live = self.live.get(run_id)
        if live is not None:
            live.stop("cancel")
            with anyio.move_on_after(CANCEL_WAIT_SECONDS):
                await live.done.wait()
            return
        if record.status == RunState.INTERRUPTED:
            self.store.update_run(
                run_id,
                RunEvent.CANCEL,
                "cancelled while interrupted",
                status=apply_run(record.status, RunEvent.CANCEL),
                finished_at=time.time(),
            )
            return
        self._refuse_if_owned_elsewhere(record, "cancel")
        raise Refused(f"run {run_id!r} already ended", record.status, [NextCall("ability_status", {"run_id": run_id})])

    def resume(self, run_id: str, session_id: str) -> None:
        """Continue an interrupted or failed run from the step that did not finish, in this session."""
        record = self._require(run_id)
        if run_id in self.live:
            raise Refused(
                f"run {run_id!r} is live in this server",
                record.status,
                [NextCall("ability_status", {"run_id": run_id, "wait_seconds": 30})],
            )
        self._refuse_if_owned_elsewhere(record, "resume")
        if record.status not in (RunState.INTERRUPTED, RunState.FAILED):
            raise Refused(
                f"only interrupted or failed runs resume; {run_id!r} is {record.status}",
                record.status,
                [NextCall("ability_run", {"name": record.ability})],
            )
        apply_run(record.status, RunEvent.RESUME)  # refuses before anything is written
        ability = Ability.model_validate(record.definition)
        self._refuse_second_strict_run(session_id)
        outputs: dict[str, dict[str, Any]] = {}
        for step in record.steps:
            if step.status == StepState.COMPLETED:
                outputs[step.step_id] = {
                    "status": StepState.COMPLETED,
                    "output": step.output,
                    "exit_code": step.exit_code,
                }
            elif step.status != StepState.PENDING:
                self._store_step(run_id, step, StepEvent.RESET, error=None)
        self.store.update_run(
            run_id,
            "adopted",
            f"resumed by session {session_id}",
            session_id=session_id,
            owner_pid=self.owner[0],
            owner_start=self.owner[1],
            error=None,
            finished_at=None,
        )
        self._launch(
            LiveRun(run_id, record.ability, ability, record.inputs, outputs, status=record.status), resumed=True
        )

    def _refuse_if_owned_elsewhere(self, record: RunRecord, verb: str) -> None:
        elsewhere = record.owner_pid != self.owner[0] and owner_alive(record.owner_pid, record.owner_start)
        if record.status in LIVE_RUN_STATES and elsewhere:
            raise Refused(
                f"run {record.run_id!r} is live in another server process (pid {record.owner_pid}); {verb} it there",
                record.status,
                [NextCall("ability_status", {"run_id": record.run_id})],
            )

    def _require(self, run_id: str) -> RunRecord:
        self.recover()
        record = self.store.get_run(run_id)
        if record is None:
            raise Refused(f"there is no run {run_id!r}", "unknown", [NextCall("ability_history", {"limit": 20})])
        return record


def _stopped_because(live: LiveRun, shutdown: bool) -> str:
    if shutdown:
        return "interrupted: the server stopped"
    if live.reason == "cancel":
        return "cancelled"
    return f"killed: {live.halt_error or 'the run ended'}"


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
    if status in (RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION):
        return (
            "the run waits for a person's answer, not for the agent; a person answers with "
            f"`abilities-mcp approve {record.run_id}` in a terminal",
            status,
            [NextCall("ability_status", {**rid, "wait_seconds": 30})],
        )
    return (f"the run is {status}; nothing is waiting for the agent", status, [NextCall("ability_status", rid)])


def _seconds(duration: str | float | None) -> float:
    return parse_duration(duration) if duration is not None else float("inf")
