"""Who gets into a team server's page: the person the team's OpenID provider signs in, one session per browser,
and whether they may approve.

The page lives under `/ui/` on the team server's own origin. `/ui/login` sends the browser to the provider
(authorization code with PKCE, `state` and `nonce`: ui/oidc.py); `/ui/callback` takes the code back, learns who
signed in, and opens a session: an HttpOnly, SameSite=Lax cookie scoped to `/ui/` (Lax, not Strict: the browser
comes back from the provider's site, and a Strict cookie set then would be withheld on that first landing; every
change is still a POST checked for Origin and the session's CSRF token), Secure when the page is served over https.
Every other check is the local page's (ui/auth.py `Guard`): Host, Origin, CSRF, the security headers.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..state.identities import Approvers, Identity
from .auth import CALLBACK_PATH, COOKIE, Session, _cookie, cookie_session, from_page
from .oidc import PendingLogin, RelyingParty, discover

BASE = "/ui"
# How long a browser may take at the provider between leaving and coming back.
PENDING_SECONDS = 600.0
MAX_PENDING = 1024
# A session lasts a working day; the provider's own session decides how often a person types a password.
SESSION_SECONDS = 12 * 3600.0
# The cookie that ties a sign-in to the browser that began it: a callback in any other browser signs nobody in (login
# CSRF: someone's finished sign-in, handed to another person's browser, would sign that person in as them).
LOGIN_COOKIE = "abilities_login"


@dataclass
class SignedIn(Session):
    """A browser's session on the team page: who signed in, and whether they may answer approvals."""

    identity: Identity | None = None
    approver: bool = False
    expires_at: float = field(default_factory=lambda: time.time() + SESSION_SECONDS)


class TeamGate:
    """The team page's sign-in, with the interface of ui/auth.py's Gate that Guard and the routes use."""

    def __init__(
        self,
        public_url: str,
        provider: tuple[str, str, str],
        approvers: Approvers,
        clock: Callable[[], float] = time.time,
    ):
        """`provider`: the issuer, and this server's client id and secret there."""
        parts = urlsplit(public_url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.hosts = (parts.netloc.lower(),)
        self.secure = parts.scheme == "https"
        self.base = BASE
        self.home = f"{self.origin}{BASE}/"
        self.callback = f"{self.origin}{BASE}{CALLBACK_PATH}"
        self.provider, self.approvers, self._clock = provider, approvers, clock
        self._rp: RelyingParty | None = None
        self._pending: dict[str, tuple[float, PendingLogin, str]] = {}  # state -> (expiry, login, its browser)
        self.sessions: dict[str, SignedIn] = {}
        self.team = True

    def within(self, path: str) -> str | None:
        if path == BASE:
            return "/"
        return path[len(BASE) :] if path.startswith(BASE + "/") else None

    async def start_login(self, cookie_header: str | None = None) -> tuple[str, str]:
        """Where to send the browser to sign in (the provider's authorization endpoint, with this attempt's state,
        nonce and PKCE challenge remembered here until it comes back), and the value of the browser's login cookie
        (`login_cookie_header`): kept when the browser has one already, so that two tabs may sign in at once."""
        url, pending = (await self._relying_party()).begin()
        now = self._clock()
        for lapsed in [k for k, (at, _, _) in self._pending.items() if at <= now]:
            del self._pending[lapsed]
        if len(self._pending) >= MAX_PENDING:  # a flood of half-done logins: the oldest one goes
            self._pending.pop(next(iter(self._pending)))
        browser = _cookie(cookie_header or "", LOGIN_COOKIE) or ""
        if len(browser) < 32 or not browser.isascii() or not all(c.isalnum() or c in "-_" for c in browser):
            browser = secrets.token_urlsafe(32)
        self._pending[pending.state] = (now + PENDING_SECONDS, pending, browser)
        return url, browser

    def login_cookie_header(self, browser: str) -> str:
        """Set-Cookie for the browser's login cookie: HttpOnly, Lax (the provider sends the browser back with a
        top-level GET, which carries a Lax cookie), the page's path, lasting as long as a sign-in may."""
        secure = "; Secure" if self.secure else ""
        return f"{LOGIN_COOKIE}={browser}; HttpOnly; SameSite=Lax; Path={BASE}/; Max-Age={int(PENDING_SECONDS)}{secure}"

    async def finish_login(self, params: dict[str, str], cookie_header: str | None = None) -> SignedIn | None:
        """The browser came back with a code: who it is, as a new session; None for an unknown or stale state, a
        browser other than the one that began this sign-in (its login cookie), or a code the provider refuses (the
        RP raises, and nothing is opened)."""
        state = params.get("state", "")
        key = next((k for k in list(self._pending) if hmac.compare_digest(k.encode(), state.encode())), None)
        if key is None:
            return None
        expires, pending, browser = self._pending.pop(key)  # a state is good for one return
        if expires <= self._clock():
            return None
        came = _cookie(cookie_header or "", LOGIN_COOKIE) or ""
        if not hmac.compare_digest(came.encode(), browser.encode()):
            return None  # begun in another browser: its code is never exchanged here
        identity = await (await self._relying_party()).finish(pending, params)  # LoginFailed names what failed
        session = SignedIn(identity=identity, approver=self.approvers.includes(identity))
        self.sessions[session.session_id] = session
        return session

    async def _relying_party(self) -> RelyingParty:
        """The page as the provider's client, its endpoints discovered on the first sign-in (the provider may
        start after this server)."""
        if self._rp is None:
            issuer, client_id, secret = self.provider
            self._rp = RelyingParty(await discover(issuer), client_id, secret, self.callback)
        return self._rp

    def session(self, cookie_header: str | None) -> SignedIn | None:
        found = cookie_session(self.sessions, cookie_header)
        if found is not None and found.expires_at <= self._clock():
            self.sessions.pop(found.session_id, None)
            return None
        return found

    def logout(self, session: Session) -> None:
        self.sessions.pop(session.session_id, None)

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None, referer: str | None) -> bool:
        return from_page(origin, referer, self.origin, self.home)

    def cookie_header(self, session: Session) -> str:
        secure = "; Secure" if self.secure else ""
        return f"{COOKIE}={session.session_id}; HttpOnly; SameSite=Lax; Path={BASE}/{secure}"
