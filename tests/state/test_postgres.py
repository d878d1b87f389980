"""The state on PostgreSQL (team mode): the same tables, migrations, compare-and-sets and errors as the SQLite file.

The store's own behaviours run on both engines in test_store.py and test_database.py (the `state_location`
fixture); this module holds what is PostgreSQL's own: schemas, the version table, the write lock across
connections, and what a person is told when the database cannot be reached.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from abilities_mcp.prerequisites.approvals import APPROVED, USED, CallApprovals, NotPending, Request
from abilities_mcp.prerequisites.sessions import SessionState
from abilities_mcp.state import skill_events
from abilities_mcp.state.database import SCHEMA_VERSION, Database, StateFileError, _expected_columns
from abilities_mcp.state.store import RunRecord, StepRecord, Store

# Threads racing one compare-and-set, each on its own connection (a replica each).
RACERS = 8


def make_run(run_id: str, started_by: str | None = None, started: float | None = None) -> RunRecord:
    now = started or time.time()
    return RunRecord(
        run_id=run_id,
        ability="deploy",
        session_id="s",
        status="running",
        enforcement="strict",
        definition={"description": "d", "steps": [{"id": "one"}]},
        source_path="abilities/deploy.yaml",
        inputs={"version": "v1", "percent": "5%"},
        parent_run=None,
        error=None,
        owner_pid=os.getpid(),
        owner_start=2**40,  # process start times outgrow 32 bits
        started_at=now,
        finished_at=None,
        updated_at=now,
        steps=[StepRecord("one", 0, "script"), StepRecord("two", 1, "agent")],
        started_by=started_by,
    )


def raw(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def tables_and_columns(url: str) -> dict[str, set[str]]:
    with raw(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        ).fetchall()
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    return found


def test_a_fresh_database_gets_the_sqlite_schema_in_public_and_its_version(postgres_cluster) -> None:
    url = postgres_cluster.fresh_database()
    Store(url).close()
    found = tables_and_columns(url)
    with raw(url) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        version = conn.execute("SELECT version FROM abilities_schema").fetchall()
    assert schema == "public" and version == [(SCHEMA_VERSION,)]
    assert found.pop("abilities_schema") == {"version"}
    assert found == _expected_columns()  # one schema description, both engines


def test_two_projects_share_one_database_each_in_its_own_schema(postgres_cluster) -> None:
    first, second = postgres_cluster.fresh_schema(), postgres_cluster.fresh_schema()
    a, b = Store(first), Store(second)
    try:
        a.create_run(make_run("in-a"))
        b.create_run(make_run("in-b"))
        assert [r.run_id for r in a.runs()] == ["in-a"] and [r.run_id for r in b.runs()] == ["in-b"]
        assert a.db.schema != b.db.schema and a.db.lock_key != b.db.lock_key  # neither waits for the other's writers
    finally:
        a.close()
        b.close()


def test_runs_steps_and_events_round_trip_with_who_started_them(postgres_url: str) -> None:
    store = Store(postgres_url)
    started = 1_760_000_000.123456
    try:
        store.create_run(make_run("r1", started_by="https://id.example#alice", started=started))
        store.create_run(make_run("r2"))
        store.update_step(
            "r1", "one", "succeed", status="completed", output="50% done", exit_code=0, output_bytes=2**33
        )
        store.update_run("r1", "ask", question='{"kind": "approval"}', question_id="q1")
        answer = {"value": "approved", "by": "terminal", "origin": "tty"}
        assert store.answer("r1", "q1", answer, "two") and not store.answer("r1", "q1", answer, "two")
        run = store.get_run("r1")
    finally:
        store.close()
    assert run.started_by == "https://id.example#alice" and run.started_at == started
    assert run.inputs == {"version": "v1", "percent": "5%"} and run.owner_start == 2**40
    assert (run.steps[0].status, run.steps[0].output, run.steps[0].output_bytes) == ("completed", "50% done", 2**33)
    assert run.question == {"kind": "approval"} and run.answer == answer
    assert [a["detail"] for a in run.answers] == ["approved by terminal (tty)"]
    assert Store(postgres_url).get_run("r2").started_by is None


def test_a_schema_from_an_older_version_is_migrated_and_keeps_its_runs(postgres_url: str) -> None:
    Store(postgres_url).create_run(make_run("old"))
    with raw(postgres_url) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN started_by")
        conn.execute("ALTER TABLE steps DROP COLUMN child_run")
        conn.execute("UPDATE abilities_schema SET version = 8")
    store = Store(postgres_url)
    try:
        store.update_step("old", "one", "spawn", child_run="child")
        store.update_run("old", "who", started_by="alice")
        run = store.get_run("old")
    finally:
        store.close()
    assert (run.steps[0].child_run, run.started_by) == ("child", "alice")
    assert tables_and_columns(postgres_url)["runs"] >= {"started_by"}
    with raw(postgres_url) as conn:
        assert conn.execute("SELECT version FROM abilities_schema").fetchall() == [(SCHEMA_VERSION,)]


def test_a_schema_a_newer_version_wrote_is_refused_saying_what_to_do(postgres_url: str) -> None:
    Store(postgres_url).close()
    with raw(postgres_url) as conn:
        conn.execute("UPDATE abilities_schema SET version = 99")
    with pytest.raises(StateFileError, match=r"newer abilities-mcp \(schema 99 > \d+\).*--state"):
        Store(postgres_url)
    Store(postgres_url, accept_newer=True).close()  # the hook reads what it understands


def test_replicas_opening_a_new_schema_at_the_same_moment_all_open_it(postgres_url: str) -> None:
    errors: list[BaseException] = []
    go = threading.Event()

    def open_it() -> None:
        go.wait()
        try:
            Store(postgres_url).close()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(RACERS)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(timeout=60)
    assert errors == []


def _approved(url: str) -> Request:
    request = Request("Bash", "d" * 64, "git push --force", ("protect-main",), "Force-push?", 600.0)
    approvals = CallApprovals(Database(url))
    asked = approvals.ask("ses", "claude", request)
    assert approvals.ask("ses", "claude", request).call_id == asked.call_id  # the open request, not a second one
    approvals.answer(asked.call_id, True, "alice", "terminal", "tty")
    return request


def _race(url: str, attempt) -> list[object]:
    """Each racer on its own connection, released together; what each got."""
    barrier, results = threading.Barrier(RACERS), [None] * RACERS

    def racer(i: int) -> None:
        db = Database(url)
        try:
            barrier.wait(timeout=30)
            results[i] = attempt(db)
        finally:
            db.close()

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_one_yes_taken_by_racing_replicas_is_used_exactly_once(postgres_url: str) -> None:
    request = _approved(postgres_url)
    taken = _race(postgres_url, lambda db: CallApprovals(db).take("ses", request))
    winners = [t for t in taken if t is not None]
    assert len(winners) == 1 and winners[0].status == USED
    [stored] = CallApprovals(Database(postgres_url)).listed("ses")
    assert stored.status == USED


def test_racing_answers_to_one_request_record_only_the_first(postgres_url: str) -> None:
    request = Request("Bash", "e" * 64, "rm -rf build", ("careful",), "Delete?", 600.0)
    asked = CallApprovals(Database(postgres_url)).ask("ses", "claude", request)

    def answer(db: Database) -> str:
        try:
            return CallApprovals(db).answer(asked.call_id, True, f"person-{threading.get_ident()}", "page", "x").status
        except NotPending:
            return "refused"

    said = _race(postgres_url, answer)
    assert sorted(said) == [APPROVED] + ["refused"] * (RACERS - 1)
    assert CallApprovals(Database(postgres_url)).get(asked.call_id).status == APPROVED


def test_a_session_s_clock_starts_once_and_an_expired_session_starts_again(postgres_url: str) -> None:
    db = Database(postgres_url)
    try:
        first = SessionState(db).session("s1")
        assert SessionState(db).session("s1") == first
        again = SessionState(db, ttl_seconds=0.0).session("s1")  # expired at once: cleared and started now
        assert again.started_at > first.started_at
        with raw(postgres_url) as conn:
            assert conn.execute("SELECT count(*) FROM prereq_sessions").fetchone()[0] == 1
    finally:
        db.close()


def test_skill_events_are_recorded_counted_and_bounded(postgres_url: str, monkeypatch) -> None:
    monkeypatch.setattr(skill_events, "MAX_EVENTS", 5)
    db = Database(postgres_url)
    try:
        skill_events.record_discovery(db, "s1", {"project": 2}, ["a", "b"], [{"path": "x/SKILL.md", "error": "bad"}])
        selection = {"skills": [{"name": "a"}, {"name": "b"}], "errors": []}
        for _ in range(4):
            skill_events.record_selection(db, "s1", selection, ["b"], 100)
        kinds = [e["kind"] for e in skill_events.events(db, session_id="s1")]
        totals = skill_events.counters(db)
    finally:
        db.close()
    assert len(kinds) == 5 and kinds[-2:] == [skill_events.SELECTED, skill_events.TRUNCATED]
    assert totals["skills_selected_total"] == 2 * kinds.count(skill_events.SELECTED)


def test_a_location_that_is_no_postgresql_url_is_refused_naming_the_accepted_forms() -> None:
    with pytest.raises(StateFileError, match=r"'db\.example/state'.*postgresql://USER@HOST:PORT/DATABASE.*--state-dir"):
        Database("mysql://me:secret@db.example/state")


def test_a_database_that_cannot_be_reached_is_named_with_the_fix_and_no_password(tmp_path: Path) -> None:
    url = f"postgresql://me:hunter2@/state?host={tmp_path}"  # no server listens in an empty folder
    with pytest.raises(StateFileError) as caught:
        Database(url)
    said = str(caught.value)
    assert "hunter2" not in said and f"postgresql://me:***@/state?host={tmp_path}" in said
    assert "start the PostgreSQL server or fix --state (or $ABILITIES_STATE)" in said


def test_the_cli_says_what_is_wrong_with_the_state_location_without_a_traceback(root: Path, tmp_path: Path) -> None:
    def status(location: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "abilities_mcp", "--root", str(root), "status", "--state", location]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    down = status(f"postgresql://me:hunter2@/state?host={tmp_path}")
    wrong = status(str(tmp_path / "state.db"))
    assert down.returncode == 2 and "cannot be reached" in down.stderr and "hunter2" not in down.stderr
    assert wrong.returncode == 2 and "postgresql://USER@HOST:PORT/DATABASE" in wrong.stderr
    assert "Traceback" not in down.stderr + wrong.stderr


def test_the_embedded_default_never_imports_psycopg(tmp_path: Path) -> None:
    """The stdio server's and the hook's start-up stay as they were: psycopg loads only for a postgresql:// state."""
    code = (
        "import sys, pathlib\n"
        "import abilities_mcp.cli.main, abilities_mcp.server, abilities_mcp.clients.hook\n"
        "from abilities_mcp.state.store import Store\n"
        f"Store(pathlib.Path({str(tmp_path / 's.db')!r})).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_binary')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_server_that_restarted_is_reconnected_on_the_next_statement(postgres_url: str) -> None:
    store = Store(postgres_url)
    try:
        store.create_run(make_run("before"))
        with raw(postgres_url) as admin:  # what a restart or a failover does to every open connection
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
        assert [r.run_id for r in store.runs()] == ["before"]  # a read: sent again on a fresh connection
        with raw(postgres_url) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
        store.create_run(make_run("after"))  # a write: its BEGIN found the connection gone, nothing was lost
        assert {r.run_id for r in store.runs()} == {"before", "after"}
    finally:
        store.close()
