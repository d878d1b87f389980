"""The workflows in force: as workflows.json and the tool cache are, unless an edit since a person trusted them would
lower a gate (lowering.py); then the version they trusted, with a note naming the files and the command.

Stdlib only: the hook asks this on every tool call a workflow could gate.
"""

from __future__ import annotations

from ..state.database import trust_store
from ..state.project import stamp
from .workflows import TOOL_CACHE, Source, WorkflowSet, parse_workflows, read_source

TYPE_CHECKING = False  # typing's, without importing typing (nor pathlib): the hook asks this module
if TYPE_CHECKING:
    from pathlib import Path

    from ..state.project import Project
    from ..state.trust import TrustStore


class Workflows:
    """The project's workflows in force, re-read only when workflows.json, the routing cache or trust changes."""

    def __init__(self, project: Project):
        self.files = (project.workflows_file, project.root / TOOL_CACHE)
        self.trust = trust_store(project)
        self._stamps: tuple | None = None
        self._current = WorkflowSet()

    def current(self) -> WorkflowSet:
        stamps = (*(stamp(f) for f in self.files), self.trust.stamp())
        if stamps != self._stamps:
            self._current, self._stamps = workflows_in_force(*self.files, self.trust), stamps
        return self._current


def workflows_in_force(workflows_file: str | Path, tool_cache: str | Path, trust: TrustStore) -> WorkflowSet:
    """The workflows the gates enforce: as the files are, unless an edit since a person trusted them would lower a
    gate (prerequisites/lowering.py); then the trusted version, with a note naming the files and the command."""
    now = (read_source(workflows_file), read_source(tool_cache))
    current = parse_workflows(*now)
    if all(trust.record(s.path) is None for s in now):
        return current  # never trusted: there is no gate a person set that an edit could lower
    then = tuple(Source(s.path, trust.trusted(s.path), []) for s in now)
    if [s.raw for s in then] == [s.raw for s in now]:
        return current
    from ..state.trust import waiting_note
    from .lowering import lowerings  # here: only an edit since the trust is judged, not every call

    trusted = parse_workflows(*then)
    reasons = lowerings(trusted, current)
    if not reasons:
        return current  # tightened (or only reworded): applies at once
    changed = [trust.key(s.path) for s, t in zip(now, then, strict=True) if s.raw != t.raw]
    trusted.pending = [waiting_note(" and ".join(changed), reasons)]
    return trusted
