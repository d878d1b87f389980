"""A team server in the test's own event loop: uvicorn on a free loopback port, and MCP clients holding a token."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken

from abilities_mcp.server.http import Listen, TeamOptions, create_team_app
from abilities_mcp.state.identities import Approvers
from abilities_mcp.state.project import Project
from support import TEST_RETRY_BASE

ISSUER = "http://issuer.test"
# The audience the tests' team servers take tokens for (RFC 8707), shared by replicas on different ports.
AUDIENCE = "http://abilities.test/mcp"
# An ability whose approval needs four eyes: a build, a second person's yes, then the ship it guards.
DEPLOY = """\
description: Deploy with a second person's yes
steps:
  - id: build
    type: script
    run: echo built
  - id: second
    type: approval
    approval: four-eyes
    prompt: Ship it?
    needs: [build]
  - id: ship
    type: script
    run: echo shipped
    needs: [second]
"""


class Tokens:
    """A verifier for tests that do not need a real provider: each token names a user of ISSUER."""

    def __init__(self, **users: str):
        self.users = users  # token → subject

    async def verify_token(self, token: str) -> AccessToken | None:
        subject = self.users.get(token)
        if subject is None:
            return None
        claims = {"iss": ISSUER, "sub": subject, "email": f"{subject}@example.test", "email_verified": True}
        return AccessToken(
            token=token,
            client_id="agent",
            scopes=["openid"],
            subject=subject,
            claims=claims,
            expires_at=int(time.time()) + 3600,
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def team_options(
    port: int, issuer: str = ISSUER, approvers: str = "", audience: str | None = None, **secrets: str
) -> TeamOptions:
    return TeamOptions(
        Listen.parse(f"127.0.0.1:{port}"),
        issuer,
        secrets.get("client_id", "abilities"),
        secrets.get("client_secret", "secret"),
        Approvers.parse(approvers),
        audience,
    )


@asynccontextmanager
async def team_server(
    project: Project, verifier: Any, approvers: str = "", hook: Any = None, **options: Any
) -> AsyncIterator[str]:
    """Serve the project as a team server until the block ends; yields its origin (http://127.0.0.1:PORT). `hook`:
    the client hooks' endpoint (cli/team_hooks.py `hook_endpoint`), as `serve --http` serves it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings = team_options(port, approvers=approvers, **options)
    app = create_team_app(project, settings, verifier, hook=hook, retry_base=TEST_RETRY_BASE)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


@asynccontextmanager
async def team_client(origin: str, token: str | None, **options: Any) -> AsyncIterator[Client]:
    """An MCP client of the team server's /mcp, sending `token` as its bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(f"{origin}/mcp", http_client=http), **options) as client:
            yield client
