"""The audit trail (issue 34): entries written where decisions happen, one hash chain that names the first edited,
deleted or inserted entry, on SQLite and PostgreSQL, pruned by a retention no project file sets, kept whole by
writers in several processes at once."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.clients.hook import main as hook_main
from abilities_mcp.prerequisites.approvals import CallApprovals, Request
from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.server.app import create_server
from abilities_mcp.state import audit
from abilities_mcp.state.database import Database
from abilities_mcp.state.project import Project
from support import TEST_RETRY_BASE, trust_project

SESSION = "sess-audit"
WRITERS, EACH = 4, 25
DAY = 86400.0


def entries_of(project: Project) -> list[audit.Entry]:
    db = Database.open(project)
    try:
        return audit.entries(db)
    finally:
        db.close()


def hook(project: Project, event: str, **payload: Any) -> str:
    out = io.StringIO()
    body = json.dumps({"session_id": SESSION, "hook_event_name": event, "permission_mode": "default", **payload})
    hook_main("claude", event, project=project, stdin=io.StringIO(body), stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def gated(root: Path, project: Project) -> Project:
    """A project whose workflows.json enforces the database template."""
    t = TEMPLATES["database"]
    (root / "workflows.json").write_text(json.dumps({t["name"]: {k: v for k, v in t.items() if k != "name"}}))
    return project


def test_a_hook_deny_and_a_record_are_entries_with_tool_verdict_rule_reason_session_and_client(gated) -> None:
    said = hook(gated, "PreToolUse", tool_name="mcp__db__execute_query", tool_input={})
    hook(gated, "PostToolUse", tool_name="mcp__db__list_databases", tool_input={}, tool_response="db1")
    hook(gated, "PreToolUse", tool_name="Read", tool_input={})  # no gate touched it: nothing to record

    deny, record = entries_of(gated)
    assert '"deny"' in said
    assert (deny.kind, deny.tool, deny.verdict, deny.rule) == (
        "gate",
        "mcp__db__execute_query",
        "deny",
        "database-safe-query",
    )
    assert (deny.session_id, deny.client, deny.channel) == (SESSION, "claude", "hook")
    assert "may not run yet" in deny.reason
    assert (record.kind, record.tool, record.verdict) == ("record", "mcp__db__list_databases", "counted")
    assert record.rule == "database-safe-query step 1" and record.reason == "db1"


def test_a_call_approval_asked_answered_and_used_is_three_entries_naming_who_and_the_channel(project) -> None:
    db = Database.open(project)
    try:
        approvals = CallApprovals(db)
        request = Request("Bash", "d" * 64, "git push --force", ("force-push",), "Force-push?", 600.0)
        asked = approvals.ask(SESSION, "claude", request)
        approvals.answer(asked.call_id, True, "ana at a terminal", "terminal", "/dev/pts/3", "ok")
        approvals.take(SESSION, request)
        found = audit.entries(db)
    finally:
        db.close()
    assert [(e.kind, e.verdict, e.tool, e.rule) for e in found] == [
        ("approval", v, "Bash", "force-push") for v in ("asked", "approved", "used")
    ]
    assert (found[1].actor, found[1].channel, found[1].reason) == ("ana at a terminal", "terminal", "ok")


APPROVING = """
description: Ship it
settings: {enforcement: loose}
steps:
  - id: ok
    type: approval
    prompt: Ship?
"""


async def test_an_answer_to_an_approval_and_an_out_of_step_call_are_entries(project, write) -> None:
    write("ship", APPROVING)
    trust_project(project)  # a trust change too
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as client:
        run = (await client.call_tool("ability_run", {"name": "ship", "wait_seconds": 5})).structured_content
        assert run["status"] == "awaiting_approval", run
        args = {"run_id": run["run_id"], "step_id": "ok", "approved": True}
        assert not (await client.call_tool("ability_approve", args)).is_error
        late = await client.call_tool(
            "ability_step_complete", {"run_id": run["run_id"], "step_id": "ok", "output": "x"}
        )

    kinds = {e.kind: e for e in entries_of(project)}
    assert kinds["trust"].tool == "abilities/ship.yaml" and kinds["trust"].actor == "the test's author"
    answer = kinds["answer"]
    assert (answer.tool, answer.verdict, answer.channel) == ("ok", "approved", "agent")
    assert json.loads(answer.detail)["run_id"] == run["run_id"]
    refused = kinds["refused"]
    assert refused.verdict == "warned" and "Refused" in refused.reason, refused  # loose: a warning, still recorded
    assert late.structured_content["run_id"] == run["run_id"]


REVIEWED = """\
description: A review the agent hands back, checked
steps:
  - id: review
    type: agent
    prompt: Review it
    validation: {output_contains: APPROVED}
"""


async def test_a_hand_back_its_step_refuses_is_an_entry(project, write) -> None:
    write("review", REVIEWED)
    trust_project(project)
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as client:
        run = (await client.call_tool("ability_run", {"name": "review", "wait_seconds": 5})).structured_content
        args = {"run_id": run["run_id"], "step_id": "review", "output": "looks fine"}
        assert (await client.call_tool("ability_step_complete", args)).is_error

    [refused] = [e for e in entries_of(project) if e.kind == "refused"]
    assert (refused.tool, refused.verdict, refused.channel) == ("ability_step_complete", "refused", "mcp")
    assert "APPROVED" in refused.reason and json.loads(refused.detail)["step"] == "review"


# --- the chain ------------------------------------------------------------------------------------------------------


def filled(location: Path | str, count: int = 5) -> Database:
    db = Database(location)
    for i in range(count):
        audit.append(db, "gate", tool=f"t{i}", verdict="deny", session_id="s", detail={"i": i})
    return db


def test_an_untouched_trail_verifies_whole(state_location) -> None:
    db = filled(state_location)
    try:
        assert audit.verify(db) == (5, None)
    finally:
        db.close()


def test_an_entry_appended_in_a_write_that_fails_is_rolled_back_with_it_and_the_trail_still_verifies(
    state_location,
) -> None:
    # Database.transaction (a plain class since the hook does without contextlib): an append inside a write is part
    # of it, and a failed write leaves nothing of it, its audit entry included; the next write chains on as before.
    db = filled(state_location)
    try:
        with pytest.raises(RuntimeError, match="the write failed"), db.transaction():
            audit.append(db, "gate", tool="gone", verdict="deny", session_id="s")
            raise RuntimeError("the write failed")
        assert not db.db.in_transaction
        with db.transaction():
            audit.append(db, "gate", tool="kept", verdict="deny", session_id="s")
        tools = [e.tool for e in audit.entries(db)]
        assert audit.verify(db) == (6, None)
    finally:
        db.close()
    assert tools == ["t0", "t1", "t2", "t3", "t4", "kept"]


TAMPERING = {
    "a field edited": ("UPDATE audit_log SET verdict='allow' WHERE id=3", 3, "edited"),
    "a row deleted": ("DELETE FROM audit_log WHERE id=3", 4, "#3 deleted"),
    "the last row deleted": ("DELETE FROM audit_log WHERE id=5", 5, "#5 deleted"),
    "a row inserted": (
        "INSERT INTO audit_log (id, at, kind, prev, hash) VALUES (6, 0, 'gate', 'x', 'y')",
        6,
        "inserted",
    ),
    "an edit with its hash recomputed": (None, 2, "rewritten"),
}


@pytest.mark.parametrize("how", TAMPERING, ids=list(TAMPERING))
def test_a_tampered_trail_names_its_first_broken_entry(state_location, how) -> None:
    sql, entry, words = TAMPERING[how]
    db = filled(state_location)
    try:
        if sql is None:  # rewrite entry 2 with a hash that fits its new content: entry 3 was chained to the old one
            old = audit.entries(db)[1]._replace(verdict="allow")
            db.db.execute("UPDATE audit_log SET verdict='allow', hash=? WHERE id=2", (audit.hash_of(old),))
        else:
            db.db.execute(sql)
        count, broken = audit.verify(db)
    finally:
        db.close()
    assert broken is not None and broken.entry == entry and words in broken.problem, broken
    assert count == min(entry - 1, 5) or words == "#3 deleted"  # the entries before it that hold


def test_pruning_keeps_the_recent_entries_and_a_chain_that_still_verifies(tmp_path) -> None:
    db = Database(tmp_path / "s.db")
    try:
        now = time.time()
        for at in (now - 40 * DAY, now - 35 * DAY, now - DAY, now):
            audit.append(db, "record", at=at, tool="t")
        assert audit.prune(db, 30) == 2
        assert [e.id for e in audit.entries(db)] == [3, 4]
        assert audit.verify(db) == (2, None)
        audit.append(db, "record", tool="after")
        assert audit.verify(db) == (3, None)
        db.db.execute("DELETE FROM audit_log WHERE id=3")  # the first kept entry, gone: still found
        assert audit.verify(db)[1].entry == 4
    finally:
        db.close()


def test_retention_comes_from_the_flag_or_the_environment_never_a_project_file(root, monkeypatch) -> None:
    (root / "abilities-mcp.json").write_text(json.dumps({"audit": {"days": 1}, "history": {"days": 1}}))
    monkeypatch.delenv(audit.RETENTION_ENV, raising=False)
    assert audit.retention_days() == audit.DEFAULT_RETENTION_DAYS
    monkeypatch.setenv(audit.RETENTION_ENV, "365")
    assert audit.retention_days() == 365 and audit.retention_days(400) == 400
    # never shorter than the floor: an agent's shell sets flags and environment as easily as a person's
    monkeypatch.setenv(audit.RETENTION_ENV, "7")
    assert audit.retention_days() == audit.DEFAULT_RETENTION_DAYS and audit.retention_days(0.001) == 90
    assert audit.retention_days(0) == 0  # keep everything


WRITER = """
import sys
from pathlib import Path
from abilities_mcp.state import audit
from abilities_mcp.state.database import Database
db = Database(Path(sys.argv[1]))
for i in range(int(sys.argv[3])):
    audit.append(db, "gate", tool=f"w{sys.argv[2]}-{i}", verdict="allow")
db.close()
"""


def test_writers_in_several_processes_keep_one_unbroken_chain(tmp_path) -> None:
    path = tmp_path / "s.db"
    Database(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w), str(EACH)]) for w in range(WRITERS)]
    assert [p.wait(timeout=60) for p in procs] == [0] * WRITERS
    db = Database(path)
    try:
        assert audit.verify(db) == (WRITERS * EACH, None)
    finally:
        db.close()
