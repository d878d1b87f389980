"""A developer's agent attacking its team server with the developer's own token: each route that would approve
something without a second, signed-in person, act as someone else, or record the wrong identity is closed."""

from __future__ import annotations

import json
import sqlite3

import anyio
import httpx2
import pytest

from abilities_mcp.cli.team_hooks import hook_endpoint
from provider_support import login_in_browser
from support import state_db, stored_run, trust_project
from team_support import ISSUER, Tokens, team_client, team_server

pytestmark = pytest.mark.anyio

READ_FIRST = {
    "read-first": {
        "description": "Read the notes before running a command",
        "triggers": {"tools": ["Bash"]},
        "prerequisites": [{"step": 1, "tool": "Read", "description": "Read the notes"}],
        "mode": "enforce",
    }
}


async def test_a_prerequisite_the_team_hook_records_names_the_caller_as_its_actor(project):
    """Every record carries who it was made for (docs/team.md): the hook endpoint's too, not a blank `local`."""
    (project.root / "workflows.json").write_text(json.dumps(READ_FIRST))
    trust_project(project)
    payload = {
        "session_id": "s1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "/tmp/notes.txt"},
        "tool_response": {"type": "text", "file": {"content": "notes"}},
    }
    async with team_server(project, Tokens(alice_token="alice"), hook=hook_endpoint) as origin:
        async with httpx2.AsyncClient() as http:
            answer = await http.post(
                f"{origin}/hook/claude/PostToolUse", json=payload, headers={"Authorization": "Bearer alice_token"}
            )
    assert answer.status_code == 200 and answer.json()["exit"] == 0, answer.text
    with sqlite3.connect(state_db(project.root)) as db:
        actors = [row[0] for row in db.execute("SELECT actor FROM prereq_records")]
    assert actors == [f"{ISSUER}#alice"]


async def test_a_callback_begun_in_another_browser_signs_nobody_in(project, oidc_provider):
    """Login CSRF: mallory starts a sign-in, finishes it at the provider as herself and hands the callback link to
    grace; grace's browser, which never started that sign-in, must not come back signed in as mallory."""
    secrets = {"client_id": oidc_provider.server.client_id, "client_secret": oidc_provider.server.secret}
    async with team_server(project, None, approvers="grace", issuer=oidc_provider.issuer, **secrets) as origin:
        async with httpx2.AsyncClient(base_url=origin, timeout=20) as mallory:
            leave = await mallory.get("/ui/login")
            back = await anyio.to_thread.run_sync(login_in_browser, oidc_provider, leave.headers["location"], "mallory")
        async with httpx2.AsyncClient(base_url=origin, timeout=20) as grace:
            landed = await grace.get(back)
            assert landed.status_code == 403, landed.headers
            assert "set-cookie" not in landed.headers
            assert (await grace.get("/ui/waiting")).status_code == 303  # still off to sign in

        async with httpx2.AsyncClient(base_url=origin, timeout=20) as browser:  # the browser that began it gets in
            leave = await browser.get("/ui/login")
            back = await anyio.to_thread.run_sync(login_in_browser, oidc_provider, leave.headers["location"], "grace")
            landed = await browser.get(back)
            assert landed.status_code == 303, landed.text
            assert (await browser.get("/ui/waiting")).status_code == 200


AGENT_THEN_FOUR_EYES = """\
description: The agent writes the version, a second person approves shipping it
steps:
  - {id: version, type: agent, prompt: Pick the version to ship}
  - {id: second, type: approval, approval: four-eyes, prompt: "Ship {{steps.version.output}}?", needs: [version]}
"""


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_caller_cannot_change_a_run_someone_else_started(project, write, mode):
    """Bob's token could hand back alice's agent step (choosing what her four-eyes prompt asks), then approve it as
    the second pair of eyes; nor may he cancel or resume her run. He may still read it, as the page shows it."""
    write("release", AGENT_THEN_FOUR_EYES)
    async with team_server(project, Tokens(alice_token="alice", bob_token="bob")) as origin:
        async with team_client(origin, "alice_token", mode=mode) as alice:
            run = (await alice.call_tool("ability_run", {"name": "release", "wait_seconds": 10})).structured_content
            assert run["status"] == "awaiting_agent", run
            run_id = run["run_id"]
            async with team_client(origin, "bob_token", mode=mode) as bob:
                assert not (await bob.call_tool("ability_status", {"run_id": run_id})).is_error
                calls = {
                    "ability_step_complete": {"step_id": "version", "output": "v6.6.6"},
                    "ability_cancel": {},
                    "ability_resume": {},
                    "ability_approve": {"step_id": "second", "approved": True},
                }
                for tool, arguments in calls.items():
                    refused = await bob.call_tool(tool, {"run_id": run_id, **arguments})
                    assert refused.is_error, (tool, refused)
                    said = refused.content[0].text
                    assert "started by alice" in said and "ability_status" in said, said
            assert stored_run(project.root, run_id).status == "awaiting_agent"
            mine = await alice.call_tool(
                "ability_step_complete", {"run_id": run_id, "step_id": "version", "output": "v1.2.3", "wait_seconds": 5}
            )
            assert mine.structured_content["status"] == "awaiting_approval", mine
