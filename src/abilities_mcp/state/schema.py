"""The state database's tables, one description for both engines (the SQLite file, PostgreSQL), and how an older one
is brought forward; StateFileError, what either engine raises when the state cannot be used as it is.

Written in SQLite's dialect; postgres.py translates the types. Stdlib only: the hook opens the state on every call.
"""

from __future__ import annotations

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, ability TEXT NOT NULL, session_id TEXT NOT NULL, status TEXT NOT NULL,
    enforcement TEXT NOT NULL, definition TEXT NOT NULL, source_path TEXT, inputs TEXT NOT NULL,
    parent_run TEXT, error TEXT, owner_pid INTEGER, owner_start INTEGER,
    started_at REAL NOT NULL, finished_at REAL, updated_at REAL NOT NULL,
    question TEXT, question_id TEXT, answer TEXT, started_by TEXT, owner_replica INTEGER, owner_host TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs(session_id, started_at);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, step_id TEXT NOT NULL,
    position INTEGER NOT NULL, type TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER, duration_ms INTEGER, output TEXT, stderr TEXT, output_bytes INTEGER, stderr_bytes INTEGER,
    instructions TEXT, prompt TEXT, error TEXT, pgid INTEGER,
    started_at REAL, finished_at REAL, child_run TEXT,
    PRIMARY KEY (run_id, step_id)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    step_id TEXT, event TEXT NOT NULL, detail TEXT, at REAL NOT NULL, actor TEXT
);
CREATE INDEX IF NOT EXISTS events_by_run ON events(run_id, id);
CREATE TABLE IF NOT EXISTS prereq_sessions (session_id TEXT PRIMARY KEY, started_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS prereq_records (
    session_id TEXT NOT NULL REFERENCES prereq_sessions(session_id) ON DELETE CASCADE, workflow TEXT NOT NULL,
    step INTEGER NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL, how TEXT NOT NULL, result TEXT,
    at REAL NOT NULL, actor TEXT,
    PRIMARY KEY (session_id, workflow, step, server)
);
CREATE TABLE IF NOT EXISTS observed_sessions (session_id TEXT PRIMARY KEY, client TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS call_claims (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, tool TEXT NOT NULL, args_hash TEXT NOT NULL,
    client_pid INTEGER, client_start INTEGER, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS call_claims_by_call ON call_claims(tool, args_hash, at);
CREATE TABLE IF NOT EXISTS skill_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, session_id TEXT, run_id TEXT,
    detail TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS skill_events_by_kind ON skill_events(kind, id);
CREATE TABLE IF NOT EXISTS call_approvals (
    call_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, client TEXT NOT NULL, tool TEXT NOT NULL,
    digest TEXT NOT NULL, shown TEXT NOT NULL, workflows TEXT NOT NULL, prompt TEXT NOT NULL, status TEXT NOT NULL,
    lifetime REAL NOT NULL, requested_at REAL NOT NULL, expires_at REAL NOT NULL,
    answered_at REAL, answered_by TEXT, channel TEXT, origin TEXT, note TEXT, used_at REAL, four_eyes INTEGER,
    requested_by TEXT
);
CREATE INDEX IF NOT EXISTS call_approvals_by_call ON call_approvals(session_id, tool, digest);
CREATE TABLE IF NOT EXISTS run_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    kind TEXT NOT NULL, step_id TEXT, body TEXT, at REAL NOT NULL, taken_at REAL, outcome TEXT
);
CREATE INDEX IF NOT EXISTS run_requests_open ON run_requests(taken_at, run_id);
CREATE TABLE IF NOT EXISTS trust_files (
    file TEXT PRIMARY KEY, sha256 TEXT NOT NULL, at REAL NOT NULL, how TEXT NOT NULL, origin TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trust_blobs (sha256 TEXT PRIMARY KEY, content TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trust_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT, file TEXT NOT NULL, sha256 TEXT, at REAL NOT NULL, how TEXT NOT NULL,
    origin TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit_log (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, kind TEXT NOT NULL, session_id TEXT, client TEXT, tool TEXT,
    verdict TEXT, rule TEXT, reason TEXT, actor TEXT, channel TEXT, detail TEXT, prev TEXT NOT NULL, hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_by_time ON audit_log(at);
CREATE TABLE IF NOT EXISTS audit_chain (name TEXT PRIMARY KEY, entry INTEGER NOT NULL, hash TEXT NOT NULL);
"""
# Bumped with every schema change; older files are migrated forward when opened (6: skill_events, a new table;
# 7: prereq_records, a prerequisite's record per server with how it is known, replacing prereq_done, and
# observed_sessions, the sessions whose client runs the hooks; 8: call_approvals, a person's yes to one tool call;
# 9: runs.started_by, the identity that started a run on a team server; 10: events.actor and prereq_records.actor,
# the identity each change and record was made for; 11: runs.owner_replica and owner_host, the replica owning a run on
# PostgreSQL and where its process ids mean something, and run_requests, what a call that reached a replica other
# than the run's owner asks of that owner; 12: trust_files, trust_blobs and trust_log, the trust records of a team
# server's database, which every replica enforces; 13: call_approvals.four_eyes and requested_by, a call a second
# person must approve and whose call it is; 14: audit_log and audit_chain, the audit trail, state/audit.py).
SCHEMA_VERSION = 14
# Tables an older schema had and this one dropped, with the version that dropped them: their rows are not carried
# over (prereq_done's records expire 24 hours after their session started anyway; a session starts them again).
DROPPED_TABLES = [(7, "prereq_done")]
# Columns added after a table was first created: (table, column, type). Migration adds the missing ones.
ADDED_COLUMNS = [
    ("steps", "output_bytes", "INTEGER"),
    ("steps", "stderr_bytes", "INTEGER"),
    ("steps", "instructions", "TEXT"),
    ("steps", "prompt", "TEXT"),
    ("steps", "child_run", "TEXT"),
    ("runs", "question", "TEXT"),
    ("runs", "question_id", "TEXT"),
    ("runs", "answer", "TEXT"),
    ("runs", "started_by", "TEXT"),
    ("events", "actor", "TEXT"),
    ("prereq_records", "actor", "TEXT"),
    ("runs", "owner_replica", "INTEGER"),
    ("runs", "owner_host", "TEXT"),
    ("call_approvals", "four_eyes", "INTEGER"),
    ("call_approvals", "requested_by", "TEXT"),
]


class StateFileError(RuntimeError):
    """The state file cannot be used as it is; the message names the file and the fix."""
