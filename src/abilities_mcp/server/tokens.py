"""The team server's bearer tokens: each introspected (RFC 7662) at the OpenID provider, good answers cached briefly.

`IntrospectionVerifier` is the SDK's `TokenVerifier`: it reads the issuer's discovery document once, asks the
provider's introspection endpoint about a token with the server's own client credentials, and accepts only an active
token of that issuer, for a person (`sub`), unexpired, and, when the server names its own URL (`resource`), issued
for it (RFC 8707 audience). A token it cannot judge (garbage, revoked, another provider's, the provider down) is
`None`: no access, never an exception. `identity_of` turns an accepted token into the `Identity` the state records.
"""

from __future__ import annotations

import hashlib
import logging
import time
from base64 import b64encode
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus

import httpx2
from mcp.server.auth.provider import AccessToken

from ..state.identities import Identity

log = logging.getLogger(__name__)

# A revoked token stays accepted at most this long: the price of not asking the provider on every request.
GOOD_CACHE_SECONDS = 60.0
# A refused token is asked about again this soon: a token the provider just issued must work at once.
BAD_CACHE_SECONDS = 2.0
# Cached answers kept at most (a flood of distinct garbage tokens must not grow the process).
CACHE_ENTRIES = 4096
# How long a request to the provider may take before the token counts as unverifiable.
TIMEOUT_SECONDS = 5.0
# No real access token is this long; a longer one is refused without asking anyone.
MAX_TOKEN_CHARS = 16_384
# What the identity needs from userinfo when introspection leaves it out.
PERSON_CLAIMS = ("email", "email_verified", "name")


class ProviderUnavailable(Exception):
    """The provider could not be asked (down, slow, misconfigured): no access, logged once per outage."""


class IntrospectionVerifier:
    """Verifies bearer tokens by asking the issuer's introspection endpoint, as client `client_id`."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        client_secret: str,
        *,
        resource: str | None = None,
        timeout: float = TIMEOUT_SECONDS,
        http: httpx2.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ):
        """`resource`: this server's URL; a token whose audience does not name it is refused. `http`: a client of
        the caller's (kept open by the caller), else one is opened per request to the provider."""
        self.issuer, self.resource = issuer, resource
        self._authorization = _basic(client_id, client_secret)
        self._timeout, self._http, self._clock = timeout, http, clock
        self._endpoints: dict[str, str] | None = None
        self._cache: OrderedDict[bytes, tuple[float, AccessToken | None]] = OrderedDict()
        self._down = False

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's access, or None: unknown, inactive, expired, another issuer's, not for this server."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        key = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and now < cached[0]:
            return cached[1]
        try:
            answer = await self._introspect(token)
        except ProviderUnavailable as problem:
            self._outage(str(problem))
            return None
        self._recovered()
        access = self._accepted(token, answer, now)
        if access is not None and not _has_email(answer):
            access = await self._with_userinfo(token, access)
        self._remember(key, access, now)
        return access

    def _accepted(self, token: str, answer: dict[str, Any], now: float) -> AccessToken | None:
        exp, sub = answer.get("exp"), answer.get("sub")
        refused = (
            answer.get("active") is not True
            or answer.get("iss", self.issuer) != self.issuer
            or not isinstance(sub, str)
            or not sub
            or not isinstance(exp, int | float)
            or exp <= now
            or (isinstance(answer.get("nbf"), int | float) and answer["nbf"] > now)
            # An access token says it is a bearer one (RFC 7662 token_type; Keycloak's `typ`); a refresh token says
            # nothing (oidc-provider) and must not pass for one. DPoP and others need a proof we lack.
            or str(answer.get("token_type") or answer.get("typ") or "").lower() != "bearer"
            or "cnf" in answer  # sender-constrained (mTLS, DPoP): a bare bearer presentation is not enough
        )
        resource = self._audience(answer.get("aud"))
        if refused or (self.resource is not None and resource is None):
            return None
        scope = answer.get("scope")
        return AccessToken(
            token=token,
            client_id=str(answer.get("client_id") or ""),
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=int(exp),
            resource=resource,
            subject=sub,
            claims={key: value for key, value in answer.items() if key != "active"} | {"iss": self.issuer},
        )

    def _audience(self, aud: object) -> str | None:
        """The audience entry naming this server (or, with no `resource` set, a single audience as it is)."""
        audiences = [aud] if isinstance(aud, str) else [a for a in aud if isinstance(a, str)] if aud else []
        if self.resource is None:
            return audiences[0] if len(audiences) == 1 else None
        wanted = self.resource.removesuffix("/")
        return next((a for a in audiences if a.removesuffix("/") == wanted), None)

    async def _with_userinfo(self, token: str, access: AccessToken) -> AccessToken:
        """The person's email and name from userinfo, when introspection did not carry them (best effort)."""
        endpoint = (self._endpoints or {}).get("userinfo_endpoint")
        if not endpoint:
            return access
        try:
            response = await self._request("GET", endpoint, headers={"Authorization": f"Bearer {token}"})
            info = response.json() if response.status_code == 200 else {}
        except (httpx2.HTTPError, ValueError):
            return access
        if not isinstance(info, dict) or info.get("sub") != access.subject:  # OIDC Core 5.3.2: another person's
            return access
        person = {claim: info[claim] for claim in PERSON_CLAIMS if claim in info}
        return access.model_copy(update={"claims": {**(access.claims or {}), **person}})

    async def _introspect(self, token: str) -> dict[str, Any]:
        endpoint = (await self._discovered())["introspection_endpoint"]
        try:
            response = await self._request(
                "POST",
                endpoint,
                data={"token": token, "token_type_hint": "access_token"},
                headers={"Authorization": self._authorization, "Accept": "application/json"},
            )
        except httpx2.HTTPError as error:
            raise ProviderUnavailable(f"introspection at {endpoint} failed: {error!r}") from None
        if response.status_code == 401:
            raise ProviderUnavailable(
                f"{endpoint} refused this server's client credentials (401): check the client id and secret"
            )
        return _json_object(response, "introspection")

    async def _discovered(self) -> dict[str, str]:
        """The issuer's endpoints, read once; a failed read is tried again on the next token."""
        if self._endpoints is None:
            url = f"{self.issuer.removesuffix('/')}/.well-known/openid-configuration"
            try:
                document = _json_object(await self._request("GET", url), "discovery")
            except httpx2.HTTPError as error:
                raise ProviderUnavailable(f"reading {url} failed: {error!r}") from None
            if document.get("issuer") != self.issuer:
                raise ProviderUnavailable(
                    f"{url} names the issuer {document.get('issuer')!r}, not {self.issuer!r}: "
                    "give the issuer exactly as the provider spells it"
                )
            if not isinstance(document.get("introspection_endpoint"), str):
                raise ProviderUnavailable(f"{url} names no introspection_endpoint: enable introspection (RFC 7662)")
            self._endpoints = {k: v for k, v in document.items() if k.endswith("_endpoint") and isinstance(v, str)}
        return self._endpoints

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx2.Response:
        if self._http is not None:
            return await self._http.request(method, url, timeout=self._timeout, **kwargs)
        async with httpx2.AsyncClient(timeout=self._timeout) as http:
            return await http.request(method, url, **kwargs)

    def _remember(self, key: bytes, access: AccessToken | None, now: float) -> None:
        until = now + BAD_CACHE_SECONDS
        if access is not None:
            until = min(now + GOOD_CACHE_SECONDS, float(access.expires_at or now))
        self._cache[key] = (until, access)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)

    def _outage(self, problem: str) -> None:
        if not self._down:
            log.warning("OpenID provider %s: %s; bearer tokens are refused until it answers", self.issuer, problem)
        self._down = True

    def _recovered(self) -> None:
        if self._down:
            log.warning("OpenID provider %s answers again", self.issuer)
        self._down = False


def identity_of(access: AccessToken) -> Identity:
    """Who an accepted token speaks for: issuer and subject, with the email only when the provider verified it."""
    claims = access.claims or {}
    email, name = claims.get("email"), claims.get("name")
    return Identity(
        issuer=str(claims["iss"]),
        subject=str(access.subject),
        email=email if isinstance(email, str) and claims.get("email_verified") is True else None,
        name=name if isinstance(name, str) else None,
    )


def _has_email(answer: dict[str, Any]) -> bool:
    return isinstance(answer.get("email"), str)


def _basic(client_id: str, secret: str) -> str:
    """HTTP Basic client authentication as RFC 6749 §2.3.1 spells it: each part form-encoded first."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}"
    return "Basic " + b64encode(pair.encode()).decode()


def _json_object(response: httpx2.Response, what: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise ProviderUnavailable(f"the {what} answer was HTTP {response.status_code}: {response.text[:200]!r}")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ProviderUnavailable(f"the {what} answer was not a JSON object: {response.text[:200]!r}")
    return body
