"""The team server over streamable HTTP: a bearer token for every call, each caller's own sessions, and a run's
starter recorded, in both protocol eras."""

from __future__ import annotations

import json
from contextlib import closing

import httpx2
import pytest

from abilities_mcp.state.store import Store
from support import stored_run, trust_project
from team_support import DEPLOY, ISSUER, Tokens, team_client, team_server

pytestmark = pytest.mark.anyio


async def test_a_call_without_a_valid_token_is_refused_and_pointed_at_the_provider(project, write):
    write("deploy", DEPLOY)
    async with team_server(project, Tokens(alice="alice")) as origin:
        async with httpx2.AsyncClient() as http:
            for headers in ({}, {"Authorization": "Bearer forged"}):
                answer = await http.post(
                    f"{origin}/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={**headers, "Accept": "application/json, text/event-stream"},
                )
                assert answer.status_code == 401
                assert "resource_metadata=" in answer.headers["www-authenticate"]
            metadata = (await http.get(f"{origin}/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata["resource"] == f"{origin}/mcp"
    assert metadata["authorization_servers"] == [ISSUER]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_run_records_who_started_it_and_each_caller_sees_only_their_own_session(project, write, mode):
    write("deploy", DEPLOY)
    async with team_server(project, Tokens(alice_token="alice", bob_token="bob")) as origin:
        async with team_client(origin, "alice_token", mode=mode) as alice:
            started = await alice.call_tool("ability_run", {"name": "deploy", "wait_seconds": 10})
            assert not started.is_error, started.content[0].text
            run = started.structured_content
            assert run["status"] == "awaiting_approval", run
            mine = await alice.call_tool("ability_status", {})
            assert mine.structured_content["run_id"] == run["run_id"]
        async with team_client(origin, "bob_token", mode=mode) as bob:
            theirs = await bob.call_tool("ability_status", {})
            assert theirs.is_error  # bob's session has no run: alice's is not his default
    record = stored_run(project.root, run["run_id"])
    assert record.started_by == f"{ISSUER}#alice"
    with closing(Store.open(project)) as store:  # every change the run went through is recorded as alice's
        actors = {event["actor"] for event in store.events(run["run_id"])}
    assert actors == {f"{ISSUER}#alice"}
    assert record.session_id.endswith(":" + record.session_id.split(":", 1)[1])


async def test_on_a_team_server_the_agent_cannot_answer_an_approval_even_under_loose(project, write):
    loose = DEPLOY.replace("approval: four-eyes", "approval: person")
    write("deploy", loose.replace("description:", "settings: {enforcement: loose}\ndescription:"))
    trust_project(project)  # a person trusted the loose file: loose is what holds
    async with team_server(project, Tokens(alice_token="alice")) as origin:
        async with team_client(origin, "alice_token", mode="legacy") as alice:
            run = (await alice.call_tool("ability_run", {"name": "deploy", "wait_seconds": 10})).structured_content
            relayed = await alice.call_tool(
                "ability_approve", {"run_id": run["run_id"], "step_id": "second", "approved": True}
            )
            # loose answers an out-of-step call with a warning, not an error; either way nothing was approved
            assert "run page" in json.dumps(relayed.structured_content or relayed.content[0].text)
            status = await alice.call_tool("ability_status", {"run_id": run["run_id"]})
            assert status.structured_content["status"] == "awaiting_approval"
    assert json.loads(json.dumps(status.structured_content))["current_step"]["id"] == "second"
