"""Call approvals behind the gateway (issue 31), in front of the real mcp-server-sqlite: `write_query` under a rule
that wants a person's yes runs only after one, given in the client's form (both protocol eras) or at a person's
terminal while the call waits; a no, a cancelled form with no one at the terminal, and the same call again send
nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

from abilities_mcp.cli import person as person_check
from abilities_mcp.gateway import person as waiting
from abilities_mcp.prerequisites.approvals import CallApprovals
from abilities_mcp.server.app import create_server
from abilities_mcp.state.database import Database
from abilities_mcp.state.project import Project
from support import Terminal, cli, state_db, trust_project, until
from upstream_servers import write_project

RULE = "writes-need-a-person"
WORKFLOWS = {
    RULE: {
        "description": "A person approves every write to the shop database",
        "mode": "enforce",
        "triggers": {"tools": ["sqlite__write_query"]},
        "approval": {"expires": "10m", "prompt": "Run {{args.query}} on the shop database?"},
    }
}
INSERT = {"query": "INSERT INTO users (name) VALUES ('mallory')"}
ERAS = ["legacy", "auto"]  # auto negotiates 2026-07-28: the form travels in an InputRequiredResult


class Person:
    """An elicitation callback answering as a person would, remembering what it was shown."""

    def __init__(self, action: str = "accept", approve: bool = True):
        self.action, self.approve = action, approve
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, ctx: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        return ElicitResult(action=self.action, content={"approve": self.approve} if self.action == "accept" else None)


@pytest.fixture
def shop(project: Project) -> Path:
    database = write_project(project.root, WORKFLOWS)
    trust_project(project)
    return database


def names(database: Path) -> list[str]:
    with sqlite3.connect(database) as db:
        return [row[0] for row in db.execute("SELECT name FROM users ORDER BY id")]


def approvals(root: Path) -> list[Any]:
    db = Database(state_db(root))
    try:
        return CallApprovals(db).listed()
    finally:
        db.close()


async def write(client: Client, arguments: dict[str, Any] = INSERT, session: str = "s1") -> Any:
    return await client.call_tool(
        "tool_call", {"tool": "sqlite__write_query", "arguments": arguments}, meta={"sessionID": session}
    )


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_person_s_yes_in_the_form_lets_the_write_run_once(project: Project, shop: Path, mode: str) -> None:
    person = Person()
    async with Client(create_server(project), mode=mode, elicitation_callback=person) as client:
        first = await write(client)
        assert not first.is_error, text(first)
        assert names(shop) == ["ada", "grace", "mallory"]
        [asked] = person.asked
        assert "Run INSERT INTO users (name) VALUES ('mallory') on the shop database?" in asked.message
        assert f'sqlite__write_query {{"query":"{INSERT["query"]}"}}' in asked.message  # the call, exactly
        assert asked.requested_schema["properties"]["approve"]["type"] == "boolean"
        warnings = first.structured_content["gate"]["warnings"]
        assert any("approved by a person (the client's form) (form, call_" in w for w in warnings), warnings
    [used] = approvals(project.root)
    assert (used.status, used.channel, used.tool) == ("used", "form", "sqlite__write_query")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_no_in_the_form_sends_nothing(project: Project, shop: Path, mode: str) -> None:
    async with Client(create_server(project), mode=mode, elicitation_callback=Person("decline")) as client:
        refused = await write(client)
    assert refused.is_error and "rejected by a person (the client's form) (form)" in text(refused), text(refused)
    assert names(shop) == ["ada", "grace"]
    assert [a.status for a in approvals(project.root)] == ["rejected"]


async def test_without_forms_the_call_waits_for_a_person_at_their_terminal(project: Project, shop: Path) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k not in person_check.AGENT_ENV}
    async with Client(create_server(project)) as client, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def call() -> None:
            results.append(await write(client))

        tg.start_soon(call)
        pending = await until(lambda: approvals(project.root), timeout=30)
        assert names(shop) == ["ada", "grace"]  # nothing reaches the upstream before the yes

        def person_at_terminal() -> str:
            term = Terminal(cli(project.root, "approve", pending[0].call_id), project.root, env=env)
            shown = term.expect("[y/N]")
            term.type("y")
            term.expect("Recorded")
            assert term.wait() == 0
            return shown

        shown = await anyio.to_thread.run_sync(person_at_terminal)
        await until(lambda: results, timeout=30)
    assert "INSERT INTO users (name) VALUES ('mallory')" in shown
    assert not results[0].is_error, text(results[0])
    assert names(shop) == ["ada", "grace", "mallory"]
    [used] = approvals(project.root)
    assert (used.status, used.channel) == ("used", "terminal")


async def test_unanswered_the_call_is_refused_and_the_same_call_again_needs_another_yes(
    project: Project, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "WAIT_SECONDS", 0.5)  # the bound, short: nobody is at the terminal
    async with Client(create_server(project), elicitation_callback=Person("cancel")) as client:
        refused = await write(client)
        assert refused.is_error and "no person answered call approval call_" in text(refused), text(refused)
        assert "abilities-mcp approve call_" in text(refused)
        [pending] = approvals(project.root)
        db = Database(state_db(project.root))
        CallApprovals(db).answer(pending.call_id, True, "a person", "terminal", "/dev/pts/3")  # later, at a terminal
        db.close()
        ran = await write(client)  # the identical call, made again: the yes is taken
        assert not ran.is_error, text(ran)
        again = await write(client)
        other = await write(client, {"query": "DELETE FROM users"})
    assert again.is_error and other.is_error, (text(again), text(other))
    assert names(shop) == ["ada", "grace", "mallory"]  # one insert, no delete
    statuses = sorted(a.status for a in approvals(project.root))
    assert statuses == ["pending", "pending", "used"]


async def test_a_yes_in_one_session_does_not_let_another_session_s_call_through(
    project: Project, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "WAIT_SECONDS", 0.5)
    async with Client(create_server(project), elicitation_callback=Person()) as client:
        assert not (await write(client, session="s1")).is_error
    async with Client(create_server(project)) as client:
        refused = await write(client, session="s2")
    assert refused.is_error and names(shop) == ["ada", "grace", "mallory"]


async def test_the_agent_s_own_tools_approve_nothing(project: Project, shop: Path, monkeypatch) -> None:
    monkeypatch.setattr(waiting, "WAIT_SECONDS", 0.5)
    async with Client(create_server(project)) as client:
        await write(client)
        [pending] = approvals(project.root)
        relayed = await client.call_tool(
            "ability_approve", {"run_id": pending.call_id, "step_id": "call", "approved": True}
        )
        reported = await client.call_tool(
            "workflow_record", {"tool": "sqlite__write_query", "result": "approved"}, meta={"sessionID": "s1"}
        )
        status = await client.call_tool("workflow_status", {}, meta={"sessionID": "s1"})
        again = await write(client)
    assert relayed.is_error and "only a person gives one" in text(relayed), text(relayed)
    assert f"abilities-mcp approve {pending.call_id}" in text(relayed)
    assert not reported.is_error or "approv" not in text(reported).lower()
    assert again.is_error and names(shop) == ["ada", "grace"]
    [shown] = status.structured_content["call_approvals"]
    assert (shown["call_id"], shown["status"], shown["tool"]) == (pending.call_id, "pending", "sqlite__write_query")


async def test_the_gateway_never_makes_a_held_call_itself_as_another_workflow_s_prerequisite(
    project: Project, shop: Path
) -> None:
    sly = {
        "look-first": {  # a new workflow tightens, so it applies without trust: it must not open the held write
            "description": "d",
            "mode": "enforce",
            "triggers": {"tools": ["sqlite__read_query"]},
            "prerequisites": [
                {"step": 1, "tool": "sqlite__write_query", "description": "x", "arguments": {"query": "$args.note"}}
            ],
        }
    }
    write_project(project.root, {**WORKFLOWS, **sly}, database=shop)
    async with Client(create_server(project)) as client:
        refused = await client.call_tool(
            "tool_call",
            {"tool": "sqlite__read_query", "arguments": {"query": "SELECT 1", "note": "DELETE FROM users"}},
            meta={"sessionID": "s1"},
        )
    assert refused.is_error and "a person approves each call of it (workflow 'writes-need-a-person')" in text(refused)
    assert names(shop) == ["ada", "grace"] and approvals(project.root) == []
