"""A skill's complete file manifest for the MCP skills extension (SEP-2640): every file, its size and SHA-256.

SEP-2640 says a listed manifest is complete — SKILL.md and every supporting file, each once — so a host can bind
a person's approval to the content and verify each file it reads. A skill over the extension's limits (512 files,
16 MiB) is not served at all rather than served with a partial list; the fallback tools still reach it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..files import Unreadable, open_inside
from .skillset import SKIPPED_FOLDERS
from .spec import Skill

# The extension's per-skill limits: every conforming host accepts up to these, none is promised more.
MAX_FILES = 512
MAX_TOTAL_BYTES = 16 * 1024 * 1024
# How deep a skill's folders are walked (deeper than any real skill; a link loop must not recurse forever).
MAX_DEPTH = 16


class ManifestFile(NamedTuple):
    path: str  # relative POSIX path inside the skill's folder
    digest: str  # sha256:<64 lowercase hex>
    size: int


class OverLimit(Exception):
    """The skill is larger than the extension lets a server serve; the message says by how much."""


def manifest(skill: Skill) -> list[ManifestFile]:
    """SKILL.md first, then every other file in path order; OverLimit when the skill breaks a limit."""
    paths = sorted(_files(skill.real_directory, skill.real_directory, 0), key=lambda p: (p != "SKILL.md", p))
    if len(paths) > MAX_FILES:
        raise OverLimit(f"skill {skill.name!r} has {len(paths)} files; the skills extension serves at most {MAX_FILES}")
    root = skill.real_directory
    if sum(_size(root / path) for path in paths) > MAX_TOTAL_BYTES:  # sizes first: a 3 GiB file is never read
        raise _too_big(skill)
    found, left = [], MAX_TOTAL_BYTES
    for path in paths:
        digest, size = _digest(root / path, root, left)
        left -= size
        if left < 0:  # a file grew since its size was read
            raise _too_big(skill)
        found.append(ManifestFile(path, digest, size))
    return found


def _too_big(skill: Skill) -> OverLimit:
    return OverLimit(f"skill {skill.name!r} holds more than 16 MiB, the skills extension's limit")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # gone or unreadable: the read below says which


def children(skill: Skill, relative: str) -> list[tuple[str, bool]]:
    """(name, is_folder) of a folder's direct children inside the skill, as the manifest sees them; NotADirectoryError
    when `relative` names no folder of the skill ("" is the skill's own folder)."""
    folder = (skill.real_directory / relative).resolve() if relative else skill.real_directory
    if not folder.is_relative_to(skill.real_directory) or not folder.is_dir() or _hidden(relative):
        raise NotADirectoryError(relative)
    out = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if _skipped(entry.name) or not _inside(entry, skill.real_directory):
            continue
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError:
            continue
        if is_dir or is_file:
            out.append((entry.name, is_dir))
    return out


def _inside(entry: os.DirEntry[str], root: Path) -> bool:
    """Whether an entry of a folder inside `root` is inside it too: only a link can lead out, so only a link's
    real path is worked out (a folder of 20,000 files costs no 20,000 realpath calls)."""
    try:
        if not entry.is_symlink():
            return True
    except OSError:
        return False
    return Path(os.path.realpath(entry.path)).is_relative_to(root)


def _files(root: Path, folder: Path, depth: int) -> Iterator[str]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if _skipped(entry.name):
            continue
        if not _inside(entry, root):  # a link leading out is not the skill's
            continue
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError:  # a link loop, a name the OS will not take
            continue
        if is_dir and depth < MAX_DEPTH:
            yield from _files(root, Path(entry.path), depth + 1)
        elif is_file:
            yield Path(entry.path).relative_to(root).as_posix()


def _digest(path: Path, root: Path, limit: int) -> tuple[str, int]:
    """The file's digest and size, reading at most `limit` + 1 bytes. Opened as files.open_inside opens: a file
    swapped for a FIFO since the walk is refused, not waited on; one swapped for a link out is not read."""
    try:
        fd = open_inside(path, root, follow=True)
    except Unreadable as exc:
        raise OSError(f"{path.relative_to(root).as_posix()} {exc}") from None
    sha, size = hashlib.sha256(), 0
    with os.fdopen(fd, "rb") as f:
        while size <= limit and (chunk := f.read(min(1 << 20, limit + 1 - size))):
            sha.update(chunk)
            size += len(chunk)
    return f"sha256:{sha.hexdigest()}", size


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_FOLDERS


def _hidden(relative: str) -> bool:
    return any(_skipped(part) for part in relative.split("/") if part)
