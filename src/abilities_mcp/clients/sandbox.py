"""Each client's own sandbox: the settings `init CLIENT --sandbox` writes, the folders the agent's shell may still
write under it, and what it needs from the system; `doctor` reads the same tables.

The state folder lives outside the project (state/project.py) so that a shell the client confines to the project
cannot write it: a forged approval needs the state file. What each client lets a sandboxed command write was read
from the pinned client itself (clients/versions.py), each noted where its table is.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from .jsonc import read_object


class Setting(NamedTuple):
    """One verified value, and what goes wrong without it (the note when a person's file says otherwise)."""

    value: Any
    risk: str


class JsonSandbox(NamedTuple):
    """A client whose sandbox is a few keys of a JSON settings file in the project."""

    label: str
    path: str  # relative to the project
    table: str  # the object the keys live in
    settings: dict[str, Setting]
    defaults: dict[str, Any]  # what the client assumes for a key no file sets


# Claude Code 2.1.330's `sandbox` (the settings schema in its binary): Bash runs in bubblewrap on Linux, Seatbelt on
# macOS, writing only the project and the folders of claude_roots. Verified with the real client, headless
# (tests/clients/test_sandboxes.py; the threat model's routes in tests/clients/test_claude_code.py).
CLAUDE = JsonSandbox(
    "Claude Code",
    ".claude/settings.json",
    "sandbox",
    {
        "enabled": Setting(True, "Bash runs unsandboxed and can write wherever you can, the state folder included"),
        "autoAllowBashIfSandboxed": Setting(
            True, "every sandboxed Bash command asks first, although the sandbox is what confines it"
        ),
        "allowUnsandboxedCommands": Setting(
            False,
            "the model may run a command outside the sandbox (dangerouslyDisableSandbox), without a question in "
            "bypass-permissions mode",
        ),
        "failIfUnavailable": Setting(True, "a sandbox that cannot start only warns, and Bash then runs unsandboxed"),
    },
    {"enabled": False, "autoAllowBashIfSandboxed": False, "allowUnsandboxedCommands": True, "failIfUnavailable": False},
)
# Gemini CLI 0.61.0's tool sandbox (packages/core/src/services/sandboxManagerFactory.ts): each shell command and file
# write runs in bubblewrap on Linux (Seatbelt on macOS), writing only the project and ~/.gemini/tmp; a command that
# asks for more (`additional_permissions`) needs a person's yes, even under --yolo. Not `tools.sandbox`: that runs the
# whole CLI, its hooks and MCP servers included, in a Docker or Podman image where abilities-mcp is not installed
# and the state folder not mounted. Verified with the real client (tests/clients/test_sandboxes.py).
GEMINI = JsonSandbox(
    "Gemini CLI",
    ".gemini/settings.json",
    "security",
    {
        "toolSandboxing": Setting(
            True, "its shell and file tools run unsandboxed and can write wherever you can, the state folder included"
        )
    },
    {"toolSandboxing": False},
)
JSON_SANDBOXES = {"claude": CLAUDE, "gemini": GEMINI}

# Codex 0.169.0 (codex-rs/protocol: SandboxPolicy::WorkspaceWrite): commands write the project (its .git, .codex and
# .agents read-only), /tmp, $TMPDIR and `[sandbox_workspace_write] writable_roots`; a project's .codex/config.toml
# counts only once the project is trusted (codex-rs/config/src/loader), and then over the user's. Verified with the
# real client (tests/clients/test_sandboxes.py); its Linux sandbox is a bubblewrap bundled with Codex.
CODEX_CONFIG = ".codex/config.toml"
CODEX_MODE = "workspace-write"
CODEX_MODES_CONFINED = ("workspace-write", "read-only")
CODEX_RISK = "its shell writes wherever you can, the state folder included"

# What init --sandbox says instead of writing anything, for a client with no sandbox of its own.
NO_SANDBOX = {
    "opencode": (
        "OpenCode has no sandbox of its own, so nothing can confine its shell to the project. Run `abilities-mcp init "
        "opencode` for the server and the plugin; then run OpenCode as another OS user or in a container, or set "
        '"permission": {"bash": "ask"} in opencode.json so a person reviews each shell command (that stops a hidden '
        "write only if the person reads the command)"
    ),
    "cursor": (
        "Cursor has no sandbox setting init can write and verify (Cursor has no CLI to test with). Run "
        "`abilities-mcp init cursor` for the server and the hooks, and run Cursor's agent as another OS user or in a "
        "container"
    ),
    "vscode": (
        "VS Code (Copilot) has no sandbox for the agent's own tools that init can write (its MCP `sandbox` confines "
        "servers, and this one must write its state outside the project). Run `abilities-mcp init vscode` for the "
        "server; the client's own tools stay ungated there"
    ),
    "desktop": (
        "Claude Desktop has no shell of its own to sandbox: it only runs MCP servers, and this server gates its own "
        "tools. Run `abilities-mcp init desktop`"
    ),
}

# What a sandbox needs on this platform to start at all: command -> how to get it.
NEEDS: dict[str, dict[str, dict[str, str]]] = {
    "claude": {"linux": {"bwrap": "bubblewrap", "socat": "socat"}},
    "gemini": {"linux": {"bwrap": "bubblewrap"}},
}
# After a sandbox was written: what the person should know.
NOTES = {
    "claude": (
        "Claude Code: its sandbox is on and allowUnsandboxedCommands is false, so Bash writes only the project (and "
        "Claude Code's own temporary folders); the Write and Edit tools stay under the hooks. Start a new session to "
        "load it; with failIfUnavailable it refuses to start where the sandbox cannot (Linux: bubblewrap and socat)"
    ),
    "gemini": (
        "Gemini CLI: security.toolSandboxing runs each shell command and file write in a sandbox that writes only the "
        "project and ~/.gemini/tmp (Linux: bubblewrap; macOS: Seatbelt). Restart Gemini CLI to load it"
    ),
    "codex": (
        f'Codex: sandbox_mode = "{CODEX_MODE}" lets its shell write only the project (its .codex read-only), /tmp and '
        "$TMPDIR; Codex reads .codex/config.toml only once you trust this project, and a person approves any "
        "command that asks to leave the sandbox (unless approval_policy is never)"
    ),
}


class Root(NamedTuple):
    """A folder the client lets the agent's sandboxed shell write, where that comes from, and how to take it out."""

    path: Path
    why: str
    undo: str = ""


class Found(NamedTuple):
    """One setting as the client will read it: its value, and the file that sets it (None: the client's default)."""

    value: Any
    source: Path | None


class Where(NamedTuple):
    """What the clients' user-level files depend on: the home folder and the environment."""

    home: Path
    env: Mapping[str, str]

    @classmethod
    def here(cls) -> Where:
        return cls(Path.home(), os.environ)

    @property
    def claude_dir(self) -> Path:
        """Claude Code's user folder: $CLAUDE_CONFIG_DIR, else ~/.claude."""
        return Path(self.env.get("CLAUDE_CONFIG_DIR") or self.home / ".claude")

    @property
    def codex_home(self) -> Path:
        return Path(self.env.get("CODEX_HOME") or self.home / ".codex")


# --- what the client will read ------------------------------------------------------------------------------------


def claude_files(root: Path, where: Where) -> list[tuple[Path, Path]]:
    """Claude Code's settings files, lowest precedence first, each with the folder its relative paths start from:
    the user's, the project's, the project's local one, then managed settings (which win over all)."""
    managed = Path("/Library/Application Support/ClaudeCode" if sys.platform == "darwin" else "/etc/claude-code")
    return [
        (where.claude_dir / "settings.json", where.claude_dir),
        (root / CLAUDE.path, root),
        (root / ".claude" / "settings.local.json", root),
        (managed / "managed-settings.json", managed),
    ]


def gemini_files(root: Path, where: Where) -> list[tuple[Path, Path]]:
    """Gemini CLI's settings files, lowest precedence first: the user's, then the project's."""
    return [(where.home / ".gemini" / "settings.json", where.home), (root / GEMINI.path, root)]


def json_settings(client: str, root: Path, where: Where) -> dict[str, Found]:
    """Each sandbox key of a JSON client as it will read it: the last file that sets it wins, except that
    `allowUnsandboxedCommands: false` in Claude Code's user or managed settings holds whatever the project says
    (its schema's words)."""
    sandbox = JSON_SANDBOXES[client]
    files = claude_files(root, where) if client == "claude" else gemini_files(root, where)
    found = {key: Found(default, None) for key, default in sandbox.defaults.items()}
    for path, _ in files:
        table = (read_object(path) or {}).get(sandbox.table)
        for key in found if isinstance(table, dict) else ():
            if key in table and not _held(client, key, found[key], root):
                found[key] = Found(table[key], path)
    return found


def overriding(client: str, root: Path, where: Where) -> list[tuple[Path, str, Any, str]]:
    """(file, key, value, what it risks) for each sandbox key that a file read after the project's sets otherwise:
    Claude Code's settings.local.json and managed settings win over .claude/settings.json."""
    sandbox = JSON_SANDBOXES[client]
    files = claude_files(root, where) if client == "claude" else gemini_files(root, where)
    after = [path for path, _ in files][[path for path, _ in files].index(root / sandbox.path) + 1 :]
    found = []
    for path in after:
        table = (read_object(path) or {}).get(sandbox.table)
        for key, setting in sandbox.settings.items() if isinstance(table, dict) else ():
            if key in table and table[key] != setting.value:
                found.append((path, key, table[key], setting.risk))
    return found


def _held(client: str, key: str, current: Found, root: Path) -> bool:
    """Whether a value already found stays, whatever a later file says."""
    outside = current.source is not None and not current.source.is_relative_to(root)
    return client == "claude" and key == "allowUnsandboxedCommands" and current.value is False and outside


def codex_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def codex_trusted(root: Path, where: Where) -> bool:
    """Whether the user's Codex config trusts this project (Codex reads its .codex/ folder only then)."""
    projects = codex_config(where.codex_home / "config.toml").get("projects")
    entry = projects.get(str(root)) if isinstance(projects, dict) else None
    return isinstance(entry, dict) and entry.get("trust_level") == "trusted"


def codex_setting(root: Path, where: Where, key: str) -> Found:
    """A top-level key of Codex's config: the project's (when trusted) over the user's."""
    found = Found(None, None)
    files = [where.codex_home / "config.toml"] + ([root / CODEX_CONFIG] if codex_trusted(root, where) else [])
    for path in files:
        data = codex_config(path)
        if key in data:
            found = Found(data[key], path)
    return found


# --- where the agent's sandboxed shell may write ------------------------------------------------------------------


def writable_roots(client: str, root: Path, where: Where) -> list[Root]:
    """The folders the client's sandbox lets the agent's shell write once it is on, the project first; [] for a
    client with no sandbox, whose shell writes wherever the user can."""
    return ROOTS[client](root, where) if client in ROOTS else []


def claude_roots(root: Path, where: Where) -> list[Root]:
    """Claude Code 2.1.330 on Linux and macOS: the project, its own temporary and log folders (the binary's
    default write list), then every settings file's `permissions.additionalDirectories` and
    `sandbox.filesystem.allowWrite`."""
    roots = [Root(root, "the project")]
    roots += [Root(Path(p), "Claude Code's temporary folder") for p in ("/tmp/claude", "/private/tmp/claude")]
    roots += [Root(where.home / p, "Claude Code's log folder") for p in (".npm/_logs", ".claude/debug")]
    for path, base in claude_files(root, where):
        data = read_object(path) or {}
        for keys in (("permissions", "additionalDirectories"), ("sandbox", "filesystem", "allowWrite")):
            roots += [_listed(entry, keys, path, base, where) for entry in _list(data, keys)]
    return roots


def codex_roots(root: Path, where: Where) -> list[Root]:
    """Codex 0.169.0 in workspace-write: the project, /tmp and $TMPDIR unless excluded, and `writable_roots`."""
    table = codex_setting(root, where, "sandbox_workspace_write").value
    table = table if isinstance(table, dict) else {}
    roots = [Root(root, "the project")]
    table_name = f"[sandbox_workspace_write] in {root / CODEX_CONFIG}"
    if not table.get("exclude_slash_tmp"):
        roots.append(Root(Path("/tmp"), "Codex's workspace-write", f"set exclude_slash_tmp = true under {table_name}"))
    if not table.get("exclude_tmpdir_env_var") and os.path.isabs(where.env.get("TMPDIR", "")):
        undo = f"set exclude_tmpdir_env_var = true under {table_name}"
        roots.append(Root(Path(where.env["TMPDIR"]), "$TMPDIR, in Codex's workspace-write", undo))
    for entry in table.get("writable_roots") or []:
        if isinstance(entry, str):
            path = _resolved(entry, where.codex_home, where)
            roots.append(Root(path, "sandbox_workspace_write.writable_roots", f"remove {entry!r} from writable_roots"))
    return roots


def gemini_roots(root: Path, where: Where) -> list[Root]:
    """Gemini CLI 0.61.0's tool sandbox: the project, ~/.gemini/tmp, and every settings file's
    `tools.sandboxAllowedPaths` and `context.includeDirectories`."""
    roots = [Root(root, "the project"), Root(where.home / ".gemini" / "tmp", "Gemini CLI's temporary folder")]
    for path, base in gemini_files(root, where):
        data = read_object(path) or {}
        for keys in (("permissions", "additionalDirectories"), ("sandbox", "filesystem", "allowWrite")):
            roots += [_listed(entry, keys, path, base, where) for entry in _list(data, keys)]
    return roots


ROOTS: dict[str, Callable[[Path, Where], list[Root]]] = {
    "claude": claude_roots,
    "codex": codex_roots,
    "gemini": gemini_roots,
}


def exposing(state_dir: Path, roots: list[Root]) -> Root | None:
    """The first writable root that holds the state folder, or None when the sandbox keeps it out of reach."""
    state = _real(state_dir)
    return next((r for r in roots if state.is_relative_to(_real(r.path))), None)


def missing(client: str, which: Callable[[str], str | None], platform: str = sys.platform) -> list[str]:
    """The packages the client's sandbox needs on this platform and cannot find (their commands not on PATH)."""
    wanted = NEEDS.get(client, {}).get("linux" if platform.startswith("linux") else platform, {})
    return [package for command, package in wanted.items() if which(command) is None]


# Claude Code drops a path from its first component with a glob character on (its allowWrite reading).
_GLOB_TAIL = re.compile(r"(^|/)[^/]*[*?\[\]{}].*$")


def _listed(entry: str, keys: tuple[str, ...], path: Path, base: Path, where: Where) -> Root:
    """A folder a settings file lists as writable."""
    dotted = ".".join(keys)
    return Root(_resolved(entry, base, where), f"{dotted} in {path}", f"remove {entry!r} from {dotted} in {path}")


def _resolved(entry: str, base: Path, where: Where) -> Path:
    """A path as the clients write them: ~ for the home folder, else absolute, else relative to `base`."""
    plain = _GLOB_TAIL.sub("", entry).rstrip("/") or "/"
    if plain == "~" or plain.startswith("~/"):
        return where.home / plain[2:]
    return Path(plain) if os.path.isabs(plain) else base / plain


def _list(data: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _real(path: Path) -> Path:
    """The path with symlinks resolved as far as they exist (a sandbox binds the real folder)."""
    try:
        return path.resolve()
    except OSError:
        return path.absolute()
