"""Where a project's files and state live (DESIGN §2)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SKILL_FOLDERS = ("skills", ".agents/skills", ".agent/skills", ".claude/skills", ".opencode/skills")


@dataclass(frozen=True)
class Project:
    """The project root, the user's folders, and the state directory."""

    root: Path
    state_dir: Path
    home: Path = field(default_factory=Path.home)
    config_home: Path = field(
        default_factory=lambda: Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    )

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
