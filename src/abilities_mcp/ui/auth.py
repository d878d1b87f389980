"""Who gets into the page: its secret prefix, the one-time login link, the session cookie, and the checks every
request passes.

Only the person who typed `abilities-mcp ui` holds the link (printed to their terminal, kept in this process's memory
only, used once, lapsing). Every page lives under a secret path prefix minted by the process, `/s/<prefix>/`, which
is in that link and nowhere else; a request for any other path is a bare 404, before any other check. The link buys
one session: an HttpOnly, SameSite=Strict cookie scoped to the prefix (`Path=/s/<prefix>/`), so the browser sends it
to no other URL of 127.0.0.1, whatever the port (cookies do not tell ports apart; paths they do). Every request must
name this server in its Host header (a DNS-rebinding page names its own); every request but the login and the static
files must carry the cookie; every change (POST) must also come from the page itself (Origin, else a Referer under
the prefix) and carry the session's CSRF token. A request that fails a check is answered 401 or 403 before any route
runs: nothing changes. Every response carries the headers that keep it out of frames and other origins.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs

COOKIE = "abilities_ui"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# How long the printed login link works (a person opens it right away; a link found later in a scrollback must not).
TOKEN_SECONDS = 600.0
# The largest body a change may carry: the answer forms are a few fields.
MAX_BODY_BYTES = 64 * 1024
# Random bytes in the page's path prefix (22 characters): as unguessable as a session id needs, short in the link.
PREFIX_BYTES = 16
# Every page is under /s/<prefix>/; these paths are within it.
PREFIX_ROOT = "/s/"
# Paths anyone who has the prefix may read without a session: the stylesheet and the script, which hold no data.
PUBLIC_PREFIX = "/static/"
LOGIN_PATH = "/login"
# Where a team page's browser comes back from the provider (ui/signin.py): public, like the login.
CALLBACK_PATH = "/callback"
SAFE_METHODS = ("GET", "HEAD")
HEADERS = {
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cross-origin-resource-policy": "same-origin",
}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# Renders a refusal page: (status, title, message) -> HTML.
Refusal = Callable[[int, str, str], str]


@dataclass
class Session:
    """One browser's way in: its cookie value and the token its changes carry."""

    session_id: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    started_at: float = field(default_factory=time.time)


class Gate:
    """The page's secret prefix, the login link and the sessions it opened, for a server on 127.0.0.1:`port`."""

    def __init__(
        self,
        port: int,
        token_seconds: float = TOKEN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        *,
        printed_link: bool = True,
    ):
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.hosts = (f"127.0.0.1:{port}", f"localhost:{port}")
        # Memory only, never written anywhere, like the token: only the printed link carries it.
        self.prefix = secrets.token_urlsafe(PREFIX_BYTES)
        self.base = f"{PREFIX_ROOT}{self.prefix}"  # every page's path starts with this and a slash
        self.home = f"{self.origin}{self.base}/"
        self._clock = clock
        # memory only, never written anywhere; none for a page the MCP server hosts (it mints links as it asks)
        self._token: str | None = secrets.token_urlsafe(32) if printed_link else None
        self._token_expires = clock() + token_seconds
        # One-time links to one place within the page (server/page.py: the waiting page's item for a question),
        # token -> (expiry, target path within the page): memory only too.
        self._links: dict[str, tuple[float, str]] = {}
        self.sessions: dict[str, Session] = {}

    def login_url(self) -> str:
        """The link to print, once; raises when the token is spent."""
        if self._token is None:
            raise RuntimeError("the login link was used already")
        return f"{self.origin}{self.base}{LOGIN_PATH}?token={self._token}"

    def mint(self, target: str, seconds: float = TOKEN_SECONDS) -> str:
        """A further one-time login token whose login lands on `target`, a path within the page the caller fixes
        (`/waiting#ask-RUN`), never one a request names: no open redirect. Kept in memory only, like the first."""
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            raise ValueError(f"not a path within the page: {target!r}")
        token = secrets.token_urlsafe(32)
        self._links[token] = (self._clock() + seconds, target)
        return token

    def link(self, token: str) -> str:
        """The login link for a minted token."""
        return f"{self.origin}{self.base}{LOGIN_PATH}?token={token}"

    def revoke(self, token: str) -> None:
        """A minted token no longer logs in (its question was answered some other way, or the person declined)."""
        self._links.pop(token, None)

    def within(self, path: str) -> str | None:
        """Where `path` is within the page (`/waiting` for `/s/<prefix>/waiting`), or None when it is not under the
        page's prefix (compared in constant time, as the token and the session are)."""
        if not path.startswith(PREFIX_ROOT):
            return None
        prefix, slash, rest = path[len(PREFIX_ROOT) :].partition("/")
        if not slash or not hmac.compare_digest(prefix.encode(), self.prefix.encode()):
            return None
        return "/" + rest

    def login(self, token: str) -> Session | None:
        """A new session for the valid token, which is spent by it; None for any other token, or a late one."""
        found = self.login_to(token)
        return found[0] if found is not None else None

    def login_to(self, token: str) -> tuple[Session, str] | None:
        """login, with where the link lands within the page: `/` (the runs) for the printed link, a minted link's
        own target."""
        now = self._clock()
        wanted = self._token
        if wanted is not None and hmac.compare_digest(token.encode(), wanted.encode()):
            self._token = None  # spent, also when it came too late: a link is tried once
            return self._open() if now < self._token_expires else None
        minted = next((t for t in list(self._links) if hmac.compare_digest(token.encode(), t.encode())), None)
        if minted is None:
            return None  # a wrong token does not spend the person's link
        expires, target = self._links.pop(minted)
        for lapsed in [t for t, (at, _) in self._links.items() if at <= now]:
            del self._links[lapsed]
        return self._open(target) if now < expires else None

    def _open(self, target: str = "/") -> tuple[Session, str]:
        session = Session()
        self.sessions[session.session_id] = session
        return session, target

    def session(self, cookie_header: str | None) -> Session | None:
        """The session the request's cookie names, or None."""
        return cookie_session(self.sessions, cookie_header)

    def host_ok(self, host: str | None) -> bool:
        """The Host header names this server (a page on another name resolving here names that name)."""
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None, referer: str | None) -> bool:
        """The change comes from this server's page: its Origin, else (none sent) a Referer under its prefix."""
        return from_page(origin, referer, self.origin, self.home)

    def cookie_header(self, session: Session) -> str:
        """Set-Cookie for a session: not readable by scripts, never sent from another site, sent only to the page's
        prefix (no other server on 127.0.0.1 gets it, whatever its port); no Secure, as this is plain http on
        loopback."""
        return f"{COOKIE}={session.session_id}; HttpOnly; SameSite=Strict; Path={self.base}/"


S = TypeVar("S", bound=Session)


def cookie_session(sessions: dict[str, S], cookie_header: str | None) -> S | None:
    """The session a request's cookie names among `sessions` (compared in constant time), or None."""
    value = _cookie(cookie_header or "", COOKIE)
    if not value:
        return None
    return next((s for sid, s in sessions.items() if hmac.compare_digest(sid.encode(), value.encode())), None)


def from_page(origin: str | None, referer: str | None, own_origin: str, home: str) -> bool:
    """A change comes from the page itself: its Origin, else (none sent) a Referer under the page's address."""
    if origin is not None:
        return origin == own_origin
    return referer is not None and referer.startswith(home)


def csrf_ok(session: Session, header: str | None, body: bytes, content_type: str) -> bool:
    """The change carries the session's token: in the X-CSRF-Token header, or the form's `csrf` field."""
    if header is not None:
        return hmac.compare_digest(header.encode(), session.csrf.encode())
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return False
    try:
        sent = parse_qs(body.decode("utf-8"), strict_parsing=False).get(CSRF_FIELD, [])
    except (UnicodeDecodeError, ValueError):
        return False
    return len(sent) == 1 and hmac.compare_digest(sent[0].encode(), session.csrf.encode())


def _cookie(header: str, name: str) -> str | None:
    """One cookie's value from a Cookie header, read by hand: cookies ignore ports, so other pages on 127.0.0.1 may
    have left cookies here that http.cookies would stop at, losing ours after them."""
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip().strip('"')
    return None


class Guard:
    """ASGI middleware: every request passes the gate's checks before the app sees it; every answer gets the
    headers. The app (its routes under the gate's prefix) finds the request's session in
    `scope["state"]["session"]`."""

    def __init__(self, app: ASGIApp, gate: Gate, refusal: Refusal):
        self.app, self.gate, self.refusal = app, gate, refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = self.gate.within(scope["path"])
        send = _with_headers(send, path is not None and path.startswith(PUBLIC_PREFIX))
        if path is None:  # not the page: nothing, not even a refusal page (it would name the prefix)
            return await _nothing(send)
        headers = _headers(scope)
        if not self.gate.host_ok(headers.get("host")):
            return await self._refuse(send, 403, "Wrong address", _WRONG_HOST)
        method = scope["method"]
        if method not in (*SAFE_METHODS, "POST"):
            return await self._refuse(send, 405, "Not allowed", "This page only reads, or answers with its forms.")
        public = path.startswith(PUBLIC_PREFIX) or path in (LOGIN_PATH, CALLBACK_PATH)
        if public and method in SAFE_METHODS:
            return await self.app(scope, receive, send)
        session = self.gate.session(headers.get("cookie"))
        if session is None and getattr(self.gate, "team", False) and method in SAFE_METHODS:
            return await _redirect(send, f"{self.gate.base}{LOGIN_PATH}")  # the team page: off to sign in
        if session is None:
            return await self._refuse(send, 401, "Log in first", _NO_SESSION)
        scope.setdefault("state", {})["session"] = session
        if method in SAFE_METHODS:
            return await self.app(scope, receive, send)
        if not self.gate.origin_ok(headers.get("origin"), headers.get("referer")):
            return await self._refuse(send, 403, "Refused", _FOREIGN_ORIGIN)
        body = await _body(receive)
        if body is None:
            return await self._refuse(send, 413, "Too large", "The form sent more than an answer needs.")
        if not csrf_ok(session, headers.get(CSRF_HEADER), body, headers.get("content-type", "")):
            return await self._refuse(send, 403, "Refused", _NO_CSRF)
        await self.app(scope, _replay(body, receive), send)

    async def _refuse(self, send: Send, status: int, title: str, message: str) -> None:
        page = self.refusal(status, title, message).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", b"%d" % len(page))],
            }
        )
        await send({"type": "http.response.body", "body": page})


async def _redirect(send: Send, location: str) -> None:
    await send({"type": "http.response.start", "status": 303, "headers": [(b"location", location.encode())]})
    await send({"type": "http.response.body", "body": b""})


async def _nothing(send: Send) -> None:
    """A bare 404: no body, no page, no hint of the prefix."""
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


_WRONG_HOST = (
    "This server answers only at 127.0.0.1 or localhost on its own port. A page that reached it under another name "
    "is not the page abilities-mcp ui serves."
)
_NO_SESSION = (
    "This page is only for the person who started it. Run `abilities-mcp ui` in your terminal and open the link it "
    "prints (each link works once)."
)
_FOREIGN_ORIGIN = (
    "A change must come from this page itself (its Origin header, or its Referer, names this server); this one did "
    "not, so nothing was changed."
)
_NO_CSRF = "The form did not carry this page's token, so nothing was changed. Reload the page and answer again from it."


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; one sent twice counts as garbage, never as the first one."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        out[name] = "\0twice" if name in out and name != "cookie" else value
    return out


def _with_headers(send: Send, public: bool) -> Send:
    """`send` that adds the security headers to the response, and no-store to every page (static files: no-cache)."""

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            extra = {**HEADERS, "cache-control": "no-cache" if public else "no-store"}
            kept = [(k, v) for k, v in message.get("headers", []) if k.decode("latin-1").lower() not in extra]
            message = {**message, "headers": kept + [(k.encode(), v.encode()) for k, v in extra.items()]}
        await send(message)

    return sending


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None past MAX_BODY_BYTES."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app the body already read, then whatever comes next (a disconnect)."""
    sent = False

    async def replaying() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replaying
