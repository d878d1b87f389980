"""Where a project's files and state live (DESIGN §2)."""

from __future__ import annotations

import binascii
import os
import re

# typing's TYPE_CHECKING without importing typing; pathlib is imported where a Path is made (as_path), not here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# Nested ability folders deeper than this are not searched (DESIGN §2).
MAX_ABILITY_DEPTH = 3
SKIPPED_FOLDERS = {".git", "node_modules", "__pycache__"}
ABILITY_SUFFIXES = (".yaml", ".yml")
# The gateway's upstream servers (gateway/config.py reads it; the hook asks which it lists directly).
GATEWAY_FILE = "gateway.json"
SKILL_FOLDERS = ("skills", ".agents/skills", ".agent/skills", ".claude/skills", ".opencode/skills")
# Where the state lived before it moved out of the project tree: a file there is never opened (an agent whose
# sandbox lets it write the project could plant one), only named in a notice that says how to move it.
LEGACY_STATE_DIR = ".abilities"
# A PostgreSQL state location from the environment, when no --state is given (team mode, docs/team.md).
STATE_ENV = "ABILITIES_STATE"
# The user's state home holds STATE_FOLDER/PROJECTS_FOLDER/<slug>/state.db, one folder per project.
STATE_FOLDER, PROJECTS_FOLDER = "abilities-mcp", "projects"
# The readable part of a project's state folder name: its last path component, cut to this many characters.
SLUG_NAME_CHARS = 40
# Characters a state folder name keeps from the project's name; the rest become "_".
_UNSAFE_IN_SLUG = re.compile(r"[^\w.-]")


class Project:
    """The project root, the user's folders, and where the state lives.

    Held as text (`root_dir`, `state_folder`, `home_dir`, `config_dir`): the hook reads them on every tool call and
    never imports pathlib, ~5 ms of its start. `root`, `state_dir`, `state_db`, `home` and the rest are the same
    places as Paths, for the server and the CLI."""

    # A plain class, not a dataclass: the hook imports this on every tool call and dataclasses cost it ~14 ms.
    __slots__ = ("root_dir", "state_folder", "home_dir", "config_dir", "state_url")

    def __init__(
        self,
        root: str | Path,
        state_dir: str | Path,
        home: str | Path | None = None,
        config_home: str | Path | None = None,
        state_url: str | None = None,
    ):
        self.root_dir = os.fspath(root)
        self.state_folder = os.fspath(state_dir)  # the SQLite file's; also the trust records' and the spools', always
        self.home_dir = os.fspath(home) if home else os.path.expanduser("~")
        config = config_home or os.environ.get("XDG_CONFIG_HOME") or os.path.join(self.home_dir, ".config")
        self.config_dir = os.fspath(config)
        self.state_url = state_url or None  # a postgresql:// location: runs, sessions and approvals live there

    def __repr__(self) -> str:
        return f"Project(root={self.root_dir!r}, state_dir={self.state_folder!r})"

    @classmethod
    def resolve(
        cls, root: str | Path | None = None, state_dir: str | Path | None = None, state: str | None = None
    ) -> Project:
        """--root, else $ABILITIES_ROOT, else $CLAUDE_PROJECT_DIR, else the current directory. The state database:
        --state, else $ABILITIES_STATE (a postgresql:// URL, checked when opened: database.check_location), else the
        SQLite file in --state-dir, else $ABILITIES_STATE_DIR, else the user's state home."""
        chosen = root or os.environ.get("ABILITIES_ROOT") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        resolved = _resolved(chosen)
        folder = state_dir or os.environ.get("ABILITIES_STATE_DIR") or state_folder_of(resolved)
        url = state or os.environ.get(STATE_ENV)
        return cls(root=resolved, state_dir=_resolved(folder), state_url=url)

    @property
    def root(self) -> Path:
        return as_path(self.root_dir)

    @property
    def state_dir(self) -> Path:
        return as_path(self.state_folder)

    @property
    def home(self) -> Path:
        return as_path(self.home_dir)

    @property
    def config_home(self) -> Path:
        return as_path(self.config_dir)

    @property
    def state_file(self) -> str:
        """The SQLite state file's path, as text (the hook's form of state_db)."""
        return os.path.join(self.state_folder, "state.db")

    @property
    def state_db(self) -> Path:
        """The SQLite state file (in use unless state_url names a PostgreSQL database)."""
        return as_path(self.state_file)

    @property
    def state_location(self) -> Path | str:
        """What Database opens: the PostgreSQL URL when one is given, else the SQLite file's path."""
        return self.state_url or self.state_db

    @property
    def state_shown(self) -> str:
        """The state's location for a message: the SQLite file, or the URL without its password."""
        if self.state_url is None:
            return self.state_file
        from urllib.parse import urlsplit

        password = urlsplit(self.state_url).password
        return self.state_url.replace(f":{password}@", ":***@", 1) if password else self.state_url

    @property
    def legacy_state_db(self) -> Path:
        """Where older versions kept the state file, inside the project: never opened, see LEGACY_STATE_DIR."""
        return self.root / LEGACY_STATE_DIR / "state.db"

    def notices(self) -> list[str]:
        """What a person should know about where the state is, before a command uses it (printed to stderr)."""
        return [n for n in (self.legacy_notice(), self.exposed_notice()) if n]

    def exposed_notice(self) -> str | None:
        """A state folder inside the project: a sandboxed agent may write the project, so it may write this."""
        if not self.state_dir.is_relative_to(self.root):
            return None
        return (
            f"abilities-mcp: the state folder {str(self.state_dir)!r} is inside the project {str(self.root)!r}, so an "
            "agent whose shell the client sandboxes to the project can still write it, approvals included. Point "
            "--state-dir, $ABILITIES_STATE_DIR or $XDG_STATE_HOME at a folder outside the project."
        )

    def legacy_notice(self) -> str | None:
        """What to tell a person whose state file is still in the project and not yet where it is read now."""
        legacy = self.legacy_state_db
        if legacy == self.state_db or self.state_db.exists() or not legacy.is_file():
            return None
        import shlex

        old, new = shlex.quote(str(legacy.parent)), shlex.quote(str(self.state_dir))
        return (
            f"abilities-mcp: {str(legacy)!r} is no longer read: the state file (runs, approvals, workflow records) now "
            f"lives outside the project, at {str(self.state_db)!r}, where an agent whose shell is sandboxed to the "
            "project cannot write it. If the old file holds runs you want to keep and no agent could have written it, "
            f"stop the server and move it:\n  mkdir -p -m 700 {new} && mv {old}/state.db* {new}/\n"
            f"Otherwise delete it:\n  rm {old}/state.db*"
        )

    def ability_dirs(self) -> list[tuple[Path, str]]:
        """Folders holding abilities, project first, each with its scope."""
        return [
            (self.root / "abilities", "project"),
            (self.root / ".opencode" / "abilities", "project"),
            (self.config_home / "abilities-mcp" / "abilities", "user"),
            (self.home / ".config" / "opencode" / "abilities", "user"),
        ]

    def skill_dirs(self) -> list[tuple[Path, str]]:
        """Folders holding skills, project first, each with its scope; the settings file may name others."""
        from .settings import load  # on first use: most hook calls never look at skills

        chosen = load(self.root).get("skills.folders")
        if chosen is None:
            defaults = [(self.root / f, "project") for f in SKILL_FOLDERS]
            return defaults + [(self.home / f, "user") for f in SKILL_FOLDERS]
        folders = [self.home / f[2:] if f.startswith("~/") else self.root / f for f in (c.strip() for c in chosen)]
        return [(f, "project" if f.resolve().is_relative_to(self.root.resolve()) else "user") for f in folders]

    @property
    def workflows_file(self) -> Path:
        return as_path(self.workflows_json)

    @property
    def workflows_json(self) -> str:
        """workflows.json's path, as text (the hook's form of workflows_file)."""
        return os.path.join(self.root_dir, "workflows.json")


def as_path(text: str) -> Path:
    """`text` as a Path, pathlib imported on first use: the hook's path keeps to text (see Project)."""
    from pathlib import Path

    return Path(text)


def _resolved(place: str | Path) -> str:
    """`place` with ~ expanded, made absolute and its links resolved: Path(place).expanduser().resolve(), as text."""
    return os.path.realpath(os.path.expanduser(os.fspath(place)))


def user_state_home() -> str:
    """$XDG_STATE_HOME, else ~/.local/state (a relative $XDG_STATE_HOME is ignored, as the XDG spec says)."""
    chosen = os.environ.get("XDG_STATE_HOME", "")
    return chosen if os.path.isabs(chosen) else os.path.join(os.path.expanduser("~"), ".local", "state")


def default_state_dir(root: str | Path, state_home: str | Path | None = None) -> Path:
    """The state folder of the project at `root` (resolved): outside the project tree, where an agent whose client
    sandboxes its shell to the project cannot write. `STATE_HOME/abilities-mcp/projects/NAME-CRC/`."""
    return as_path(state_folder_of(root, state_home))


def state_folder_of(root: str | Path, state_home: str | Path | None = None) -> str:
    """default_state_dir, as text (the hook's form)."""
    return os.path.join(state_home or user_state_home(), STATE_FOLDER, PROJECTS_FOLDER, state_slug(root))


def state_slug(root: str | Path) -> str:
    """The project folder's name, readable, and a checksum of its whole path, so two `app` folders differ.

    CRC-32 from binascii, not a hashlib digest: the hook computes this on every tool call, and importing hashlib
    costs it about 8 ms against binascii's 0.1 ms. Two projects collide only with the same name and the same CRC."""
    name = _UNSAFE_IN_SLUG.sub("_", os.path.basename(root))[:SLUG_NAME_CHARS].lstrip(".") or "root"
    return f"{name}-{binascii.crc32(os.fsencode(root)):08x}"


def stamp(path: str | Path) -> tuple[int, ...]:
    """Changes when the file does, even when a copy kept the old mtime and size (ctime and inode still move)."""
    try:
        st = os.stat(path)
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
                yield from _walk(as_path(entry.path), depth + 1)
        elif entry.name.endswith(ABILITY_SUFFIXES) and not entry.name.startswith("."):
            yield as_path(entry.path)


def derive_name(relative: Path) -> str:
    """`test.yaml` → test; `deploy/production/ability.yaml` → deploy/production; `deploy/x.yml` → deploy/x."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "ability" and len(parts) > 1:
        parts.pop()
    return "/".join(parts)
