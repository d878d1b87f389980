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

from ..engine.core import Engine
from ..state.identities import ACTING, Identity
from ..state.store import Store
from .session import Session
from .tokens import identity_of

# Sessions kept for callers; the least recently used is forgotten past this (its records stay in the store).
MAX_SESSIONS = 4096
SESSION_HEADER = "mcp-session-id"


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
