"""`abilities-mcp trust`: a person reads, as diffs, what changed in the files that decide gates since they last
trusted them, and trusts them as they are now (DESIGN §10; `init` counts as trust too).

The files: abilities, agent files that claim abilities, workflows.json, the tool cache, gateway.json and
abilities-mcp.json. What is recorded is exactly the bytes shown: a file swapped after the diff was printed is not
trusted by it, and waits for the next `trust`.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import NamedTuple

from ..abilities.agents import agent_files, discover_agent_files, read_agent_file
from ..abilities.catalog import Catalog
from ..gateway.config import Gateway
from ..prerequisites.workflows import TOOL_CACHE, read_source
from ..state import audit
from ..state.database import Database, trust_store
from ..state.project import GATEWAY_FILE, Project, discover_ability_files
from ..state.settings import FILE_NAME as SETTINGS_FILE
from ..state.settings import in_force as settings_in_force
from ..state.trust import TRUST_COMMAND, TrustStore
from . import person

# Lines of one file's diff shown before the rest is left to the file itself (a person reads the file then).
MAX_DIFF_LINES = 400


class Change(NamedTuple):
    """One gate-defining file that is not as a person trusted it."""

    path: Path
    key: str  # as the trust records name it
    kind: str  # ability | agent | workflows | tool cache | gateway | settings
    status: str  # new | edited | deleted
    note: str  # what it means for the gates now
    waits: bool  # an edit that would lower a gate: the trusted version is enforced until trust
    then: bytes | None  # the trusted content (None: never trusted)
    now: bytes | None  # the content shown and trusted (None: deleted)


def changes(project: Project) -> list[Change]:
    """Every gate-defining file whose content differs from what a person trusted, in a stable order."""
    trust = trust_store(project)
    notes = _notes(project)
    found = []
    for path, kind in _gate_files(project, trust).items():
        now, then = read_source(path).raw, trust.trusted(path)
        if now == then or (kind == "agent" and not _claims(path, now, then)):
            continue
        status = "new" if then is None else "deleted" if now is None else "edited"
        note, waits = notes.get(path, (_plain(status), False))
        found.append(Change(path, trust.key(path), kind, status, note, waits, then, now))
    return found


def trust_all(project: Project, chosen: list[Change], how: str, origin: str) -> None:
    """Record these files as trusted, as they were shown."""
    trust_store(project).trust({c.path: c.now for c in chosen}, how, origin)
    database = Database.open(project)
    try:
        for c in chosen:  # the audit trail (state/audit.py): who trusted what, and how
            detail = {"file": c.key, "kind": c.kind, "status": c.status}
            audit.append(database, "trust", tool=c.key, verdict=c.status, actor=origin, channel=how, detail=detail)
    finally:
        database.close()


def command(project: Project, args: argparse.Namespace) -> int:
    """`trust [PATH…] [--list] [--yes]`: show what waits, then (a person, at their terminal) trust it."""
    found = changes(project)
    if args.paths:
        wanted = {Path(p).resolve() for p in args.paths}
        found = [c for c in found if c.path.resolve() in wanted or c.key in args.paths]
    if args.how == "init":
        return _at_init(project, found)
    if not found:
        print("Nothing waits for trust: every file that decides a gate is as a person trusted it.")
        return 0
    for change in found:
        print(describe(change))
    if args.list:
        print(
            f"\n{len(found)} file(s) differ from what a person trusted; `{TRUST_COMMAND}` in your terminal trusts them."
        )
        return 0
    if _refused():
        return 2
    if not args.yes and not _confirmed(len(found)):
        print("Nothing trusted.")
        return 1
    if not args.yes and _refused():  # checked again as the answer comes: the terminal may have changed hands
        return 2
    trust_all(project, found, args.how, person.origin())
    print(f"Trusted {len(found)} file(s): {', '.join(c.key for c in found)}.")
    return 0


def _at_init(project: Project, found: list[Change]) -> int:
    """`init` typed by a person trusts the project being set up: its files by name, not every line of them."""
    if not found:
        return 0
    refused = person.refusal()
    if refused is not None:
        print(
            f"abilities-mcp init: {len(found)} file(s) that decide gates were not trusted ({refused}): a person runs "
            f"`{TRUST_COMMAND}` in their own terminal to review and trust them.",
            file=sys.stderr,
        )
        return 2
    trust_all(project, found, "init", person.origin())
    print(f"Trusted {len(found)} file(s) (init counts as trust): {', '.join(c.key for c in found)}.")
    return 0


def describe(change: Change) -> str:
    """One file's heading and its diff, for a person to read."""
    head = f"\n{change.key} ({change.kind}, {change.status}): {change.note}"
    return head + "\n" + diff(change.then, change.now)


def diff(then: bytes | None, now: bytes | None) -> str:
    """A unified diff from the trusted content to the current one, cut at MAX_DIFF_LINES."""
    before, after = _lines(then), _lines(now)
    lines = list(difflib.unified_diff(before, after, "trusted", "now", lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"[... {len(lines) - MAX_DIFF_LINES} more lines: read the file itself]"]
    return "\n".join(lines)


def _lines(content: bytes | None) -> list[str]:
    return [] if content is None else content.decode("utf-8", errors="replace").splitlines()


def _refused() -> bool:
    """Whether the person check refuses this process, saying why on stderr (nothing is recorded then)."""
    refused = person.refusal()
    if refused is not None:
        print(
            f"abilities-mcp trust: refused: {refused}; nothing was recorded. Trust is a person's word, given in their "
            "own terminal: an agent's tools never give it. Ask the user to review the change and run "
            f"`{TRUST_COMMAND}` in their own terminal.",
            file=sys.stderr,
        )
    return refused is not None


def _confirmed(count: int) -> bool:
    try:
        answer = input(f"\nTrust {'this file' if count == 1 else f'these {count} files'} as shown? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _gate_files(project: Project, trust: TrustStore) -> dict[Path, str]:
    """Every file that decides a gate now, or did when a person trusted it: path → kind."""
    root = project.root
    files: dict[Path, str] = {path: "ability" for path, _, _ in discover_ability_files(project)}
    files |= {path: "agent" for path, _ in discover_agent_files(root)}
    files |= {root / "workflows.json": "workflows", root / TOOL_CACHE: "tool cache"}
    files |= {root / GATEWAY_FILE: "gateway", root / SETTINGS_FILE: "settings"}
    for key in trust.records():
        path = Path(key) if Path(key).is_absolute() else root / key
        files.setdefault(path, "agent" if path.suffix == ".md" else "ability")
    return files


def _notes(project: Project) -> dict[Path, tuple[str, bool]]:
    """What each file's edit means for the gates now, from the readers that enforce them, and whether it waits."""
    catalog = Catalog(project).refresh()
    notes = {d.path: (d.trust_note, d.trust == "waiting") for d in catalog.definitions if d.trust_note}
    notes |= {path: (note, True) for path, note in agent_files(catalog).pending.items()}
    pending = catalog.workflows.current().pending
    if pending:
        notes |= {f: (pending[0], True) for f in catalog.workflows.files}
    config = Gateway(project).current()
    if config.pending:
        notes[project.root / GATEWAY_FILE] = (config.pending[0], True)
    settings = settings_in_force(project.root, project.state_dir)
    if settings.pending:
        notes[project.root / SETTINGS_FILE] = (settings.pending, True)
    return notes


def _plain(status: str) -> str:
    if status == "deleted":
        return "deleted since it was trusted"
    return "no gate is lowered: it already applies as written"


def _claims(path: Path, now: bytes | None, then: bytes | None) -> bool:
    """Whether an agent file claims abilities in either version (one that claims none decides no gate)."""
    return any(
        (found := read_agent_file(path, raw)) is not None and found.abilities for raw in (now, then) if raw is not None
    )
