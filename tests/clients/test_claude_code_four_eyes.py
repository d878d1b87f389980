"""The issue's "done when", with the real Claude Code: two team servers on one PostgreSQL, tokens from the real
OpenID provider. Claude Code, holding ada's token, starts an ability on one replica over HTTP; the run waits at a
four-eyes approval; ada's agent cannot approve it, nor can ada on the page; grace, an approver, approves it on the
page of the other replica, and the run completes on its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx2
import pytest
from test_claude_code import ABILITIES_MCP, Session, client_env, init_claude, load, own, run_claude, run_id_from, turn

from abilities_mcp.state.project import Project
from provider_support import OidcProvider, login_in_browser, user_token
from scripted_anthropic import ToolUse, call, say
from support import stored_run, trust_project
from team_support import AUDIENCE, DEPLOY, free_port

START_TIMEOUT_SECONDS = 30.0
SETTLE_SECONDS = 30.0


def start_replica(root: Path, state: str, provider: OidcProvider, env: dict[str, str], approvers: str) -> tuple:
    """`abilities-mcp serve --http` on a free port, on the shared state; returns (process, origin) once it answers."""
    port = free_port()
    server_env = {
        **env,
        "ABILITIES_OIDC_CLIENT_ID": provider.server.client_id,
        "ABILITIES_OIDC_CLIENT_SECRET": str(provider.server.secret),
    }
    args = ["--root", str(root), "--state", state, "serve", "--http", f"127.0.0.1:{port}", "--issuer", provider.issuer]
    process = subprocess.Popen(
        [str(ABILITIES_MCP), *args, "--approvers", approvers, "--audience", AUDIENCE],
        env=server_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    origin = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:  # bounded: a replica that exits or stays silent fails the test
        try:
            if httpx2.get(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=2).status_code == 200:
                return process, origin
        except httpx2.TransportError:
            pass
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        assert time.monotonic() < deadline, "the team server did not start"
        time.sleep(0.1)


def page_answer(origin: str, provider: OidcProvider, user: str, run_id: str) -> httpx2.Response:
    """`user` signs in to the replica's page through the provider's own pages and presses Approve for the run."""
    with httpx2.Client(base_url=origin, timeout=20) as browser:
        leave = browser.get("/ui/login")
        back = login_in_browser(provider, urljoin(origin, leave.headers["location"]), user)
        assert browser.get(back).status_code == 303
        page = browser.get("/ui/waiting").text
        csrf = page.split('data-csrf="', 1)[1].split('"', 1)[0]
        question = page.split('name="question" value="', 1)[1].split('"', 1)[0]
        fields = {"csrf": csrf, "step": "second", "question": question, "answer": "approve"}
        return browser.post(f"/ui/waiting/runs/{run_id}", data=fields, headers={"origin": origin})


@pytest.fixture(scope="module")
def four_eyes(
    tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider, postgres_cluster
) -> Iterator[tuple[Session, Project, list[str]]]:
    base = tmp_path_factory.mktemp("claude-four-eyes")
    team_root = base / "team-project"
    (team_root / "abilities").mkdir(parents=True)
    (team_root / "abilities" / "deploy.yaml").write_text(textwrap.dedent(DEPLOY))
    project = Project.resolve(team_root, base / "team-state", state=postgres_cluster.fresh_schema())
    trust_project(project)
    env = client_env(base / "server")
    replicas = [start_replica(team_root, project.state_url, oidc_provider, env, "ada,grace") for _ in range(2)]
    try:
        root = base / "project"  # ada's checkout
        root.mkdir()
        init_claude(root, "--url", replicas[0][1])
        session = run_claude(
            base,
            root,
            "Deploy, and approve it yourself.",
            [
                call(load(own("ability_run"), own("ability_approve"))),
                call(ToolUse(own("ability_run"), {"name": "deploy", "wait_seconds": 20}, id="toolu_run")),
                turn(
                    lambda r: [
                        ToolUse(
                            own("ability_approve"),
                            {"run_id": run_id_from(r), "step_id": "second", "approved": True},
                            id="toolu_approve",
                        )
                    ]
                ),
                say("A second person has to approve it."),
            ],
            env={"ABILITIES_TOKEN": user_token(oidc_provider, "ada", resource=AUDIENCE)},
        )
        yield session, project, [origin for _, origin in replicas]
    finally:
        for process, _ in replicas:
            os.killpg(process.pid, signal.SIGTERM)
        for process, _ in replicas:
            process.wait(timeout=30)
            if process.stderr is not None:
                process.stderr.close()


def test_the_run_waits_at_four_eyes_and_the_agent_cannot_approve_it(four_eyes, oidc_provider) -> None:
    session, project, _ = four_eyes
    run = json.loads(session.result("toolu_run").text)
    assert run["status"] == "awaiting_approval" and run["current_step"]["id"] == "second", run
    refused = session.result("toolu_approve")
    assert refused.is_error, refused.text
    record = stored_run(project.root, run["run_id"], project.state_location)
    assert record.status == "awaiting_approval" and record.started_by == f"{oidc_provider.issuer}#ada"


def test_ada_is_refused_on_the_page_and_grace_completes_the_run_from_the_other_replica(four_eyes, oidc_provider):
    session, project, origins = four_eyes
    run_id = json.loads(session.result("toolu_run").text)["run_id"]
    own_yes = page_answer(origins[1], oidc_provider, "ada", run_id)
    assert "started this run" in own_yes.text, own_yes.text
    assert stored_run(project.root, run_id, project.state_location).status == "awaiting_approval"

    second = page_answer(origins[1], oidc_provider, "grace", run_id)
    assert second.status_code == 303, second.text
    deadline = time.monotonic() + SETTLE_SECONDS
    while (record := stored_run(project.root, run_id, project.state_location)).status != "completed":
        assert record.status in ("running", "awaiting_approval") and time.monotonic() < deadline, record
        time.sleep(0.1)
    trail = [a["detail"] for a in record.answers if a["step_id"] == "second"]
    assert len(trail) == 1 and "signed in as grace@example.test" in trail[0], trail
