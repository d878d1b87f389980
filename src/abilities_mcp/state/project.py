"""Where a project's files and state live (DESIGN §2)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# Nested ability folders deeper than this are not searched (DESIGN §2).
MAX_ABILITY_DEPTH = 3
SKIPPED_FOLDERS = {".git", "node_modules", "__pycache__"}
ABILITY_SUFFIXES = (".yaml", ".yml")
SKILL_FOLDERS = ("skills", ".agents/skills", ".agent/skills", ".claude/skills", ".opencode/skills")


class Project:
    """The project root, the user's folders, and the state directory."""

    # A plain class, not a dataclass: the hook imports this on every tool call and dataclasses cost it ~14 ms.
    __slots__ = ("root", "state_dir", "home", "config_home")

    def __init__(self, root: Path, state_dir: Path, home: Path | None = None, config_home: Path | None = None):
        self.root = root
        self.state_dir = state_dir
        self.home = home or Path.home()
        self.config_home = config_home or Path(os.environ.get("XDG_CONFIG_HOME") or self.home / ".config")

    def __repr__(self) -> str:
        return f"Project(root={str(self.root)!r}, state_dir={str(self.state_dir)!r})"

    @classmethod
    def resolve(cls, root: str | Path | None = None, state_dir: str | Path | None = None) -> Project:
        """--root, else $ABILITIES_ROOT, else $CLAUDE_PROJECT_DIR, else the current directory."""
        chosen = root or os.environ.get("ABILITIES_ROOT") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        resolved = Path(chosen).expanduser().resolve()
        state = state_dir or os.environ.get("ABILITIES_STATE_DIR") or resolved / ".abilities"
        return cls(root=resolved, state_dir=Path(state).expanduser().resolve())

    @property
    def state_db(self) -> Path:
        return self.state_dir / "state.db"

    def ability_dirs(self) -> list[tuple[Path, str]]:
        """Folders holding abilities, project first, each with its scope."""
        return [
            (self.root / "abilities", "project"),
            (self.root / ".opencode" / "abilities", "project"),
            (self.config_home / "abilities-mcp" / "abilities", "user"),
            (self.home / ".config" / "opencode" / "abilities", "user"),
        ]

    def skill_dirs(self) -> list[tuple[Path, str]]:
        """Folders holding skills, project first, each with its scope."""
        return [(self.root / f, "project") for f in SKILL_FOLDERS] + [(self.home / f, "user") for f in SKILL_FOLDERS]

    @property
    def workflows_file(self) -> Path:
        return self.root / "workflows.json"


def stamp(path: Path) -> tuple[int, ...]:
    """Changes when the file does, even when a copy kept the old mtime and size (ctime and inode still move)."""
    try:
        st = path.stat()
    except OSError:
        return (0,)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def discover_ability_files(project: Project) -> Iterator[tuple[Path, str, str]]:
    """(file, derived name, scope) for every ability file, project folders first."""
    seen: set[Path] = set()
    for folder, scope in project.ability_dirs():
        real = folder.resolve() if folder.is_dir() else None
        if real is None or real in seen:
            continue
        seen.add(real)
        for path in sorted(_walk(folder, 0)):
            yield path, derive_name(path.relative_to(folder)), scope


def _walk(folder: Path, depth: int) -> Iterator[Path]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir():
            if depth < MAX_ABILITY_DEPTH and not entry.name.startswith(".") and entry.name not in SKIPPED_FOLDERS:
                yield from _walk(Path(entry.path), depth + 1)
        elif entry.name.endswith(ABILITY_SUFFIXES) and not entry.name.startswith("."):
            yield Path(entry.path)


def derive_name(relative: Path) -> str:
    """`test.yaml` → test; `deploy/production/ability.yaml` → deploy/production; `deploy/x.yml` → deploy/x."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "ability" and len(parts) > 1:
        parts.pop()
    return "/".join(parts)
