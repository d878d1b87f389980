"""The engine proper: start a run, drive its steps in order, record every transition, finish it."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from .. import tracing
from ..abilities.catalog import Catalog
from ..abilities.checks import execution_order
from ..abilities.inputs import resolve_inputs
from ..abilities.models import DEFAULT_MAX_RETRIES, Ability, ScriptStep, Step
from ..errors import DefinitionError, NextCall, Refused
from ..state.owners import Owner
from ..state.spool import Spool, remove_spools, spool_path
from ..state.store import RunRecord, StepRecord, Store
from .asking import PersonSteps, hook_label, question_fields
from .control import RunControl
from .flow import skip_reason
from .handback import AgentSteps
from .live import LiveRun, seconds
from .machine import (
    RunEvent,
    RunState,
    StepEvent,
    StepState,
    apply_run,
    apply_step,
)
from .nesting import ChildRuns
from .process import KILL_GRACE_SECONDS, MARKER_VAR, SHOW_AFTER_SECONDS, SpawnError, run_script
from .reaper import Reaper
from .recovery import recover_orphans
from .replicas import HANDED_OVER, Replicas
from .scripts import check_result, needles, prepare_script, step_timeout

log = logging.getLogger(__name__)
# Pause before retry n is RETRY_BASE_SECONDS * 2**(n-1), at most RETRY_MAX_SECONDS: a flaky command gets room.
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
# Concurrent steps under settings.parallel: true (each is a process; more would only contend for 2 cores).
MAX_PARALLEL_STEPS = 8


class Engine(AgentSteps, PersonSteps, ChildRuns, RunControl, Replicas):
    """Starts, drives, cancels and resumes runs over a Store."""

    def __init__(self, store: Store, catalog: Catalog, *, retry_base: float = RETRY_BASE_SECONDS, team: bool = False):
        """`team`: a team server's engine, where a person answers on the run page, signed in, or at the server's
        own terminal; never through a client's form or the agent, which hold nothing but the caller's token."""
        self.store, self.catalog, self.retry_base, self.team = store, catalog, retry_base, team
        self.live: dict[str, LiveRun] = {}
        self._owner: Owner | None = None  # taken by the first run (on PostgreSQL, a replica's lock: Database.owner)
        self._carry: set[str] = set()  # runs being taken over from a dead replica: their questions are kept
        self._watching: anyio.CancelScope | None = None  # the replica's watch (engine/replicas.py)
        self._tg: anyio.abc.TaskGroup | None = None
        self.reaper = Reaper(KILL_GRACE_SECONDS)
        self._hook_scopes: set[anyio.CancelScope] = set()
        self._stopping = False

    @property
    def owner(self) -> Owner:
        """This process as the owner of the runs it drives (state/owners.py), taken on first use."""
        if self._owner is None:
            self._owner = self.store.owner()
        return self._owner

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Engine]:
        """Own the run tasks; on exit every live run is stopped, its processes killed, and it is `interrupted` (on a
        state replicas share, handed over: another replica takes it over, engine/replicas.py)."""
        self.owner  # noqa: B018 -- on PostgreSQL the replica's lock, before anything is driven under it
        self.recover()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                if self.store.replicated and self.team:  # team servers take over; a stdio server or a terminal
                    tg.start_soon(self._watch)  # on the same database (one person's) never drives a team's runs
                try:
                    yield self
                finally:
                    self._stopping = True
                    self._stop_all()
                    for scope in self._hook_scopes:
                        scope.cancel()
        finally:
            self.reaper.close()

    def recover(self) -> list[str]:
        """Mark runs left live by a dead process `interrupted`, killing their leftover step processes (on a state
        replicas share, the watch takes them over instead: engine/replicas.py)."""
        return recover_orphans(self.store)

    # --- starting -------------------------------------------------------------------------------------------

    def start(self, name: str, inputs: dict[str, Any] | None, session_id: str, started_by: str | None = None) -> str:
        """Check and start a run in the background; returns its id. `started_by`: the identity of the caller on a
        team server (state/identities.py), which a four-eyes approval of the run refuses."""
        definition = self.catalog.get(name)
        if not self.catalog.is_valid(definition):
            raise DefinitionError(self.catalog.diagnostics(definition))
        ability = definition.ability
        assert ability is not None
        self.recover()  # a run a dead server left live must not block this session
        self._refuse_second_strict_run(session_id)
        values = resolve_inputs(ability.inputs, inputs)
        live = self._new_run(
            name, ability, str(definition.path), values, session_id, note=definition.trust_note, started_by=started_by
        )
        self._launch(live, resumed=False)
        return live.run_id

    def _new_run(
        self,
        name: str,
        ability: Ability,
        source_path: str,
        values: dict[str, Any],
        session_id: str,
        parent: LiveRun | None = None,
        note: str | None = None,
        started_by: str | None = None,
    ) -> LiveRun:
        """Write a new pending run and register it as live (a child run is driven by its parent's task); `note`
        says why the definition it runs is not the file as written (abilities/in_force.py)."""
        run_id = f"run_{time.strftime('%Y%m%d')}_{secrets.token_hex(4)}"
        now = time.time()
        if parent is not None:  # a child run is its root's: a second person must be second to whoever started that
            started_by = parent.started_by
        record = RunRecord(
            run_id=run_id,
            ability=name,
            session_id=session_id,
            status=RunState.PENDING,
            enforcement=ability.settings.enforcement,
            definition=ability.model_dump(mode="json", by_alias=True, exclude_none=True),
            source_path=source_path,
            inputs=values,
            parent_run=parent.run_id if parent else None,
            error=None,
            owner_pid=self.owner.pid,
            owner_start=self.owner.start,
            owner_replica=self.owner.replica,
            owner_host=self.owner.host,
            started_at=now,
            finished_at=None,
            updated_at=now,
            steps=[StepRecord(sid, i, ability.step(sid).type) for i, sid in enumerate(execution_order(ability))],
            trust_note=note,
            started_by=started_by,
        )
        self.store.create_run(record)
        live = LiveRun(run_id, name, ability, values, {}, session_id=session_id, started_by=started_by)
        return self._register(live, parent)

    def _register(self, live: LiveRun, parent: LiveRun | None) -> LiveRun:
        if parent is not None:
            live.parent, live.depth = parent, parent.depth + 1
        self.live[live.run_id] = live
        return live

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
            self.live.pop(live.run_id, None)
            raise RuntimeError("Engine.running() must be entered before runs start")
        self._tg.start_soon(self._drive, live, resumed)

    # --- driving --------------------------------------------------------------------------------------------

    async def _drive(self, live: LiveRun, resumed: bool) -> None:
        """The run in its span: a child of the call that started it (the run's task copied its context), or of the
        workflow step whose child run it is."""
        with tracing.span(f"run {live.name}", _run_attributes(live, resumed)) as span:
            await self._drive_in_span(live, resumed)
            span.set({"abilities.status": live.status})
            if live.status != RunState.COMPLETED:
                span.fail(live.halt_error or live.status)

    async def _drive_in_span(self, live: LiveRun, resumed: bool) -> None:
        error: str | None = None
        unwinding = False
        after: list[int] | None = None  # the after-hooks that may run, once asked about (checkpoint)
        try:
            with live.scope:
                self._run_event(live, RunEvent.RESUME if resumed else RunEvent.START, "run started")
                timeout = live.ability.settings.timeout
                with anyio.move_on_after(seconds(timeout)) as limit:
                    error = await self._approve_plan(live, resumed)
                    if error is None:
                        error = await self._before_hooks(live, resumed)
                    if error is None:
                        error = await self._execute(live)
                    after = await self._approve_after_hooks(live)
                if limit.cancelled_caught:
                    error = live.halt_error = f"the run exceeded settings.timeout ({timeout}); raise it or split it"
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside: the server is stopping, or a child's parent stopped it (the parent was
            # cancelled, ran out of time, or a parallel step failed): the child is cancelled, not interrupted.
            unwinding = True
            live.reason = live.reason or ("cancel" if live.parent is not None else "shutdown")
            raise
        except Exception as exc:  # a bug: record it on the run and in the log, keep the server up
            log.exception("run %s crashed", live.run_id)
            error = f"internal error: {exc!r} (see the server log)"
        finally:
            with anyio.CancelScope(shield=True):
                ended = await self._finish_safely(live, error)
            if ended and unwinding:  # a child its parent stopped: its after-hooks still run, shielded from that stop
                await self._after_hooks(live, after, shielded=True)
        if ended:
            await self._after_hooks(live, after)

    async def _before_hooks(self, live: LiveRun, resumed: bool) -> str | None:
        """Before-hooks gate the run, each after its checkpoint (settings.approval: checkpoint); a rejection or a
        failure is the run's error. A resumed run passes the gate again unless it passed it already."""
        if resumed and any(e["event"] == "hooks_before_passed" for e in self.store.events(live.run_id)):
            return None
        for i, command in enumerate(live.ability.hooks.before):
            if (refused := await self._checkpoint_hook(live, "before", i, command)) is not None:
                return refused
            if (problem := await self._run_hook(live, "before", i, command)) is not None:
                return f"{hook_label('before', i)} ({command!r}) failed: {problem}"
        if live.ability.hooks.before:
            self.store.update_run(live.run_id, "hooks_before_passed")
        return None

    async def _after_hooks(self, live: LiveRun, approved: list[int] | None, shielded: bool = False) -> None:
        """After-hooks run once the run's end is recorded (those `approved`, or when the run ended before they were
        asked about, those _unasked_after_hooks allows); stopping the server cancels them (and kills them)."""
        with anyio.CancelScope(shield=shielded) as scope:
            if self._stopping:
                scope.cancel()
            self._hook_scopes.add(scope)
            try:
                allowed = self._unasked_after_hooks(live) if approved is None else approved
                for i in allowed:
                    await self._run_hook(live, "after", i, live.ability.hooks.after[i])
            except Exception:
                log.exception("after-hooks of run %s crashed", live.run_id)
            finally:
                self._hook_scopes.discard(scope)

    async def _finish_safely(self, live: LiveRun, error: str | None) -> bool:
        """Record the run's end; returns whether it ended (not interrupted). Never lets a failure escape."""
        try:
            if live.reason in HANDED_OVER:  # another replica takes it over: this one writes nothing more of it
                return False
            return self._finish(live, error)
        except Exception:
            log.exception("could not record the end of run %s", live.run_id)
            return False
        finally:
            if self.live.get(live.run_id) is live:
                self.live.pop(live.run_id)
            remove_spools(self.store.folder, live.run_id)  # the store has each step's head and tail now
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

    async def _run_step(self, live: LiveRun, step: Step) -> None:
        """A step in its span, a child of its run's."""
        attributes = _step_attributes(live, step) if tracing.enabled() else None  # only where spans are recorded
        with tracing.span(f"step {step.id}", attributes) as span:
            await self._step_attempts(live, step)
            outcome = live.outputs.get(step.id, {})
            span.set({"abilities.status": outcome.get("status"), "process.exit.code": outcome.get("exit_code")})
            if outcome.get("status") == StepState.FAILED:
                span.fail(str(outcome.get("error") or "the step failed"))

    async def _step_attempts(self, live: LiveRun, step: Step) -> None:
        skip = skip_reason(live.ability, step, live.inputs, live.outputs)
        if skip is not None:
            self._step_event(live, step.id, StepEvent.SKIP, error=skip)
            return
        policy = step.on_failure or live.ability.settings.on_failure
        retries = (
            (step.max_retries if step.max_retries is not None else DEFAULT_MAX_RETRIES) if policy == "retry" else 0
        )
        attempt, problem = 0, None
        while True:
            attempt += 1
            problem = await self._one_attempt(live, step, attempt, max(attempt, retries + 1), problem)
            if problem is None:
                return
            if policy == "ask":
                decision = await self._decide(live, step.id, problem)
                if decision == "retry":
                    continue
                if decision == "continue":
                    return
                break
            if attempt > retries:
                break
            if step.type == "script":
                await anyio.sleep(min(self.retry_base * 2 ** (attempt - 1), RETRY_MAX_SECONDS))
        if policy != "continue":
            live.halt_error = f"step {step.id!r} failed: {problem}"

    async def _one_attempt(self, live: LiveRun, step: Step, attempt: int, attempts: int, previous: str | None):
        """One attempt of any step type; returns why it failed, or None."""
        if step.type == "agent":
            return await self._await_agent(live, step, attempt, attempts, previous)
        if step.type == "skill":
            return await self._await_skill(live, step, attempt, attempts, previous)
        if step.type == "approval":
            return await self._approval(live, step, attempt)
        if (refused := await self._checkpoint(live, step, attempt)) is not None:
            return refused
        if step.type == "workflow":
            return await self._workflow(live, step, attempt)
        return await self._attempt(live, step, attempt)

    async def _attempt(self, live: LiveRun, step: ScriptStep, attempt: int) -> str | None:
        """One attempt of a script step; returns the reason it failed, or None."""
        started = dict(attempts=attempt, started_at=time.time(), error=None)
        event = StepEvent.START if attempt == 1 else StepEvent.RETRY
        try:
            command, cwd, env = prepare_script(step, live, self.catalog.project.root)
        except ValueError as exc:
            return self._fail_unstarted(live, step.id, event, started, str(exc))
        env[MARKER_VAR] = f"{live.run_id}:{step.id}"
        shown = False

        def spawned(pgid: int) -> None:
            self.reaper.watch(pgid)  # from now on the group dies with this process, however it dies
            started["pgid"] = pgid

        def show(pgid: int) -> None:
            # The start and its process group in one write. A step that ends before it is shown has its start
            # written with its end (one commit, not two); recovery finds its processes by the marker meanwhile.
            nonlocal shown
            if not shown:
                shown = True
                self._step_event(live, step.id, event, **started)

        spool: Spool | None = None

        def spooled(chunk: bytes) -> None:
            nonlocal spool
            if spool is None:  # most steps end before they are shown, and never spool
                spool = Spool(spool_path(self.store.folder, live.run_id, step.id))
            spool.write(chunk)

        try:
            result = await run_script(
                command,
                cwd=cwd,
                env=env,
                timeout=step_timeout(step),
                on_start=spawned,
                on_end=self.reaper.release,
                on_show=show,
                # replicas take a dead one's runs over from what is recorded: there, every start is, at once
                show_after=0.0 if self.store.replicated else SHOW_AFTER_SECONDS,
                spool=spooled,
                **needles(step),
            )
        except SpawnError as exc:
            return self._fail_unstarted(live, step.id, event, started, str(exc))
        except BaseException:
            if "pgid" in started:  # stopped before it was shown: it did start, so it is cancelled, not skipped
                show(started["pgid"])
            raise
        finally:
            if spool is not None:
                spool.close()
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
        live.outputs.setdefault(step.id, {}).update(output=output, exit_code=result.exit_code)
        ended = StepEvent.FAIL if problem else StepEvent.SUCCEED
        if shown:
            self._step_event(live, step.id, ended, **fields)
        else:
            self._step_event(live, step.id, ended, first=(event, started["started_at"]), **{**started, **fields})
        return problem

    def _fail_unstarted(self, live: LiveRun, step_id: str, event: StepEvent, started: dict, problem: str) -> str:
        """An attempt that could not even start still counts: record its start and its failure."""
        self._step_event(live, step_id, event, **started)
        self._step_event(live, step_id, StepEvent.FAIL, error=problem, finished_at=time.time())
        return problem

    async def _run_hook(self, live: LiveRun, which: str, index: int, command: str) -> str | None:
        """Run one hook command; returns why it failed (recorded on the run), or None."""
        hook = ScriptStep(id=f"hook-{which}-{index}", type="script", run=command)
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
            self.store.update_run(live.run_id, f"hook_{which}_failed", f"{hook_label(which, index)}: {problem}")
        return problem or None

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
        fields = question_fields(None) if live.question is not None or record.question else {}
        self._run_event(live, event, error or "run completed", error=error, finished_at=finished, **fields)
        return not shutdown

    # --- recording ------------------------------------------------------------------------------------------

    def _run_event(self, live: LiveRun, event: RunEvent, message: str, **fields: Any) -> None:
        status = apply_run(live.status, event)
        self.store.update_run(live.run_id, event, message, status=status, **fields)
        live.status = status
        live.notify(message)
        if live.parent is not None:
            self._mirror(live)

    def _step_event(
        self, live: LiveRun, step_id: str, event: StepEvent, *, first: tuple[StepEvent, float] | None = None, **fields
    ) -> None:
        """Apply `event` to the step and write it with `fields`; `first`: an event before it and when, in the same
        write (a short script step's start)."""
        current = live.outputs.get(step_id, {}).get("status", StepState.PENDING)
        if first is not None:
            current = apply_step(current, first[0])
        status = apply_step(current, event)
        self.store.update_step(live.run_id, step_id, event, fields.get("error"), first=first, status=status, **fields)
        live.outputs.setdefault(step_id, {})["status"] = status
        verb = {StepState.RUNNING: "started"}.get(status, status.value)
        live.notify(f"step {step_id} {verb}")

    def _store_step(self, run_id: str, step: StepRecord, event: StepEvent, **fields: Any) -> None:
        self.store.update_step(
            run_id, step.step_id, event, fields.get("error"), status=apply_step(step.status, event), **fields
        )

    # --- waiting, cancelling, resuming ----------------------------------------------------------------------


def _run_attributes(live: LiveRun, resumed: bool) -> dict[str, Any]:
    """What a person filters a run's span on."""
    return {
        "abilities.ability": live.name,
        "abilities.run_id": live.run_id,
        "abilities.session": live.session_id,
        "abilities.enforcement": live.ability.settings.enforcement,
        "abilities.parent_run_id": live.parent.run_id if live.parent is not None else None,
        "abilities.resumed": resumed,
    }


def _step_attributes(live: LiveRun, step: Step) -> dict[str, Any]:
    """What a person filters a step's span on."""
    return {
        "abilities.ability": live.name,
        "abilities.run_id": live.run_id,
        "abilities.step": step.id,
        "abilities.step_type": step.type,
        "abilities.workflow": getattr(step, "workflow", None),
        "abilities.skill": getattr(step, "skill", None),
        "abilities.agent": getattr(step, "agent", None),
    }


def _stopped_because(live: LiveRun, shutdown: bool) -> str:
    if shutdown:
        return "interrupted: the server stopped"
    if live.reason == "cancel":
        return "cancelled"
    return f"killed: {live.halt_error or 'the run ended'}"
