"""The MCP Inspector's CLI, a third-party client, against two team servers on one PostgreSQL over streamable HTTP,
with a real token from the OpenID provider: it lists the tools, starts a run on one replica and reads it on the
other; without the token it gets nowhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from abilities_mcp.state.project import Project
from provider_support import user_token
from team_support import AUDIENCE, DEPLOY, team_server

pytestmark = pytest.mark.anyio

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
INSPECTOR_TIMEOUT_SECONDS = 300
# Captured at import, before the tests point HOME at a scratch folder: npx keeps its downloads in the real cache.
NPM_CACHE = Path(os.environ.get("npm_config_cache") or Path(os.environ.get("HOME", "~")).expanduser() / ".npm")


@pytest.fixture
def npx() -> str:
    found = shutil.which("npx")
    if found is None:
        if os.environ.get("ABILITIES_REQUIRE_INSPECTOR"):
            pytest.fail("ABILITIES_REQUIRE_INSPECTOR is set but npx is not on PATH; install Node.js")
        pytest.skip("npx is not installed (set ABILITIES_REQUIRE_INSPECTOR=1 to make this a failure)")
    return found


async def inspect(npx: str, url: str, token: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    headers = ["--header", f"Authorization: Bearer {token}"] if token else []
    command = [npx, "-y", INSPECTOR, "--cli", url, "--transport", "http", *headers, *args, "--format", "json", "-q"]
    env = {**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"}
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run(command, capture_output=True, text=True, timeout=INSPECTOR_TIMEOUT_SECONDS, env=env)
    )


def ok(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["result"]


async def test_the_inspector_drives_two_replicas_on_one_postgresql_with_a_providers_token(
    npx, root, write, postgres_url, oidc_provider
):
    write("deploy", DEPLOY)
    project = Project.resolve(root, state=postgres_url)
    token = await anyio.to_thread.run_sync(lambda: user_token(oidc_provider, "ada", resource=AUDIENCE))
    server = {"client_id": oidc_provider.server.client_id, "client_secret": oidc_provider.server.secret}
    server |= {"audience": AUDIENCE}  # both replicas: one service to the provider
    async with (
        team_server(project, None, issuer=oidc_provider.issuer, **server) as one,
        team_server(project, None, issuer=oidc_provider.issuer, **server) as two,
    ):
        listed = ok(await inspect(npx, f"{one}/mcp", token, "--method", "tools/list"))
        assert {"ability_run", "ability_status", "ability_approve"} <= {t["name"] for t in listed["tools"]}

        started = ok(
            await inspect(
                npx,
                f"{one}/mcp",
                token,
                "--method",
                "tools/call",
                "--tool-name",
                "ability_run",
                "--tool-arg",
                "name=deploy",
                "--tool-arg",
                "wait_seconds=10",
            )
        )
        run = started["structuredContent"]
        assert run["status"] == "awaiting_approval", started

        seen = ok(
            await inspect(
                npx,
                f"{two}/mcp",
                token,
                "--method",
                "tools/call",
                "--tool-name",
                "ability_status",
                "--tool-arg",
                f"run_id={run['run_id']}",
            )
        )
        assert seen["structuredContent"]["status"] == "awaiting_approval"
        assert seen["structuredContent"]["current_step"]["id"] == "second"

        refused = await inspect(npx, f"{two}/mcp", None, "--method", "tools/list")
        assert refused.returncode != 0
        # refused with 401 and the metadata, the Inspector turns to OAuth with the provider it names: no TTY here
        assert "auth_required" in refused.stderr, refused.stderr
