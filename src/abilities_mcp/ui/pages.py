"""The pages about runs, server-rendered: the runs list, a run's timeline and a step's output. Every value goes
through markup.el, escaped and inert.

Elements the browser tests find (keep them): `table#runs` with `tr[data-run][data-status]`; `ol#timeline` with
`li[data-step][data-status]`; `span#run-status` (the waiting page's are answers.py's). Elements marked `data-live` are
refreshed by app.js when the event stream says something changed; `data-live="keyed"` ones keep the children whose
id and content did not change (a note being typed survives).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from ..engine.machine import RunState
from ..state.store import RunRecord, StepRecord
from .markup import Safe, clock, el, join, path, scroll, seconds

# A step's output shown on the run page: its last characters (the step's page shows all that was kept).
TAIL_CHARS = 4096
# Statuses that wait for a person's answer.
ASKING = (RunState.AWAITING_APPROVAL, RunState.AWAITING_DECISION)
# What each waiting status waits for, in a person's words.
WAITS_FOR = {
    RunState.AWAITING_AGENT: "the agent's hand-back",
    RunState.AWAITING_APPROVAL: "a person's approval",
    RunState.AWAITING_DECISION: "a person's decision",
}
FINISHED = {RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED, RunState.INTERRUPTED}
# An SVG bar's width in its own units (drawn at 100% of its box): the run's whole span.
BAR_UNITS = 1000


# --- runs ---------------------------------------------------------------------------------------------------------


def runs_body(records: Sequence[RunRecord], status: str, ability: str, abilities: Sequence[str]) -> Safe:
    """The runs list, newest first, with its filters (a GET form: the filters are in the address, live too)."""
    status_choice = el(
        "select",
        el("option", "any status", value=""),
        [el("option", s.value, value=s.value, selected=s.value == status) for s in RunState],
        id="filter-status",
        name="status",
    )
    ability_choice = el(
        "select",
        el("option", "any ability", value=""),
        [el("option", a, value=a, selected=a == ability) for a in abilities],
        id="filter-ability",
        name="ability",
    )
    filters = el(
        "form",
        el("span", el("label", "Status", for_="filter-status"), " ", status_choice, class_="field"),
        el("span", el("label", "Ability", for_="filter-ability"), " ", ability_choice, class_="field"),
        el("button", "Filter", type="submit"),
        method="get",
        action=path(),
        class_="filters",
        aria_label="Filter runs",
    )
    head = el(
        "thead", el("tr", [el("th", h, scope="col") for h in ("Run", "Ability", "Status", "Started", "Took", "Steps")])
    )
    rows = [_run_row(r) for r in records] or [el("tr", el("td", _no_runs(status, ability), colspan="6"), id="no-runs")]
    table = el(
        "table",
        el("caption", "Runs, newest first"),
        head,
        el("tbody", rows, id="runs-body", data_live="keyed"),
        id="runs",
    )
    return join([filters, scroll(table, "Runs")])


def _no_runs(status: str, ability: str) -> str:
    if status or ability:
        return "No run matches these filters."
    return "No runs yet. Start one from your agent (ability_run) or with `abilities-mcp run NAME`."


def _run_row(r: RunRecord) -> Safe:
    done = sum(s.status in ("completed", "skipped") for s in r.steps)
    return el(
        "tr",
        el("td", el("a", r.run_id, href=path("runs", r.run_id))),
        el("td", el("a", r.ability, href=path("abilities", r.ability, keep_slashes=True))),
        el(
            "td",
            _status(r.status),
            " ",
            el("span", f"(waits for {WAITS_FOR[r.status]})", class_="note") if r.status in WAITS_FOR else None,
        ),
        el("td", clock(r.started_at)),
        el("td", seconds(_took(r))),
        el("td", f"{done}/{len(r.steps)}"),
        id=f"run-{r.run_id}",
        data_run=r.run_id,
        data_status=r.status,
    )


def _status(status: str) -> Safe:
    return el("span", status, class_=f"status status-{status}")


def _took(r: RunRecord) -> float:
    return (r.finished_at or time.time()) - r.started_at


# --- one run ------------------------------------------------------------------------------------------------------


def run_body(record: RunRecord, children: Sequence[RunRecord], parent: RunRecord | None, svg: str) -> Safe:
    """A run's timeline: each step with status, attempts, a bar for when it ran, exit code and output's end; its
    child runs, its answers and inputs; and the ability as it ran, as a graph coloured by step status (`svg`, from
    graph.py, which escapes what it draws)."""
    facts = el(
        "dl",
        el("dt", "Ability"),
        el("dd", el("a", record.ability, href=path("abilities", record.ability, keep_slashes=True))),
        el("dt", "Status"),
        el("dd", el("span", record.status, id="run-status", class_=f"status status-{record.status}")),
        el("dt", "Started"),
        el("dd", clock(record.started_at)),
        el("dt", "Took" if record.finished_at else "Running for"),
        el("dd", seconds(_took(record))),
        el("dt", "Session"),
        el("dd", el("code", record.session_id)),
        el("dt", "Enforcement"),
        el("dd", record.enforcement),
        [el("dt", "Part of"), el("dd", el("a", parent.run_id, href=path("runs", parent.run_id)))] if parent else None,
        id="run-facts",
        class_="facts",
    )
    asked = f"{path('waiting')}#ask-{record.run_id}"
    notes = [
        el("p", "Error: ", record.error, class_="error", role="alert") if record.error else None,
        el("p", record.trust_note, class_="note") if record.trust_note else None,
        el("p", "This run waits for your answer: ", el("a", "answer it", href=asked), ".")
        if record.status in ASKING
        else None,
    ]
    timeline = el("ol", [_step_item(record, s) for s in record.steps], id="timeline", data_live="keyed")
    return el(
        "div",
        facts,
        el("div", notes, id="run-notes"),
        el("h2", "Timeline", id="timeline-title"),
        timeline,
        _children(children),
        _answers(record),
        el(
            "figure", Safe(svg), el("figcaption", "The steps as this run has them, coloured by status."), id="run-graph"
        ),
        el("section", el("h2", "Inputs"), el("pre", _json(record.inputs)), id="run-inputs"),
        id="run-live",
        data_live="keyed",
        data_run=record.run_id,
    )


def _step_item(record: RunRecord, step: StepRecord) -> Safe:
    facts = [
        el("span", step.type, class_="type"),
        _status(step.status),
        el("span", f"{step.attempts} attempt{'s' if step.attempts != 1 else ''}") if step.attempts else None,
        el("span", f"exit {step.exit_code}", class_="exit") if step.exit_code is not None else None,
        el("span", seconds(_step_seconds(step))) if step.started_at else None,
    ]
    output = _tail(step.output, "Output")
    errors = _tail(step.stderr, "Errors (stderr)")
    here = path("runs", record.run_id, "steps", step.step_id)
    links = [el("a", "Follow output" if step.type == "script" else "Output", href=here)]
    if step.child_run:
        links += [" · ", el("a", f"child run {step.child_run}", href=path("runs", step.child_run))]
    return el(
        "li",
        el("p", el("strong", step.step_id), " ", join(_spaced(facts)), class_="step-head"),
        _bar(record, step),
        el("p", step.error, class_="error") if step.error else None,
        output,
        errors,
        el("p", links, class_="links"),
        id=f"step-{step.step_id}",
        data_step=step.step_id,
        data_status=step.status,
        class_="step",
    )


def _spaced(items: Sequence[Safe | None]) -> list[Safe]:
    shown = [i for i in items if i is not None]
    return [x for i, item in enumerate(shown) for x in ((Safe(" ") if i else Safe("")), item)]


def _step_seconds(step: StepRecord) -> float | None:
    if step.duration_ms is not None:
        return step.duration_ms / 1000
    if step.started_at is None:
        return None
    return (step.finished_at or time.time()) - step.started_at


def _bar(record: RunRecord, step: StepRecord) -> Safe | None:
    """When the step ran within the run, as a bar: an SVG rectangle (the page's policy allows no inline style, and
    this draws without the script too)."""
    if step.started_at is None:
        return None
    span = max(_took(record), 1e-3)
    start = min(max(step.started_at - record.started_at, 0.0) / span, 1.0)
    width = min(max((_step_seconds(step) or 0.0) / span, 0.004), 1.0 - start)
    label = f"ran {seconds(_step_seconds(step))}, from {seconds(step.started_at - record.started_at)} into the run"
    rect = el("rect", x=f"{start * BAR_UNITS:.1f}", y="0", width=f"{max(width, 0.004) * BAR_UNITS:.1f}", height="10")
    return el(
        "svg",
        el("title", label),
        rect,
        class_=f"bar bar-{step.status}",
        viewBox=f"0 0 {BAR_UNITS} 10",
        preserveAspectRatio="none",
        role="img",
        aria_label=label,
    )


def _tail(text: str | None, label: str) -> Safe | None:
    if not text:
        return None
    cut = f" (its last {TAIL_CHARS} characters; Output shows all that was kept)" if len(text) > TAIL_CHARS else ""
    return el("figure", el("figcaption", label, cut), el("pre", text[-TAIL_CHARS:], tabindex="0"), class_="output")


def _children(children: Sequence[RunRecord]) -> Safe:
    items = [
        el("li", el("a", c.run_id, href=path("runs", c.run_id)), " ", c.ability, " ", _status(c.status))
        for c in children
    ]
    return el("section", el("h2", "Child runs"), el("ul", items) if items else el("p", "None."), id="run-children")


def _answers(record: RunRecord) -> Safe:
    """Who let the run on, through what, and when (the answer trail)."""
    items = [
        el("li", el("code", a["step_id"] or "plan"), ": ", a["detail"], " at ", clock(a["at"])) for a in record.answers
    ]
    return el("section", el("h2", "Answers"), el("ul", items) if items else el("p", "None yet."), id="run-answers")


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


# --- one step's output ---------------------------------------------------------------------------------------------


def step_body(record: RunRecord, step: StepRecord, follow_url: str | None) -> Safe:
    """All that was kept of a step's output; while it runs, its output as it comes (app.js, from the spool)."""
    kept = [
        _kept(step.output, step.output_bytes, "Output (stdout)"),
        _kept(step.stderr, step.stderr_bytes, "Errors (stderr)"),
    ]
    live = None
    if follow_url is not None:
        live = el(
            "section",
            el("h2", "As it runs"),
            el("p", "New output appears here while the step runs (it needs the page's script).", class_="note"),
            el("pre", "", id="follow", data_follow=follow_url, tabindex="0"),
            id="follow-section",
        )
    return join(
        [
            el(
                "p",
                "Step ",
                el("code", step.step_id),
                " of run ",
                el("a", record.run_id, href=path("runs", record.run_id)),
                ": ",
                el("span", step.status, id="step-status", class_=f"status status-{step.status}"),
                f", exit {step.exit_code}" if step.exit_code is not None else None,
                ". At a terminal: ",
                el("code", f"abilities-mcp logs --follow {record.run_id} {step.step_id}"),
            ),
            live,
            [k for k in kept if k is not None] or el("p", "Nothing was printed (or nothing yet)."),
        ]
    )


def _kept(text: str | None, size: int | None, label: str) -> Safe | None:
    if not text:
        return None
    cut = ", head and tail kept" if "bytes truncated of" in text else ""
    return el(
        "section",
        el("h2", label, el("span", f" ({size if size is not None else len(text)} bytes{cut})", class_="note")),
        el("pre", text, tabindex="0"),
    )
