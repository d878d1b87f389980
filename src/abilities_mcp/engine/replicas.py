"""Replicas: several server processes (maybe on several hosts) driving runs on one PostgreSQL state.

Each replica owns the runs it drives through an advisory lock it holds for its life (state/replicas.py). Every
WATCH_SECONDS it checks that lock is still its own, and looks for live runs whose owner's lock is gone: it takes
each over with a compare-and-set on the run's status and owner (one replica wins), and drives it on itself from
the step that did not finish, as a resume does. What was reported is in the state; what was running is not:

- a script step that was running when its replica died runs again from its start (a step runs at least once, not
  exactly once: docs/state.md). The new owner starts it only once the old one's processes are gone: on the same
  host (and pid namespace) it kills them itself, marked as they are (process.kill_leftovers); on another host it
  waits RERUN_FENCE_SECONDS, by which the old host's own watchdog has killed them (engine/reaper.py) or, for a
  replica that lost its lock but lives, its watch has (`_lost`).
- an agent step waiting for its hand-back is handed out again, and a question waiting for a person keeps its id,
  so an answer given on any replica, before or after the move, counts.

Calls that reach a replica other than the run's owner (a load balancer without stickiness) go to the owner through
the state (state/requests.py): a hand-back and a cancel are written as requests the owner reads every
REQUEST_POLL_SECONDS and answers; status and waits read the run from the state.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any

import anyio

from ..errors import NextCall, Refused
from ..state import requests
from ..state.acting import ACTING
from ..state.owners import this_host
from ..state.store import RunRecord
from .live import LiveRun
from .machine import LIVE_RUN_STATES, RunState, StepEvent, StepState, apply_step
from .process import KILL_GRACE_SECONDS, kill_leftovers

log = logging.getLogger(__name__)

# How often a replica reads the requests other replicas wrote for its runs (a hand-back's added latency).
REQUEST_POLL_SECONDS = 0.1
# How often it checks its own lock and looks for runs whose owner is gone (the failover's detection time).
WATCH_SECONDS = 0.5
# Before a script step that was running on another host runs again: that host's watchdog kills the old step's
# group within the kill grace (SIGTERM, then SIGKILL), and a replica that lost its lock hears of it within a watch.
RERUN_FENCE_SECONDS = WATCH_SECONDS + KILL_GRACE_SECONDS + 1.0
# How long a taken-over step's leftover processes on this host get to die once killed.
LEFTOVERS_SECONDS = 5.0
# How long a call on another replica waits for the owner to take its hand-back (a failover fits in it).
REQUEST_WAIT_SECONDS = 10.0
# How long a run just taken over may hold a hand-back it cannot take yet (it is on its way to the awaited step).
TAKE_PATIENCE_SECONDS = 3.0
# How long a replica that lost its lock waits for its runs to stop (their groups killed) before taking a new one.
LOST_STOP_SECONDS = KILL_GRACE_SECONDS + 3.0
# Why a run stops without its end being written: another replica takes it over.
LOST, HANDOVER = "lost", "handover"
HANDED_OVER = (LOST, HANDOVER)


class Replicas:
    """Mixed into Engine: needs its store, live runs, owner, _tg, _drive, _revive, complete and cancel."""

    # --- the owner's side ----------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Read requests for this replica's runs; every WATCH_SECONDS, check the lock and take over orphans."""
        ticks = round(WATCH_SECONDS / REQUEST_POLL_SECONDS)
        with anyio.CancelScope() as self._watching:
            for tick in itertools.count(1):
                await anyio.sleep(REQUEST_POLL_SECONDS)
                try:
                    if tick % ticks == 0:
                        if not await anyio.to_thread.run_sync(self.store.owner_held, abandon_on_cancel=True):
                            await self._lost()
                            continue
                        self.take_over_orphans()
                    self._take_requests()
                except Exception:  # the database away for a moment: the next tick tries again
                    log.exception("replica %s: watching the state failed", self.owner.replica)

    def take_over_orphans(self) -> list[str]:
        """Take over every live run whose owner's lock is gone; returns the ids this replica won."""
        taken = []
        for run in self.store.orphaned_runs():
            if run.parent_run is None and run.run_id not in self.live and self._take_over(run):
                taken.append(run.run_id)
        return taken

    def _take_over(self, run: RunRecord) -> bool:
        """Claim a dead replica's run (compare-and-set), stop what it left running, and drive it on here."""
        me = self.owner
        why = (
            f"replica {run.owner_replica} (pid {run.owner_pid}) stopped: its lock on the state database was "
            f"released; replica {me.replica} takes the run over"
        )
        if not self.store.claim_orphan(run, RunState.INTERRUPTED, why, owner=me):
            return False  # another replica won it
        leftovers, fence = [], 0.0
        for record in [run, *self._live_children(run, why)]:
            found, wait = self._close_steps(record)
            leftovers += found
            fence = max(fence, wait)
            self._carry.add(record.run_id)
        fresh = self.store.get_run(run.run_id)
        assert fresh is not None
        live = self._revive(fresh, fresh.session_id, note=f"taken over by replica {me.replica}")
        live.adopted_at = time.monotonic()
        self._tg.start_soon(self._drive_taken, live, leftovers, fence)
        return True

    def _live_children(self, run: RunRecord, why: str) -> list[RunRecord]:
        """The live child runs (workflow steps) under a taken-over run, claimed too: its resume revives them."""
        claimed = []
        for child in self.store.children(run.run_id):
            if child.status in LIVE_RUN_STATES and self.store.claim_orphan(
                child, RunState.INTERRUPTED, why, owner=self.owner
            ):
                claimed += [child, *self._live_children(child, why)]
        return claimed

    def _close_steps(self, record: RunRecord) -> tuple[list[str], float]:
        """Close the steps a dead replica left running or awaiting, saying what follows; returns the markers of
        script steps whose processes may live on this host, and how long to wait for those on another."""
        leftovers, fence, here = [], 0.0, record.owner_host == this_host()
        for step in record.steps:
            if step.status not in (StepState.RUNNING, StepState.AWAITING):
                continue
            if step.status == StepState.RUNNING and step.pgid:
                if here:
                    leftovers.append(f"{record.run_id}:{step.step_id}")
                else:
                    fence = RERUN_FENCE_SECONDS
            what = (
                "was running: it runs again from its start (a script step runs at least once, docs/state.md)"
                if step.status == StepState.RUNNING
                else "was waiting: it is handed out again (a question keeps its id: an answer counts wherever given)"
            )
            self.store.update_step(
                record.run_id,
                step.step_id,
                StepEvent.CANCEL,
                f"its replica {record.owner_replica} stopped while this step {what}",
                status=apply_step(step.status, StepEvent.CANCEL),
                error=f"interrupted: its replica stopped while this step {what.split(':')[0].removeprefix('was ')}",
            )
        return leftovers, fence

    async def _drive_taken(self, live: LiveRun, leftovers: list[str], fence: float) -> None:
        """Drive a taken-over run once the old owner's step processes are gone (never two of one step at once)."""
        with anyio.move_on_after(LEFTOVERS_SECONDS):
            while any([kill_leftovers(0, marker) for marker in leftovers]):  # every marker, each round
                await anyio.sleep(0.02)
        await anyio.sleep(fence)
        await self._drive(live, resumed=True)

    def _take_requests(self) -> None:
        """Act on the requests other replicas wrote for the runs this one drives."""
        for request in requests.open_requests(self.store, list(self.live)):
            live = self.live.get(request.run_id)
            if live is None or (request.kind == requests.HANDBACK and _not_ready(live, request)):
                continue
            if requests.take(self.store, request.id):
                requests.settle(self.store, request.id, self._act_on(live, request))

    def _act_on(self, live: LiveRun, request: requests.Request) -> dict[str, Any]:
        """Act on a request as if its call had come here, for whoever made the call (ACTING, on what it writes)."""
        acting = ACTING.set(request.body.get("actor"))
        try:
            return self._act_for_caller(live, request)
        finally:
            ACTING.reset(acting)

    def _act_for_caller(self, live: LiveRun, request: requests.Request) -> dict[str, Any]:
        if request.kind == requests.CANCEL:
            live.stop("cancel")
            return {"cancelling": True}
        handed_out = [live.attempt, live.last_attempt]
        try:
            problem = self.complete(live.run_id, request.step_id or "", request.body["output"], request.body["success"])
        except Refused as refusal:
            calls = [{"tool": c.tool, "arguments": c.arguments} for c in refusal.next_calls]
            return {"refused": {"rule": refusal.rule, "state": refusal.state, "next_calls": calls}}
        return {"problem": problem, "handed_out": handed_out}

    async def _lost(self) -> None:
        """The lock is gone: another replica may own these runs already. Stop driving them (their step groups are
        killed as any stopped run's are), write nothing more of them, then take a new lock."""
        roots = [live for live in self.live.values() if live.parent is None]
        log.error(
            "replica %s lost its lock on the state database: it stops driving its %d runs (another replica takes "
            "them over) and starts again under a new id",
            self.owner.replica,
            len(roots),
        )
        for live in roots:
            live.stop(LOST)
        with anyio.move_on_after(LOST_STOP_SECONDS):
            for live in roots:
                await live.done.wait()
        self._owner = None
        self._owner = await anyio.to_thread.run_sync(self.store.renew_owner)
        log.warning("replica %s takes over where it left off, under a new lock", self._owner.replica)

    def _stop_all(self) -> None:
        """The server stops: each live run is interrupted (on a state replicas share, handed over: written so, and
        any other replica takes it over once this one's lock is released with its connection)."""
        if self._watching is not None:
            self._watching.cancel()
        if not self.store.replicated:
            for live in list(self.live.values()):
                live.stop("shutdown")
            return
        for live in [live for live in self.live.values() if live.parent is None]:
            try:
                self.store.update_run(live.run_id, "handed_over", f"replica {self.owner.replica} stops")
            except Exception:  # lost already: the taking over says it
                log.warning("replica %s could not record the hand-over of %s", self.owner.replica, live.run_id)
            live.stop(HANDOVER)

    # --- a call that reached a replica other than the owner ------------------------------------------------

    def _owned_elsewhere(self, run_id: str) -> RunRecord | None:
        """On a state replicas share, a live run this replica does not drive (its owner's, or soon a taker's)."""
        if not self.store.replicated or run_id in self.live:
            return None
        record = self.store.get_run(run_id)
        return record if record is not None and record.status in LIVE_RUN_STATES else None

    async def hand_back(
        self, run_id: str, step_id: str, output: str, success: bool
    ) -> tuple[str | None, tuple[int, int]]:
        """`complete` wherever the run is driven; returns why the hand-back was refused (or None) and the attempt
        it was with the last of its round, as they stood before it."""
        record = self._owned_elsewhere(run_id)
        if record is None:
            live = self.live.get(run_id)
            handed_out = (live.attempt, live.last_attempt) if live is not None else (0, 0)
            return self.complete(run_id, step_id, output, success), handed_out
        body = {"output": output, "success": success, "actor": ACTING.get()}
        found = await self._ask_owner(record, requests.HANDBACK, step_id, body)
        if found is None:
            raise Refused(
                f"the replica driving run {run_id!r} did not take the hand-back within {REQUEST_WAIT_SECONDS:g} s "
                "(the run may be moving to another replica); nothing was recorded: hand it back again",
                record.status,
                [NextCall("ability_step_complete", {"run_id": run_id, "step_id": step_id, "output": "<your result>"})],
            )
        if "refused" in found:
            refused = found["refused"]
            raise Refused(refused["rule"], refused["state"], [NextCall(**c) for c in refused["next_calls"]])
        attempt, last = found.get("handed_out") or (0, 0)
        return found.get("problem"), (attempt, last)

    async def _cancel_elsewhere(self, record: RunRecord, wait: float) -> None:
        """Ask the owner to cancel, and wait (bounded) for the run to end."""
        request = requests.ask(self.store, record.run_id, requests.CANCEL, body={"actor": ACTING.get()})
        await self._wait_in_store(record.run_id, wait, until_ended=True)
        requests.withdraw(self.store, request)  # not taken by then: the call answers with the run as it is

    async def _ask_owner(
        self, record: RunRecord, kind: str, step_id: str | None, body: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Write a request for the run's owner and wait for its outcome; None when nobody took it in time."""
        request = requests.ask(self.store, record.run_id, kind, step_id, body)
        with anyio.move_on_after(REQUEST_WAIT_SECONDS):
            while (found := requests.outcome(self.store, request)) is None:
                await anyio.sleep(REQUEST_POLL_SECONDS)
            return found
        if requests.withdraw(self.store, request):
            return None
        with anyio.move_on_after(REQUEST_WAIT_SECONDS):  # taken at the last moment: its outcome follows
            while (found := requests.outcome(self.store, request)) is None:
                await anyio.sleep(REQUEST_POLL_SECONDS)
            return found
        return None

    async def _wait_in_store(self, run_id: str, seconds: float, *, first_change: bool = False, until_ended=False):
        """Wait, reading the state, for a run another replica drives to end or wait for someone (or change at all)."""
        first = self.store.run_state(run_id)
        with anyio.move_on_after(seconds):
            while (now := self.store.run_state(run_id)) is not None:
                status, _, answered = now
                if status not in LIVE_RUN_STATES or (first_change and now != first):
                    return
                if not until_ended and not first_change and status in _AWAITING and not answered:
                    return
                await anyio.sleep(REQUEST_POLL_SECONDS * 2)


_AWAITING = (RunState.AWAITING_AGENT, RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION)


def _not_ready(live: LiveRun, request: requests.Request) -> bool:
    """A run just taken over is on its way back to the step it waits on: a hand-back for it waits a moment."""
    fresh = live.adopted_at is not None and time.monotonic() - live.adopted_at < TAKE_PATIENCE_SECONDS
    return fresh and live.status != RunState.AWAITING_AGENT and time.time() - request.at < TAKE_PATIENCE_SECONDS
