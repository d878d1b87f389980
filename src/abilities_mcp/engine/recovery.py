"""Crash recovery: runs a dead server left live become `interrupted`, and their leftover processes die."""

from __future__ import annotations

from ..state.spool import remove_spools
from ..state.store import Store
from .machine import RunEvent, StepEvent, StepState, apply_run, apply_step
from .process import kill_run_leftovers


def recover_orphans(store: Store) -> list[str]:
    """Mark every run whose owner process is gone `interrupted`; returns their ids. On a state replicas share,
    nothing: a live replica takes such runs over and drives them on (engine/replicas.py)."""
    if store.replicated:
        return []
    recovered = []
    for run in store.orphaned_runs():
        error = (
            f"the server running it (pid {run.owner_pid}) stopped; continue with ability_resume(run_id={run.run_id!r})"
        )
        if not store.claim_orphan(run, apply_run(run.status, RunEvent.INTERRUPT), error):
            continue  # another process recovered or adopted it first
        # Every step's, not only those recorded running: a step that ended or died within its first moments was
        # never recorded as started (process.SHOW_AFTER_SECONDS), and its marker names it all the same.
        kill_run_leftovers(run.run_id)
        for step in run.steps:
            if step.status in (StepState.RUNNING, StepState.AWAITING):
                status = apply_step(step.status, StepEvent.CANCEL)
                store.update_step(
                    run.run_id,
                    step.step_id,
                    StepEvent.CANCEL,
                    "interrupted",
                    status=status,
                    error="interrupted: the server stopped while this step ran",
                )
        remove_spools(store.folder, run.run_id)  # a dead server's live views: the store has what was reported
        recovered.append(run.run_id)
    return recovered
