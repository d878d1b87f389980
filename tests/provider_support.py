"""A real OpenID Connect provider for the team-mode tests: panva's oidc-provider from npm, pinned, on 127.0.0.1.

`start_provider` runs tests/provider/provider.mjs (Node 20) on a free port and stops it after; `conftest.py` keeps one
for the whole session as the `oidc_provider` fixture. Any user name signs in, with any password, through the
provider's own login and consent pages: `login_in_browser` drives them with httpx as a browser would, and
`user_token(provider, "ada")` gets a developer's real access token that way (authorization code + PKCE), for a client
to send as `Authorization: Bearer …`. Access tokens are opaque: the abilities server introspects them (RFC 7662) with
`provider.server` (a confidential client). Asked with `resource=URL` (RFC 8707), a token's audience is that URL and it
carries only the provider's API scopes (`SCOPES`); without one it is a token for the provider's userinfo endpoint.

`REQUIRE_ENV` set (as `.ci/run` sets it): a provider that cannot be installed or started fails instead of skipping.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2 as httpx
import pytest

from real_clients import CACHE, INSTALL_TIMEOUT_SECONDS, NPM_CACHE

REQUIRE_ENV = "ABILITIES_REQUIRE_PROVIDER"
PACKAGE = Path(__file__).parent / "provider"
# The scopes a resource server (the abilities server) may be given, besides OpenID Connect's own.
SCOPES = ("abilities", "abilities:approve")
# Registered exactly; the provider also allows any http://127.0.0.1:PORT/…/callback (a test server's own page).
REDIRECT_URI = "http://127.0.0.1/callback"
# Node starts and imports the package in well under a second; a loaded CI machine gets much longer.
START_TIMEOUT_SECONDS = 30.0
STOP_GRACE_SECONDS = 5.0
HTTP_TIMEOUT_SECONDS = 10.0
# How long the `short_lived` client's access tokens live (provider.mjs SHORT_TTL_SECONDS).
SHORT_TTL_SECONDS = 4.0
# Login, consent and the redirects between them take six requests; a loop past this is a bug.
MAX_BROWSER_STEPS = 20


@dataclass(frozen=True)
class OAuthClient:
    """A client registered at the provider: a confidential one has a secret, a public one (a developer's CLI) not."""

    client_id: str
    secret: str | None = None

    def registration(self) -> dict[str, object]:
        return {
            "client_id": self.client_id,
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            **(
                {"client_secret": self.secret, "token_endpoint_auth_method": "client_secret_basic"}
                if self.secret
                else {"token_endpoint_auth_method": "none"}
            ),
        }


@dataclass
class OidcProvider:
    """One running provider: its issuer, its clients, and `stop`/`start` for a test of a provider that goes away."""

    folder: Path
    introspection_claims: bool = True
    # The abilities server: introspects tokens, and logs people in to the run page.
    server: OAuthClient = field(default_factory=lambda: OAuthClient("abilities-server", secrets.token_urlsafe(24)))
    # A developer's tool (Claude Code, the MCP Inspector): what user_token logs in as by default.
    developer: OAuthClient = OAuthClient("abilities-developer")
    # The same, but its access tokens expire one second after they are issued.
    short_lived: OAuthClient = OAuthClient("abilities-developer-short")
    issuer: str = ""
    port: int = 0
    _process: subprocess.Popen[bytes] | None = None
    _cookie_keys: list[str] = field(default_factory=lambda: [secrets.token_urlsafe(24)])

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def discovery(self) -> dict[str, object]:
        return httpx.get(self.discovery_url, timeout=HTTP_TIMEOUT_SECONDS).raise_for_status().json()

    def start(self) -> None:
        """Start (or start again, on the same port and with the same grants and tokens) and wait until it answers."""
        modules = install()
        node = shutil.which("node")
        if node is None:
            _unavailable("node is not on PATH; install Node.js 20")
        config = {
            "modules": str(modules),
            "port": self.port,
            "store": str(self.folder / "store.json"),
            "cookieKeys": self._cookie_keys,
            "clients": [c.registration() for c in (self.server, self.developer, self.short_lived)],
            "shortLivedClients": [self.short_lived.client_id],
            "scopes": list(SCOPES),
            "introspectionClaims": self.introspection_claims,
        }
        log = (self.folder / "provider.log").open("ab")
        self._process = subprocess.Popen(
            [node, str(PACKAGE / "provider.mjs"), json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,  # its own process group, killed whole by stop()
        )
        log.close()
        self.issuer = self._ready_line()["issuer"]
        self.port = urlsplit(self.issuer).port or 0
        found = self.discovery()["issuer"]
        assert found == self.issuer, f"the provider's discovery names {found!r}, not {self.issuer!r}"

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stdout:
            process.stdout.close()

    def _ready_line(self) -> dict[str, str]:
        process = self._process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        line = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    self.stop()
                    raise AssertionError(f"the OpenID provider did not start in {START_TIMEOUT_SECONDS} s{self._log()}")
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    self.stop()
                    _unavailable(f"the OpenID provider exited at start{self._log()}")
                line += chunk
        return json.loads(line)

    def _log(self) -> str:
        path = self.folder / "provider.log"
        return f": {path.read_text(errors='replace')[-2000:]}" if path.exists() else ""


@contextmanager
def start_provider(folder: Path, *, introspection_claims: bool = True) -> Iterator[OidcProvider]:
    """A provider of its own in `folder` (its store and log), stopped at the end.
    `introspection_claims=False`: its introspection answers carry no email or name (the verifier must ask userinfo)."""
    folder.mkdir(parents=True, exist_ok=True)
    provider = OidcProvider(folder, introspection_claims=introspection_claims)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


def install() -> Path:
    """The node_modules of tests/provider/'s lockfile, installed once into the shared cache (offline afterwards)."""
    lock = (PACKAGE / "package-lock.json").read_bytes()
    prefix = CACHE / "npm" / f"abilities-test-provider@{hashlib.sha256(lock).hexdigest()[:16]}"
    done = prefix / ".installed"
    if done.exists():
        return prefix / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        _unavailable("npm is not on PATH; install Node.js 20 to run the OpenID provider")
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # two test processes installing at once would corrupt node_modules
        if not done.exists():
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(PACKAGE / name, prefix / name)
            result = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--engine-strict=false"],
                cwd=prefix,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_SECONDS,
                env={**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"},
            )
            if result.returncode != 0:
                _unavailable(f"npm ci in {prefix} failed: {result.stderr[-2000:]}")
            done.touch()
    return prefix / "node_modules"


def _unavailable(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but {why}")
    pytest.skip(f"{why} (set {REQUIRE_ENV}=1 to make this a failure)")


# --- a person in a browser, and a developer's token ---


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge), RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def login_in_browser(provider: OidcProvider, authorization_url: str, user: str) -> str:
    """Follow `authorization_url` as a browser would, sign in as `user` on the provider's login page, consent, and
    return the URL the provider redirects back to (the client's callback, with `code` and `state`), not fetched."""
    with httpx.Client(timeout=HTTP_TIMEOUT_SECONDS) as browser:
        response = browser.get(authorization_url)
        for _ in range(MAX_BROWSER_STEPS):
            if response.is_redirect:
                target = urljoin(str(response.url), response.headers["location"])
                if not target.startswith(provider.issuer + "/"):
                    return target
                response = browser.get(target)
                continue
            response.raise_for_status()
            form = _Form.parse(response.text)
            fields = dict(form.hidden)
            if fields.get("prompt") == "login":  # the login page; consent's form has nothing to fill in
                fields |= {"login": user, "password": "any password"}
            response = browser.post(urljoin(str(response.url), form.action), data=fields)
        raise AssertionError(f"no redirect back to the client after {MAX_BROWSER_STEPS} steps: {response.text[:500]}")


def token_response(
    provider: OidcProvider,
    user: str,
    *,
    scope: str = "openid email profile " + " ".join(SCOPES),
    resource: str | None = None,
    client: OAuthClient | None = None,
) -> dict[str, object]:
    """The token endpoint's whole answer for `user`, through the real authorization-code flow with PKCE."""
    client = client or provider.developer
    discovery = provider.discovery()
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(16)
    query = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "state": state,
        "nonce": secrets.token_urlsafe(16),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "prompt": "consent",
        **({"resource": resource} if resource else {}),
    }
    callback = login_in_browser(provider, f"{discovery['authorization_endpoint']}?{urlencode(query)}", user)
    params = {key: values[0] for key, values in parse_qs(urlsplit(callback).query).items()}
    assert params.get("state") == state and "code" in params, f"the provider answered {callback!r}"
    form = {"grant_type": "authorization_code", "code": params["code"], "redirect_uri": REDIRECT_URI}
    form |= {"code_verifier": verifier}
    auth = (client.client_id, client.secret) if client.secret else None
    if auth is None:
        form["client_id"] = client.client_id
    answer = httpx.post(str(discovery["token_endpoint"]), data=form, auth=auth, timeout=HTTP_TIMEOUT_SECONDS)
    assert answer.status_code == 200, f"the token endpoint refused the code: {answer.text}"
    return answer.json()


def user_token(provider: OidcProvider, user: str, *, scope: str | None = None, resource: str | None = None) -> str:
    """A real access token for `user` (e.g. to give Claude Code or the MCP Inspector as `Authorization: Bearer …`).
    `resource`: the abilities server's URL, so the token's audience is that server (RFC 8707)."""
    extra = {"scope": scope} if scope is not None else {}
    return str(token_response(provider, user, resource=resource, **extra)["access_token"])


def revoke(provider: OidcProvider, token: str, client: OAuthClient | None = None) -> None:
    """Revoke an access token at the provider's revocation endpoint (RFC 7009), as the client it was issued to."""
    client = client or provider.developer
    endpoint = str(provider.discovery()["revocation_endpoint"])
    data = {"token": token, "token_type_hint": "access_token", "client_id": client.client_id}
    httpx.post(endpoint, data=data, timeout=HTTP_TIMEOUT_SECONDS).raise_for_status()


class _Form(HTMLParser):
    """The one form on the provider's login or consent page: where it posts and its hidden fields."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.hidden: dict[str, str] = {}

    @classmethod
    def parse(cls, html: str) -> _Form:
        form = cls()
        form.feed(html)
        assert form.action, f"no form on the provider's page: {html[:500]}"
        return form

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form" and not self.action:
            self.action = named.get("action") or ""
        elif tag == "input" and named.get("type") == "hidden" and named.get("name"):
            self.hidden[str(named["name"])] = named.get("value") or ""
