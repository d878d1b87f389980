"""Which agents may run which abilities: the ability's own rules and the agents' definition files (DESIGN §3).

An ability restricts itself with `exclusive_agent` (only that agent) or `compatible_agents` (only those). An
agent claims abilities in its own file's frontmatter (`abilities: [deploy/production, ...]`): the claims bind
the agent to those abilities, as in the OpenAgents plugin — it may run them even when the ability lists other
compatible agents (only another agent's `exclusive_agent` beats a claim), and an agent with claims runs only
what it claims or what names it explicitly. An agent without claims may run every ability that does not restrict
itself to others.
"""

from __future__ import annotations

import io
import logging
import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from ..errors import NextCall, Refused
from ..files import Unreadable, open_text, yaml_problem
from ..state.trust import TrustStore, waiting_note
from .catalog import Catalog

log = logging.getLogger(__name__)

# Agent definition files under the project root (Claude Code, then OpenCode's two spellings).
AGENT_FOLDERS = (".claude/agents", ".opencode/agent", ".opencode/agents")
# Only the frontmatter is read (the body is the agent's prompt and may be long); a header larger than this is
# not an agent's frontmatter, and reading it would make every ability_list slower.
MAX_FRONTMATTER_CHARS = 64 * 1024
FENCE = "---"

Stamp = tuple[int, ...]


@dataclass(frozen=True)
class AgentFile:
    """One agent definition: its name and the abilities its frontmatter claims."""

    name: str
    path: Path
    abilities: tuple[str, ...] = ()


class AgentFiles:
    """A project's agent files, re-read only when one is added, removed or changed (or trust is given)."""

    def __init__(self, root: Path, trust: TrustStore):
        self.root = root
        self.trust = trust
        self.claims: dict[str, set[str]] = {}  # ability → agents whose file claims it
        self.pending: dict[Path, str] = {}  # agent files whose claims wait for a person's trust, and why
        self._parsed: dict[Path, tuple[Stamp, AgentFile | None]] = {}
        self._fingerprint: tuple | None = None

    def refresh(self) -> AgentFiles:
        found = (*discover_agent_files(self.root), self.trust.stamp())
        if found == self._fingerprint:
            return self
        self._parsed = {path: self._reuse_or_read(path, stamp) for path, stamp in found[:-1]}
        self.pending = {}
        for path, (_, agent) in self._parsed.items():
            if agent is not None and (note := self._waiting(agent)) is not None:
                self._parsed[path] = (self._parsed[path][0], note[0])
                self.pending[path] = note[1]
        self.claims = {}
        for _, agent in self._parsed.values():
            for ability in agent.abilities if agent else ():
                self.claims.setdefault(ability, set()).add(agent.name)
        self._fingerprint = found
        return self

    def _reuse_or_read(self, path: Path, stamp: Stamp) -> tuple[Stamp, AgentFile | None]:
        cached = self._parsed.get(path)
        return cached if cached and cached[0] == stamp else (stamp, read_agent_file(path))

    def _waiting(self, agent: AgentFile) -> tuple[AgentFile, str] | None:
        """Claims a person has not trusted bind nothing: the agent keeps the claims of the version they trusted
        (none for a file nobody trusted), since a claim lets an agent past an ability's compatible_agents."""
        raw = self.trust.trusted(agent.path)
        trusted = read_agent_file(agent.path, raw) if raw is not None else None
        claims = trusted.abilities if trusted is not None else ()
        if agent.abilities == claims:
            return None
        what = f"its `abilities:` claims {list(claims)} → {list(agent.abilities)}"
        return replace(agent, abilities=claims), waiting_note(self.trust.key(agent.path), [what])


# One index per catalog, living as long as it does: each server (and each test) keeps its own.
_indexes: weakref.WeakKeyDictionary[Catalog, AgentFiles] = weakref.WeakKeyDictionary()


def agent_files(catalog: Catalog) -> AgentFiles:
    """The catalog's project's agent files, as they are on disk now."""
    index = _indexes.get(catalog)
    if index is None:
        index = _indexes[catalog] = AgentFiles(catalog.project.root, catalog.trust)
    return index.refresh()


def agent_may_run(catalog: Catalog, name: str, agent: str) -> bool:
    """Whether an agent may run an ability (the rules in this module's docstring).

    An ability whose file does not load (so its rules are unknown), or that does not exist, may be run by nobody.
    """
    allowed = allowed_agents(catalog, name)
    if allowed is not None:
        return agent in allowed
    bound = {ability for ability, agents in agent_files(catalog).claims.items() if agent in agents}
    return not bound or name in bound


def allowed_agents(catalog: Catalog, name: str) -> list[str] | None:
    """The agents that may run an ability, sorted; None when any agent may."""
    definition = catalog.winners.get(name)
    ability = definition.ability if definition else None
    if ability is None:
        return []
    if ability.exclusive_agent:
        return [ability.exclusive_agent]
    if not ability.compatible_agents:
        return None
    return sorted(set(ability.compatible_agents) | agent_files(catalog).claims.get(name, set()))


def refuse_agent(catalog: Catalog, name: str, agent: str) -> None:
    """Raise Refused when the agent may not run the ability, naming who may and how to see what this agent may run.

    Unknown names raise UnknownName; a file that does not load is left for the run to report with its diagnostics.
    """
    definition = catalog.get(name)
    if definition.ability is None or agent_may_run(catalog, name, agent):
        return
    allowed = allowed_agents(catalog, name)
    if allowed is None:
        why = f"agent {agent!r} is bound by its definition file's `abilities:` list, which does not name {name!r}"
    else:
        rule = "exclusive_agent" if definition.ability.exclusive_agent else "compatible_agents"
        who = ", ".join(repr(a) for a in allowed)
        why = f"agent {agent!r} may not run ability {name!r}; only {who} may ({rule})"
    raise Refused(
        f"{why}. Delegate to an agent that may, or pick an ability this agent may run",
        f"agent {agent!r} not allowed",
        [NextCall("ability_list", {"agent": agent})],
    )


def discover_agent_files(root: Path) -> Iterator[tuple[Path, Stamp]]:
    """(file, stamp) for every agent definition file, in folder order, then by name."""
    for folder in AGENT_FOLDERS:
        try:
            entries = sorted(os.scandir(root / folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".md") and not entry.name.startswith(".") and entry.is_file():
                try:
                    st = entry.stat()
                except OSError:
                    continue
                yield Path(entry.path), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def read_agent_file(path: Path, raw: bytes | None = None) -> AgentFile | None:
    """The agent a file defines (from `raw`, when given: a trusted version); None when its frontmatter cannot be
    read (logged, never raised)."""
    import yaml  # imported on first use, as the loader does, so the server starts fast

    try:
        with open_text(path) if raw is None else io.StringIO(raw.decode("utf-8")) as f:
            header = _frontmatter(f)
        problem = yaml_problem(header) if header is not None else None
        if problem:
            raise Unreadable(problem)
        data = yaml.safe_load(header) if header is not None else {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, Unreadable) as exc:
        log.debug("skipping agent file %s: %s", path, exc)
        return None
    if not isinstance(data, dict):
        log.debug("skipping agent file %s: its frontmatter is not a mapping", path)
        return None
    name = data.get("name")
    name = name.strip() if isinstance(name, str) and name.strip() else path.stem
    return AgentFile(name, path, _claimed(path, data.get("abilities")))


def _frontmatter(f: IO[str]) -> str | None:
    """The YAML between the opening and closing `---` lines; None when there is none (or it is too large)."""
    if f.readline(MAX_FRONTMATTER_CHARS).lstrip("\ufeff").rstrip() != FENCE:
        return None
    lines: list[str] = []
    size = 0
    while line := f.readline(MAX_FRONTMATTER_CHARS - size + 1):
        if line.rstrip() == FENCE:
            return "".join(lines)
        size += len(line)
        if size > MAX_FRONTMATTER_CHARS:
            return None
        lines.append(line)
    return None


def _claimed(path: Path, abilities: object) -> tuple[str, ...]:
    """`abilities:` as ability names: a list, or one name written alone; anything else claims nothing."""
    if isinstance(abilities, str):
        abilities = [abilities]
    if abilities is None:
        return ()
    if not isinstance(abilities, list):
        log.debug("ignoring abilities: in agent file %s: expected a list of ability names", path)
        return ()
    return tuple(a.strip() for a in abilities if isinstance(a, str) and a.strip())
