"""The sessions of a team server over HTTP: one engine for every caller, one Session per caller and connection.

On stdio the server's lifespan is one client's connection, so it yields that connection's Session. Over streamable
HTTP the lifespan is the server's: every caller shares the engine and the store, and each request finds its own
Session here, by the identity its bearer token names (the SDK's auth middleware verified it) and the MCP session
it belongs to (`Mcp-Session-Id`; a 2026-07-28 request has none, and the caller's own session is then the one).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.types import CallToolResult, TextContent

from ..engine.core import Engine
from ..state.acting import ACTING
from ..state.identities import Identity, shown_key
from ..state.store import Store
from .session import Session
from .tokens import identity_of

# Sessions kept for callers; the least recently used is forgotten past this (its records stay in the store).
MAX_SESSIONS = 4096
SESSION_HEADER = "mcp-session-id"
# The tools that change a run: on a team server only the identity that started it (its root's, for a child run) may
# call them. Reading a run (ability_status, ability_history) stays open, as the run page shows every run.
CHANGING_TOOLS = ("ability_step_complete", "ability_approve", "ability_decide", "ability_cancel", "ability_resume")


@dataclass(frozen=True)
class Team:
    """What makes a server a team server: who vouches for callers, and how their tokens are checked."""

    issuer: str  # the OpenID provider's issuer URL, exactly as its discovery document says it
    resource: str  # this server's MCP endpoint as callers reach it (RFC 9728's resource), e.g. https://host/mcp
    verifier: Any  # the SDK's TokenVerifier (server/tokens.py)


class Unidentified(RuntimeError):
    """A request reached a tool without a verified identity: the auth middleware was not in front of it."""


@dataclass
class Hub:
    """What a team server's lifespan yields: the shared engine, and each caller's Session."""

    engine: Engine
    store: Store
    issuer: str
    upstreams: Any = None
    _sessions: OrderedDict[tuple[str, str], Session] = field(default_factory=OrderedDict)

    def session_for(self, request: Any) -> Session:
        """The Session of a request context: the caller's, for this MCP session."""
        identity = self.identity()
        ACTING.set(identity.key)  # what this request writes is recorded as this caller's (state/identities.py)
        headers = getattr(getattr(request, "request", None), "headers", None) or {}
        key = (identity.key, str(headers.get(SESSION_HEADER) or ""))
        session = self._sessions.get(key)
        if session is None:
            session = Session(
                self.engine,
                self.store,
                f"http-{secrets.token_hex(6)}",
                self.upstreams,
                forms_work=False,  # a form's answer would be the token's, not an approver's (engine: team)
                client=None,
                identity=identity,
            )
            self._sessions[key] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(key)
        return session

    def identity(self) -> Identity:
        """The caller, as the verified token names them."""
        token = get_access_token()
        if token is None or not token.subject or not (token.claims or {}).get("iss"):
            raise Unidentified("a team server's tool was called without a verified token naming a person")
        return identity_of(token)


class OwnRuns:
    """Server middleware on a team server: a tools/call that would change a run another identity started (hand back
    its step, cancel, resume it, relay an answer) is refused before the tool runs. Without it anyone holding a token
    could drive a colleague's run: write the output an approval's prompt shows, then approve it as the second pair
    of eyes, since only the starter's yes is refused."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        params = ctx.params or {}
        arguments = params.get("arguments")
        run_id = arguments.get("run_id") if isinstance(arguments, dict) else None
        hub = getattr(ctx, "lifespan_context", None)
        if ctx.method != "tools/call" or params.get("name") not in CHANGING_TOOLS or not isinstance(hub, Hub):
            return await call_next(ctx)
        if not isinstance(run_id, str):
            return await call_next(ctx)  # the tool says what it needs
        record = hub.store.get_run(run_id)
        if record is None:
            return await call_next(ctx)  # the tool says there is no such run
        caller = hub.identity().key
        if record.started_by == caller:
            return await call_next(ctx)
        starter = shown_key(record.started_by) if record.started_by else "a person at the server's own terminal"
        text = (
            f"Refused: run {run_id} was started by {starter}; on a team server only whoever started a run (through "
            f"their own token) hands back its steps, answers, cancels or resumes it (state: {record.status}). "
            f"Legal next call: ability_status(run_id={run_id!r}) to follow it, or ability_run to start your own."
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
