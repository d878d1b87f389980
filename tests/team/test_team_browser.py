"""The team server as a person runs it (`abilities-mcp serve --http`, a real process) with a real OpenID provider, and
its run page in a real headless Chromium: a developer's agent starts a run with their token; on the page, signed in
through the provider's own login page, that developer's Approve is refused (four eyes); a second approver's goes
through and the run completes."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import httpx2
import pytest
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import Browser, Page, expect

from browser_support import chromium
from provider_support import user_token
from support import cli, stored_run, until
from team_support import AUDIENCE, DEPLOY, free_port, team_client

SHOWN_MS = 15_000
SETTLE_SECONDS = 30

expect.set_options(timeout=SHOWN_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def team(root, write, oidc_provider, tmp_path) -> Iterator[str]:
    """`abilities-mcp serve --http` on the project, as whoever runs the team server starts it; SIGTERM stops it."""
    write("deploy", DEPLOY)
    port = free_port()
    env = {
        **os.environ,
        "ABILITIES_OIDC_CLIENT_ID": oidc_provider.server.client_id,
        "ABILITIES_OIDC_CLIENT_SECRET": oidc_provider.server.secret,
    }
    serve = [
        "serve",
        "--http",
        f"127.0.0.1:{port}",
        "--issuer",
        oidc_provider.issuer,
        "--approvers",
        "ada,grace",
        "--audience",
        AUDIENCE,
    ]
    args = cli(root, *serve)
    log = (tmp_path / "team.log").open("w+b")
    proc = subprocess.Popen(args, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    origin = f"http://127.0.0.1:{port}"
    try:
        _blocking(until, lambda: _answers(origin, proc, log), SETTLE_SECONDS)
        yield origin
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(SETTLE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log.close()


def _answers(origin: str, proc: subprocess.Popen, log) -> bool:
    """The team server answers (its metadata); a server that exited fails with what it printed."""
    try:
        return httpx2.get(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=2).status_code == 200
    except httpx2.TransportError:
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"the team server exited: {log.read().decode()}")
        return False


def start_run(origin: str, token: str) -> str:
    """The developer's agent starts the ability over MCP with their token: the run waits for an approval."""

    async def start() -> str:
        async with team_client(origin, token) as agent:
            run = (await agent.call_tool("ability_run", {"name": "deploy", "wait_seconds": 20})).structured_content
            assert run["status"] == "awaiting_approval", run
            return run["run_id"]

    return _blocking(start)


def _blocking(function, *args):
    """An async function run to its end from this test's thread (sync Playwright keeps an event loop of its own here)."""
    with start_blocking_portal() as portal:
        return portal.call(function, *args)


def _finished(root, run_id: str):
    record = stored_run(root, run_id)
    return record if record.status in ("completed", "failed", "cancelled") else None


def signed_in(browser: Browser, origin: str, user: str) -> Page:
    """A browser window signed in to the team page as `user` through the provider's own login and consent pages."""
    page = browser.new_context(base_url=origin).new_page()
    page.goto("/ui/waiting")  # no session: off to the provider
    page.fill("input[name=login]", user)
    page.fill("input[name=password]", "any password")
    page.click("button[type=submit]")
    page.click("button[type=submit]")  # consent
    page.wait_for_url(f"{origin}/ui/waiting")
    return page


def test_the_starter_is_refused_on_the_page_and_a_second_approver_completes_the_run(browser, team, root, oidc_provider):
    run_id = start_run(team, user_token(oidc_provider, "ada", resource=AUDIENCE))

    ada = signed_in(browser, team, "ada")
    item = ada.locator(f"#ask-{run_id}")
    expect(item).to_be_visible()
    item.get_by_role("button", name="Approve").click()
    expect(ada.get_by_text("started this run")).to_be_visible()
    assert stored_run(root, run_id).status == "awaiting_approval"

    grace = signed_in(browser, team, "grace")
    grace.locator(f"#ask-{run_id}").get_by_role("button", name="Approve").click()
    record = _blocking(until, lambda: _finished(root, run_id), SETTLE_SECONDS)
    assert record.status == "completed", record
    assert any("signed in as grace@example.test" in a["detail"] for a in record.answers)
