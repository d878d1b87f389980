"""A person at a terminal: running an ability with live progress (Ctrl-C cancels), and answering the questions
runs ask (`abilities-mcp approve` / `decide`, or inline while `run` drives the ability).

Answers are taken only from a person's terminal (person.py): a pipe, or a terminal an agent's tools made, could be
the agent speaking for the person. Every answer typed here passes `from_a_person` when it is taken, in a process
that re-ran itself in Python's isolated mode (main._isolated), and records the terminal and the process chain.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ..abilities.catalog import Catalog
from ..engine.core import Engine
from ..engine.live import LiveRun
from ..engine.process import last_line
from ..engine.questions import Answer, Question
from ..errors import AbilitiesError, Refused
from ..server.results import Run
from ..server.views import run_view
from ..state.project import Project
from ..state.store import Store
from . import person
from .inert import inert, raw
from .parser import pick

MARKS = {"running": ">", "completed": "ok", "failed": "FAIL", "skipped": "skip", "cancelled": "cancel"}
# The states an attempt ends in.
ENDED = ("completed", "failed", "cancelled")


async def run_in_terminal(project: Project, name: str, inputs: dict[str, Any]) -> int:
    """Run one ability here; returns 0 when it completed, 1 otherwise."""
    store = Store.open(project)
    engine = Engine(store, Catalog(project))
    try:
        async with engine.running():
            try:
                run_id = engine.start(name, inputs, f"cli-{secrets.token_hex(6)}")
            except AbilitiesError as exc:
                print(f"abilities-mcp: {cli_words(str(exc))}", file=sys.stderr)
                return 2
            print(f"run {run_id}: {name}", flush=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_interrupt, engine, run_id)
                await _follow(engine, store, run_id)
                tg.cancel_scope.cancel()
        view = run_view(store.get_run(run_id), store.get_run)
        print(print_run(view))
        for report in failed_step_reports(store, view):
            print(report, file=sys.stderr)
        return run_exit_code(view)
    finally:
        store.close()


# How often the step in flight is redrawn at a terminal, and how often a plain progress line is printed otherwise
# ($ABILITIES_PROGRESS_EVERY seconds, for a CI log that wants more or fewer).
TICK_SECONDS = 1.0
# Back to the start of the line and erase it: how the step in flight is redrawn in place.
REDRAW = "\r\x1b[K"
PLAIN_PROGRESS_SECONDS = 30.0
# `run`'s exit codes (documented in `run --help` and docs/cli.md).
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 3
# Lines of a failed step's output shown after the run; `abilities-mcp logs` prints all of it.
FAILED_TAIL_LINES = 20
# How the engine appends a quote of stderr to a script step's failure (engine/scripts.py); the block of a failed step
# shows stderr's last lines instead.
STDERR_QUOTE = "; stderr: "
# A step skipped because the run stopped at a failed step: the engine repeats that step's whole reason after it.
_SKIPPED_AFTER_FAILURE = re.compile(r"^(not run: step '[^']+' failed): .*", re.DOTALL)
# The run's error when it stopped at a failed step (its block says why).
_RUN_STOPPED_AT = re.compile(r"^step '([^']+)' failed: ")
# The server's words, as a person at a terminal says them.
_CLI_WORDS = [
    (re.compile(r"Call ability_list\(\) to see what exists\."), "Run `abilities-mcp list` to see what exists."),
    (
        re.compile(r"input '([^']+)' is required \((.*?)\); pass it in inputs"),
        r"input '\1' is required (\2); pass it with -i \1=VALUE",
    ),
]


def for_a_person(instructions: str) -> str:
    """An agent step's instructions, for the person at the terminal who does the step: the tool-call protocol is
    the agent's, not theirs (they answer below)."""
    out = []
    for line in instructions.splitlines():
        if line.startswith("When done, call ability_step_complete("):
            continue
        if agent := re.match(r"Delegate this step to the agent '([^']+)'", line):
            line = f"(In an agent client this step goes to the agent {agent.group(1)!r}; here it is yours.)"
        out.append(line)
    return inert("\n".join(out).rstrip())


def cli_words(message: str) -> str:
    """A message the engine words for an agent (tool calls), reworded for a person at the command line."""
    for pattern, replacement in _CLI_WORDS:
        message = pattern.sub(replacement, message)
    return message


def run_exit_code(view: Run) -> int:
    """0 when every step passed; 1 when a step failed, even under on_failure: continue; 3 when cancelled."""
    if view.status == "cancelled":
        return EXIT_CANCELLED
    failed = view.status != "completed" or any(s.status == "failed" for s in view.steps)
    return EXIT_FAILED if failed else EXIT_PASSED


def failed_step_reports(store: Store, view: Run) -> list[str]:
    """One block per failed step: the one place a failure's reason is said (print_run and the live lines point
    here rather than repeat it)."""
    return [failed_step_report(store, view.run_id, s.id) for s in view.steps if s.status == "failed"]


def failed_step_report(store: Store, run_id: str, step_id: str) -> str:
    """What a person needs when a step failed: why, and the end of what it printed."""
    record = store.get_run(run_id).step(step_id)
    reason = record.error or "no reason recorded"
    if (record.stderr or "").strip():  # the stderr tail below says it in full: no quote of it in the reason too
        reason = reason.split(STDERR_QUOTE, 1)[0]
    lines = [f"--- {step_id} failed: {reason}"]
    for label, text in (("stdout", record.output), ("stderr", record.stderr)):
        tail = (text or "").rstrip("\n").splitlines()[-FAILED_TAIL_LINES:]
        if tail:
            lines += [f"    {label} (last {len(tail)} lines):", *(f"    | {inert(line)}" for line in tail)]
    lines.append(f"    all of it: abilities-mcp logs {run_id} {step_id}")
    return "\n".join(lines)


class Ticker:
    """The step in flight: at a terminal one line redrawn each second (elapsed time, its last output line); piped
    or under CI, a plain line now and then, so a log shows the run is alive without a flood."""

    def __init__(self) -> None:
        self.live = sys.stdout.isatty() and not os.environ.get("CI")
        self.shown = False
        self.every = float(os.environ.get("ABILITIES_PROGRESS_EVERY") or PLAIN_PROGRESS_SECONDS)
        self.next_plain = self.every

    def clear(self) -> None:
        if self.shown:
            self._draw("")
            self.shown = False

    @staticmethod
    def _draw(text: str) -> None:
        """Redraw the line: the carriage return and erase are the CLI's own codes, written past the inert stream so
        the terminal obeys them; the text goes through it, so nothing a step printed is obeyed."""
        raw(sys.stdout).write(REDRAW)
        sys.stdout.write(text)
        sys.stdout.flush()

    def show(self, store: Store, run_id: str) -> None:
        running = [s for s in store.get_run(run_id).steps if s.status == "running" and s.started_at]
        if not running:
            return
        step = running[0]
        elapsed = time.time() - step.started_at
        line = inert(last_line(step.pgid)) if step.pgid else ""
        text = f"  [>] {step.step_id}  {elapsed:.0f}s" + (f"  {line}" if line else "")
        if self.live:
            width = shutil.get_terminal_size().columns
            self._draw(text[: max(width - 1, 20)])
            self.shown = True
        elif elapsed >= self.next_plain:
            print(f"{text}  (still running)", flush=True)
            self.next_plain = elapsed + self.every


async def _follow(engine: Engine, store: Store, run_id: str) -> None:
    seen: dict[str, tuple[str, int]] = {}
    asked: set[str] = set()
    ticker = Ticker()
    live = engine.live.get(run_id)
    while live is not None and not live.done.is_set():
        changed = live.changed
        ticker.clear()
        _print_changes(store, run_id, seen)
        target = live.innermost()  # a workflow step's child run asks through its parent
        if target.status == "awaiting_agent":
            await _answer_agent_step(engine, store, live, target.run_id)
            continue
        question = target.question
        if question is not None and not target.question_answered.is_set() and question.id not in asked:
            asked.add(question.id)
            await _answer_question(engine, live, target, question)
            continue
        with anyio.move_on_after(TICK_SECONDS):
            await changed.wait()
        if not changed.is_set():
            ticker.show(store, run_id)
    ticker.clear()
    _print_changes(store, run_id, seen)


async def _answer_agent_step(engine: Engine, store: Store, top: LiveRun, run_id: str) -> None:
    """At a terminal the person is the agent: show the instructions, take the typed answer, hand it back."""
    step = next(s for s in store.get_run(run_id).steps if s.status == "awaiting")
    print(f"\n--- step {step.step_id} is yours ---\n{for_a_person(step.instructions or '')}\n", flush=True)
    print("Type your answer; end it with a line holding only '.' (or end of input):", flush=True)
    ended, answer = await _read_unless_ended(top, _read_answer)
    if ended:
        return
    if answer is None:
        print("no answer (end of input): cancelling the run", file=sys.stderr, flush=True)
        await engine.cancel(run_id)
        return
    try:
        problem = engine.complete(run_id, step.step_id, answer, success=True)
    except Refused as exc:  # the run moved on meanwhile (cancelled, timed out)
        print(f"abilities-mcp: {exc}", file=sys.stderr, flush=True)
        return
    if problem:
        print(f"answer refused: {problem}", file=sys.stderr, flush=True)


async def _read_unless_ended(top: LiveRun, read: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    """A blocking read from the terminal, given up when the run ends meanwhile (a cancel, a signal, a timeout):
    (True, None) then, else (False, what was read). The read runs in a daemon thread: one still blocked on the
    terminal when the run ends must not keep the command from exiting."""
    got: list[Any] = []
    read_done = anyio.Event()
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            got.append(read(*args))
        finally:
            with contextlib.suppress(RuntimeError):  # the event loop has ended: nobody waits any more
                anyio.from_thread.run_sync(read_done.set, token=token)

    threading.Thread(target=work, name="terminal-read", daemon=True).start()
    async with anyio.create_task_group() as tg:

        async def when_read() -> None:
            await read_done.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(when_read)
        await top.done.wait()
        tg.cancel_scope.cancel()
    return (False, got[0]) if got else (True, None)


async def _answer_question(engine: Engine, top: LiveRun, live: LiveRun, question: Question) -> None:
    """Ask the person here when a person types here; otherwise say how to answer from their own terminal."""
    print(f"\n{question.message(live.run_id, live.name)}", flush=True)
    why = person.refusal()
    if why is None:
        ended, got = await _read_unless_ended(top, _ask_inline, question)
        if ended or got is None:
            return
        if isinstance(got, Answer):
            try:
                engine.record_answer(live.run_id, question, got)
            except Refused as exc:  # answered meanwhile from elsewhere, or timed out
                print(exc, file=sys.stderr, flush=True)
            return
        why = f"{got}; nothing was recorded"
    print(
        f"The answer cannot come from here ({why}): a person types, in their own terminal,\n"
        f"  {question.terminal_command(live.run_id)}{'' if question.kind == 'decision' else '   (or with --reject)'}\n"
        "The run waits for it.",
        flush=True,
    )


def _ask_inline(question: Question) -> Answer | str | None:
    """Read a choice typed at the terminal (y/n for a yes/no question, else one of the option values) and take it
    as a person's: the Answer, why it cannot be a person's (the check made when the reply came), or None at the
    end of input."""
    if question.is_yes_no:
        reply = _prompt(f"{question.options[0].label}? [y/N] ")
        if reply is None:
            return None
        return from_a_person(question.from_yes_no(reply.lower() in ("y", "yes"), "terminal"))
    while True:
        reply = _prompt(f"Answer ({' / '.join(question.values())}): ")
        if reply is None:
            return None
        try:
            value = pick(question.values(), reply)
        except ValueError as exc:  # ask again, naming the answers
            print(exc, flush=True)
            continue
        return from_a_person(question.from_choice(value, "terminal"))


def from_a_person(answer: Answer) -> Answer | str:
    """Every answer typed at a terminal passes here, at the moment it is taken (a terminal can change hands between
    the prompt and the reply): the answer stamped with where it came from, or why no person can have given it."""
    why = person.refusal()
    return why if why is not None else replace(answer, origin=person.origin())


def _prompt(text: str) -> str | None:
    print(text, end="", flush=True)
    line = sys.stdin.readline()
    return line.strip() if line else None


def answer_command(project: Project, run_id: str, step_id: str | None, wanted: str, choice: str | None, note) -> int:
    """`abilities-mcp approve` / `decide`: show the question, take the person's confirmation, record the answer."""
    if (why := person.refusal()) is not None:
        return _refused(why)
    store = Store.open(project)
    try:
        engine = Engine(store, Catalog(project))
        try:
            record, question = engine.pending_question(run_id, step_id, "terminal")
            answer = _command_answer(question, run_id, wanted, choice, note)
        except (Refused, ValueError) as exc:  # no such run, nothing asked, the other command, no such choice
            print(f"abilities-mcp: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(question.message(run_id, record.ability), flush=True)
        verb = {True: "Approve", False: "Reject"}[answer.approved] if question.kind != "decision" else answer.value
        reply = _prompt(f"\n{verb.capitalize()} ({answer.value})? [y/N] ")
        if (reply or "").lower() not in ("y", "yes"):
            print("Nothing recorded.", flush=True)
            return 1
        taken = from_a_person(answer)
        if isinstance(taken, str):
            return _refused(f"{taken}; nothing was recorded")
        try:
            engine.record_answer(run_id, question, taken)
        except Refused as exc:  # answered meanwhile from elsewhere, or timed out
            print(f"abilities-mcp: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"Recorded: {taken.summary()}.", flush=True)
        return 0
    finally:
        store.close()


def _refused(why: str) -> int:
    print(
        f"abilities-mcp: refused: {why}. Approvals and decisions come from a person typing this command in their "
        "own terminal; an agent's tools cannot give them.",
        file=sys.stderr,
    )
    return 2


def _command_answer(question: Question, run_id: str, wanted: str, choice: str | None, note: str | None) -> Answer:
    if wanted == "decision" and question.kind != "decision":
        raise ValueError(f"run {run_id} waits for an approval, not a decision: `{question.terminal_command(run_id)}`")
    if wanted != "decision" and question.kind == "decision":
        raise ValueError(f"run {run_id} waits for a decision, not an approval: `{question.terminal_command(run_id)}`")
    if choice is not None:
        return question.from_choice(pick(question.values(), choice), "terminal", note)
    return question.from_yes_no(wanted == "approve", "terminal", note)


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
            attempt = f" attempt {step.attempts}" if step.attempts > 1 else ""
            if step.status in ENDED and step.attempts and seen.get(step.step_id, ("", 0))[1] != step.attempts:
                # A short script step's start is written with its end (engine/core.py): it still started here.
                print(f"  [{MARKS['running']}] {step.step_id}{attempt}", flush=True)
            seen[step.step_id] = key
            detail = f" ({step.duration_ms} ms)" if step.duration_ms is not None and step.status != "running" else ""
            # A failure's reason is said once, in its block after the run; here the other statuses say why.
            shown = step.error and step.status not in ("running", "failed")
            reason = f": {brief_reason(step.error)}" if shown else ""
            print(f"  [{MARKS.get(step.status, step.status)}] {step.step_id}{attempt}{detail}{reason}", flush=True)


async def _cancel_on_interrupt(engine: Engine, run_id: str) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            print("\ncancelling...", file=sys.stderr, flush=True)
            await engine.cancel(run_id)
            return


def print_run(view: Run) -> str:
    """A run as lines of text. A failed step's reason is left to its block (failed_step_reports): each reason is
    said once, and the steps skipped after it say which step failed."""
    lines = [f"run {view.run_id}  {view.ability}  {view.status}  ({step_count(view)})"]
    for s in view.steps:
        extra = f"  exit {s.exit_code}" if s.exit_code is not None else ""
        why = "" if s.status == "failed" or not s.error else f"  {brief_reason(s.error)}"
        lines.append(f"  {s.id:20} {s.status:10}{extra}{why}")
    stopped_at = _RUN_STOPPED_AT.match(view.error or "")
    failed = {s.id for s in view.steps if s.status == "failed"}
    if view.error and not (stopped_at and stopped_at.group(1) in failed):
        lines.append(f"error: {view.error}")
    lines += [f"  answered {a.step}: {a.answer}  ({a.at})" for a in view.answers]
    return "\n".join(lines)


def step_count(view: Run) -> str:
    """How many steps ran of how many, and what became of the others: `1 of 4 steps ran; 1 failed, 3 skipped`."""
    statuses = [s.status for s in view.steps]
    ran = sum(status in ("completed", "failed") for status in statuses)
    others = [f"{statuses.count(st)} {st}" for st in ("failed", "cancelled", "skipped", "running", "awaiting")]
    rest = [o for o in others if not o.startswith("0 ")]
    return f"{ran} of {len(statuses)} steps ran" + (f"; {', '.join(rest)}" if rest else "")


def brief_reason(reason: str) -> str:
    """A step's reason without the failure of another step it repeats (that step's block says it)."""
    return _SKIPPED_AFTER_FAILURE.sub(r"\1", reason)
