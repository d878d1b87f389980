"""The state folder kept the user's alone: its folders 0700 and its files 0600, tightened where an older version (or
a umask) left them open, and the default layout's `projects/` closed so other users cannot list every project's name.

A folder is only tightened when it is plainly ours: owned by this user, not sticky (no `/tmp`), and holding nothing
but abilities-mcp's own files. A `--state-dir` that points at a folder shared with other things keeps its mode, and
the warning says how to close it; the files inside are tightened either way.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from .project import PROJECTS_FOLDER, STATE_FOLDER

log = logging.getLogger(__name__)
FOLDER_MODE, FILE_MODE = 0o700, 0o600
# What abilities-mcp keeps in a project's state folder: the SQLite file and its companions (-wal, -shm, and files
# moved aside as `state.db.corrupt-…`), a running step's output (state/spool.py) and trust (state/trust.py).
OURS_PREFIX = "state.db"
# spool.FOLDER and trust.FOLDER, spelled here: trust reads the state database, which tightens this folder through
# this module (tests/state/test_privacy.py holds the names equal).
OUR_FOLDERS = ("live", "trust")


def keep_private(state_dir: Path) -> list[str]:
    """Tighten the state folder and what it holds; returns what could not be closed, in words for the person."""
    problems: list[str] = []
    if not state_dir.is_dir():
        return problems
    _tighten_folder(state_dir, problems, only_ours=True)
    layout = state_dir.parent
    if layout.name == PROJECTS_FOLDER and layout.parent.name == STATE_FOLDER:  # the default: one folder a project
        _tighten_folder(layout, problems, only_ours=False)
        _tighten_folder(layout.parent, problems, only_ours=False)
    for entry in _entries(state_dir):
        if entry.name.startswith(OURS_PREFIX):
            _tighten(Path(entry.path), FILE_MODE, problems)
        elif entry.name in OUR_FOLDERS:
            _tighten_tree(Path(entry.path), problems)
    return problems


def _tighten_folder(folder: Path, problems: list[str], only_ours: bool) -> None:
    try:
        st = folder.lstat()
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o077:
        return
    foreign = only_ours and any(not _ours(entry.name) for entry in _entries(folder))
    if st.st_uid != os.geteuid() or st.st_mode & stat.S_ISVTX or foreign:
        problems.append(
            f"the state folder {str(folder)!r} can be read by other users (mode {stat.S_IMODE(st.st_mode):04o}) and "
            "is not abilities-mcp's alone to close; run `chmod 700` on it, or point --state-dir at a folder of its own"
        )
        return
    _tighten(folder, FOLDER_MODE, problems)


def _tighten_tree(folder: Path, problems: list[str]) -> None:
    _tighten(folder, FOLDER_MODE, problems)
    for entry in _entries(folder):
        if entry.is_dir(follow_symlinks=False):
            _tighten_tree(Path(entry.path), problems)
        elif entry.is_file(follow_symlinks=False):
            _tighten(Path(entry.path), FILE_MODE, problems)


def _tighten(path: Path, mode: int, problems: list[str]) -> None:
    """chmod to `mode` when group or others have any access; a link is never followed."""
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077 or st.st_uid != os.geteuid():
            return
        os.chmod(path, mode, follow_symlinks=False)
    except NotImplementedError:  # no lchmod here; lstat said it is no link
        os.chmod(path, mode)
    except OSError as exc:
        problems.append(f"{str(path)!r} could not be made private ({exc.strerror}); run `chmod {mode:o}` on it")


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as found:
            return list(found)
    except OSError:
        return []


def _ours(name: str) -> bool:
    return name.startswith(OURS_PREFIX) or name in OUR_FOLDERS
