"""Running an ability in a terminal: live progress lines for a person, Ctrl-C cancels."""

from __future__ import annotations

import secrets
import signal
import sys
from typing import Any

import anyio
import anyio.to_thread

from .catalog import Catalog
from .engine import Engine
from .errors import AbilitiesError
from .project import Project
from .results import Run
from .store import Store
from .views import run_view

MARKS = {"running": ">", "completed": "ok", "failed": "FAIL", "skipped": "skip", "cancelled": "cancel"}


async def run_in_terminal(project: Project, name: str, inputs: dict[str, Any]) -> int:
    """Run one ability here; returns 0 when it completed, 1 otherwise."""
    store = Store(project.state_db)
    engine = Engine(store, Catalog(project))
    try:
        async with engine.running():
            try:
                run_id = engine.start(name, inputs, f"cli-{secrets.token_hex(6)}")
            except AbilitiesError as exc:
                print(f"abilities-mcp: {exc}", file=sys.stderr)
                return 2
            print(f"run {run_id}: {name}", flush=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_interrupt, engine, run_id)
                await _follow(engine, store, run_id)
                tg.cancel_scope.cancel()
        view = run_view(store.get_run(run_id))
        print(print_run(view))
        return 0 if view.status == "completed" else 1
    finally:
        store.close()


async def _follow(engine: Engine, store: Store, run_id: str) -> None:
    seen: dict[str, tuple[str, int]] = {}
    live = engine.live.get(run_id)
    while live is not None and not live.done.is_set():
        changed = live.changed
        _print_changes(store, run_id, seen)
        if live.status == "awaiting_agent":
            await _answer_agent_step(engine, store, run_id)
            continue
        await changed.wait()
    _print_changes(store, run_id, seen)


async def _answer_agent_step(engine: Engine, store: Store, run_id: str) -> None:
    """At a terminal the person is the agent: show the instructions, take the typed answer, hand it back."""
    step = next(s for s in store.get_run(run_id).steps if s.status == "awaiting")
    print(f"\n--- step {step.step_id} is yours ---\n{step.instructions}\n", flush=True)
    print("Type your answer; end it with a line holding only '.' (or end of input):", flush=True)
    answer = await anyio.to_thread.run_sync(_read_answer, abandon_on_cancel=True)
    if answer is None:
        print("no answer (end of input): cancelling the run", file=sys.stderr, flush=True)
        await engine.cancel(run_id)
        return
    problem = engine.complete(run_id, step.step_id, answer, success=True)
    if problem:
        print(f"answer refused: {problem}", file=sys.stderr, flush=True)


def _read_answer() -> str | None:
    lines = []
    for line in sys.stdin:
        if line.rstrip("\n") == ".":
            return "\n".join(lines)
        lines.append(line.rstrip("\n"))
    return "\n".join(lines) if lines else None


def _print_changes(store: Store, run_id: str, seen: dict[str, tuple[str, int]]) -> None:
    record = store.get_run(run_id)
    for step in record.steps:
        key = (step.status, step.attempts)
        if step.status != "pending" and seen.get(step.step_id) != key:
            seen[step.step_id] = key
            detail = f" ({step.duration_ms} ms)" if step.duration_ms is not None and step.status != "running" else ""
            attempt = f" attempt {step.attempts}" if step.attempts > 1 else ""
            reason = f": {step.error}" if step.error and step.status != "running" else ""
            print(f"  [{MARKS.get(step.status, step.status)}] {step.step_id}{attempt}{detail}{reason}", flush=True)


async def _cancel_on_interrupt(engine: Engine, run_id: str) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            print("\ncancelling...", file=sys.stderr, flush=True)
            await engine.cancel(run_id)
            return


def print_run(view: Run) -> str:
    """A run as lines of text."""
    lines = [f"run {view.run_id}  {view.ability}  {view.status}  ({view.progress.done}/{view.progress.total} steps)"]
    for s in view.steps:
        extra = f"  exit {s.exit_code}" if s.exit_code is not None else ""
        lines.append(f"  {s.id:20} {s.status:10}{extra}{'  ' + s.error if s.error else ''}")
    if view.error:
        lines.append(f"error: {view.error}")
    return "\n".join(lines)
