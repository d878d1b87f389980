"""abilities-mcp.json under trust: keeping fewer runs or days (the record of who answered what) or letting a
prerequisite count longer waits for a person's `abilities-mcp trust`; the other way applies at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.state.project import Project
from abilities_mcp.state.settings import chosen, in_force, lowerings, parse_settings
from abilities_mcp.state.store import Store
from support import stdio_params, stored_run, trust_project

LOWERING = [
    ("fewer-runs", {"history": {"runs": 1}}, "history.runs 500 → 1"),
    ("fewer-days", {"history": {"days": 0.00001}}, "history.days 30.0 → 1e-05"),
    ("longer-ttl", {"sessions": {"ttl": "30d"}}, 'sessions.ttl 86400.0 → "30d"'),
]
UNLOWERED = [
    ("more-runs", {"history": {"runs": 5000}}),
    ("more-days", {"history": {"days": 90}}),
    ("shorter-ttl", {"sessions": {"ttl": "1h"}}),
    ("skills", {"skills": {"builtin": False}}),
]


def settings(data: dict[str, Any]):
    return parse_settings(Path("/p/abilities-mcp.json"), json.dumps(data).encode())


@pytest.mark.parametrize(("data", "reason"), [(d, r) for _, d, r in LOWERING], ids=[i for i, _, _ in LOWERING])
def test_a_setting_moved_the_loose_way_is_named(data, reason: str) -> None:
    assert lowerings(settings({}), settings(data)) == [reason]


@pytest.mark.parametrize("data", [d for _, d in UNLOWERED], ids=[i for i, _ in UNLOWERED])
def test_a_setting_moved_the_safe_way_lowers_nothing(data) -> None:
    assert lowerings(settings({}), settings(data)) == []


def test_a_shorter_history_waits_for_trust_and_a_longer_one_applies(root: Path, project: Project) -> None:
    path = root / "abilities-mcp.json"
    path.write_text(json.dumps({"history": {"runs": 1}}))
    assert in_force(root, project.state_dir).get("history.runs") is None  # the default, 500
    assert "abilities-mcp.json has edits that would lower a gate" in (in_force(root, project.state_dir).pending or "")
    trust_project(project)
    assert in_force(root, project.state_dir).get("history.runs") == 1
    path.write_text(json.dumps({"history": {"runs": 1000}}))
    assert in_force(root, project.state_dir).get("history.runs") == 1000


def test_the_hooks_session_ttl_is_the_trusted_one(root: Path, project: Project) -> None:
    (root / "abilities-mcp.json").write_text(json.dumps({"sessions": {"ttl": "365d"}}))
    ttl = chosen(root, "sessions.ttl", None, None, float, 86400.0, project.state_dir)
    assert ttl == 86400.0


FINISHED = """
description: finishes at once
steps:
  - {id: one, type: script, run: "true"}
"""


async def test_a_project_file_that_shortens_history_erases_no_run_at_the_next_start(root: Path, project) -> None:
    (root / "abilities" / "quick.yaml").write_text(FINISHED)
    run_ids = []
    for _ in range(3):
        async with Client(stdio_params(root)) as client:
            run = (await client.call_tool("ability_run", {"name": "quick"})).structured_content
            assert run["status"] == "completed"
            run_ids.append(run["run_id"])
    (root / "abilities-mcp.json").write_text(json.dumps({"history": {"runs": 1, "days": 0.00001}}))

    async with Client(stdio_params(root)) as client:  # the start that prunes
        await client.call_tool("ability_list", {})

    assert all(stored_run(root, rid).status == "completed" for rid in run_ids)
    store = Store(project.state_db)
    try:
        assert len(store.runs(limit=10)) == 3
    finally:
        store.close()
