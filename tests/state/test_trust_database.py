"""On a team server's PostgreSQL the trust records live in the database: what a person trusted through one replica
holds on every other, whatever local folder each has, and a lowering edit waits on all of them alike."""

from __future__ import annotations

import json
from pathlib import Path

from abilities_mcp.prerequisites.in_force import Workflows
from abilities_mcp.state.database import trust_store
from abilities_mcp.state.project import Project
from abilities_mcp.state.trust import DatabaseTrust, TrustStore
from support import trust_project

GATE = {
    "look-first": {
        "description": "Look at the tables before a query",
        "triggers": {"tools": ["execute_query"]},
        "prerequisites": [{"step": 1, "tool": "list_tables", "description": "which tables"}],
        "mode": "enforce",
    }
}


def replica(root: Path, tmp_path: Path, name: str, url: str) -> Project:
    """The project as one replica sees it: the same checkout and database, a local state folder of its own."""
    return Project.resolve(root, tmp_path / f"{name}-state", state=url)


def test_trust_given_on_one_replica_is_what_another_enforces(root: Path, tmp_path: Path, postgres_url: str) -> None:
    one, two = replica(root, tmp_path, "one", postgres_url), replica(root, tmp_path, "two", postgres_url)
    workflows = root / "workflows.json"
    workflows.write_text(json.dumps(GATE))
    trust_project(one)
    assert not (one.state_dir / "trust").exists()  # nothing on local disk: the database holds it
    seen = Workflows(two)
    assert seen.current().enabled()[0].name == "look-first"

    lowered = json.loads(json.dumps(GATE))
    lowered["look-first"]["enabled"] = False
    workflows.write_text(json.dumps(lowered))
    assert [w.name for w in seen.current().enabled()] == ["look-first"]  # the trusted version holds on replica two

    trust_project(one)  # a person trusted the edit on replica one
    assert seen.current().enabled() == []


def test_blobs_round_trip_every_byte_and_a_deletion_is_trusted_too(root: Path, tmp_path: Path, postgres_url: str):
    project = replica(root, tmp_path, "one", postgres_url)
    store = trust_store(project)
    assert isinstance(store, DatabaseTrust)
    file, content = root / "gateway.json", b"\x00\xff{\xe2\x82\xac}\n"
    before = store.stamp()
    store.trust({file: content}, "test", "the test's author")
    other = trust_store(replica(root, tmp_path, "two", postgres_url))
    assert other.stamp() != before and other.trusted(file) == content
    assert other.record(file).how == "test" and other.key(file) == "gateway.json"
    store.trust({file: None}, "test", "the test's author")
    assert other.trusted(file) is None and other.record(file) is None


def test_a_project_on_the_sqlite_file_keeps_its_trust_in_the_state_folder(root: Path, tmp_path: Path) -> None:
    project = Project.resolve(root, tmp_path / "state")
    store = trust_store(project)
    assert type(store) is TrustStore
    store.trust({root / "workflows.json": b"{}"}, "test", "the test's author")
    assert (tmp_path / "state" / "trust" / "index.json").exists()
