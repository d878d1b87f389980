"""Four eyes on a team server, with a real OpenID provider: the developer's agent starts a run with their token; they
cannot approve it on the page, nor can anyone who is not an approver; a second approver can, and the run goes on."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest

from provider_support import login_in_browser, user_token
from support import stored_run, until
from team_support import AUDIENCE, DEPLOY, team_client, team_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sign_in(origin: str, provider, user: str) -> AsyncIterator[httpx2.AsyncClient]:
    """A browser signed in to the team page as `user`, through the provider's own login page."""
    async with httpx2.AsyncClient(base_url=origin, timeout=20) as browser:
        leave = await browser.get("/ui/login")
        assert leave.status_code == 303
        back = await anyio.to_thread.run_sync(login_in_browser, provider, leave.headers["location"], user)
        assert back.startswith(f"{origin}/ui/callback?")
        landed = await browser.get(back)
        assert landed.status_code == 303, landed.text
        yield browser


async def answer(browser: httpx2.AsyncClient, origin: str, run_id: str, said: str = "approve") -> httpx2.Response:
    page = await browser.get("/ui/waiting")
    assert page.status_code == 200, page.text
    csrf = re.search(r'data-csrf="([^"]+)"', page.text).group(1)
    question = re.search(r'name="question" value="([^"]+)"', page.text).group(1)
    fields = {"csrf": csrf, "step": "second", "question": question, "answer": said}
    return await browser.post(f"/ui/waiting/runs/{run_id}", data=fields, headers={"origin": origin})


async def test_the_starter_and_a_non_approver_are_refused_and_a_second_approver_completes_the_run(
    project, write, oidc_provider
):
    write("deploy", DEPLOY)
    ada = await anyio.to_thread.run_sync(lambda: user_token(oidc_provider, "ada", resource=AUDIENCE))
    secrets = {"client_id": oidc_provider.server.client_id, "client_secret": oidc_provider.server.secret}
    secrets |= {"issuer": oidc_provider.issuer, "audience": AUDIENCE}
    async with team_server(project, None, approvers="ada,grace", **secrets) as origin:
        async with team_client(origin, ada, mode="legacy") as agent:
            run = (await agent.call_tool("ability_run", {"name": "deploy", "wait_seconds": 10})).structured_content
            assert run["status"] == "awaiting_approval"
            run_id = run["run_id"]

            async with sign_in(origin, oidc_provider, "ada") as own:
                refused = await answer(own, origin, run_id)
                assert "ada" in refused.text and "started this run" in refused.text
            async with sign_in(origin, oidc_provider, "mallory") as outsider:
                refused = await answer(outsider, origin, run_id)
                assert "not an approver" in refused.text
            assert stored_run(project.root, run_id).status == "awaiting_approval"

            async with sign_in(origin, oidc_provider, "grace") as second:
                taken = await answer(second, origin, run_id)
                assert taken.status_code == 303 and "answered=" in taken.headers["location"], taken.text
            with anyio.fail_after(30):
                while (now := stored_run(project.root, run_id)).status not in ("completed", "failed"):
                    await agent.call_tool("ability_status", {"run_id": run_id, "wait_seconds": 5})
            assert now.status == "completed", now

    record = await until(lambda: stored_run(project.root, run_id))
    assert record.started_by == f"{oidc_provider.issuer}#ada"
    assert record.step("second").status == "completed"
    trail = [a["detail"] for a in record.answers if a["step_id"] == "second"]
    assert len(trail) == 1 and f"signed in as grace@example.test ({oidc_provider.issuer}#grace)" in trail[0], trail


async def test_a_token_the_provider_issued_for_anything_but_this_server_is_refused(project, write, oidc_provider):
    write("deploy", DEPLOY)
    secrets = {"client_id": oidc_provider.server.client_id, "client_secret": oidc_provider.server.secret}
    secrets |= {"issuer": oidc_provider.issuer, "audience": AUDIENCE}
    elsewhere = await anyio.to_thread.run_sync(lambda: user_token(oidc_provider, "ada", resource="http://other.test"))
    userinfo = await anyio.to_thread.run_sync(lambda: user_token(oidc_provider, "ada"))  # the provider's own API
    async with team_server(project, None, **secrets) as origin, httpx2.AsyncClient() as http:
        for token in (elsewhere, userinfo):
            answer = await http.post(
                f"{origin}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
            )
            assert answer.status_code == 401, answer.text


FORCE_PUSH = {
    "force-push-second-person": {
        "description": "A force push needs a second person's yes",
        "triggers": {"tools": ["Bash(git push --force:*)"]},
        "approval": {"expires": "10m", "four_eyes": True},
    }
}


async def test_a_four_eyes_call_approval_is_refused_to_the_caller_and_given_by_a_second_approver(
    project, oidc_provider
):
    from abilities_mcp.cli.team_hooks import hook_endpoint
    from support import trust_project

    (project.root / "workflows.json").write_text(json.dumps(FORCE_PUSH))
    trust_project(project)
    ada = await anyio.to_thread.run_sync(lambda: user_token(oidc_provider, "ada", resource=AUDIENCE))
    secrets = {"client_id": oidc_provider.server.client_id, "client_secret": oidc_provider.server.secret}
    secrets |= {"issuer": oidc_provider.issuer, "audience": AUDIENCE}
    push = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git push --force origin main"},
        "cwd": str(project.root),
    }

    async def hook() -> dict:
        async with httpx2.AsyncClient() as http:
            answer = await http.post(
                f"{origin}/hook/claude/PreToolUse", json=push, headers={"Authorization": f"Bearer {ada}"}
            )
        assert answer.status_code == 200, answer.text
        stdout = answer.json()["stdout"]
        said = json.loads(stdout).get("hookSpecificOutput", {}) if stdout else {}
        return {"permissionDecision": "allow", **said}

    async with team_server(project, None, approvers="ada,grace", hook=hook_endpoint, **secrets) as origin:
        denied = await hook()
        assert denied["permissionDecision"] == "deny", denied
        call_id = re.search(r"\bcall_[0-9a-f]{10}\b", denied["permissionDecisionReason"]).group(0)
        assert "second person" in denied["permissionDecisionReason"]

        async def approve(user: str) -> httpx2.Response:
            async with sign_in(origin, oidc_provider, user) as browser:
                page = await browser.get("/ui/waiting")
                csrf = re.search(r'data-csrf="([^"]+)"', page.text).group(1)
                fields = {"csrf": csrf, "answer": "approve"}
                return await browser.post(f"/ui/waiting/calls/{call_id}", data=fields, headers={"origin": origin})

        own = await approve("ada")
        assert "the call is yours" in own.text, own.text
        assert (await hook())["permissionDecision"] == "deny"  # still waiting: ada's yes did not count

        second = await approve("grace")
        assert second.status_code == 303, second.text
        assert (await hook())["permissionDecision"] == "allow"  # the identical call, once
        assert (await hook())["permissionDecision"] == "deny"  # and once only
