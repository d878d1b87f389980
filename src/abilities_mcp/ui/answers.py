"""What waits for a person, and their answer given on the page: every run question (approvals, plan approvals,
decisions, child runs' too) and every pending call approval, each shown exactly (made inert) with its buttons; and
taking an answer, recorded with channel `web` and its origin. The first answer wins, from any channel (the store's
compare-and-set): an answer to a question the run no longer asks, or to a call already answered, is not recorded.

Elements the browser tests find (keep them): `section#waiting` with one `article[data-run]` or `article[data-call]`
an item, each with `button[name=answer]`: value `approve` (Approve) and `reject` (Reject), or for a decision one
button an option, its value the option's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..abilities.catalog import Catalog
from ..engine.core import Engine
from ..engine.questions import Answer, Question
from ..errors import Refused
from ..prerequisites.approvals import CallApproval, CallApprovals, NotPending, describe
from ..state.database import Database
from ..state.store import RunRecord, Store
from .markup import Safe, clock, el, join, path
from .pages import ASKING

# Runs read for what waits (the live ones, newest first; their child runs too).
LISTED_RUNS = 500
CHANNEL = "web"


class NotTaken(ValueError):
    """An answer the page did not record, and why."""


@dataclass(frozen=True)
class Asking:
    """A run that waits for a person, with its question."""

    record: RunRecord
    question: Question


def asking(store: Store) -> list[Asking]:
    """Every run that waits for a person's answer, child runs too, oldest first."""
    found: list[Asking] = []
    todo = store.runs(limit=LISTED_RUNS, live_only=True)
    while todo:
        record = todo.pop()
        todo += store.children(record.run_id)
        if record.status in ASKING and record.question:
            try:
                found.append(Asking(record, Question.from_json(record.question)))
            except (TypeError, KeyError, ValueError):  # not written by this program: nothing a person could answer
                continue
    return sorted(found, key=lambda a: a.record.updated_at)


# --- taking an answer ------------------------------------------------------------------------------------------------


def answer_run(
    store: Store, catalog: Catalog, run_id: str, form: dict[str, str], origin: str, identity: str | None = None
) -> str:
    """Record a person's answer to the question the run waits on (the one the page showed: its step and question
    id); returns what was recorded, or raises NotTaken. The run's own server notices it in the state file."""
    engine = Engine(store, catalog)
    try:
        _, question = engine.pending_question(run_id, form.get("step") or None, CHANNEL)
        if form.get("question") and form["question"] != question.id:
            raise NotTaken("the run asks another question now; reload the page to see it")
        answer = replace(_answer(question, form.get("answer", ""), form.get("note") or None, origin), identity=identity)
        engine.record_answer(run_id, question, answer)
    except (Refused, ValueError) as exc:
        raise NotTaken(str(exc)) from None
    return f"Recorded: {answer.summary()}."


def _answer(question: Question, value: str, note: str | None, origin: str) -> Answer:
    if question.kind != "decision" and value in ("approve", "reject"):
        return question.from_yes_no(value == "approve", CHANNEL, note, origin=origin)
    return question.from_choice(value, CHANNEL, note, origin=origin)


def answer_call(
    db: Database, call_id: str, form: dict[str, str], by: str, origin: str, identity: str | None = None
) -> str:
    """Record a person's yes (or no) to one tool call; returns what was recorded, or raises NotTaken."""
    if form.get("answer") not in ("approve", "reject"):
        raise NotTaken("answer with Approve or Reject")
    try:
        approved = form["answer"] == "approve"
        done = CallApprovals(db).answer(call_id, approved, by, CHANNEL, origin, form.get("note"), identity)
    except NotPending as exc:
        raise NotTaken(str(exc)) from None
    return f"Recorded: {done.status} {done.call_id}."


# --- the page ------------------------------------------------------------------------------------------------------


def waiting_body(asking: Sequence[Asking], calls: Sequence[CallApproval], csrf: str, flash: str | None) -> Safe:
    """Every run question and call approval that waits for a person, each with its buttons."""
    items = [_run_question(a, csrf) for a in asking] + [_call(c, csrf) for c in calls]
    empty = el("p", "Nothing waits for your answer.", id="nothing-waits") if not items else None
    return join(
        [
            el("p", flash or "", id="flash", role="status"),
            el(
                "section",
                el("h2", "Waiting", id="waiting-title", class_="visually-hidden"),
                items,
                empty,
                id="waiting",
                data_live="keyed",
            ),
        ]
    )


def _run_question(a: Asking, csrf: str) -> Safe:
    r, q = a.record, a.question
    if q.kind == "decision":
        buttons = [el("button", o.label, type="submit", name="answer", value=o.value) for o in q.options]
    else:
        buttons = [
            el("button", "Approve", type="submit", name="answer", value="approve", class_="approve"),
            el("button", "Reject", type="submit", name="answer", value="reject", class_="reject"),
        ]
        buttons += [
            el("button", o.label, type="submit", name="answer", value=o.value) for o in q.options if not q.is_yes_no
        ]
    heading = {"approval": "Approval", "plan": "Plan approval", "decision": "Decision"}[q.kind]
    deadline = [" · answer by ", clock(q.deadline)] if q.deadline else []
    return el(
        "article",
        el(
            "h3",
            heading,
            " for ",
            el("a", r.ability, href=path("abilities", r.ability, keep_slashes=True)),
            id=f"ask-title-{r.run_id}",
        ),
        el(
            "p",
            "Run ",
            el("a", r.run_id, href=path("runs", r.run_id)),
            ", step ",
            el("code", q.step_id),
            *deadline,
            class_="meta",
        ),
        el("pre", q.message(r.run_id, r.ability), class_="question"),
        _what_runs(r),
        _answer_form(
            path("waiting", "runs", r.run_id),
            csrf,
            buttons,
            step=q.step_id,
            question=q.id,
            label_id=f"ask-title-{r.run_id}",
        ),
        el("p", "", class_="problem", role="alert"),
        id=f"ask-{r.run_id}",
        data_run=r.run_id,
        aria_labelledby=f"ask-title-{r.run_id}",
    )


def _what_runs(r: RunRecord) -> Safe:
    """What would run after a yes: the inputs and the steps still to come, each script's command as written."""
    by_id = {s.get("id"): s for s in r.definition.get("steps", []) if isinstance(s, dict)}
    rows = []
    for step in r.steps:
        if step.status not in ("pending", "awaiting"):
            continue
        spec = by_id.get(step.step_id, {})
        what = spec.get("run") or spec.get("workflow") or spec.get("prompt") or spec.get("skill") or ""
        rows.append(el("li", el("code", step.step_id), f" ({step.type})", el("pre", what) if what else None))
    return el(
        "details",
        el("summary", "What would run: the inputs and the steps still to come"),
        el("pre", _json(r.inputs)),
        el("ol", rows) if rows else el("p", "No step after this one."),
        class_="what-runs",
    )


def _call(c: CallApproval, csrf: str) -> Safe:
    title = f"call-title-{c.call_id}"
    buttons = [
        el("button", "Approve", type="submit", name="answer", value="approve", class_="approve"),
        el("button", "Reject", type="submit", name="answer", value="reject", class_="reject"),
    ]
    return el(
        "article",
        el("h3", "Tool call ", el("code", c.tool), id=title),
        el(
            "p",
            f"In a session of {c.client or 'a client'}, for workflow {', '.join(c.workflows)} · ",
            describe(c),
            class_="meta",
        ),
        el("p", c.prompt) if c.prompt else None,
        el("p", "The call, exactly:"),
        el("pre", c.shown, class_="call", tabindex="0"),
        el("p", "A yes lets this exact call run once; another call, or this one again, needs its own.", class_="note"),
        _answer_form(path("waiting", "calls", c.call_id), csrf, buttons, label_id=title),
        el("p", "", class_="problem", role="alert"),
        id=f"ask-{c.call_id}",
        data_call=c.call_id,
        aria_labelledby=title,
    )


def _answer_form(action: str, csrf: str, buttons: list[Safe], label_id: str, **hidden: str) -> Safe:
    note_id = f"note-{label_id}"
    return el(
        "form",
        el("input", type="hidden", name="csrf", value=csrf),
        [el("input", type="hidden", name=k, value=v) for k, v in hidden.items()],
        el("label", "Note for the record (optional)", for_=note_id),
        el("input", type="text", id=note_id, name="note", maxlength="500", autocomplete="off"),
        el("div", buttons, class_="buttons"),
        method="post",
        action=action,
        class_="answer",
        data_answer="",
        aria_labelledby=label_id,
    )


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
