"""Where the state file lives (DESIGN §2): in the user's state home, one folder per project, outside the project
tree a sandboxed agent may write; the old `R/.abilities/state.db` is never opened, only named in a notice."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from abilities_mcp.state.project import Project, default_state_dir, state_slug
from support import run_record, write_run

# How long one CLI process may take in a test before it counts as hung (a bound, not a speed check).
CLI_TIMEOUT = 60


def cli(root: Path, *args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """`python -m abilities_mcp --root ROOT ARGS` with the test's environment (HOME and XDG_STATE_HOME in tmp)."""
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=CLI_TIMEOUT,
    )


def plant_run(state_db: Path, run_id: str) -> None:
    """A finished run, written straight into a state file."""
    write_run(state_db, run_record(run_id, status="completed", step_status="completed", finished_at=time.time()))


def test_the_state_file_lives_in_the_user_s_state_home_outside_the_project(root: Path, tmp_path: Path) -> None:
    state_home = tmp_path / "home" / ".local" / "state"  # conftest's XDG_STATE_HOME

    project = Project.resolve(root)

    assert project.state_db == state_home / "abilities-mcp" / "projects" / state_slug(root) / "state.db"
    assert not project.state_db.is_relative_to(root)
    assert state_slug(root).startswith("project-")  # the folder's name, readable, then its path's checksum


@pytest.mark.parametrize("xdg", [None, "", "relative/state"], ids=["unset", "empty", "relative"])
def test_without_an_absolute_xdg_state_home_the_state_home_is_dot_local_state(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xdg: str | None
) -> None:
    if xdg is None:
        monkeypatch.delenv("XDG_STATE_HOME")
    else:
        monkeypatch.setenv("XDG_STATE_HOME", xdg)

    state_dir = Project.resolve(root).state_dir

    assert state_dir == tmp_path / "home" / ".local" / "state" / "abilities-mcp" / "projects" / state_slug(root)


def test_an_xdg_state_home_elsewhere_holds_the_state(root: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "elsewhere"))

    assert Project.resolve(root).state_dir.parent == tmp_path / "elsewhere" / "abilities-mcp" / "projects"


def test_two_projects_of_the_same_name_get_two_state_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "app", tmp_path / "b" / "app"
    for folder in (first, second):
        folder.mkdir(parents=True)

    assert Project.resolve(first).state_db != Project.resolve(second).state_db
    assert Project.resolve(first).state_dir.name.startswith("app-")


def test_the_same_project_through_a_linked_path_has_the_same_state_file(root: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(root)

    assert Project.resolve(link).state_db == Project.resolve(root).state_db
    assert Project.resolve(link / ".." / "project").state_db == Project.resolve(root).state_db


@pytest.mark.parametrize(
    "name",
    ["my project", "ünïcode", "../..", "." * 3, "x" * 300, "a\nb"],
    ids=["space", "unicode", "dots", "only-dots", "long", "newline"],
)
def test_any_folder_name_makes_one_safe_folder_name(name: str) -> None:
    slug = state_slug(Path("/work") / name)

    assert "/" not in slug and "\n" not in slug and " " not in slug and not slug.startswith(".")
    assert len(slug) <= 49 and slug == state_slug(Path("/work") / name)


def test_state_dir_and_abilities_state_dir_override_the_default(root: Path, tmp_path: Path, monkeypatch) -> None:
    flag, env = tmp_path / "by-flag", tmp_path / "by-env"
    monkeypatch.setenv("ABILITIES_STATE_DIR", str(env))

    assert Project.resolve(root).state_db == env / "state.db"
    assert Project.resolve(root, flag).state_db == flag / "state.db"


def test_the_cli_creates_the_state_folder_private_to_the_user_and_nothing_in_the_project(root: Path) -> None:
    done = cli(root, "history")

    state_dir = Project.resolve(root).state_dir
    assert done.returncode == 0, done.stderr
    assert (state_dir / "state.db").is_file()
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert not (root / ".abilities").exists()


def test_the_cli_and_the_server_honour_the_state_dir_flag_and_the_environment(root: Path, tmp_path: Path) -> None:
    plant_run(tmp_path / "by-flag" / "state.db", "run_flag")
    plant_run(tmp_path / "by-env" / "state.db", "run_env")

    by_flag = cli(root, "--state-dir", str(tmp_path / "by-flag"), "status", "run_flag")
    by_env = cli(root, "status", "run_env", env={"ABILITIES_STATE_DIR": str(tmp_path / "by-env")})

    assert by_flag.returncode == 0 and "run_flag" in by_flag.stdout, by_flag.stderr
    assert by_env.returncode == 0 and "run_env" in by_env.stdout, by_env.stderr
    assert not default_state_dir(root).exists()


# --- the state file inside the project, from older versions or planted by an agent ---


def test_a_state_file_in_the_project_is_not_read_and_a_notice_names_both_paths_and_the_move(root: Path) -> None:
    legacy = root / ".abilities" / "state.db"
    plant_run(legacy, "run_planted")
    project = Project.resolve(root)

    done = cli(root, "status", "run_planted")

    assert done.returncode == 2 and "run_planted" not in done.stdout  # not read: its run is unknown (exit 2)
    assert done.stderr.count("is no longer read") == 1
    assert str(legacy) in done.stderr and str(project.state_db) in done.stderr
    assert f"mv {legacy.parent}/state.db* {project.state_dir}/" in done.stderr
    assert f"rm {legacy.parent}/state.db*" in done.stderr  # a file an agent could have planted: not to be adopted
    assert "no longer read" not in done.stdout


def test_the_notice_s_command_moves_the_runs_to_where_they_are_read(root: Path) -> None:
    plant_run(root / ".abilities" / "state.db", "run_old")
    notice = cli(root, "history").stderr  # `history` makes the new file: move over it, as a person would after
    Project.resolve(root).state_db.unlink()
    [command] = [line for line in notice.splitlines() if line.startswith("  mkdir -p -m 700 ")]

    moved = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=CLI_TIMEOUT)
    after = cli(root, "status", "run_old")

    assert moved.returncode == 0, moved.stderr
    assert after.returncode == 0 and "run_old" in after.stdout, after.stderr
    assert "no longer read" not in after.stderr
    assert not (root / ".abilities" / "state.db").exists()


def test_the_server_s_notice_goes_to_stderr_and_stdout_carries_only_the_protocol(root: Path) -> None:
    plant_run(root / ".abilities" / "state.db", "run_planted")

    done = cli(root, "serve")  # stdin closes at once: the server starts, prints what it prints, and leaves

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("is no longer read") == 1 and str(root / ".abilities" / "state.db") in done.stderr


def test_no_notice_once_the_state_file_is_where_it_is_read(root: Path) -> None:
    plant_run(root / ".abilities" / "state.db", "run_planted")
    plant_run(Project.resolve(root).state_db, "run_current")

    done = cli(root, "status", "run_current")

    assert done.returncode == 0 and "run_current" in done.stdout, done.stderr
    assert "no longer read" not in done.stderr


@pytest.mark.parametrize(
    "where", ["flag", "env", "state-home"], ids=["--state-dir", "ABILITIES_STATE_DIR", "XDG_STATE_HOME"]
)
def test_a_state_folder_inside_the_project_is_named_on_stderr_as_one_a_sandboxed_agent_can_write(
    root: Path, where: str
) -> None:
    inside = root / "state"
    args, env = ("--state-dir", str(inside)) if where == "flag" else (), {}
    if where == "env":
        env["ABILITIES_STATE_DIR"] = str(inside)
    if where == "state-home":
        env["XDG_STATE_HOME"] = str(inside)

    done = cli(root, *args, "history", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stderr.count("is inside the project") == 1 and "can still write it" in done.stderr
    assert "inside the project" not in done.stdout


def test_no_state_notice_for_the_default_folder(root: Path) -> None:
    done = cli(root, "history")

    assert done.returncode == 0 and done.stderr == "", done.stderr


# Project and the state keep their paths as text (the hook imports no pathlib): each answer must be the one a Path
# would give.


@pytest.mark.parametrize(
    ("path", "root"),
    [
        ("/a/b/c", "/a/b"),
        ("/a/b", "/a/b"),
        ("/a/bc", "/a/b"),  # a name that only starts like the root's is not inside it
        ("/a", "/a/b"),
        ("/x", "/"),
        ("/", "/"),
        ("/a/b/../c", "/a/b"),  # `..` is a name as written, as Path.relative_to reads it
        ("/elsewhere/b/c", "/a/b"),
    ],
)
def test_inside_answers_as_path_relative_to_does(path: str, root: str) -> None:
    from abilities_mcp.files import inside

    try:
        expected: str | None = Path(path).relative_to(root).as_posix()
    except ValueError:
        expected = None

    assert inside(path, root) == expected


def test_a_project_resolved_from_text_is_the_one_path_would_resolve(tmp_path, monkeypatch) -> None:
    real = tmp_path / "real" / "project"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)

    for given in (str(tmp_path / "link" / "project"), "link/project", "~/link/project/", real):
        project = Project.resolve(given, state_dir="~/link/state")

        assert project.root == Path(given).expanduser().resolve() and project.root_dir == str(real)
        assert project.state_dir == (tmp_path / "real" / "state") and project.state_file == str(project.state_db)
        assert project.workflows_json == str(project.workflows_file) == str(real / "workflows.json")


def test_the_state_opens_the_same_from_text_and_from_a_path_and_refuses_any_location_but_postgresql(tmp_path) -> None:
    from abilities_mcp.state.database import Database
    from abilities_mcp.state.schema import StateFileError

    text = Database(str(tmp_path / "state" / "state.db"), url=False)
    text.db.execute("CREATE TABLE mark (x)")
    text.close()
    path = Database(tmp_path / "state" / "state.db")

    assert path.db.execute("SELECT name FROM sqlite_master WHERE name='mark'").fetchone() is not None
    assert path.folder == tmp_path / "state"
    path.close()
    for elsewhere in ("sqlite:///" + str(tmp_path / "other.db"), str(tmp_path / "other.db")):  # as $ABILITIES_STATE
        project = Project(tmp_path, tmp_path / "state", state_url=elsewhere)
        with pytest.raises(StateFileError, match="postgresql://USER@HOST"):
            Database.open(project)
        with pytest.raises(StateFileError, match="postgresql://USER@HOST"):
            Database(project.state_location)
    assert not (tmp_path / "other.db").exists()
