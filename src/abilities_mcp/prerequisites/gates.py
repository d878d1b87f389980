"""The prerequisite gate: which workflows a tool call triggers, what each still needs, and one verdict.

Pure functions over a WorkflowSet and what this session has recorded; stdlib only (the hook runs them on every
tool call). Every matching workflow applies and the strictest verdict wins (deny > warn > suggest > allow), with
each one listed: no silent first-defined-wins.

Names are matched whole (names.py). A record counts as evidence only where it fits (`counts`): for the server the
prerequisite names, else for the gated call's server (a client's own tool counting anywhere), and, where someone
sees the tool run (the gateway its upstreams, the client's hooks every tool of a session they observe), only when
it was seen: a self-report (workflow_record) does not count there.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ..records import Record
from .names import UNKNOWN_SERVER, Name, matches, name_of, same, wanted
from .workflows import Prerequisite, Workflow, WorkflowSet

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERDICTS = ("allow", "suggest", "warn", "deny")  # weakest first
MODE_VERDICT = {"enforce": "deny", "warn": "warn", "suggest": "suggest"}
# A keyword is a word in the task, not the tool: "update the README" must not deny Edit because a database workflow
# lists "update". A workflow matched by keywords alone asks (warn) at most; a tool or category match can deny.
KEYWORD_ONLY_CAP = "warn"
# Only the head of a task is searched: real requests are far shorter, and a pasted log must not cost more.
MAX_TASK_CHARS = 10_000
# How a record is known: seen run and succeed (the hook's after-event, the gateway's own call), or said so by the
# agent (workflow_record).
OBSERVED, REPORTED = "observed", "reported"

# workflow -> step -> its records (server, how), one per server
Done = Mapping[str, Mapping[int, Sequence[object]]]


# Records, not dataclasses nor typing.NamedTuple: the hook runs this module on every tool call (see workflows.py).
class Observer(Record, fields="upstreams hooks offers", defaults=(frozenset(), False, {})):
    """Who sees this session's tool calls run, so that only what they saw counts as evidence."""

    __slots__ = ()

    upstreams: frozenset[str]  # = frozenset(); the servers behind this server's gateway: it makes their calls
    hooks: bool  # = False; the session's client runs this server's hooks, which see every tool call it makes
    # The tools of the upstreams whose listing is at hand (server -> tool names, lowercase): a tool such an upstream
    # does not offer (a client's own tool named by a bare prerequisite) is not the gateway's to see.
    offers: Mapping[str, frozenset[str]]  # = {}; a shared default: never mutated

    def sees(self, server: str | None, tool: str) -> bool:
        """Whether a call of `tool` on `server` (None: a client's own tool) is seen when it runs."""
        if self.hooks:
            return True
        if server is None or not same(server, self.upstreams):
            return False
        listed = self.offers.get(server.lower())
        return listed is None or tool.lower() in listed

    def lacks(self, server: str | None, tool: str) -> bool:
        """Whether `server` is an upstream whose tools are at hand and `tool` is not among them: no call of it
        there can be made (a client's own tool of that name is the client's to call)."""
        if server is None or not same(server, self.upstreams):
            return False
        listed = self.offers.get(server.lower())
        return listed is not None and tool.lower() not in listed


NOBODY = Observer()
EVERYONE = Observer(hooks=True)  # as if every call were seen: only what was seen counts


class Matched(Record, fields="workflow verdict reasons missing optional done"):
    """One workflow a call triggered, and where this session stands with it."""

    __slots__ = ()

    workflow: Workflow
    verdict: str
    reasons: list[str]  # "tool execute_query", "category database", "keyword 'select'"
    missing: list[Prerequisite]  # required, not recorded, in step order
    optional: list[Prerequisite]  # optional, not recorded
    done: list[Prerequisite]


class Check(Record, fields="verdict tool matched message next_calls"):
    """The answer to "may this tool run now?"."""

    __slots__ = ()

    verdict: str
    tool: str
    matched: list[Matched]
    message: str
    next_calls: list[tuple[str, dict[str, Any]]]


def tool_matches(tool: str | Name, want: str) -> bool:
    """Whether the called `tool` is the tool a workflow names `want`: the same tool whole, on the server `want`
    names if it names one (`mcp__db__list_tables`, `db__list_tables`); a bare `want` is that tool on any server."""
    return matches(name_of(tool), wanted(want))


def categories_of(tool: str | Name, categories: dict[str, frozenset[str]]) -> set[str]:
    """The routing cache's categories for a tool; cache ids may be bare or name their server, like triggers."""
    name = name_of(tool)
    return {c for tool_id, names in categories.items() if matches(name, wanted(tool_id), trigger=True) for c in names}


def triggers(
    workflow: Workflow,
    tool: str | Name,
    task: str,
    categories: dict[str, frozenset[str]],
    arguments: Mapping[str, Any] | None = None,
) -> list[str]:
    """Why a call triggers this workflow (empty: it does not). Triggers are OR'ed. A shell rule
    (`Bash(git push --force:*)`) triggers on a call of the client's shell tool whose command line it matches
    (`arguments`: the call's; without them no rule can match)."""
    name = name_of(tool)
    reasons = [f"tool {t}" for t in workflow.tools if name.raw and matches(name, wanted(t), trigger=True)]
    if workflow.commands and arguments and not name.server:
        from .commands import matching_rules, shell_command  # here: only a file with shell rules needs them

        command = shell_command(name.tool, arguments)
        if command is not None:
            reasons += [f"command rule {r.raw}" for r in matching_rules(workflow.commands, command)]
    if workflow.category and name.raw and workflow.category.lower() in categories_of(name, categories):
        reasons.append(f"category {workflow.category}")
    text = task[:MAX_TASK_CHARS]
    if text and workflow.keywords:  # only a prompt's words meet keywords: a tool call's check never loads phrases
        from ..phrases import phrase

        reasons += [f"keyword {k!r}" for k in workflow.keywords if k.split() and phrase(k.split()).search(text)]
    return reasons


def counts(record: Any, prerequisite: Name, gated: Name, observer: Observer = NOBODY) -> bool:
    """Whether one record (its `server`, None for a client's own tool, and `how`) is evidence of `prerequisite`
    for a call of `gated`: made on the server the prerequisite names, else on the gated call's server or by a
    client's own tool; and seen run, wherever someone sees that tool run."""
    server = record.server
    if prerequisite.server is not None:
        if not same(server, prerequisite.server):
            return False
        on = prerequisite.server
    elif gated.server is not None and gated.server != UNKNOWN_SERVER:
        if server is not None and not same(server, gated.server):
            return False
        on = gated.server
    else:
        on = server
    return record.how == OBSERVED or not observer.sees(on, prerequisite.tool)


def satisfied(workflow: Workflow, records: Mapping[int, Sequence[Any]], gated: Name, observer: Observer) -> dict:
    """step -> the first record that is evidence of it for a call of `gated` (steps with none are left out)."""
    out = {}
    for p in workflow.prerequisites:
        want = wanted(p.tool)
        hit = next((r for r in records.get(p.step, ()) if counts(r, want, gated, observer)), None)
        if hit is not None:
            out[p.step] = hit
    return out


# What the answer tells the model to do about missing steps: record them itself (the server's tool), or nothing
# more than calling them when a client hook records what runs.
RECORD_YOURSELF = (
    "Call the missing tools in step order, and after each, workflow_record(tool=<its name>, result=<a short "
    "summary>) (a client hook may record them for you)."
)
RECORDED_BY_HOOK = "Call the missing tools in step order; each is recorded when it runs."
RUN_BY_GATEWAY = (
    "The gateway runs the missing tools itself, in step order, when the tool is called through it (tool_call, or "
    "the tool it lists): call it; there is nothing to record."
)


def check(
    workflows: WorkflowSet,
    tool: str | Name,
    task: str,
    done: Done,
    how: str = RECORD_YOURSELF,
    observer: Observer = NOBODY,
    arguments: Mapping[str, Any] | None = None,
) -> Check:
    """The verdict for calling `tool` (for `task`) given what this session has recorded; `observer`: who sees which
    calls run, so that a self-report of those does not count; `arguments`: the call's, for shell rules. A workflow
    with an approval is allowed here once its prerequisites are done: the person's yes is approvals.py's to ask."""
    name = name_of(tool)
    matched = []
    for workflow in workflows.enabled():
        reasons = triggers(workflow, name, task, workflows.categories, arguments)
        if reasons and _own_prerequisite(workflow, name, reasons):
            continue  # a workflow never gates its own prerequisites: that would lock it
        if reasons:
            recorded = satisfied(workflow, done.get(workflow.name, {}), name, observer)
            matched.append(standing(workflow, reasons, recorded))
    verdict = max((m.verdict for m in matched), key=VERDICTS.index, default="allow")
    lacking = {p.tool for m in matched for p in m.missing if observer.lacks(*_where(wanted(p.tool), name))}
    said = message(verdict, name.raw, matched, how) + _lacking(lacking, name)
    return Check(verdict, name.raw, matched, said, next_calls(matched, lacking))


def _own_prerequisite(workflow: Workflow, name: Name, reasons: list[str]) -> bool:
    """Whether a call is one of the workflow's own prerequisites, which it never gates. Not a call its shell rule
    names (`Bash(git push --force:*)` is narrower than a prerequisite `Bash`), nor any call of a workflow that wants
    a person's yes: an added prerequisite must not open what the approval holds."""
    if workflow.approval is not None or any(r.startswith("command rule ") for r in reasons):
        return False
    return any(matches(name, wanted(p.tool)) for p in workflow.prerequisites)


def standing(workflow: Workflow, reasons: list[str], recorded: dict[int, Any]) -> Matched:
    """Where the session stands with one workflow, and the verdict that gives."""
    missing = [p for p in workflow.prerequisites if p.required and p.step not in recorded]
    optional = [p for p in workflow.prerequisites if not p.required and p.step not in recorded]
    done = [p for p in workflow.prerequisites if p.step in recorded]
    verdict = MODE_VERDICT[workflow.mode] if missing else "allow"
    if all(r.startswith("keyword ") for r in reasons) and VERDICTS.index(verdict) > VERDICTS.index(KEYWORD_ONLY_CAP):
        verdict = KEYWORD_ONLY_CAP
    return Matched(workflow, verdict, reasons, missing, optional, done)


def next_calls(matched: list[Matched], lacking: Collection[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """The missing prerequisites to call, in step order, strictest workflow first, each tool once; never one of
    `lacking`, tools their upstream does not have."""
    calls: dict[str, dict[str, Any]] = {}
    for m in sorted(matched, key=lambda m: -VERDICTS.index(m.verdict)):
        for p in m.missing if m.verdict != "allow" else ():
            if p.tool not in lacking:
                calls.setdefault(p.tool, dict(p.params))
    return list(calls.items())


def _where(prerequisite: Name, gated: Name) -> tuple[str | None, str]:
    """Where a prerequisite runs for a call of `gated` (the server it names, else the gated call's), and its tool."""
    return prerequisite.server or gated.server, prerequisite.tool


def _lacking(tools: Collection[str], gated: Name) -> str:
    """What the message says of prerequisites no upstream call can meet, instead of telling the model to call them."""
    if not tools:
        return ""
    named = ", ".join(sorted(map(repr, tools)))
    return (
        f"\nNo call can meet {named} on {gated.server!r}, whose tools have none of that name: if it is one of your "
        "client's own tools, call it directly; otherwise the workflow names a tool no upstream has, and a person "
        "fixes it in workflows.json (a tool an upstream offers, the step optional or removed; then `abilities-mcp "
        "trust`)."
    )


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
        elif w.approval is not None:
            lines.append(f"- {w.name} ({w.mode}; matched by {why}): each such call needs a person's approval.")
        else:
            lines.append(f"- {w.name} ({w.mode}; matched by {why}): all required steps done.")
        if m.optional:
            lines.append(f"  Optional: {', '.join(p.tool for p in m.optional)}.")
    if verdict != "allow" and any(m.missing for m in matched):
        lines.append(how)
    return "\n".join(lines)


class RecordPlan(Record, fields="record already refused watched", defaults=([],)):
    """What recording one tool does: the steps it completes, and the steps it may not complete yet."""

    __slots__ = ()

    record: list[tuple[Workflow, Prerequisite]]
    already: list[tuple[Workflow, Prerequisite]]
    refused: list[tuple[Workflow, Prerequisite, Prerequisite]]  # (workflow, step, the earlier step it waits for)
    # Enforced steps a self-report may not complete: someone sees that tool run (the server it runs on, or None for
    # the client's hooks), and only what they saw counts.
    watched: list[tuple[Workflow, Prerequisite, str | None]]  # = []; a shared default: plans pass their own


def plan_record(
    workflows: WorkflowSet,
    tool: str | Name,
    done: Done,
    only: str | None = None,
    observer: Observer = NOBODY,
    how: str = OBSERVED,
) -> RecordPlan:
    """A tool that ran completes its step in every workflow that lists it, unless an enforced workflow still
    needs an earlier required step (order matters there; optional steps may be skipped), or, for a self-report
    (`how` REPORTED), someone sees that tool run and the workflow enforces."""
    name = name_of(tool)
    plan = RecordPlan([], [], [], [])
    for workflow in workflows.enabled():
        if only is not None and workflow.name != only:
            continue
        listed = [p for p in workflow.prerequisites if matches(name, wanted(p.tool))]
        if not listed:
            continue
        recorded = satisfied(workflow, done.get(workflow.name, {}), name, observer)
        # A call seen to run is kept even where a report of it stood: what was seen outranks what was said.
        seen = recorded if how == REPORTED else satisfied(workflow, done.get(workflow.name, {}), name, EVERYONE)
        pending = [p for p in listed if p.step not in seen]  # a tool listed twice fills one step a call
        if not pending:
            plan.already.append((workflow, listed[0]))
            continue
        step = pending[0]
        earlier = [p for p in workflow.prerequisites if p.step < step.step and p.required and p.step not in recorded]
        on = wanted(step.tool).server or name.server
        if workflow.mode == "enforce" and earlier:
            plan.refused.append((workflow, step, earlier[0]))
        elif how == REPORTED and workflow.mode == "enforce" and observer.sees(on, wanted(step.tool).tool):
            plan.watched.append((workflow, step, None if observer.hooks else on))
        else:
            plan.record.append((workflow, step))
    return plan
