"""The project's abilities (and the skills they may use): discovered, cached by mtime, checked as a whole.

A broken file never hides the others; files changed on disk are picked up at the next look without a restart.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Diagnostic, UnknownName, did_you_mean
from ..prerequisites.in_force import Workflows
from ..prerequisites.workflows import read_workflows
from ..skills.skillset import BUILTIN_SKILLS, SkillSet
from ..skills.spec import for_authors
from ..state.project import Project, discover_ability_files, stamp
from ..state.settings import FILE_NAME as SETTINGS_FILE
from ..state.settings import read as read_settings
from .in_force import load_in_force
from .loader import Definition
from .models import SkillStep, WorkflowStep

# A workflow step may start a child run this many levels deep at most.
MAX_NESTING = 5


@dataclass(frozen=True)
class FileDiagnostics:
    """One file the server loads and what is wrong with it."""

    kind: str  # "ability" | "skill" | "workflows" | "tool cache" | "settings" | "gateway"
    name: str
    path: Path
    diagnostics: list[Diagnostic]
    warnings: list[Diagnostic] = field(default_factory=list)  # it loads, but deserves a look


class Catalog:
    """Every ability the project can run, re-read when its files change."""

    def __init__(self, project: Project):
        self.project = project
        self._cache: dict[Path, tuple[tuple[int, ...], Definition]] = {}
        self._fingerprint: tuple | None = None
        self.definitions: list[Definition] = []
        self.winners: dict[str, Definition] = {}
        self.skillset = SkillSet(project)
        self.workflows = Workflows(project)
        self.trust = self.workflows.trust  # one view of the trust records for every file the catalog reads
        self.problems: dict[Path, list[Diagnostic]] = {}
        self.path_names: dict[Path, str] = {}  # each file's name as its path gives it (a `name:` may differ)
        self._lock = threading.RLock()

    def refresh(self) -> Catalog:
        """Re-scan the folders; re-parse only files whose size or mtime changed. Thread-safe: the server refreshes
        in a worker thread, so a 10,000-step file being checked never holds up other calls."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> Catalog:
        found = list(discover_ability_files(self.project))
        skills = self.skillset.refresh()
        fingerprint = (tuple((p, stamp(p)) for p, _, _ in found), tuple(sorted(skills.skills)), self.trust.stamp())
        if fingerprint == self._fingerprint:
            return self
        self.definitions = [self._load(path, name, scope) for path, name, scope in found]
        self.path_names = {path: name for path, name, _ in found}
        self._check_project()
        self._fingerprint = fingerprint
        return self

    def _load(self, path: Path, name: str, scope: str) -> Definition:
        current = (*stamp(path), *self.trust.stamp())
        cached = self._cache.get(path)
        if cached and cached[0] == current:
            return cached[1]
        definition = load_in_force(path, name, scope, self.trust)
        self._cache[path] = (current, definition)
        return definition

    def diagnostics(self, definition: Definition) -> list[Diagnostic]:
        """File-level and project-level problems of one definition."""
        return definition.diagnostics + self.problems.get(definition.path, [])

    def is_valid(self, definition: Definition) -> bool:
        return definition.ability is not None and not self.diagnostics(definition)

    def get(self, name: str) -> Definition:
        """The definition that answers to a name; raises UnknownName with a did-you-mean."""
        self.refresh()
        if name not in self.winners:
            renamed = self.renamed(name)  # `run gha` for abilities/gha.yaml, which `name: ci` renamed
            raise UnknownName("ability", name, self.winners, renamed.name if renamed else None)
        return self.winners[name]

    def require_file(self, name: str) -> None:
        """Refuse a name that is neither an ability nor a skill (for validating one file), with the name it may
        mean: the one a file's `name:` gives it instead of its path's, or the closest spelling."""
        self.refresh()
        if name not in self.winners and name not in self.skillset.skills:
            renamed = self.renamed(name)
            known = [*self.winners, *self.skillset.skills]
            raise UnknownName("ability or skill", name, known, renamed.name if renamed else None)

    def renamed(self, path_name: str) -> Definition | None:
        """The ability whose file's path gives `path_name` but whose `name:` calls it something else."""
        return next(
            (d for d in self.definitions if d.name != path_name and self.path_names.get(d.path) == path_name), None
        )

    def files(self) -> list[FileDiagnostics]:
        """Every file the server loads, with its problems: abilities, skills, workflows.json, abilities-mcp.json."""
        out = [FileDiagnostics("ability", d.name, d.path, self.diagnostics(d), d.warnings) for d in self.definitions]
        names = {s.path: s.name for s in self.skillset.skills.values()}
        for path, problems in self.skillset.problems.items():
            if path.is_relative_to(BUILTIN_SKILLS):
                continue  # the package's own skills (used or shadowed): checked by its tests, not the project's to fix
            shown = [d._replace(message=for_authors(d.message)) for d in problems]  # one line with the fix
            out.append(FileDiagnostics("skill", names.get(path, path.parent.name), path, shown))
        for path in self.workflows.files:
            if path.exists():
                kind = "workflows" if path == self.project.workflows_file else "tool cache"
                problems, warnings = workflow_file_problems(path, kind), workflow_file_warnings(path, kind)
                out.append(FileDiagnostics(kind, path.name, path, problems, warnings))
        settings = read_settings(self.project.root / SETTINGS_FILE)
        if settings.path.exists():
            problems = [Diagnostic(str(settings.path), field, message) for field, message in settings.problems]
            out.append(FileDiagnostics("settings", SETTINGS_FILE, settings.path, problems))
        return out

    def _check_project(self) -> None:
        self.problems = {}
        self.winners = {}
        for scope in ("project", "user"):
            by_name: dict[str, list[Definition]] = {}
            for d in self.definitions:
                if d.scope == scope:
                    by_name.setdefault(d.name, []).append(d)
            for name, defs in by_name.items():
                self._place(name, defs)
        for d in self.winners.values():
            if (d.ability or d.partial) is not None:  # a refused file's readable part too: every problem at once
                self._check_references(d)
        self._check_recursion()

    def _place(self, name: str, defs: list[Definition]) -> None:
        if len(defs) > 1:
            files = ", ".join(str(d.path) for d in defs)
            for d in defs:
                self._add(d, "name", f"ability name {name!r} is defined twice in one scope ({files}); rename one")
        self.winners.setdefault(name, defs[0])

    def _check_references(self, d: Definition) -> None:
        ability = d.ability or d.partial
        assert ability is not None
        for i, step in enumerate(ability.steps):
            if isinstance(step, WorkflowStep) and step.workflow not in self.winners:
                close = did_you_mean(step.workflow, self.winners)
                hint = f"did you mean {close!r}?" if close else "add it under abilities/"
                self._add(d, f"steps[{i}].workflow", f"unknown ability {step.workflow!r}; {hint}")
            if isinstance(step, SkillStep) and step.skill not in self.skillset.skills:
                close = did_you_mean(step.skill, self.skillset.skills)
                hint = f"did you mean {close!r}?" if close else "add skills/<name>/SKILL.md"
                self._add(d, f"steps[{i}].skill", f"unknown skill {step.skill!r}; {hint}")

    def _check_recursion(self) -> None:
        loops, longest = workflow_chains(
            {
                name: [
                    s.workflow for s in d.ability.steps if isinstance(s, WorkflowStep) and s.workflow in self.winners
                ]
                for name, d in self.winners.items()
                if d.ability is not None
            }
        )
        for name, d in self.winners.items():
            if name in loops:
                self._add(d, "steps", f"abilities run each other in a loop {' → '.join(loops[name])}; break the loop")
            elif len(longest.get(name, [])) > MAX_NESTING + 1:
                chain = longest[name]
                self._add(
                    d,
                    "steps",
                    f"workflow steps nest {len(chain) - 1} deep ({' → '.join(chain)}); the limit is {MAX_NESTING}",
                )

    def _add(self, d: Definition, path: str, message: str) -> None:
        self.problems.setdefault(d.path, []).append(Diagnostic(str(d.path), path, message))


def workflow_chains(graph: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """For each ability: the loop it runs into (if any), and its longest chain of nested workflow steps.

    One depth-first pass with memoised results, so a wide or deep project loads in linear time.
    """
    state: dict[str, str] = {}
    loops: dict[str, list[str]] = {}
    longest: dict[str, list[str]] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = "open"
        stack.append(name)
        best = [name]
        for child in graph.get(name, []):
            if state.get(child) == "open":
                cycle = stack[stack.index(child) :]
                for i, member in enumerate(cycle):
                    loops.setdefault(member, cycle[i:] + cycle[: i + 1])
                continue
            if child not in state:
                visit(child, stack)
            if child in loops and name not in loops:
                loops[name] = [name] + loops[child]
            best = max(best, [name] + longest.get(child, [child]), key=len)
        longest[name] = best
        stack.pop()
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name, [])
    return loops, longest


def workflow_file_problems(path: Path, kind: str) -> list[Diagnostic]:
    """workflows.json in full (the spec's words); the routing cache only for its `workflows` key."""
    from ..prerequisites.spec import check_file

    if kind == "workflows":
        return check_file(path)
    return read_workflows(None, path).problems


def workflow_file_warnings(path: Path, kind: str) -> list[Diagnostic]:
    """What validate says of a workflows.json that works (prerequisites/spec.py `check_warnings`)."""
    from ..prerequisites.spec import check_warnings

    return check_warnings(path) if kind == "workflows" else []
