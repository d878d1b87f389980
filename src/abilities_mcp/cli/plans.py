"""`skills plan` and `skills sync`: a plan's next step with its skills, and the skills catalog in AGENTS.md."""

from __future__ import annotations

import argparse
import difflib
import json
import secrets
import sqlite3
import sys
from pathlib import Path

from ..files import Unreadable, read_text
from ..prerequisites.edits import write_atomically
from ..skills.openskills import removed, synced, system_block
from ..skills.plan import PlanError
from ..skills.selection import Step, for_step, selection_event
from ..skills.skillset import SkillSet
from ..state import skill_events
from ..state.database import Database, StateFileError, open_state
from .inert import inert

# An AGENTS.md larger than this is not edited (it is not one a person keeps).
MAX_AGENTS_MD_BYTES = 4 * 1024 * 1024


def plan(skillset: SkillSet, args: argparse.Namespace) -> int:
    """Print the prompt block for the plan's next task (or the task given); --json prints what skill_plan returns."""
    if args.plan is None and args.task is None:
        print("abilities-mcp: give a plan (skills plan PLAN.md) or a task (--task TEXT)", file=sys.stderr)
        return 2
    try:
        step = for_step(skillset, args.plan, args.task, args.kind, args.max_skills, args.budget, args.references)
    except PlanError as exc:  # no plan there, none under the project, no checklist: not what was asked (exit 2)
        print(f"abilities-mcp: {inert(str(exc))}", file=sys.stderr)
        return 2
    record_events(skillset, step)
    task, chosen = step.task, step.selection
    if args.json:
        answer = {
            "task": vars(task) if task else None,
            "step_kind": chosen.step_kind,
            "skills": [vars(c) for c in chosen.skills],
            "strategy": chosen.strategy,
            "errors": chosen.errors,
            "truncated": chosen.truncated,
            "prompt": chosen.prompt,
        }
        print(json.dumps(answer, indent=2, ensure_ascii=False))
        return 0
    if task is None:
        print("Every task of the plan is done.")
        return 0
    where = f" (line {task.line}" + (f", {task.section})" if task.section else ")") if task.line else ""
    print(f"Task{where}: {inert(task.text)}")
    for c in chosen.skills:
        print(f"Skill: {c.name} ({inert(c.reason)})")
    for e in chosen.errors:
        print(f"Skipped: {inert(e['name'])}: {inert(e['error'])}")
    if chosen.prompt:
        print(f"\n{chosen.prompt}")
    return 0


def record_events(skillset: SkillSet, step: Step) -> None:
    """Record what this command found and chose as skill events, as an MCP session's skill_plan does: each command
    is a session of its own (`cli-…`). A state file that cannot be written costs the record, never the plan."""
    session = f"cli-{secrets.token_hex(6)}"
    task = step.task.text if step.task else None
    try:
        db, notice = open_state(skillset.project.state_location, Database)
    except (StateFileError, OSError, sqlite3.Error) as exc:
        print(f"abilities-mcp: skill events not recorded: {exc}", file=sys.stderr)
        return
    if notice:
        print(notice, file=sys.stderr)
    try:
        chosen = step.selection
        skill_events.record_discovery(db, session, *skillset.discovery())
        skill_events.record_selection(db, session, selection_event(chosen, task), chosen.truncated, chosen.budget)
    except sqlite3.Error as exc:  # a read-only mount, a full disk
        print(f"abilities-mcp: skill events not recorded: {exc}", file=sys.stderr)
    finally:
        db.close()


def sync(skillset: SkillSet, args: argparse.Namespace) -> int:
    """Write OpenSkills' <skills_system> block into AGENTS.md (replaced in place, else appended); idempotent."""
    root = skillset.project.root
    target = (root / args.output).resolve()
    if target.suffix != ".md":
        print(f"abilities-mcp: {args.output} is not a Markdown file; give a path ending in .md", file=sys.stderr)
        return 2
    if not target.is_relative_to(root.resolve()):
        print(f"abilities-mcp: {args.output} is outside the project {root}; give a path under it", file=sys.stderr)
        return 2
    try:
        before = read_text(target, MAX_AGENTS_MD_BYTES)
    except FileNotFoundError:
        before = None
    except Unreadable as exc:
        print(f"abilities-mcp: {target} {exc}; nothing was written", file=sys.stderr)
        return 2
    skills = sorted((s for s in skillset.skills.values() if s.model_invocable), key=lambda s: s.name)
    command = args.read_command or "abilities-mcp skills read"
    after = synced(before, system_block(skills, command), target.stem) if skills else removed(before or "")
    if after == (before or ""):
        print(f"{target.name} is up to date ({len(skills)} skill(s)).")
        return 0
    if args.dry_run:
        old, new = (before or "").splitlines(), after.splitlines()
        print("\n".join(difflib.unified_diff(old, new, str(target), str(target), lineterm="")))
        return 0
    write_atomically(target, after)
    print(f"Synced {len(skills)} skill(s) to {_shown(target, root)}.")
    return 0


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root.resolve())) if path.is_relative_to(root.resolve()) else str(path)
