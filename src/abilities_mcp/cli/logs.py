"""`abilities-mcp logs RUN [STEP] [--follow]`: everything a run's steps printed that was kept (the first and last
24 KiB of each stream, with the total size), and with --follow what a running step prints as it prints it, made
inert for the terminal."""

from __future__ import annotations

import argparse
import sys
import time

from ..state.project import Project
from ..state.spool import Follower, spool_path
from ..state.store import RunRecord, StepRecord, Store
from .inert import inert

# How often --follow looks for new output and for the step's end (a person watching; no one waits on it).
POLL_SECONDS = 0.1
# --follow's exit codes (docs/cli.md): how what it followed ended. Ctrl-C: 130.
FOLLOW_EXIT = {"completed": 0, "skipped": 0, "failed": 1, "cancelled": 3, "interrupted": 3}
LIVE_RUN_STATES = {"pending", "running"}


def logs(project: Project, args: argparse.Namespace) -> int:
    if getattr(args, "follow", False):
        try:
            return follow(project, args)
        except KeyboardInterrupt:
            return 130
    store = Store.open(project)
    try:
        record = _asked_for(store, args)
        if record is None:
            return 2
        steps = record.steps if args.step is None else [s for s in record.steps if s.step_id == args.step]
        for step in steps:
            print(
                f"=== {step.step_id} ({step.type}, {step.status}"
                + (f", exit {step.exit_code}" if step.exit_code is not None else "")
                + ")"
            )
            for label, text, size in (
                ("stdout", step.output, step.output_bytes),
                ("stderr", step.stderr, step.stderr_bytes),
            ):
                if text:
                    kept = f"{size} bytes" if size is not None else "size unknown"
                    cut = ", head and tail kept" if "bytes truncated of" in text else ""
                    print(f"--- {label} ({kept}{cut})")
                    print(inert(text.rstrip("\n")))
            if step.child_run:
                print(f"--- a child run: abilities-mcp logs {step.child_run}")
        return 0
    finally:
        store.close()


def _asked_for(store: Store, args: argparse.Namespace) -> RunRecord | None:
    """The run named (with the step named, if one is), or None once the person is told what exists."""
    record = store.get_run(args.run_id)
    if record is None:
        print(f"abilities-mcp: no run {args.run_id!r}; `abilities-mcp history` lists the runs", file=sys.stderr)
        return None
    if args.step is not None and all(s.step_id != args.step for s in record.steps):
        known = ", ".join(s.step_id for s in record.steps)
        print(f"abilities-mcp: run {record.run_id} has no step {args.step!r}; its steps: {known}", file=sys.stderr)
        return None
    return record


def follow(project: Project, args: argparse.Namespace) -> int:
    """Print a step's (or, with no STEP, each step's) output as it arrives until it stops running; the exit code
    says how it ended: 0 completed or skipped (or the run waits for a person or the agent), 1 failed, 3 cancelled or
    interrupted."""
    store = Store.open(project)
    try:
        record = _asked_for(store, args)
        if record is None:
            return 2
        shown: set[str] = set()
        while True:
            step = _next_step(record, args.step, shown)
            if step is None and record.status in LIVE_RUN_STATES:
                time.sleep(POLL_SECONDS)  # between two steps: wait for the next to start
                record = store.get_run(args.run_id) or record
                continue
            if step is None:
                return _run_ended(record)
            status = _follow_step(store, project, record.run_id, step)
            shown.add(step.step_id)
            if args.step is not None:
                return FOLLOW_EXIT.get(status, 0)
            record = store.get_run(args.run_id) or record
    finally:
        store.close()


def _next_step(record: RunRecord, only: str | None, shown: set[str]) -> StepRecord | None:
    """The step to show next: the one asked for, or the first not yet shown that has started."""
    for step in record.steps:
        if step.step_id in shown or (only is not None and step.step_id != only):
            continue
        if only is not None or step.status != "pending":
            return step
    return None


def _run_ended(record: RunRecord) -> int:
    """With no STEP, once the run stops running: how it ended, or what it waits for."""
    if record.status in FOLLOW_EXIT:
        return FOLLOW_EXIT[record.status]
    print(f"--- run {record.run_id} is {record.status}: `abilities-mcp status {record.run_id}` says what it waits for")
    return 0


def _follow_step(store: Store, project: Project, run_id: str, step: StepRecord) -> str:
    """Stream one step's spool while it runs (or waits to), then what the store kept if the spool was missed."""
    print(f"=== {step.step_id} ({step.type}, {step.status})", flush=True)
    reader = Follower(spool_path(project.state_dir, run_id, step.step_id))
    pending = b""
    try:
        while True:
            run_status, current = _step(store, run_id, step)
            pending = _print_lines(pending + reader.read())
            if current.status != "running" and (current.status != "pending" or run_status not in LIVE_RUN_STATES):
                pending = _print_lines(pending + reader.read())
                if pending:
                    print(inert(pending.decode("utf-8", "replace")), flush=True)
                if not reader.opened and (current.output or current.stderr):  # ended before we looked
                    for text in (current.output, current.stderr):
                        if text:
                            print(inert(text.rstrip("\n")), flush=True)
                exit_code = f", exit {current.exit_code}" if current.exit_code is not None else ""
                print(f"--- {current.step_id} {current.status}{exit_code}", flush=True)
                return current.status
            time.sleep(POLL_SECONDS)
    finally:
        reader.close()


def _print_lines(data: bytes) -> bytes:
    """Print the whole lines of data; return the unfinished last one."""
    complete, _, rest = data.rpartition(b"\n")
    if complete or data.startswith(b"\n"):
        print(inert(complete.decode("utf-8", "replace")), flush=True)
    return rest


def _step(store: Store, run_id: str, step: StepRecord) -> tuple[str, StepRecord]:
    """The run's status and the step as stored now."""
    record = store.get_run(run_id)
    if record is None:  # pruned meanwhile
        return "completed", step
    return record.status, next((s for s in record.steps if s.step_id == step.step_id), step)
