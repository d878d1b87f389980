"""The project's skills: found in the standard folders, re-read when they change, read only inside their folders.

Discovery follows the agentskills.io client guide: a skill is a folder holding a file named exactly SKILL.md;
the scan is bounded; project folders beat user folders; within one scope the first found wins, with a warning.
A symlinked skill folder is followed when it leads inside the project or the home folder, never elsewhere.
"""

from __future__ import annotations

import filecmp
import html
import mimetypes
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ..errors import AbilitiesError, Diagnostic, UnknownName
from ..files import Unreadable, open_inside, read_open
from ..state.project import Project, stamp
from .spec import Skill, load_skill

if TYPE_CHECKING:
    from .router import Router

# Folders below a skills root searched for SKILL.md (the client guide suggests 4-6).
MAX_SKILL_DEPTH = 4
# Folders visited per root before the scan stops (the client guide's bound: a stray huge tree must not stall us).
MAX_SCANNED_DIRS = 2000
# Bundled files listed per skill; the guide says list, do not read, and cap large listings.
MAX_LISTED_FILES = 200
# Characters of a text file skill_read returns; the rest is announced, not sent (a model's context is finite).
MAX_READ_CHARS = 200_000
# Bytes of a binary file skill_read returns (as a base64 resource).
MAX_READ_BYTES = 5 * 1024 * 1024
# Bytes sniffed for NUL to tell binary from text.
SNIFF_BYTES = 8192
SKIPPED_FOLDERS = {".git", "node_modules", "__pycache__", ".venv"}
# The skills this package ships (the repository's skills/, linked into the package): every project has them, last.
BUILTIN_SKILLS = Path(__file__).resolve().parent.parent / "builtin_skills"
# Set to 0, false, off or no to leave the built-in skills out.
BUILTIN_ENV = "ABILITIES_BUILTIN_SKILLS"
# Characters of an unknown path echoed back in a refusal; a longer one is cut (it may be 5,000 characters).
MAX_SHOWN_PATH_CHARS = 200


class SkillPathRefused(AbilitiesError):
    """A path that would leave the skill's folder, or names nothing readable in it."""


@dataclass(frozen=True)
class SkillFile:
    """One file read from a skill's folder: text, or bytes when it is not text."""

    skill: str
    path: str
    mime_type: str
    size: int
    text: str | None = None
    data: bytes | None = None
    truncated: bool = False


@dataclass(frozen=True)
class FoundFolder:
    directory: Path
    real: Path
    scope: str


class SkillSet:
    """Every skill the project offers, re-read when SKILL.md files change; the router is built on first use."""

    def __init__(self, project: Project):
        self.project = project
        self.skills: dict[str, Skill] = {}
        self.problems: dict[Path, list[Diagnostic]] = {}
        self.notes: list[str] = []
        self._cache: dict[Path, tuple[tuple[int, ...], Skill | None, list[Diagnostic]]] = {}
        self._fingerprint: tuple | None = None
        self._router: Router | None = None
        self._lock = threading.RLock()

    def refresh(self) -> SkillSet:
        """Re-scan the folders; re-parse only SKILL.md files whose stamp changed. Thread-safe, like the catalog."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> SkillSet:
        found, notes = discover(self.project)
        fingerprint = tuple((f.directory, stamp(f.directory / "SKILL.md")) for f in found)
        if fingerprint == self._fingerprint:
            return self
        self.skills, self.problems, self.notes = {}, {}, notes
        claimed: dict[str, FoundFolder] = {}
        for folder in found:
            skill, diagnostics = self._load(folder)
            self.problems[folder.directory / "SKILL.md"] = list(diagnostics)
            if skill is not None:
                self._place(skill, folder, claimed)
        self._fingerprint, self._router = fingerprint, None
        return self

    def _load(self, folder: FoundFolder) -> tuple[Skill | None, list[Diagnostic]]:
        path = folder.directory / "SKILL.md"
        current = stamp(path)
        cached = self._cache.get(path)
        if cached and cached[0] == current:
            return cached[1], cached[2]
        skill, diagnostics = load_skill(folder.directory, folder.real, folder.scope)
        self._cache[path] = (current, skill, diagnostics)
        return skill, diagnostics

    def _place(self, skill: Skill, folder: FoundFolder, claimed: dict[str, FoundFolder]) -> None:
        first = claimed.get(skill.name)
        if first is None:
            claimed[skill.name], self.skills[skill.name] = folder, skill
            return
        if first.scope == folder.scope:
            self.notes.append(
                f"skill {skill.name!r} is defined twice in {folder.scope} folders: using {first.directory}, "
                f"ignoring {folder.directory}; rename one"
            )
        elif not _same_files(first.real, folder.real):  # an identical copy (a clone's skills/) hides nothing
            self.notes.append(
                f"{first.scope} skill {skill.name!r} ({first.directory}) hides the {_scope_words(folder.scope)} "
                f"({folder.directory})"
            )

    @property
    def version(self) -> tuple | None:
        """Changes whenever a skill folder or SKILL.md does (for noticing what a caller has not seen yet)."""
        return self._fingerprint

    def failures(self) -> list[tuple[Path, Diagnostic]]:
        """The SKILL.md files that did not load, each with its first problem."""
        loaded = {s.path for s in self.skills.values()}
        return [(path, found[0]) for path, found in self.problems.items() if found and path not in loaded]

    def discovery(self) -> tuple[dict[str, int], list[str], list[dict[str, str]]]:
        """What was found, as the SKILLS_DISCOVERED event and its SKILLS_LOAD_FAILED ones say it: the skills by
        scope, their names, and each SKILL.md that did not load (state/skill_events.py)."""
        found = list(self.skills.values())
        scopes = {scope: sum(s.scope == scope for s in found) for scope in ("project", "user", "builtin")}
        failed = [{"name": p.parent.name, "error": problem.message, "path": str(p)} for p, problem in self.failures()]
        return scopes, sorted(s.name for s in found), failed

    def get(self, name: str) -> Skill:
        """The skill of that name; UnknownName with a did-you-mean otherwise."""
        self.refresh()
        if name not in self.skills:
            broken = next((d for p, ds in self.problems.items() if p.parent.name == name for d in ds[:1]), None)
            if broken is not None:  # a skill of that name is there but did not load: say why, not "unknown"
                raise SkillPathRefused(f"skill {name!r} did not load ({broken.file}): {broken.message}")
            raise UnknownName("skill", name, self.skills)
        return self.skills[name]

    def warnings(self, skill: Skill) -> list[str]:
        """The skill's own loading warnings plus the collisions that involve it."""
        return list(skill.warnings) + [n for n in self.notes if repr(skill.name) in n]

    def router(self) -> Router:
        """The routing index over skills the model may invoke, built on first use after a change."""
        from .router import Router  # on first use: start-up never routes

        self.refresh()
        if self._router is None:
            self._router = Router((s.name, s.description) for s in self.skills.values() if s.model_invocable)
        return self._router


def builtin_enabled(project: Project) -> bool:
    """$ABILITIES_BUILTIN_SKILLS, else skills.builtin in the settings file, else on."""
    from ..state.settings import chosen

    return chosen(project.root, "skills.builtin", None, BUILTIN_ENV, _on, True)


def _on(value: str | bool) -> bool:
    return value if isinstance(value, bool) else value.strip().lower() not in ("0", "false", "off", "no")


def skill_roots(project: Project) -> list[tuple[Path, str]]:
    """Where skills are searched, in precedence order: the project's folders, the user's, then the built-in ones."""
    builtin = [(BUILTIN_SKILLS, "builtin")] if builtin_enabled(project) and BUILTIN_SKILLS.is_dir() else []
    return project.skill_dirs() + builtin


def _scope_words(scope: str) -> str:
    return "built-in one" if scope == "builtin" else f"{scope} one"


def discover(project: Project) -> tuple[list[FoundFolder], list[str]]:
    """Every folder holding SKILL.md, project roots first, each real folder once; plus notes on what was skipped."""
    roots = skill_roots(project)
    allowed = [project.root.resolve(), project.home.resolve()] + [r.resolve() for r, _ in roots]
    found: list[FoundFolder] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for root, scope in roots:
        if not root.is_dir() or (real_root := root.resolve()) in seen:
            continue
        seen.add(real_root)
        budget = [MAX_SCANNED_DIRS]
        for directory in _walk(root, 0, budget, notes):
            real = directory.resolve()
            if real in seen:
                continue
            seen.add(real)
            if not any(real.is_relative_to(a) for a in allowed):
                notes.append(f"skipped {directory}: it links to {real}, outside the project and home folders")
                continue
            found.append(FoundFolder(directory, real, scope))
        if budget[0] <= 0:
            notes.append(f"stopped scanning {root} after {MAX_SCANNED_DIRS} folders; move skills nearer the top")
    return found, notes


def _walk(folder: Path, depth: int, budget: list[int], notes: list[str]) -> Iterator[Path]:
    """Skill folders under `folder` (sorted, so 'first found' is stable); a skill's own subfolders are not searched.
    A folder holding `skill.md` in lower case is noted, not loaded: the spec names the file SKILL.md."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIPPED_FOLDERS or not entry.is_dir():
            continue
        budget[0] -= 1
        if budget[0] < 0:
            return
        path = Path(entry.path)
        if os.path.lexists(os.path.join(entry.path, "SKILL.md")):  # not a regular file: loading says why
            yield path
        elif os.path.lexists(os.path.join(entry.path, "skill.md")):
            notes.append(
                f"skipped {path}: its skill file is named skill.md; rename it to SKILL.md (the name the spec "
                "gives it; skills-ref also reads skill.md, this server reads SKILL.md only)"
            )
        elif depth + 1 < MAX_SKILL_DEPTH:
            yield from _walk(path, depth + 1, budget, notes)


def bundled_files(skill: Skill) -> tuple[list[str], bool]:
    """The skill's files other than SKILL.md, as relative POSIX paths (not read), and whether the list was cut."""
    out: list[str] = []
    for path in _files_under(skill.real_directory, skill.real_directory, 0):
        if len(out) == MAX_LISTED_FILES:
            return out, True
        if path != "SKILL.md":
            out.append(path)
    return out, False


def _files_under(root: Path, folder: Path, depth: int) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIPPED_FOLDERS:
            continue
        real = Path(os.path.realpath(entry.path))
        if not real.is_relative_to(root):  # a link leading out of the skill is not part of it
            continue
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError:  # a link loop (ELOOP) or a path the OS will not take: not a file of the skill
            continue
        if is_dir and depth < MAX_SKILL_DEPTH:
            yield from _files_under(root, Path(entry.path), depth + 1)
        elif is_file:
            yield Path(entry.path).relative_to(root).as_posix()


def _same_files(one: Path, other: Path) -> bool:
    """Whether two skill folders hold the same files with the same bytes (bounded: a folder with more files than
    are listed counts as different)."""
    names = list(_files_under(one, one, 0))
    if len(names) > MAX_LISTED_FILES or names != list(_files_under(other, other, 0)):
        return False
    try:
        return all(filecmp.cmp(one / name, other / name, shallow=False) for name in names)
    except OSError:
        return False


def skill_content(skill: Skill) -> str:
    """The body in the client guide's `<skill_content>` wrapper, with the folder and the (unread) file list."""
    files, more = bundled_files(skill)
    lines = [
        f'<skill_content name="{html.escape(skill.name)}">',
        skill.body,
        "",
        f"Skill directory: {skill.directory}",
        "Relative paths in this skill are relative to the skill directory.",
    ]
    if files:
        lines += ["", "<skill_resources>", *(f"  <file>{html.escape(f)}</file>" for f in files)]
        if more:
            lines.append(f"  <!-- only the first {MAX_LISTED_FILES} files are listed -->")
        lines.append("</skill_resources>")
    lines.append("</skill_content>")
    return "\n".join(lines)


def resolve_inside(skill: Skill, relative: str) -> Path:
    """The file a relative path names inside the skill's folder; refuses anything that would lead out."""
    where = f"skill {skill.name!r}"
    if not relative or "\0" in relative:
        raise SkillPathRefused(f"give a path inside {where}, such as 'SKILL.md'")
    posix = PurePosixPath(relative.replace("\\", "/"))
    if posix.is_absolute() or relative.startswith("~") or (len(relative) > 1 and relative[1] == ":"):
        raise SkillPathRefused(f"{relative!r} is absolute; paths are relative to the folder of {where}")
    if ".." in posix.parts:
        raise SkillPathRefused(f"{relative!r} climbs out with '..'; paths stay inside the folder of {where}")
    shown = relative if len(relative) <= MAX_SHOWN_PATH_CHARS else relative[:MAX_SHOWN_PATH_CHARS] + "..."
    try:
        target = (skill.real_directory / posix).resolve()
        if not target.is_relative_to(skill.real_directory):
            raise SkillPathRefused(f"{shown!r} links outside the folder of {where}; only its own files are readable")
        found = target.is_file()
    except (OSError, RuntimeError) as exc:  # ENAMETOOLONG, EACCES, a link loop: the path names nothing readable
        found = False
        where = f"{where} ({(getattr(exc, 'strerror', None) or str(exc)).lower()})"
    if not found:
        listed, _ = bundled_files(skill)
        hint = f"its files: {', '.join(['SKILL.md', *listed][:20])}"
        raise SkillPathRefused(f"{where} has no file {shown!r}; {hint}")
    return target


def read_skill_file(skill: Skill, relative: str) -> SkillFile:
    """One file of a skill: text (capped) when it decodes as UTF-8 without NULs, else bytes (capped). The file is
    opened as the path was checked: swapped since for a FIFO or a link leading out, it is refused, not waited on."""
    target = resolve_inside(skill, relative)
    rel = target.relative_to(skill.real_directory).as_posix()
    try:
        fd = open_inside(target, skill.real_directory)
    except (Unreadable, OSError) as exc:
        raise SkillPathRefused(f"{rel!r} of skill {skill.name!r} {_why(exc)}") from None
    size = os.fstat(fd).st_size
    mime = mimetypes.guess_type(rel)[0]
    raw = read_open(fd, max(MAX_READ_BYTES, MAX_READ_CHARS * 4) + 1)
    text = _as_text(raw)
    if text is None:
        cut = raw[:MAX_READ_BYTES]
        return SkillFile(skill.name, rel, mime or "application/octet-stream", size, data=cut, truncated=size > len(cut))
    truncated = len(text) > MAX_READ_CHARS or size > len(raw)
    return SkillFile(skill.name, rel, _text_mime(rel, mime), size, text=text[:MAX_READ_CHARS], truncated=truncated)


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, Unreadable) else "is gone (it was removed since it was listed)"


def _as_text(raw: bytes) -> str | None:
    if b"\0" in raw[:SNIFF_BYTES]:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(raw) - 4:  # only a character cut by the read limit
            return raw[: exc.start].decode("utf-8")
        return None


def _text_mime(rel: str, guessed: str | None) -> str:
    if rel.endswith(".md"):
        return "text/markdown"
    return guessed if guessed and (guessed.startswith("text/") or guessed.endswith(("json", "xml"))) else "text/plain"
