"""`abilities-mcp audit` (issue 34): the trail listed and as JSON, `--verify` naming the entry edited in the database
(exit 1), and `--prune` by the retention the person sets, which a project file cannot shorten."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from abilities_mcp.state import audit
from abilities_mcp.state.database import Database
from support import cli, state_db

CLI_TIMEOUT = 60
DAY = 86400.0


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(root, "audit", *args), capture_output=True, text=True, timeout=CLI_TIMEOUT)


def trail(root: Path, ages_in_days: tuple[float, ...] = (0, 0, 0)) -> None:
    db = Database(state_db(root))
    try:
        for i, age in enumerate(ages_in_days):
            reason = "denied:\x1b[2J 'mcp__db__execute_query' may not run yet" if i == 0 else None
            fields = {"tool": "mcp__db__execute_query", "verdict": "deny", "rule": "database-safe-query"}
            audit.append(db, "gate", at=time.time() - age * DAY, session_id=f"s{i}", reason=reason, **fields)
    finally:
        db.close()


def test_an_edited_row_is_named_by_audit_verify_which_exits_1(root: Path) -> None:
    trail(root)
    assert run(root, "--verify").stdout.startswith("audit trail intact: 3 entries")
    db = Database(state_db(root))
    db.db.execute("UPDATE audit_log SET verdict='allow' WHERE id=2")
    db.close()

    done = run(root, "--verify")

    assert done.returncode == 1
    assert "audit trail broken at entry #2" in done.stderr and "edited" in done.stderr, done.stderr


def test_the_listing_is_one_inert_line_an_entry_and_json_on_request(root: Path) -> None:
    trail(root)

    listed = run(root, "--session", "s0")
    as_json = json.loads(run(root, "--json", "--since", "1h").stdout)

    assert listed.returncode == 0 and listed.stdout.count("\n") == 1, listed.stdout
    line = listed.stdout
    assert line.startswith("#1  ") and "gate" in line and "[database-safe-query]" in line, line
    assert "\x1b" not in line and "\\x1b[2J" in line  # a reason cannot redraw the person's terminal
    assert [e["session_id"] for e in as_json["entries"]] == ["s0", "s1", "s2"]


def test_prune_follows_the_environment_and_not_a_project_file(root: Path, monkeypatch) -> None:
    trail(root, (400, 100, 0))
    (root / "abilities-mcp.json").write_text(json.dumps({"audit": {"days": 1}}))
    monkeypatch.delenv(audit.RETENTION_ENV, raising=False)

    monkeypatch.setenv(audit.RETENTION_ENV, "365")
    assert run(root, "--prune").stdout.startswith("Pruned 1 entries older than 365 days")
    monkeypatch.setenv(audit.RETENTION_ENV, "30")  # shorter than the floor: the floor holds
    assert run(root, "--prune", "--days", "1").stdout.startswith("Pruned 1 entries older than 90 days")

    assert run(root, "--verify").stdout.startswith("audit trail intact: 1 entries")
