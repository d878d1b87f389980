"""The team server: the MCP server over streamable HTTP at `/mcp`, an OAuth 2.1 resource server whose callers are
people the team's OpenID provider vouches for (`abilities-mcp serve --http HOST:PORT --issuer URL`).

Both protocol eras are the SDK's: a handshake-era client gets a session (`Mcp-Session-Id`), a 2026-07-28 request is
served alone, stateless. Every request carries a bearer token the SDK's middleware checks with server/tokens.py
before anything of ours runs; a request without one is answered 401 with the RFC 9728 metadata's address, which
names the provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from ..state.identities import Approvers
from ..state.project import Project
from .app import create_server
from .hub import OwnRuns, Team

MCP_PATH = "/mcp"
PAGE_PATH = "/ui"
HOOK_PATH = "/hook"
# How long a stopping server waits for open connections (event streams never close by themselves).
GRACE_SECONDS = 3


@dataclass(frozen=True)
class Listen:
    """Where the team server listens and how callers reach it."""

    host: str
    port: int
    public_url: str  # the origin callers use, e.g. https://abilities.example.com (no path)

    @classmethod
    def parse(cls, address: str, public_url: str | None = None) -> Listen:
        """`HOST:PORT` (`[::1]:8080` for IPv6); ValueError naming the form otherwise."""
        host, sep, port = address.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--http {address!r}: give HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080")
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        url = (public_url or f"http://{shown}:{port}").rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
            raise ValueError(f"--public-url {url!r}: give the origin callers use, e.g. https://abilities.example.com")
        return cls(host, int(port), url)


@dataclass(frozen=True)
class TeamOptions:
    """Everything `serve --http` needs besides the project."""

    listen: Listen
    issuer: str
    client_id: str
    client_secret: str
    approvers: Approvers
    # What a token's audience must name: this server's MCP endpoint (RFC 8707, as the MCP authorization spec asks)
    # unless the provider names its resource servers otherwise (Keycloak: a client id).
    audience: str | None = None

    @property
    def resource(self) -> str:
        return self.audience or self.listen.public_url + MCP_PATH


def create_team_app(
    project: Project, options: TeamOptions, verifier: Any = None, hook: Any = None, **server_options: Any
) -> Any:
    """The team server's ASGI app: MCP at /mcp behind the bearer check, the run page at /ui/ behind the provider's
    sign-in. `hook(project, verifier, session_ttl)`: the ASGI app of the client hooks' endpoint, served at /hook/
    (cli/team_hooks.py, passed in by the CLI: server/ and clients/ do not import each other)."""
    if verifier is None:
        from .tokens import IntrospectionVerifier

        # only a token issued for this server: one the provider gave another app of the team's is no key here
        verifier = IntrospectionVerifier(
            options.issuer, options.client_id, options.client_secret, resource=options.resource
        )
    team = Team(options.issuer, options.listen.public_url + MCP_PATH, verifier)
    server = create_server(project, team=team, **server_options)
    server._lowlevel_server.middleware.append(OwnRuns())  # no public add: a caller changes only their own runs
    mcp = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=_security(options.listen), host=options.listen.host
    )
    hooks = hook(project, verifier, server_options.get("session_ttl")) if hook is not None else None
    return _Split(mcp, _page(project, options, server_options.get("session_ttl")), hooks)


def _page(project: Project, options: TeamOptions, session_ttl: float | None) -> Any:
    from ..ui.app import create_app
    from ..ui.signin import TeamGate

    gate = TeamGate(
        options.listen.public_url, (options.issuer, options.client_id, options.client_secret), options.approvers
    )
    return create_app(project, gate, session_ttl=session_ttl)


class _Split:
    """ASGI: the page's paths (/ui, /ui/…) to the page, the hooks' (/hook/…) to theirs, everything else (MCP, its
    metadata, the lifespan) to MCP."""

    def __init__(self, mcp: Starlette, page: Any, hooks: Any = None):
        self.mcp, self.page, self.hooks = mcp, page, hooks

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == PAGE_PATH or path.startswith(PAGE_PATH + "/"):
            await self.page(scope, receive, send)
        elif self.hooks is not None and path.startswith(HOOK_PATH + "/"):
            await self.hooks(scope, receive, send)
        else:
            await self.mcp(scope, receive, send)


def _security(listen: Listen) -> TransportSecuritySettings:
    """DNS rebinding protection: only the public host and the address it listens on name this server."""
    public = urlsplit(listen.public_url)
    hosts = {public.netloc, f"{listen.host}:{listen.port}", f"127.0.0.1:{listen.port}", f"localhost:{listen.port}"}
    origins = {f"{public.scheme}://{public.netloc}"}
    return TransportSecuritySettings(allowed_hosts=sorted(hosts), allowed_origins=sorted(origins))


def serve_http(project: Project, options: TeamOptions, **server_options: Any) -> None:
    """Serve until a signal; logs to stderr."""
    import uvicorn

    app = create_team_app(project, options, **server_options)
    uvicorn.run(
        app,
        host=options.listen.host,
        port=options.listen.port,
        log_level="warning",
        log_config=None,
        # open event streams (the page's live runs, MCP's GET stream) never end by themselves: cut them at stop
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
