"""The team server's endpoint for its callers' client hooks: `POST /hook/CLIENT/EVENT` (docs/team.md).

A client in team mode runs `abilities-mcp hook CLIENT EVENT --url URL` (clients/remote.py), which posts the client's
hook payload, as the client sent it, here. The caller is whoever the bearer token names (the same token, checked by
the same verifier, as at /mcp); the payload is decided by the local hook's own code (clients/hook.py `main`) against
this server's project and state, with the payload's session filed under the caller's own (`<owner>:<id>`, as the MCP
tools file theirs: server/session.py), and the answer is what that hook printed and its exit code:

    200 {"stdout": "…", "stderr": "…", "exit": 0|1|2}    the client's hook prints both and exits with `exit`
    401 {"error": "…"}                                   no token, or one the provider does not vouch for
    404 / 405 / 413                                      an unknown client or event, not a POST, a payload too big

Query parameters (optional): `server`, repeatable, this server's names in the caller's client configs (only the
caller's machine has them: a call of one of its tools there is this server's own); `url`, the address the caller's
configs reach this server by (Cursor names a server by its url).

Here, in cli/, because it joins server/ (the app, the token check) and clients/ (the hook), which never import each
other: `serve --http` hands `hook_endpoint` to server/http.py's `create_team_app`.
"""

from __future__ import annotations

import hashlib
import io
import logging
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..clients.hook import Caller
from ..clients.hook import main as hook_main
from ..clients.payloads import event_name
from ..server.tokens import identity_of
from ..state.acting import ACTING
from ..state.project import Project

logger = logging.getLogger(__name__)

# A payload bigger than this is refused: a Write's whole content travels in it, and the local hook reads as much.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024
# The hook's own threads: each decision opens the state and may wait on a writer (bounded by the hook's budget).
MAX_CONCURRENT_HOOKS = 16
PREFIX = "/hook/"


def session_owner(identity_key: str) -> str:
    """The prefix of a caller's sessions: server/session.py's `_team_session` makes the same
    (tests/team/test_team_hooks.py holds the two together)."""
    return hashlib.sha256(identity_key.encode()).hexdigest()[:12]


def hook_endpoint(project: Project, verifier: Any, session_ttl: float | None = None) -> Any:
    """The ASGI app served at /hook/ (server/http.py routes that prefix here)."""
    limiter = anyio.CapacityLimiter(MAX_CONCURRENT_HOOKS)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        response = await _answer(Request(scope, receive), project, verifier, session_ttl, limiter)
        await response(scope, receive, send)

    return app


async def _answer(
    request: Request, project: Project, verifier: Any, session_ttl: float | None, limiter: anyio.CapacityLimiter
) -> JSONResponse:
    client, _, event = request.url.path.removeprefix(PREFIX).partition("/")
    name = event_name(client, event)
    if name is None or "/" in event:
        return _error(404, f"no hook {client!r} {event!r}; the hook URL is /hook/CLIENT/EVENT, as `init --url` wires")
    if request.method != "POST":
        return _error(405, "POST the client's hook payload")
    who = await _identity_key(request, verifier)
    if who is None:
        return _error(401, "a bearer token the team's provider vouches for is needed (the one the client sends /mcp)")
    body = await _body(request)
    if body is None:
        return _error(413, f"the payload is over {MAX_PAYLOAD_BYTES} bytes")
    servers = frozenset(s for s in request.query_params.getlist("server") if s)
    caller = Caller(session_owner(who), servers, request.query_params.get("url", ""))
    decided = await anyio.to_thread.run_sync(
        _decide, project, client, name, body, caller, session_ttl, who, limiter=limiter
    )
    return JSONResponse(decided)


def _decide(project: Project, client: str, event: str, body: str, caller: Caller, ttl: float | None, who: str) -> dict:
    """The local hook's decision, run here: what it prints and its exit code. What it records (a prerequisite
    observed) is recorded as the caller's (`who`, their identity's key), as the MCP tools record theirs."""
    stdout, stderr = io.StringIO(), io.StringIO()
    acting = ACTING.set(who)
    try:
        code = hook_main(
            client,
            event,
            project=project,
            session_ttl=ttl,
            stdin=io.StringIO(body),
            stdout=stdout,
            stderr=stderr,
            caller=caller,
        )
    finally:
        ACTING.reset(acting)
    return {"stdout": stdout.getvalue(), "stderr": stderr.getvalue(), "exit": code}


async def _identity_key(request: Request, verifier: Any) -> str | None:
    """The caller's identity (its key, `issuer#subject`), from a bearer token the verifier accepts and that names a
    person."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    access = await verifier.verify_token(token.strip())
    if access is None or not access.subject or not (access.claims or {}).get("iss"):
        return None
    return identity_of(access).key


async def _body(request: Request) -> str | None:
    """The payload as text, or None past MAX_PAYLOAD_BYTES (counted as it arrives, whatever Content-Length says)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_PAYLOAD_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _error(status: int, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer error="invalid_token"'} if status == 401 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)
