"""What no agent tool may touch, whatever run is live: a person's approval commands, the state file, and the files
that decide what gates the agent (the clients' hooks, plugins, settings and server entries).

These hold in every session, with or without a live run: a run started from a terminal has no run in the model's
session, and a settings file written today (an `Elicitation` hook that accepts every form) would answer tomorrow's
approval. A shell command is judged by its text, so a command built to hide what it runs still passes: that gap,
and what closes it (the client's sandbox, another OS user), is in the threat model (docs/clients.md).
Pure functions, stdlib only: the hook runs them on every tool call.
"""

from __future__ import annotations

import os
import re
import stat

from ..files import inside
from ..records import Record
from ..state.project import LEGACY_STATE_DIR, PROJECTS_FOLDER, STATE_FOLDER, user_state_home

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call (pathlib
# too: the places here are text).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# Files and folders that decide what gates the agent, relative to the project and to the home folder.
CLIENT_FILES = (
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/hooks",
    "opencode.json",
    "opencode.jsonc",
    ".opencode/plugins",
    ".opencode/opencode.json",
    ".opencode/opencode.jsonc",
    ".config/opencode",
    ".cursor/hooks.json",
    ".cursor/mcp.json",
    ".vscode/mcp.json",
    ".codex/config.toml",
    ".codex/hooks.json",
    ".gemini/settings.json",
    ".claude.json",  # Claude Code's user and local MCP servers (`claude mcp add` writes it): ~/.claude.json
)
# A person's word, however it is started (the script, `python -m abilities_mcp`, a path to either): an answer
# (approve, decide), trust in the files that decide gates (trust), or the client configs and hooks (init).
# Matched a command part at a time, each once (_answer_command): one regex over the whole command tried the rest of
# the part from every mention, quadratic (a command repeating `abilities-mcp ` took 58 s at 280 KB).
# Patterns as text, compiled by re on first use and cached there: most tool calls are neither shell nor write.
_OUR_COMMAND = r"abilities[-_]mcp\b"
_ANSWER_WORD = r"\b(approve|decide|trust|init)\b"
_COMMAND_PART = r"[^;&|\n]+"
# The clients' own commands that add, change or remove MCP servers in their configs (a server entry is a gate's).
_CLIENT_CONFIG_COMMAND = r"\b(claude|codex|gemini|opencode)\s+mcp\s+(add|add-json|remove|rm|reset)"
# Tool argument keys that name the file a write tool changes (Claude Code, OpenCode).
PATH_KEYS = ("file_path", "filePath", "notebook_path", "path")
# Argument keys that hold a shell command.
COMMAND_KEYS = ("command", "cmd")
SHELL_TOOLS = {"bash", "shell", "run_shell_command", "exec", "killshell"}
WRITE_TOOLS = {"write", "edit", "multiedit", "notebookedit", "patch", "write_file", "replace", "strreplace", "delete"}
# Codex's apply_patch names its files inside the patch text (tool_input.command): these header lines.
PATCH_TOOLS = {"apply_patch"}
# `.*\S`, not `.+?\s*$`: a lazy name before trailing spaces tried every split of a run of spaces (quadratic).
_PATCH_FILE = r"(?m)^\*\*\* (?:Add File|Update File|Delete File|Move to): (.*\S)"


def refusal(tool: str, arguments: dict[str, Any], root: str | Path, state_dir: str | Path) -> str | None:
    """Why this call may not run whatever the run, or None. Only the client's shell and file-writing tools."""
    name = tool.lower()
    root, state_dir = os.path.normpath(root), os.path.normpath(state_dir)  # as a Path spells them
    if name in SHELL_TOOLS:
        command = _first(arguments, COMMAND_KEYS)
        return _shell_refusal(tool, command, root, state_dir) if command else None
    if name in WRITE_TOOLS:
        target = _first(arguments, PATH_KEYS)
        return _write_refusal(tool, target, root, state_dir) if target else None
    if name in PATCH_TOOLS:
        patch = _first(arguments, ("command", "patch", "input"))
        named = _first(arguments, PATH_KEYS)
        targets = re.findall(_PATCH_FILE, patch) or ([named] if named else [])
        return next((r for t in targets if (r := _write_refusal(tool, t, root, state_dir))), None)
    return None


def _answer_command(command: str) -> str | None:
    """The answer word (approve, decide, trust, init) after a mention of abilities-mcp in the same part of a shell
    command, or None. Only a part's first mention need be looked past: a later one's rest is inside the first's."""
    answer_word = re.compile(_ANSWER_WORD)
    for part in re.finditer(_COMMAND_PART, command):
        mention = re.search(_OUR_COMMAND, part.group())
        if mention is not None and (word := answer_word.search(part.group(), mention.end())) is not None:
            return word.group(1)
    return None


def _shell_refusal(tool: str, command: str, root: str, state_dir: str) -> str | None:
    if word := _answer_command(command):
        if word in ("approve", "decide"):
            return (
                f"abilities-mcp: {tool} refused: `abilities-mcp approve|decide` is a person's answer, typed in their "
                "own terminal; an agent's tools never run it. Ask the user to answer, then call ability_status."
            )
        return (
            f"abilities-mcp: {tool} refused: `abilities-mcp {word}` is a person's word, typed in their own "
            "terminal: only a person trusts edited gates or sets up the client's hooks and servers, and an agent's "
            "tools never run it. Ask the user to review the change and run it."
        )
    if found := re.search(_CLIENT_CONFIG_COMMAND, command):
        return (
            f"abilities-mcp: {tool} refused: `{found.group(0)}` changes the MCP servers the client starts, which "
            "decide what gates the agent; only a person changes them. Ask the user to make the change."
        )
    for place in _protected(root, state_dir):
        if any(needle in command for needle in place.needles):
            return (
                f"abilities-mcp: {tool} refused: the command names {place.shown}, which decides what gates the agent "
                "(approvals, hooks, settings); only a person changes it. Read it with the Read tool if you need to."
            )
    return None


def _write_refusal(tool: str, target: str, root: str, state_dir: str) -> str | None:
    # a link into a protected folder is that folder
    path = os.path.realpath(os.path.join(root, os.path.expanduser(target)))
    for place in _protected(root, state_dir):
        if any(path == p or path.startswith(p + os.sep) for p in place.paths):
            return (
                f"abilities-mcp: {tool} refused: {target} decides what gates the agent (approvals, hooks, settings); "
                "only a person changes it. Ask the user to make the change."
            )
    return None


class Place(Record, fields="shown paths needles"):
    """One protected file or folder: how a message shows it, where it is, and the texts that name it."""

    __slots__ = ()

    shown: str
    paths: tuple[str, ...]
    needles: tuple[str, ...]


def _protected(root: str, state_dir: str) -> list[Place]:
    home = os.path.normpath(os.path.expanduser("~"))
    state_home = os.path.normpath(os.path.join(user_state_home(), STATE_FOLDER))
    places = [_state_place(state_dir, root, home), _state_place(state_home, root, home)]
    real_root, real_home = os.path.realpath(root), os.path.realpath(home)
    # never read, but a file planted there would confuse a person who moves it
    places.append(Place(LEGACY_STATE_DIR, (_real_in(real_root, LEGACY_STATE_DIR),), (LEGACY_STATE_DIR,)))
    for name in CLIENT_FILES:
        paths = (_real_in(real_root, name), _real_in(real_home, name))
        places.append(Place(name, paths, (name, f"~/{name}", *paths)))
    return places


def _real_in(real: str, name: str) -> str:
    """os.path.realpath(real/name) for a folder `real` that is real already (realpath's own answer): only the
    components of `name` are looked at, one lstat each, rather than every component of the folder again for each of
    the files here (the hook does this on every shell and write call). A link among them: realpath as usual; one
    that cannot be looked at (missing, not a folder) leaves the rest as written, as realpath does."""
    if os.sep != "/":  # (names here are written with "/": elsewhere realpath spells them)
        return os.path.realpath(os.path.join(real, name))
    path = real
    for part in name.split("/"):
        path = f"{path}/{part}" if path != "/" else f"/{part}"
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return os.path.realpath(os.path.join(real, name))
        except OSError:
            return os.path.join(real, name)
    return path


def _state_place(folder: str, root: str, home: str) -> Place:
    """A state folder, named however a shell command could spell it: as is, resolved, from the project, from home
    (`~`, `$HOME`), and by its last components (`abilities-mcp/projects/NAME-CRC`, what a `cd` into the state home
    leaves)."""
    real = os.path.realpath(folder)
    spellings = {folder, real, inside(folder, root) or ""}
    for path in (folder, real):
        from_home = inside(path, home)
        if from_home:
            spellings.update(f"{prefix}/{from_home}" for prefix in ("~", "$HOME", "${HOME}"))
    parent, name = os.path.split(folder)
    if os.path.basename(parent) == PROJECTS_FOLDER:
        spellings.update((f"{PROJECTS_FOLDER}/{name}", name))
    if name == STATE_FOLDER:
        spellings.add(f"{STATE_FOLDER}/{PROJECTS_FOLDER}")
    return Place(folder, (real,), tuple(sorted(n for n in spellings if n)))


def _first(arguments: dict[str, Any], keys: tuple[str, ...]) -> str:
    return next((v for k in keys if isinstance(v := arguments.get(k), str) and v), "")
