"""The state folder is the user's alone: one an older version left open (0755, state.db 0644, `projects/` listable
by every user) is closed when the server or the CLI starts, and a folder shared with other things keeps its mode."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.state.privacy import keep_private
from abilities_mcp.state.project import default_state_dir

CLI_TIMEOUT_SECONDS = 60


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def open_layout(home: Path, root: Path) -> Path:
    """The default state folder as an older version left it: every folder 0755, every file 0644."""
    state = default_state_dir(root, home / ".local" / "state")
    (state / "live").mkdir(parents=True)
    (state / "trust" / "blobs").mkdir(parents=True)
    sqlite3.connect(state / "state.db").close()
    for name in ("state.db-wal", "state.db.corrupt-20261101T000000", "live/run_1.a.log", "trust/index.json"):
        (state / name).write_text("x")
    for path in [state, *state.rglob("*"), state.parent, state.parent.parent]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return state


@pytest.mark.parametrize("command", ["status", "serve"])
def test_an_open_state_folder_is_closed_when_the_cli_or_the_server_starts(tmp_path: Path, command: str) -> None:
    home, root = tmp_path / "home", tmp_path / "project"
    (root / "abilities").mkdir(parents=True)
    state = open_layout(home, root.resolve())
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    env.pop("ABILITIES_STATE_DIR", None)

    subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), command],
        stdin=subprocess.DEVNULL,  # serve: the client hangs up at once
        capture_output=True,
        env=env,
        timeout=CLI_TIMEOUT_SECONDS,
    )

    folders = [state, state / "live", state / "trust", state / "trust" / "blobs", state.parent, state.parent.parent]
    assert {str(f): mode(f) for f in folders} == {str(f): 0o700 for f in folders}, "projects/ lists every project"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert {str(f): mode(f) for f in files} == {str(f): 0o600 for f in files}


def test_a_state_folder_shared_with_other_files_keeps_its_mode_and_says_so(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    (shared / "notes.txt").write_text("someone else's")
    (shared / "state.db").write_text("")
    (shared / "state.db").chmod(0o644)

    problems = keep_private(shared)

    assert mode(shared) == 0o755 and mode(shared / "notes.txt") == 0o644  # not ours to close
    assert mode(shared / "state.db") == 0o600  # ours: closed whatever the folder
    assert len(problems) == 1 and "chmod 700" in problems[0] and str(shared) in problems[0], problems


def test_a_sticky_folder_such_as_tmp_is_never_chmodded(tmp_path: Path) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "state.db").write_text("")

    keep_private(sticky)

    assert mode(sticky) == 0o1777


def test_a_link_in_the_state_folder_is_not_followed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "live").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    outside.chmod(0o644)
    (state / "live" / "link.log").symlink_to(outside)
    (state / "state.db-shm").symlink_to(outside)

    keep_private(state)

    assert mode(outside) == 0o644


def test_the_folders_privacy_tightens_are_the_spools_and_the_trust_records() -> None:
    from abilities_mcp.state import privacy, spool, trust

    assert set(privacy.OUR_FOLDERS) == {spool.FOLDER, trust.FOLDER}
