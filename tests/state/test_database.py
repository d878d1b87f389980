"""The state file's schema brought forward: version 7 keeps a prerequisite's record per server, with how it is known."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from abilities_mcp.prerequisites.gates import REPORTED
from abilities_mcp.prerequisites.names import Name
from abilities_mcp.prerequisites.sessions import SessionState
from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.prerequisites.workflows import WorkflowSet, parse_workflow
from abilities_mcp.state.database import SCHEMA_VERSION, Database

# Version 6's prerequisite records: one per session, workflow and step, whatever server ran it.
SCHEMA_6 = """
CREATE TABLE prereq_sessions (session_id TEXT PRIMARY KEY, started_at REAL NOT NULL);
CREATE TABLE prereq_done (
    session_id TEXT NOT NULL REFERENCES prereq_sessions(session_id) ON DELETE CASCADE, workflow TEXT NOT NULL,
    step INTEGER NOT NULL, tool TEXT NOT NULL, result TEXT, at REAL NOT NULL,
    PRIMARY KEY (session_id, workflow, step)
);
INSERT INTO prereq_sessions VALUES ('s1', strftime('%s', 'now'));
INSERT INTO prereq_done VALUES ('s1', 'database-safe-query', 1, 'list_databases', 'main', strftime('%s', 'now'));
PRAGMA user_version = 6;
"""


def database_workflow() -> WorkflowSet:
    entry = {k: v for k, v in TEMPLATES["database"].items() if k != "name"}
    workflow, _ = parse_workflow("database-safe-query", entry, "workflows.json")
    return WorkflowSet({workflow.name: workflow})


def test_a_version_6_file_drops_its_unbound_records_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA_6)

    store = Database(path)
    try:
        tables = {row[0] for row in store.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        done = SessionState(store).done("s1")
    finally:
        store.close()

    assert "prereq_done" not in tables and {"prereq_records", "observed_sessions", "call_approvals"} <= tables
    assert SCHEMA_VERSION == 14 and done == {}


def test_one_step_run_on_two_servers_is_two_records_and_an_observed_call_replaces_a_report(state_location) -> None:
    store = Database(state_location)
    sessions, found = SessionState(store), database_workflow()
    try:
        sessions.record("s1", found, Name("db", "list_databases", "db__list_databases"), "main", how=REPORTED)
        sessions.record("s1", found, Name("scratch", "list_databases", "mcp__scratch__list_databases"), "tmp")
        sessions.record("s1", found, Name("db", "list_databases", "db__list_databases"), "main, analytics")
        [records] = sessions.done("s1")["database-safe-query"].values()
    finally:
        store.close()

    assert sorted((r.server, r.how, r.result) for r in records) == [
        ("db", "observed", "main, analytics"),
        ("scratch", "observed", "tmp"),
    ]
