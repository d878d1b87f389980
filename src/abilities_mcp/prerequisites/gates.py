"""The prerequisite gate: which workflows a tool call triggers, what each still needs, and one verdict.

Pure functions over a WorkflowSet and what this session has recorded; stdlib only (the hook runs them on every
tool call). Every matching workflow applies and the strictest verdict wins (deny > warn > suggest > allow), with
each one listed: no silent first-defined-wins.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..phrases import phrase
from .workflows import Prerequisite, Workflow, WorkflowSet

VERDICTS = ("allow", "suggest", "warn", "deny")  # weakest first
MODE_VERDICT = {"enforce": "deny", "warn": "warn", "suggest": "suggest"}
# A keyword is a word in the task, not the tool: "update the README" must not deny Edit because a database workflow
# lists "update". A workflow matched by keywords alone asks (warn) at most; a tool or category match can deny.
KEYWORD_ONLY_CAP = "warn"
# Only the head of a task is searched: real requests are far shorter, and a pasted log must not cost more.
MAX_TASK_CHARS = 10_000

Done = dict[str, dict[int, Any]]  # workflow -> step -> what was recorded


# NamedTuples, not dataclasses: the hook runs this module on every tool call (see workflows.py).
class Matched(NamedTuple):
    """One workflow a call triggered, and where this session stands with it."""

    workflow: Workflow
    verdict: str
    reasons: list[str]  # "tool execute_query", "category database", "keyword 'select'"
    missing: list[Prerequisite]  # required, not recorded, in step order
    optional: list[Prerequisite]  # optional, not recorded
    done: list[Prerequisite]


class Check(NamedTuple):
    """The answer to "may this tool run now?"."""

    verdict: str
    tool: str
    matched: list[Matched]
    message: str
    next_calls: list[tuple[str, dict[str, Any]]]


def tool_matches(called: str, wanted: str) -> bool:
    """`wanted` is the tool called, bare or after a client's namespace.

    Claude Code and Codex write mcp__<server>__<tool>, Cursor and VS Code <server>__<tool> on a clash, OpenCode
    <server>_<tool> (case kept): so a name matches when it is `wanted` or ends with "_" + `wanted`.
    """
    if not wanted:
        return False
    called, wanted = called.lower(), wanted.lower()
    return called == wanted or called.endswith("_" + wanted)


def categories_of(tool: str, categories: dict[str, frozenset[str]]) -> set[str]:
    """The routing cache's categories for a tool; cache ids may be bare or fully qualified, like the call."""
    return {c for tool_id, names in categories.items() if _same_tool(tool, tool_id) for c in names}


def _same_tool(a: str, b: str) -> bool:
    return tool_matches(a, b) or tool_matches(b, a)


def triggers(workflow: Workflow, tool: str, task: str, categories: dict[str, frozenset[str]]) -> list[str]:
    """Why a call triggers this workflow (empty: it does not). Triggers are OR'ed."""
    reasons = [f"tool {t}" for t in workflow.tools if tool and tool_matches(tool, t)]
    if workflow.category and tool and workflow.category.lower() in categories_of(tool, categories):
        reasons.append(f"category {workflow.category}")
    text = task[:MAX_TASK_CHARS]
    reasons += [f"keyword {k!r}" for k in workflow.keywords if text and k.split() and phrase(k.split()).search(text)]
    return reasons


# What the answer tells the model to do about missing steps: record them itself (the server's tool), or nothing
# more than calling them when a client hook records what runs.
RECORD_YOURSELF = (
    "Call the missing tools in step order, and after each, workflow_record(tool=<its name>, result=<a short "
    "summary>) (a client hook may record them for you)."
)
RECORDED_BY_HOOK = "Call the missing tools in step order; each is recorded when it runs."


def check(workflows: WorkflowSet, tool: str, task: str, done: Done, how: str = RECORD_YOURSELF) -> Check:
    """The verdict for calling `tool` (for `task`) given what this session has recorded."""
    matched = []
    for workflow in workflows.enabled():
        if any(tool_matches(tool, p.tool) for p in workflow.prerequisites):
            continue  # a workflow never gates its own prerequisites: that would lock it
        reasons = triggers(workflow, tool, task, workflows.categories)
        if reasons:
            matched.append(standing(workflow, reasons, done.get(workflow.name, {})))
    verdict = max((m.verdict for m in matched), key=VERDICTS.index, default="allow")
    return Check(verdict, tool, matched, message(verdict, tool, matched, how), next_calls(matched))


def standing(workflow: Workflow, reasons: list[str], recorded: dict[int, Any]) -> Matched:
    """Where the session stands with one workflow, and the verdict that gives."""
    missing = [p for p in workflow.prerequisites if p.required and p.step not in recorded]
    optional = [p for p in workflow.prerequisites if not p.required and p.step not in recorded]
    done = [p for p in workflow.prerequisites if p.step in recorded]
    verdict = MODE_VERDICT[workflow.mode] if missing else "allow"
    if all(r.startswith("keyword ") for r in reasons) and VERDICTS.index(verdict) > VERDICTS.index(KEYWORD_ONLY_CAP):
        verdict = KEYWORD_ONLY_CAP
    return Matched(workflow, verdict, reasons, missing, optional, done)


def next_calls(matched: list[Matched]) -> list[tuple[str, dict[str, Any]]]:
    """The missing prerequisites to call, in step order, strictest workflow first, each tool once."""
    calls: dict[str, dict[str, Any]] = {}
    for m in sorted(matched, key=lambda m: -VERDICTS.index(m.verdict)):
        for p in m.missing if m.verdict != "allow" else ():
            calls.setdefault(p.tool, dict(p.params))
    return list(calls.items())


def message(verdict: str, tool: str, matched: list[Matched], how: str = RECORD_YOURSELF) -> str:
    """One paragraph for the model: the verdict, each workflow's part in it, and what to do."""
    if not matched:
        return f"Allowed: no workflow gates {tool!r}."
    head = {
        "deny": f"Denied: {tool!r} may not run yet.",
        "warn": f"Warning: {tool!r} should wait; ask the user before running it without these steps.",
        "suggest": f"Allowed: {tool!r} may run; prerequisites are suggested first.",
        "allow": f"Allowed: {tool!r} may run; every required prerequisite is recorded in this session.",
    }[verdict]
    lines = [head]
    for m in matched:
        w = m.workflow
        why = ", ".join(m.reasons)
        if m.missing:
            steps = ", ".join(f"{p.tool} (step {p.step}: {p.description})" for p in m.missing)
            lines.append(f"- {w.name} ({w.mode}, {m.verdict}; matched by {why}) needs: {steps}.")
        else:
            lines.append(f"- {w.name} ({w.mode}; matched by {why}): all required steps done.")
        if m.optional:
            lines.append(f"  Optional: {', '.join(p.tool for p in m.optional)}.")
    if verdict != "allow" and any(m.missing for m in matched):
        lines.append(how)
    return "\n".join(lines)


class RecordPlan(NamedTuple):
    """What recording one tool does: the steps it completes, and the steps it may not complete yet."""

    record: list[tuple[Workflow, Prerequisite]]
    already: list[tuple[Workflow, Prerequisite]]
    refused: list[tuple[Workflow, Prerequisite, Prerequisite]]  # (workflow, step, the earlier step it waits for)


def plan_record(workflows: WorkflowSet, tool: str, done: Done, only: str | None = None) -> RecordPlan:
    """A tool that ran completes its step in every workflow that lists it, unless an enforced workflow still
    needs an earlier required step (order matters there; optional steps may be skipped)."""
    plan = RecordPlan([], [], [])
    for workflow in workflows.enabled():
        if only is not None and workflow.name != only:
            continue
        recorded = done.get(workflow.name, {})
        listed = [p for p in workflow.prerequisites if tool_matches(tool, p.tool)]
        pending = [p for p in listed if p.step not in recorded]  # a tool listed twice fills one step a call
        if not pending:
            plan.already.extend((workflow, p) for p in listed[:1])
            continue
        step = pending[0]
        earlier = [p for p in workflow.prerequisites if p.step < step.step and p.required and p.step not in recorded]
        if workflow.mode == "enforce" and earlier:
            plan.refused.append((workflow, step, earlier[0]))
        else:
            plan.record.append((workflow, step))
    return plan
