"""The SQLite store: shared by processes, durable, pruned, and able to tell a dead owner from a live one."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from abilities_mcp.state.store import RunRecord, StepRecord, Store, owner_alive, process_start


def make_run(
    run_id: str,
    status: str = "completed",
    started: float | None = None,
    pid: int | None = None,
    parent: str | None = None,
) -> RunRecord:
    now = started or time.time()
    return RunRecord(
        run_id=run_id,
        ability="a",
        session_id="s",
        status=status,
        enforcement="strict",
        definition={"description": "d"},
        source_path=None,
        inputs={},
        parent_run=parent,
        error=None,
        owner_pid=pid,
        owner_start=process_start(pid) if pid else None,
        started_at=now,
        finished_at=None,
        updated_at=now,
        steps=[StepRecord("one", 0, "script")],
    )


def test_a_run_written_by_one_connection_is_read_by_another(state_location) -> None:
    writer, reader = Store(state_location), Store(state_location)
    writer.create_run(make_run("r1", status="running", pid=os.getpid()))
    writer.update_step("r1", "one", "succeed", status="completed", output="hi", exit_code=0)
    run = reader.get_run("r1")
    assert run.steps[0].output == "hi" and run.steps[0].status == "completed"
    assert [e["event"] for e in reader.events("r1")] == ["created", "succeed"]


def test_concurrent_writers_from_two_processes_lose_nothing(state_location) -> None:
    db = state_location
    Store(db).create_run(make_run("r1", status="running"))
    script = (
        "import sys; from abilities_mcp.state.store import Store; at = sys.argv[1]\n"
        "s = Store(at if '://' in at else __import__('pathlib').Path(at))\n"
        "for i in range(200): s.update_run('r1', 'tick', sys.argv[2])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db), tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    details = [e["detail"] for e in Store(db).events("r1") if e["event"] == "tick"]
    assert details.count("a") == 200 and details.count("b") == 200


OPEN_AT_ONCE = """
import sys
from pathlib import Path
from abilities_mcp.state.store import Store
go = Path(sys.argv[2])
while not go.exists():
    pass
Store(Path(sys.argv[1])).close()
"""


def test_processes_creating_a_new_state_file_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    """A server and a hook may be the first to touch the file together (switching it to WAL raced before)."""
    for round_ in range(20):
        db, go = tmp_path / f"r{round_}" / "state.db", tmp_path / f"go{round_}"
        procs = [
            subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, str(db), str(go)], stderr=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        go.touch()
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], errors
        assert Store(db).db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_runs_left_live_by_a_dead_process_are_orphans_and_live_owners_are_not(state_location) -> None:
    store = Store(state_location)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.create_run(make_run("mine", status="running", pid=os.getpid()))
    store.create_run(make_run("dead", status="running", pid=dead.pid))
    store.create_run(make_run("done", status="completed", pid=dead.pid))
    assert [r.run_id for r in store.orphaned_runs()] == ["dead"]
    assert owner_alive(os.getpid(), process_start(os.getpid()))
    assert not owner_alive(os.getpid(), (process_start(os.getpid()) or 0) + 1)  # same pid, other process


def test_prune_keeps_the_newest_runs_and_drops_old_ones_but_never_live_ones(state_location) -> None:
    store = Store(state_location)
    old = time.time() - 40 * 86400
    store.create_run(make_run("ancient", started=old))
    store.create_run(make_run("ancient-live", status="running", started=old))
    for i in range(5):
        store.create_run(make_run(f"r{i}", started=time.time() + i))
    assert store.prune(keep_runs=3, keep_days=30) == 3
    assert {r.run_id for r in store.runs(limit=50)} == {"r2", "r3", "r4", "ancient-live"}


def test_an_owner_that_died_but_was_not_yet_reaped_counts_as_dead(tmp_path: Path) -> None:
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    start = None
    while zombie.poll() is None and start is None:  # read its start time while it lives, if we are quick enough
        start = process_start(zombie.pid)
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # exited, still a zombie: not reaped
    assert not owner_alive(zombie.pid, start or 1)
    zombie.wait()


def test_a_state_file_from_before_a_schema_change_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "s.db"
    Store(db).create_run(make_run("old"))
    raw = sqlite3.connect(db)
    raw.execute("ALTER TABLE steps DROP COLUMN output_bytes")
    raw.execute("PRAGMA user_version=0")
    raw.commit()
    raw.close()
    store = Store(db)
    store.update_step("old", "one", "succeed", status="completed", output_bytes=12)
    assert store.get_run("old").steps[0].output_bytes == 12


def test_a_state_file_from_a_newer_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    import sqlite3

    import pytest

    db = tmp_path / "s.db"
    Store(db).close()
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA user_version=99")
    raw.commit()
    raw.close()
    with pytest.raises(RuntimeError, match="newer abilities-mcp.*--state-dir"):
        Store(db)


def test_pruning_keeps_the_children_of_kept_runs_and_drops_those_of_dropped_runs(state_location) -> None:
    store = Store(state_location)
    now = time.time()
    try:
        store.create_run(make_run("old", started=now - 40))
        store.create_run(make_run("old-child", started=now - 39, parent="old"))
        store.create_run(make_run("live", started=now - 30, status="awaiting_agent"))
        store.create_run(make_run("live-child-done", started=now - 29, parent="live"))
        store.create_run(make_run("live-child", started=now - 28, status="awaiting_agent", parent="live"))
        store.create_run(make_run("kept", started=now - 20))
        store.create_run(make_run("kept-child", started=now - 19, parent="kept"))
        store.create_run(make_run("kept-grandchild", started=now - 18, parent="kept-child"))
        store.create_run(make_run("newest", started=now - 10))
        store.create_run(
            make_run("orphan", started=now - 50, parent="long-gone")
        )  # its parent was pruned by an old version

        store.prune(keep_runs=3, keep_days=30)

        assert {r.run_id for r in store.runs(limit=50)} == {"live", "kept", "newest"}
        assert [r.run_id for r in store.children("live")] == ["live-child-done", "live-child"]
        assert [r.run_id for r in store.children("kept")] == ["kept-child"]
        assert [r.run_id for r in store.children("kept-child")] == ["kept-grandchild"]
        assert store.get_run("old") is None and store.get_run("old-child") is None
        assert store.get_run("orphan") is None
    finally:
        store.close()


def test_pruning_by_age_takes_a_finished_runs_children_with_it(state_location) -> None:
    store = Store(state_location)
    old = time.time() - 40 * 86400
    try:
        store.create_run(make_run("ancient", started=old))
        store.create_run(make_run("ancient-child", started=old + 1, parent="ancient"))
        store.create_run(make_run("recent", started=time.time()))
        store.prune(keep_runs=10, keep_days=30)
        assert store.get_run("ancient") is None and store.get_run("ancient-child") is None
        assert store.get_run("recent") is not None
    finally:
        store.close()


# --- claims: the session of a call the client's hook announced (state/claims.py) ---

CLIENT = (4242, 777)


def test_an_announced_call_is_claimed_once_by_the_same_tool_and_arguments_in_any_key_order(state_location) -> None:
    from abilities_mcp.state.claims import announce, claim

    store = Store(state_location)
    try:
        announce(store, "ses_a", "ability_run", {"name": "deploy", "inputs": {"v": 1, "env": "prod"}}, CLIENT)
        assert claim(store, "ability_run", {"name": "other"}, CLIENT) is None
        assert claim(store, "ability_status", {"name": "deploy", "inputs": {"v": 1, "env": "prod"}}, CLIENT) is None
        assert claim(store, "ability_run", {"inputs": {"env": "prod", "v": 1}, "name": "deploy"}, CLIENT) == "ses_a"
        assert claim(store, "ability_run", {"name": "deploy", "inputs": {"v": 1, "env": "prod"}}, CLIENT) is None
    finally:
        store.close()


def test_no_arguments_and_empty_arguments_are_the_same_call(state_location) -> None:
    from abilities_mcp.state.claims import announce, claim

    store = Store(state_location)
    try:
        announce(store, "ses_a", "workflow_status", {}, CLIENT)
        assert claim(store, "workflow_status", None, CLIENT) == "ses_a"
    finally:
        store.close()


def test_the_newest_announcement_of_a_call_is_claimed_first(state_location) -> None:
    from abilities_mcp.state.claims import announce, claim

    store = Store(state_location)
    now = time.time()
    try:
        announce(store, "ses_old", "ability_status", {}, CLIENT, now=now - 5)  # its call never came (a permission
        announce(store, "ses_new", "ability_status", {}, CLIENT, now=now)  # prompt was refused, say)
        assert claim(store, "ability_status", {}, CLIENT, now=now) == "ses_new"
        assert claim(store, "ability_status", {}, CLIENT, now=now) == "ses_old"
    finally:
        store.close()


def test_a_call_announced_by_another_process_after_the_table_was_seen_empty_is_claimed(state_location) -> None:
    """The server remembers an empty table until another connection writes (data_version): the hook's announcement,
    made from its own process after the server's last call, must still be found."""
    from abilities_mcp.state.claims import announce, claim

    server, hook = Store(state_location), Store(state_location)
    try:
        assert claim(server, "ability_status", {}, CLIENT) is None  # empty: remembered
        assert claim(server, "ability_status", {}, CLIENT) is None
        announce(hook, "ses_a", "ability_status", {}, CLIENT)
        assert claim(server, "ability_status", {}, CLIENT) == "ses_a"
        announce(server, "ses_b", "workflow_status", {}, CLIENT)  # its own write: data_version does not move
        assert claim(server, "workflow_status", {}, CLIENT) == "ses_b"
    finally:
        server.close()
        hook.close()


def test_only_the_announcements_of_the_same_client_process_are_claimed_unless_a_side_cannot_tell(
    state_location,
) -> None:
    from abilities_mcp.state.claims import announce, claim

    store = Store(state_location)
    try:
        announce(store, "ses_elsewhere", "ability_status", {}, (4242, 778))  # the same pid, another process
        assert claim(store, "ability_status", {}, CLIENT) is None
        assert claim(store, "ability_status", {}, None) == "ses_elsewhere"
        announce(store, "ses_unknown", "ability_status", {}, None)
        assert claim(store, "ability_status", {}, CLIENT) == "ses_unknown"
    finally:
        store.close()


def test_announcements_expire_and_the_table_stays_bounded(state_location, monkeypatch) -> None:
    from abilities_mcp.state import claims

    monkeypatch.setattr(claims, "MAX_ANNOUNCED", 50)
    store = Store(state_location)
    now = time.time()
    try:
        claims.announce(store, "ses_stale", "ability_list", {}, CLIENT, now=now - claims.CLAIM_WINDOW_SECONDS - 1)
        assert claims.claim(store, "ability_list", {}, CLIENT, now=now) is None
        for i in range(120):
            claims.announce(store, f"ses_{i}", "ability_status", {"run_id": str(i)}, CLIENT, now=now)
        rows = store.db.execute("SELECT session_id FROM call_claims ORDER BY id").fetchall()
        assert [r[0] for r in rows] == [f"ses_{i}" for i in range(70, 120)]  # the stale one and the oldest went
        assert claims.claim(store, "ability_status", {"run_id": "119"}, CLIENT, now=now) == "ses_119"
    finally:
        store.close()


CLAIMER = """
import sys
from pathlib import Path
from abilities_mcp.state.claims import claim
from abilities_mcp.state.database import Database
db = Database(sys.argv[1] if "://" in sys.argv[1] else Path(sys.argv[1]))
go = Path(sys.argv[2])
while not go.exists():
    pass
for _ in range(int(sys.argv[3])):
    print(claim(db, "ability_status", {}, None))
"""


def test_processes_claiming_at_once_never_claim_one_announcement_twice(tmp_path: Path, state_location) -> None:
    from abilities_mcp.state.claims import announce

    db, go = state_location, tmp_path / "go"
    store = Store(db)
    for i in range(60):
        announce(store, f"ses_{i}", "ability_status", {}, None)
    store.close()
    procs = [
        subprocess.Popen([sys.executable, "-c", CLAIMER, str(db), str(go), "40"], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    go.touch()
    outputs = [p.communicate(timeout=60)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    claimed = [s for out in outputs for s in out if s != "None"]
    assert sorted(claimed) == sorted(f"ses_{i}" for i in range(60))  # each once, none lost


def test_a_state_file_from_before_claims_gets_the_table_when_opened(tmp_path: Path) -> None:
    import sqlite3

    from abilities_mcp.state.claims import announce, claim

    db = tmp_path / "s.db"
    Store(db).create_run(make_run("old"))
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE call_claims")
    raw.execute("PRAGMA user_version=4")
    raw.commit()
    raw.close()
    store = Store(db)
    try:
        announce(store, "ses_a", "ability_history", {}, CLIENT)
        assert claim(store, "ability_history", {}, CLIENT) == "ses_a"
        assert store.get_run("old") is not None
    finally:
        store.close()


# --- the answer trail: who answered a run's questions outlives history's limits --------------------------------

DAY = 86400.0


def _answered(store: Store, run_id: str, days_ago: float = 0.0) -> None:
    """A person's answer to the run's question, given `days_ago`."""
    store.update_run(run_id, "ask", question="{}", question_id=f"q-{run_id}")
    answer = {"question_id": f"q-{run_id}", "value": "approved", "approved": True, "by": "terminal", "origin": "tty"}
    assert store.answer(run_id, f"q-{run_id}", answer, "approve")
    store.db.execute(
        "UPDATE events SET at=? WHERE run_id=? AND event='answered'", (time.time() - days_ago * DAY, run_id)
    )
    store.db.commit()


def test_runs_that_carry_an_answer_outlive_a_history_setting_that_would_erase_them(state_location) -> None:
    store = Store(state_location)
    try:
        for i in range(3):
            store.create_run(make_run(f"approved-{i}", started=time.time() - 10 + i))
            _answered(store, f"approved-{i}")
        store.create_run(make_run("unanswered", started=time.time() - 20))

        store.prune(keep_runs=1, keep_days=0.00001)  # {"history": {"runs": 1, "days": 0.00001}} in a project file

        assert {r.run_id for r in store.runs(limit=50)} == {"approved-0", "approved-1", "approved-2"}
        assert [a["detail"] for a in store.get_run("approved-0").answers] == ["approved by terminal (tty)"]
    finally:
        store.close()


def test_an_answer_in_a_child_run_keeps_its_whole_run(state_location) -> None:
    store = Store(state_location)
    old = time.time() - 5 * DAY
    try:
        store.create_run(make_run("parent", started=old))
        store.create_run(make_run("child", started=old + 1, parent="parent"))
        _answered(store, "child", days_ago=5)

        store.prune(keep_runs=1, keep_days=1)

        assert store.get_run("parent") is not None and [r.run_id for r in store.children("parent")] == ["child"]
    finally:
        store.close()


def test_once_the_answer_trail_s_days_are_over_history_s_own_limits_apply_again(state_location) -> None:
    store = Store(state_location)
    try:
        store.create_run(make_run("old-approved", started=time.time() - 40 * DAY))
        _answered(store, "old-approved", days_ago=40)
        store.create_run(make_run("recent-approved", started=time.time() - 20 * DAY))
        _answered(store, "recent-approved", days_ago=20)

        store.prune(keep_runs=500, keep_days=10)

        assert {r.run_id for r in store.runs(limit=50)} == {"recent-approved"}
    finally:
        store.close()


def test_the_environment_raises_the_answer_trail_s_days_but_never_lowers_them(
    state_location, monkeypatch, caplog
) -> None:
    store = Store(state_location)
    try:
        for name, days_ago in [("forty-days", 40), ("one-day", 1)]:
            store.create_run(make_run(name, started=time.time() - days_ago * DAY))
            _answered(store, name, days_ago=days_ago)

        monkeypatch.setenv("ABILITIES_ANSWER_TRAIL_DAYS", "0.00001")
        store.prune(keep_runs=1, keep_days=0.00001)
        assert {r.run_id for r in store.runs(limit=50)} == {"one-day"}  # 30 days held; forty-days was past them
        assert "$ABILITIES_ANSWER_TRAIL_DAYS='0.00001' is ignored: it can only raise" in caplog.text

        store.create_run(make_run("forty-days", started=time.time() - 40 * DAY))
        _answered(store, "forty-days", days_ago=40)
        monkeypatch.setenv("ABILITIES_ANSWER_TRAIL_DAYS", "90")
        store.prune(keep_runs=1, keep_days=0.00001)
        assert {r.run_id for r in store.runs(limit=50)} == {"one-day", "forty-days"}
    finally:
        store.close()


# Every way a start of the server is told to keep one run for a second (a flag and a variable are what an agent's
# shell passes to a server it starts itself).
SHORT_HISTORY = {
    "settings-file": ({"abilities-mcp.json": '{"history": {"runs": 1, "days": 0.00001}}'}, [], {}),
    "flags": ({}, ["--history-runs", "1", "--history-days", "0.00001"], {}),
    "environment": ({}, [], {"ABILITIES_HISTORY_RUNS": "1", "ABILITIES_HISTORY_DAYS": "0.00001"}),
}


@pytest.mark.parametrize("how", list(SHORT_HISTORY), ids=list(SHORT_HISTORY))
def test_a_server_started_with_history_cut_short_erases_no_answer(root: Path, project, how: str) -> None:
    store = Store(project.state_db)
    try:
        for i in range(3):
            store.create_run(make_run(f"approved-{i}", started=time.time() - 10 + i))
            _answered(store, f"approved-{i}")
    finally:
        store.close()
    files, flags, env = SHORT_HISTORY[how]
    for name, text in files.items():
        (root / name).write_text(text)
    env = {**os.environ, "ABILITIES_STATE_DIR": str(project.state_db.parent), **env}

    started = subprocess.run(  # the server starts (and prunes), reads the end of its input, and stops
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    history = subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "history", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    ).stdout

    assert started.returncode == 0, started.stderr
    assert [line.split()[0] for line in history.splitlines() if line.startswith("approved-")] == [
        "approved-2",
        "approved-1",
        "approved-0",
    ]
    assert history.count("answered approve: approved by terminal (tty)") == 3
