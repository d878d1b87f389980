"""The run page's login on a team server: an OpenID Connect relying party, authorization code with PKCE, state, nonce.

`discover` reads the provider's endpoints; `RelyingParty.begin` gives the URL to send a browser to and the
`PendingLogin` to keep (server side) until the browser comes back; `RelyingParty.finish` checks what came back,
exchanges the code at the token endpoint (client_secret_basic), and names the person from the userinfo endpoint.
No routes here: ui/app.py and ui/auth.py mount them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode

import httpx2

from ..errors import AbilitiesError
from ..state.identities import Identity

# How long a request to the provider may take.
TIMEOUT_SECONDS = 5.0
# A person who has not come back from the provider this long after leaving must start again.
LOGIN_MAX_AGE_SECONDS = 600.0
# OpenID Connect's own scopes: who the person is, with a verified email and a name.
SCOPE = "openid email profile"
# What the page needs of the discovery document.
ENDPOINTS = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint")
# Slack for the ID token's `exp` between our clock and the provider's.
CLOCK_SKEW_SECONDS = 60


class LoginFailed(AbilitiesError):
    """A login that did not prove who came back: the person starts again (or whoever runs the server fixes it)."""


@dataclass(frozen=True)
class ProviderEndpoints:
    """What the page needs of the provider's discovery document."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    # RFC 9207: the provider names itself in every authorization response, so a mix-up is seen before the exchange.
    iss_in_response: bool = False


@dataclass(frozen=True)
class PendingLogin:
    """One browser's login between leaving for the provider and coming back: kept by the server, never the browser."""

    state: str
    nonce: str
    code_verifier: str
    started: float


async def discover(issuer: str, *, http: httpx2.AsyncClient | None = None) -> ProviderEndpoints:
    """The provider's endpoints from `ISSUER/.well-known/openid-configuration`; its issuer must be `issuer` exactly."""
    url = f"{issuer.removesuffix('/')}/.well-known/openid-configuration"
    document = await _json(http, "GET", url, what="discovery")
    if document.get("issuer") != issuer:
        raise LoginFailed(f"{url} names the issuer {document.get('issuer')!r}, not {issuer!r}: spell it as it does")
    missing = [name for name in ENDPOINTS if not isinstance(document.get(name), str)]
    if missing:
        raise LoginFailed(f"{url} names no {', '.join(missing)}: the page needs an OpenID Connect provider")
    return ProviderEndpoints(
        issuer=issuer,
        authorization_endpoint=document["authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        userinfo_endpoint=document["userinfo_endpoint"],
        iss_in_response=document.get("authorization_response_iss_parameter_supported") is True,
    )


@dataclass(frozen=True)
class RelyingParty:
    """The page as a client of the provider: its registration (id, secret) and where the browser comes back."""

    provider: ProviderEndpoints
    client_id: str
    client_secret: str
    redirect_uri: str
    scope: str = SCOPE

    def begin(self, *, now: float | None = None) -> tuple[str, PendingLogin]:
        """The URL to redirect the browser to, and the login to keep until it comes back (found by its `state`)."""
        pending = PendingLogin(
            state=secrets.token_urlsafe(32),
            nonce=secrets.token_urlsafe(32),
            code_verifier=secrets.token_urlsafe(64),  # 86 characters: RFC 7636 asks for 43 to 128
            started=time.time() if now is None else now,
        )
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": self.scope,
            "state": pending.state,
            "nonce": pending.nonce,
            "code_challenge": _s256(pending.code_verifier),
            "code_challenge_method": "S256",
        }
        separator = "&" if "?" in self.provider.authorization_endpoint else "?"
        return f"{self.provider.authorization_endpoint}{separator}{urlencode(query)}", pending

    async def finish(
        self, pending: PendingLogin, callback: Mapping[str, str], *, http: httpx2.AsyncClient | None = None
    ) -> Identity:
        """The person who logged in, from the callback's query parameters; LoginFailed names what did not hold."""
        code = self._checked_callback(pending, callback)
        tokens = await _json(
            http,
            "POST",
            self.provider.token_endpoint,
            what="token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": self.redirect_uri,
                "code_verifier": pending.code_verifier,
            },
            headers={"Authorization": _basic(self.client_id, self.client_secret)},
        )
        subject = self._checked_id_token(tokens.get("id_token"), pending)
        access = tokens.get("access_token")
        if not isinstance(access, str) or str(tokens.get("token_type", "")).lower() != "bearer":
            raise LoginFailed("the token endpoint gave no bearer access token to read the person's userinfo with")
        info = await _json(
            http, "GET", self.provider.userinfo_endpoint, what="userinfo", headers={"Authorization": f"Bearer {access}"}
        )
        if info.get("sub") != subject:  # OIDC Core 5.3.2: userinfo must be about the ID token's subject
            raise LoginFailed("the userinfo endpoint answered about another subject than the ID token's")
        email, name = info.get("email"), info.get("name")
        return Identity(
            issuer=self.provider.issuer,
            subject=subject,
            email=email if isinstance(email, str) and info.get("email_verified") is True else None,
            name=name if isinstance(name, str) else None,
        )

    def _checked_callback(self, pending: PendingLogin, callback: Mapping[str, str]) -> str:
        if not hmac.compare_digest(str(callback.get("state", "")).encode(), pending.state.encode()):
            raise LoginFailed("the login came back with another state than it left with: start the login again")
        if time.time() - pending.started > LOGIN_MAX_AGE_SECONDS:
            raise LoginFailed(f"the login took longer than {LOGIN_MAX_AGE_SECONDS:.0f} s: start it again")
        iss = callback.get("iss")
        if (iss is not None or self.provider.iss_in_response) and iss != self.provider.issuer:
            raise LoginFailed(f"the login came back from {iss!r}, not {self.provider.issuer!r} (RFC 9207)")
        if "error" in callback:
            described = f": {callback['error_description']}" if callback.get("error_description") else ""
            raise LoginFailed(f"the provider refused the login ({callback['error']}{described})")
        code = callback.get("code")
        if not code:
            raise LoginFailed("the login came back without a code")
        return code

    def _checked_id_token(self, id_token: object, pending: PendingLogin) -> str:
        """The ID token's subject, once its issuer, audience, nonce and expiry hold.

        Its signature is not checked: the token came straight from the token endpoint in the back-channel exchange
        this process made itself (OIDC Core 3.1.3.7, step 6, allows TLS server validation in place of the
        signature). What the exchange cannot vouch for is which login the token answers: the nonce ties it to this
        browser's, and `iss`/`aud` to this provider and this client (a mixed-up or substituted token)."""
        claims = _jwt_payload(id_token)
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences if isinstance(audiences, list) else []
        exp, subject = claims.get("exp"), claims.get("sub")
        if claims.get("iss") != self.provider.issuer:
            raise LoginFailed(f"the ID token's issuer is {claims.get('iss')!r}, not {self.provider.issuer!r}")
        if self.client_id not in audiences or (len(audiences) > 1 and claims.get("azp") != self.client_id):
            raise LoginFailed(f"the ID token is not for this client ({self.client_id!r}): audience {audiences!r}")
        if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), pending.nonce.encode()):
            raise LoginFailed("the ID token's nonce is not this login's: start the login again")
        if not isinstance(exp, int | float) or exp + CLOCK_SKEW_SECONDS < time.time():
            raise LoginFailed("the ID token has expired")
        if not isinstance(subject, str) or not subject:
            raise LoginFailed("the ID token names no subject")
        return subject


def _jwt_payload(token: object) -> dict[str, Any]:
    """A compact JWT's payload, decoded without a signature check (see `_checked_id_token` for why that is enough)."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise LoginFailed("the token endpoint gave no ID token (was the `openid` scope granted?)")
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        raise LoginFailed("the ID token's payload is not base64url JSON") from None
    if not isinstance(payload, dict):
        raise LoginFailed("the ID token's payload is not a JSON object")
    return payload


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _basic(client_id: str, secret: str) -> str:
    """HTTP Basic client authentication as RFC 6749 §2.3.1 spells it: each part form-encoded first."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


async def _json(http: httpx2.AsyncClient | None, method: str, url: str, *, what: str, **kwargs: Any) -> dict[str, Any]:
    """One request to the provider, its JSON object answer; any failure is a LoginFailed naming the endpoint."""
    try:
        if http is not None:
            response = await http.request(method, url, timeout=TIMEOUT_SECONDS, **kwargs)
        else:
            async with httpx2.AsyncClient(timeout=TIMEOUT_SECONDS) as own:
                response = await own.request(method, url, **kwargs)
        body = response.json()
    except httpx2.HTTPError as error:
        raise LoginFailed(f"the provider's {what} endpoint could not be reached ({url}): {error!r}") from None
    except ValueError:
        raise LoginFailed(f"the provider's {what} endpoint answered HTTP {response.status_code}, not JSON") from None
    if response.status_code != 200 or not isinstance(body, dict):
        said = (
            [str(body.get(key)) for key in ("error", "error_description") if body.get(key)]
            if isinstance(body, dict)
            else []
        )
        raise LoginFailed(
            f"the provider's {what} endpoint refused: HTTP {response.status_code} {': '.join(said)}".strip()
        )
    return body
