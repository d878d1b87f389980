"""A few skills for one step of a plan, and the prompt block that hands them to the agent doing it.

The orchestrator's seed: skills the task names come first, then the router's matches fill what is left of the
step kind's limit (`implementation` 2, `review` 1); a named skill that does not exist is an error entry and the
rest still works. The prompt is OpenSkills' catalog of every skill the model may invoke, then each chosen skill
in OpenSkills' `read` format, its SKILL.md cut at a budget with a visible marker, optionally with its
`references/` files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UnknownName
from ..files import Unreadable, read_text
from ..state.settings import load
from .openskills import available_skills, read_output
from .plan import PlanError, Task, next_task, plan_path, read_plan, split_hints
from .skillset import SkillSet
from .spec import Skill

STEP_LIMITS = {"implementation": 2, "review": 1}
# Characters of one SKILL.md (or reference file) a prompt carries; the rest is announced, not sent.
DEFAULT_BODY_BUDGET = 20_000
# A file larger than this is not read into a prompt at all.
MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclass
class Chosen:
    name: str
    reason: str


@dataclass
class Selection:
    step_kind: str
    skills: list[Chosen] = field(default_factory=list)
    strategy: str = "none"  # hint | match | none
    errors: list[dict[str, str]] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)  # skills whose body was cut to the budget
    budget: int = DEFAULT_BODY_BUDGET  # the characters each file was cut to
    prompt: str = ""


def selection_event(chosen: Selection, task: str | None) -> dict[str, Any]:
    """What a step was given, as its SKILLS_SELECTED event says it (state/skill_events.py)."""
    return {
        "step_kind": chosen.step_kind,
        "task_label": task,
        "skills": [{"name": c.name, "reason": c.reason} for c in chosen.skills],
        "strategy": chosen.strategy,
        "errors": chosen.errors,
    }


@dataclass
class Step:
    """What an orchestrator gets for one step: the task (None when the plan has none left) and the skills."""

    task: Task | None
    selection: Selection


def for_step(
    skillset: SkillSet,
    plan: str | None = None,
    task: str | None = None,
    step_kind: str = "implementation",
    limit: int | None = None,
    budget: int | None = None,
    references: bool | None = None,
) -> Step:
    """The plan's next task (or the task given), its skills and the prompt; PlanError when the plan gives none.
    What the caller leaves None comes from the settings file's skills.plan, else the defaults."""
    if step_kind not in STEP_LIMITS:
        raise PlanError(f"unknown step kind {step_kind!r}; use one of {', '.join(STEP_LIMITS)}")
    settings = load(skillset.project.root)
    limit = _first(limit, settings.get(f"skills.plan.{step_kind}"), STEP_LIMITS[step_kind])
    budget = _first(budget, settings.get("skills.plan.budget"), DEFAULT_BODY_BUDGET)
    references = _first(references, settings.get("skills.plan.references"), False)
    if task is not None:
        text, hints = split_hints(task)
        found: Task | None = Task(text, 0, None, hints)
    elif plan is not None:
        found = next_task(read_plan(plan_path(skillset.project.root, plan)))
    else:
        raise PlanError("give a plan (a Markdown checklist under the project) or a task")
    if found is None:
        return Step(None, Selection(step_kind))
    chosen = select(
        skillset, found.text if not found.parent else f"{found.parent}: {found.text}", found.hints, step_kind, limit
    )
    return Step(found, render(skillset, chosen, budget, references))


def _first(*values):
    return next(v for v in values if v is not None)


def select(
    skillset: SkillSet, task: str, hints: list[str], step_kind: str = "implementation", limit: int | None = None
) -> Selection:
    """Named skills first, then matches, up to the step kind's limit."""
    chosen = Selection(step_kind)
    most = STEP_LIMITS[step_kind] if limit is None else limit
    skillset.refresh()
    for name in hints:
        if len(chosen.skills) >= most:
            chosen.errors.append({"name": name, "error": f"over the {step_kind} limit of {most}; not loaded"})
        elif name in skillset.skills:
            chosen.skills.append(Chosen(name, "named in the task"))
        else:
            chosen.errors.append({"name": name, "error": str(UnknownName("skill", name, skillset.skills))})
    if chosen.skills:
        chosen.strategy = "hint"
    taken = {c.name for c in chosen.skills}
    for match in skillset.router().route(task, most):
        if len(chosen.skills) < most and match.name not in taken:
            chosen.skills.append(Chosen(match.name, "; ".join(match.reasons) or f"score {match.score}"))
            chosen.strategy = chosen.strategy if chosen.strategy == "hint" else "match"
    return chosen


def render(
    skillset: SkillSet, chosen: Selection, budget: int = DEFAULT_BODY_BUDGET, references: bool = False
) -> Selection:
    """Fill in the prompt: the catalog, then each chosen skill as `openskills read` prints it, cut at the budget."""
    chosen.budget = budget
    catalog = available_skills(sorted((s for s in skillset.skills.values() if s.model_invocable), key=_name))
    parts = [catalog] if catalog else []
    for pick in chosen.skills:
        skill = skillset.skills[pick.name]
        try:
            content = _cut(read_text(skill.path, MAX_FILE_BYTES), budget, skill, chosen)
            extra = _references(skill, budget, chosen) if references else ""
        except (OSError, Unreadable) as exc:
            chosen.errors.append({"name": pick.name, "error": f"{skill.path} could not be read: {exc}"})
            continue
        parts.append(read_output(skill, content + extra).rstrip("\n"))
    chosen.prompt = "\n\n".join(parts)
    return chosen


def _cut(text: str, budget: int, skill: Skill, chosen: Selection) -> str:
    if len(text) <= budget:
        return text
    if skill.name not in chosen.truncated:
        chosen.truncated.append(skill.name)
    return f"{text[:budget]}\n\n[truncated: {budget} of {len(text)} characters shown; read {skill.path} for the rest]"


def _references(skill: Skill, budget: int, chosen: Selection) -> str:
    folder = skill.real_directory / "references"
    if not folder.is_dir():
        return ""
    out = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        if not path.resolve().is_relative_to(skill.real_directory):
            continue  # a link leading out of the skill is not part of it
        out.append(
            f"\n\n--- references/{path.name} ---\n{_cut(read_text(path, MAX_FILE_BYTES), budget, skill, chosen)}"
        )
    return "".join(out)


def _name(skill: Skill) -> str:
    return skill.name
