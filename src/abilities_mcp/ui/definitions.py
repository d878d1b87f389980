"""The pages about the project's files, server-rendered: the abilities and one ability as a graph with its problems,
the skills with a "route a task" box, and the prerequisites (workflows, each session's records, call approvals).

The ability page holds `figure#graph` with the svg graph.py draws (it escapes what it draws; nothing else here is
trusted). Every other value goes through markup.el, escaped and inert.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..abilities.loader import Definition
from ..errors import Diagnostic
from ..prerequisites.approvals import CallApproval, describe
from ..prerequisites.gates import NOBODY, Done, name_of, satisfied, standing
from ..prerequisites.workflows import Workflow, WorkflowSet
from ..skills.router import Match
from ..skills.spec import Skill
from .markup import Safe, clock, el, escape, join, path, scroll


class SessionRecords(NamedTuple):
    """One session's prerequisite records, as the page shows them."""

    session_id: str
    started_at: float
    expires_at: float
    done: Done


# --- abilities -----------------------------------------------------------------------------------------------------


def abilities_body(definitions: Sequence[Definition], problems: Mapping[str, int], winners: Mapping[str, Path]) -> Safe:
    """Every ability file: its name (a link to its graph), what it does, where it is, whether it can run."""
    rows = []
    for d in sorted(definitions, key=lambda d: (d.name, d.scope)):
        ability = d.ability or d.partial
        count = problems.get(str(d.path), 0)
        state = "valid" if count == 0 and d.ability is not None else f"{count} problem{'s' if count != 1 else ''}"
        hidden = winners.get(d.name) != d.path
        shadowed = el("span", " (hidden by another of this name)", class_="note") if hidden else None
        rows.append(
            el(
                "tr",
                el("td", el("a", d.name, href=path("abilities", d.name, keep_slashes=True)), shadowed),
                el("td", ability.description if ability is not None else ""),
                el("td", d.scope),
                el("td", el("span", state, class_="status status-" + ("completed" if state == "valid" else "failed"))),
                el("td", el("code", str(d.path))),
                data_ability=d.name,
            )
        )
    head = el(
        "thead", el("tr", [el("th", h, scope="col") for h in ("Ability", "Description", "Scope", "Checks", "File")])
    )
    body = el(
        "tbody", rows or el("tr", el("td", "No abilities in this project: add abilities/NAME.yaml.", colspan="5"))
    )
    return scroll(el("table", el("caption", "The project's abilities"), head, body, id="abilities"), "Abilities")


def ability_body(definition: Definition, problems: Sequence[Diagnostic], svg: str | None) -> Safe:
    """One ability: its steps as a graph (graph.py), its problems, and the steps as text."""
    data = ability_data(definition)
    graph = Safe(svg) if svg is not None else el("p", "The graph cannot be drawn here yet.")
    figure = el(
        "figure",
        graph,
        el("figcaption", f"The steps of {definition.name} and what each needs; problems are marked on their step."),
        id="graph",
    )
    listed = [el("li", el("code", p.path or "(file)"), ": ", p.message) for p in problems]
    return join(
        [
            el("p", data.get("description", ""), class_="lead") if data.get("description") else None,
            el("p", "File ", el("code", str(definition.path)), f" ({definition.scope})", class_="meta"),
            el("p", definition.trust_note, class_="note") if definition.trust_note else None,
            figure,
            el(
                "section",
                el("h2", "Problems"),
                el("ul", listed) if listed else el("p", "None: this ability can run."),
                id="problems",
            ),
            el("section", el("h2", "Steps"), _steps_table(data), id="steps"),
        ]
    )


def ability_data(definition: Definition) -> dict[str, Any]:
    """The ability as the format's dict (what a run stores); what could be read of a refused file; {} for none."""
    ability = definition.ability or definition.partial
    if ability is None:
        return {}
    return ability.model_dump(mode="json", by_alias=True, exclude_none=True)


def _steps_table(data: dict[str, Any]) -> Safe:
    rows = [
        el(
            "tr",
            el("td", el("code", s.get("id", "?"))),
            el("td", s.get("type", "")),
            el("td", ", ".join(s.get("needs", []) or [])),
            el("td", el("code", s["when"]) if s.get("when") else None),
            el("td", _what(s)),
        )
        for s in data.get("steps", [])
        if isinstance(s, dict)
    ]
    head = el("thead", el("tr", [el("th", h, scope="col") for h in ("Step", "Type", "Needs", "When", "Does")]))
    return scroll(el("table", head, el("tbody", rows)), "Steps")


def _what(step: dict[str, Any]) -> Safe:
    for key in ("run", "workflow", "skill", "agent", "prompt"):
        if step.get(key):
            return join([f"{key}: ", el("code", str(step[key]))])
    return escape(step.get("description", ""))


# --- skills --------------------------------------------------------------------------------------------------------


def skills_body(
    skills: Sequence[Skill],
    warnings: Mapping[str, list[str]],
    problems: Sequence[Diagnostic],
    notes: Sequence[str],
    task: str,
    matches: Sequence[Match] | None,
) -> Safe:
    """The skills, what is wrong with their files, and a box that routes a task to them."""
    route = el(
        "form",
        el("label", "Route a task", for_="task"),
        el("input", type="text", id="task", name="task", value=task, maxlength="10000", autocomplete="off"),
        el("button", "Route", type="submit"),
        method="get",
        action=path("skills"),
        class_="route",
        role="search",
    )
    found = None
    if matches is not None:
        rows = [el("tr", el("td", m.name), el("td", f"{m.score:.2f}"), el("td", "; ".join(m.reasons))) for m in matches]
        head = el("thead", el("tr", [el("th", h, scope="col") for h in ("Skill", "Score", "Why")]))
        found = el(
            "section",
            el("h2", "Skills for this task"),
            el("table", head, el("tbody", rows)) if rows else el("p", "No skill fits this task."),
            id="routed",
            aria_live="polite",
        )
    rows = [
        el(
            "tr",
            el("td", s.name),
            el("td", s.scope),
            el("td", s.description),
            el("td", el("ul", [el("li", w) for w in warnings.get(s.name, [])]) if warnings.get(s.name) else ""),
            el("td", el("code", str(s.path))),
            data_skill=s.name,
        )
        for s in sorted(skills, key=lambda s: s.name)
    ]
    head = el(
        "thead", el("tr", [el("th", h, scope="col") for h in ("Skill", "Scope", "Description", "Warnings", "File")])
    )
    listed = el("tbody", rows or el("tr", el("td", "No skills: add skills/NAME/SKILL.md.", colspan="5")))
    issues = [el("li", el("code", p.file), f" {p.path}: " if p.path else ": ", p.message) for p in problems]
    issues += [el("li", n) for n in notes]
    return join(
        [
            route,
            found,
            scroll(el("table", el("caption", "The skills the server offers"), head, listed, id="skills"), "Skills"),
            el("section", el("h2", "Problems"), el("ul", issues) if issues else el("p", "None."), id="skill-problems"),
        ]
    )


# --- prerequisites -------------------------------------------------------------------------------------------------


def prerequisites_body(found: WorkflowSet, sessions: Sequence[SessionRecords], calls: Sequence[CallApproval]) -> Safe:
    """The workflows in force, where each recent session stands with them, and the latest call approvals."""
    workflows = [_workflow(w) for w in found.workflows.values()]
    problems = [el("li", p) for p in found.warnings()]
    return el(
        "div",
        el(
            "section", el("h2", "Workflows"), workflows or el("p", "No workflows.json in this project."), id="workflows"
        ),
        el("section", el("h2", "Problems"), el("ul", problems), id="workflow-problems") if problems else None,
        el(
            "section",
            el("h2", "Sessions"),
            [_session(s, found) for s in sessions] or el("p", "No session recorded anything yet."),
            id="sessions",
        ),
        el("section", el("h2", "Call approvals"), _calls(calls), id="call-approvals"),
        id="prerequisites-live",
        data_live="keyed",
    )


def _workflow(w: Workflow) -> Safe:
    triggers = [f"tool {t}" for t in w.tools] + ([f"category {w.category}"] if w.category else [])
    triggers += [f"keyword {k!r}" for k in w.keywords]
    chain = [
        el(
            "li",
            el("code", p.tool),
            "" if p.required else " (optional)",
            f" — {p.description}" if p.description else "",
        )
        for p in w.prerequisites
    ]
    asks = f"a person's yes for each call (lasts {w.approval.expires / 60:g} min)" if w.approval else None
    return el(
        "article",
        el("h3", w.name, " ", el("span", w.mode, class_=f"mode mode-{w.mode}"), "" if w.enabled else " (disabled)"),
        el("p", w.description) if w.description else None,
        el("p", "Triggered by: ", "; ".join(triggers) or "nothing"),
        el("ol", chain) if chain else None,
        el("p", "Asks ", asks, ": ", w.approval.prompt if w.approval and w.approval.prompt else "") if asks else None,
        data_workflow=w.name,
    )


def _session(s: SessionRecords, found: WorkflowSet) -> Safe:
    rows = []
    for w in found.enabled():
        records = s.done.get(w.name, {})
        gated = name_of(w.tools[0]) if w.tools else name_of("")
        stand = standing(w, [f"tool {gated.raw}"], satisfied(w, records, gated, NOBODY))
        steps = []
        for p in w.prerequisites:
            got = records.get(p.step, [])
            said = [
                f"{r.how} at {time.strftime('%H:%M:%S', time.localtime(r.at))}" + (f": {r.result}" if r.result else "")
                for r in got
            ]
            steps.append(el("li", el("code", p.tool), " — ", "; ".join(said) if said else "not yet"))
        rows.append(
            el(
                "li",
                el("strong", w.name),
                " — a call of its tools now: ",
                el("span", stand.verdict, class_=f"verdict verdict-{stand.verdict}"),
                el("ul", steps) if steps else None,
            )
        )
    return el(
        "article",
        el("h3", "Session ", el("code", s.session_id)),
        el("p", "Started ", clock(s.started_at), ", its records lapse ", clock(s.expires_at), class_="meta"),
        el("ul", rows) if rows else el("p", "No enabled workflow."),
        data_session=s.session_id,
    )


def _calls(calls: Sequence[CallApproval]) -> Safe:
    if not calls:
        return el("p", "None asked for.")
    rows = [
        el(
            "tr",
            el("td", el("code", c.call_id)),
            el("td", c.tool),
            el("td", el("code", (c.shown.splitlines() or [""])[0])),
            el("td", describe(c)),
        )
        for c in calls
    ]
    head = el(
        "thead",
        el("tr", [el("th", h, scope="col") for h in ("Call", "Tool", "The call (first line)", "What became of it")]),
    )
    return scroll(el("table", head, el("tbody", rows)), "Call approvals")
