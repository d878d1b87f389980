"""The real Claude Code in team mode: `abilities-mcp init claude --url` against a team server (`serve --http`, its
tokens from the real OpenID provider) serves the ability tools over HTTP with the person's token, and the hooks ask
the team server, which denies a Bash call until its prerequisite ran (docs/team.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from test_claude_code import ABILITIES_MCP, HELLO, Session, bash, client_env, init_claude, load, own, run_claude

from abilities_mcp.cli.team_hooks import session_owner
from abilities_mcp.state.project import Project
from provider_support import OidcProvider, user_token
from scripted_anthropic import ToolUse, call, say
from support import stored_run, trust_project
from team_support import AUDIENCE, free_port

READ_BEFORE_BASH = {
    "read-first": {
        "description": "Read the README before running a command",
        "triggers": {"tools": ["Bash"]},
        "prerequisites": [{"step": 1, "tool": "Read", "description": "Read the README"}],
        "mode": "enforce",
    }
}
START_TIMEOUT_SECONDS = 30.0


@dataclass
class TeamServer:
    origin: str
    project: Project


def serve_team(base: Path, provider: OidcProvider) -> Iterator[TeamServer]:
    """`abilities-mcp serve --http` on a free port, for a project of its own (the team's), until the block ends."""
    root = base / "team-project"
    (root / "abilities").mkdir(parents=True)
    (root / "abilities" / "hello.yaml").write_text(textwrap.dedent(HELLO))
    (root / "workflows.json").write_text(json.dumps(READ_BEFORE_BASH))
    project = Project.resolve(root, base / "team-state")
    trust_project(project)
    port = free_port()
    env = {
        **client_env(base / "server"),
        "ABILITIES_OIDC_CLIENT_ID": provider.server.client_id,
        "ABILITIES_OIDC_CLIENT_SECRET": str(provider.server.secret),
    }
    args = ["--root", str(root), "--state-dir", str(project.state_dir), "serve", "--http", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        [str(ABILITIES_MCP), *args, "--issuer", provider.issuer, "--audience", AUDIENCE],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                if httpx2.get(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "the team server did not start"
            time.sleep(0.1)
        yield TeamServer(origin, project)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


@pytest.fixture(scope="module")
def team_run(
    tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[tuple[Session, TeamServer]]:
    base = tmp_path_factory.mktemp("claude-team")
    token = user_token(oidc_provider, "ada", resource=AUDIENCE)
    for server in serve_team(base, oidc_provider):
        root = base / "project"  # the developer's checkout: no abilities, no workflows.json of its own
        root.mkdir()
        (root / "README.txt").write_text("A developer's checkout.\n")
        init_claude(root, "--url", server.origin)
        session = run_claude(
            base,
            root,
            "Run the hello ability, then check with the shell.",
            [
                call(load(own("ability_run"))),
                call(ToolUse(own("ability_run"), {"name": "hello"}, id="toolu_run")),
                call(bash("echo early", "toolu_bash_early")),
                call(ToolUse("Read", {"file_path": str(root / "README.txt")}, id="toolu_read")),
                call(bash("echo after", "toolu_bash")),
                say("Done."),
            ],
            env={"ABILITIES_TOKEN": token},
        )
        yield session, server


def test_init_url_writes_the_http_server_with_the_token_from_the_environment(team_run) -> None:
    session, server = team_run
    entry = json.loads((session.root / ".mcp.json").read_text())["mcpServers"]["abilities"]
    assert entry == {
        "type": "http",
        "url": f"{server.origin}/mcp",
        "headers": {"Authorization": "Bearer ${ABILITIES_TOKEN}"},
    }
    hooks = json.loads((session.root / ".claude" / "settings.json").read_text())["hooks"]
    assert hooks["PreToolUse"][0]["hooks"][0]["command"].endswith(f"hook claude PreToolUse --url {server.origin}")


def test_the_ability_runs_on_the_team_server_as_the_person_the_token_names(team_run, oidc_provider) -> None:
    session, server = team_run
    result = session.result("toolu_run")
    assert not result.is_error, result.text
    run = json.loads(result.text)
    assert run["status"] == "completed", run
    record = stored_run(server.project.root, run["run_id"], server.project.state_db)
    assert record.started_by == f"{oidc_provider.issuer}#ada"
    owner, _, named = record.session_id.partition(":")
    assert owner == session_owner(f"{oidc_provider.issuer}#ada")
    # What Claude Code sends over HTTP: no _meta.sessionID on tools/call, so the run is filed under the connection's
    # own session (http-…), which its hooks cannot name: they fall back to the person's newest live run.
    assert named.startswith("http-"), record.session_id
    assert named != session.session_id


def test_bash_is_denied_by_the_team_hook_until_its_prerequisite_ran(team_run) -> None:
    session, _ = team_run
    early = session.result("toolu_bash_early")
    assert early.is_error and "abilities-mcp: Denied: 'Bash' may not run yet." in early.text, early.text
    assert "Read (step 1: Read the README)" in early.text
    assert not session.result("toolu_read").is_error
    after = session.result("toolu_bash")
    assert not after.is_error and after.text == "after", after.text
