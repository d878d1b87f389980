"""The team server's token verifier against a real OpenID provider: whose token it accepts, what it records, what it
refuses, how long it trusts an answer, and what a provider that is down or broken means (no access, no crash)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from mcp.server.auth.provider import AccessToken

from abilities_mcp.server.tokens import BAD_CACHE_SECONDS, GOOD_CACHE_SECONDS, IntrospectionVerifier, identity_of
from abilities_mcp.state.identities import Identity
from provider_support import SHORT_TTL_SECONDS, OidcProvider, revoke, start_provider, token_response, user_token

SERVER_URL = "http://127.0.0.1:8123/mcp"


def verifier(provider: OidcProvider, **options: object) -> IntrospectionVerifier:
    return IntrospectionVerifier(provider.issuer, provider.server.client_id, str(provider.server.secret), **options)


class Clock:
    """A clock the test moves: cache lifetimes without waiting for them."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def other_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    """A second provider, whose introspection answers carry no email or name (as some providers' do not)."""
    with start_provider(tmp_path_factory.mktemp("other-provider"), introspection_claims=False) as provider:
        yield provider


async def test_a_real_users_token_is_accepted_with_who_they_are_and_their_scopes(oidc_provider: OidcProvider) -> None:
    token = user_token(oidc_provider, "ada")
    access = await verifier(oidc_provider).verify_token(token)
    assert access is not None
    assert (access.subject, access.client_id) == ("ada", oidc_provider.developer.client_id)
    assert {"openid", "email", "abilities", "abilities:approve"} <= set(access.scopes)
    assert access.expires_at is not None and access.expires_at > time.time() + 3000
    assert access.claims is not None and access.claims["iss"] == oidc_provider.issuer
    assert identity_of(access) == Identity(oidc_provider.issuer, "ada", "ada@example.test", "Ada")


async def test_a_token_for_this_server_names_it_as_resource_and_a_token_for_another_is_refused(
    oidc_provider: OidcProvider,
) -> None:
    token = user_token(oidc_provider, "bob", resource=SERVER_URL)
    access = await verifier(oidc_provider, resource=SERVER_URL).verify_token(token)
    assert access is not None and access.resource == SERVER_URL
    assert sorted(access.scopes) == ["abilities", "abilities:approve"]  # RFC 8707: only the API's scopes
    assert await verifier(oidc_provider, resource="http://127.0.0.1:9999/mcp").verify_token(token) is None
    userinfo_token = user_token(oidc_provider, "bob")  # no resource: a token for the provider's userinfo only
    assert await verifier(oidc_provider, resource=SERVER_URL).verify_token(userinfo_token) is None


@pytest.mark.parametrize(
    "token",
    ["", "garbage", "x" * 20_000, "oPst9ue3uzMXSFgvNEsp2Rn-qPFvdaiDiYIllhHUQJa"],
    ids=["empty", "garbage", "oversized", "well-formed-but-never-issued"],
)
async def test_a_token_the_provider_never_issued_is_refused(oidc_provider: OidcProvider, token: str) -> None:
    assert await verifier(oidc_provider).verify_token(token) is None


async def test_a_revoked_token_is_refused_at_once_when_unseen_and_within_a_minute_when_cached(
    oidc_provider: OidcProvider,
) -> None:
    token = user_token(oidc_provider, "carol")
    clock = Clock()
    caching = verifier(oidc_provider, clock=clock)
    assert await caching.verify_token(token) is not None
    revoke(oidc_provider, token)
    assert await verifier(oidc_provider).verify_token(token) is None
    assert await caching.verify_token(token) is not None  # the price of the cache, bounded:
    clock.now += GOOD_CACHE_SECONDS + 1
    assert await caching.verify_token(token) is None


async def test_a_token_is_refused_once_it_expires_even_when_cached(oidc_provider: OidcProvider) -> None:
    asked = time.time()
    answer = token_response(oidc_provider, "dave", client=oidc_provider.short_lived)
    checking = verifier(oidc_provider)
    access = await checking.verify_token(str(answer["access_token"]))
    if access is None:  # a machine so loaded that the token lapsed before its first use: refused, as it must be
        assert time.time() - asked >= SHORT_TTL_SECONDS
        return
    assert access.expires_at is not None
    with anyio.fail_after(SHORT_TTL_SECONDS + 5):
        while await checking.verify_token(str(answer["access_token"])) is not None:
            await anyio.sleep(0.05)
    assert time.time() >= access.expires_at


async def test_a_token_of_another_provider_is_refused(
    oidc_provider: OidcProvider, other_provider: OidcProvider
) -> None:
    token = user_token(other_provider, "ada")
    assert await verifier(oidc_provider).verify_token(token) is None
    theirs = await verifier(other_provider).verify_token(token)
    assert theirs is not None and identity_of(theirs).key == f"{other_provider.issuer}#ada"


async def test_an_email_introspection_leaves_out_comes_from_userinfo(other_provider: OidcProvider) -> None:
    access = await verifier(other_provider).verify_token(user_token(other_provider, "erin"))
    assert access is not None
    assert identity_of(access) == Identity(other_provider.issuer, "erin", "erin@example.test", "Erin")


async def test_two_verifies_of_one_token_ask_the_provider_once(oidc_provider: OidcProvider) -> None:
    token = user_token(oidc_provider, "frank")
    asked: list[str] = []

    async def count(request: httpx.Request) -> None:
        asked.append(request.url.path)

    async with httpx.AsyncClient(event_hooks={"request": [count]}) as http:
        checking = verifier(oidc_provider, http=http)
        first, second = await checking.verify_token(token), await checking.verify_token(token)
    assert first is not None and first == second
    assert asked == ["/.well-known/openid-configuration", "/token/introspection"]


async def test_a_refusal_is_remembered_only_a_few_seconds(oidc_provider: OidcProvider) -> None:
    asked: list[str] = []

    async def count(request: httpx.Request) -> None:
        asked.append(request.url.path)

    clock = Clock()
    async with httpx.AsyncClient(event_hooks={"request": [count]}) as http:
        checking = verifier(oidc_provider, http=http, clock=clock)
        assert await checking.verify_token("garbage") is None
        assert await checking.verify_token("garbage") is None
        assert asked.count("/token/introspection") == 1
        clock.now += BAD_CACHE_SECONDS + 0.1
        assert await checking.verify_token("garbage") is None
    assert asked.count("/token/introspection") == 2


async def test_a_provider_that_is_down_means_no_access_said_once_and_access_again_when_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with start_provider(tmp_path / "provider") as provider:
        seen, unseen = user_token(provider, "gina"), user_token(provider, "gina")
        running = verifier(provider)  # has read the discovery document before the provider goes
        assert await running.verify_token(seen) is not None
        starting = verifier(provider)  # has not
        provider.stop()
        with caplog.at_level(logging.WARNING, logger="abilities_mcp.server.tokens"):
            for _ in range(3):
                assert await running.verify_token(unseen) is None
                assert await starting.verify_token(seen) is None
        down = [r.getMessage() for r in caplog.records if "refused until it answers" in r.getMessage()]
        assert len(down) == 2, down  # once for each verifier, not once per token
        assert all(provider.issuer in message for message in down)
        provider.start()  # the same port, the same tokens
        assert await running.verify_token(unseen) is not None
        assert await starting.verify_token(seen) is not None


# --- what the verifier makes of a provider's answers, given straight (httpx's mock transport) ---

ISSUER = "https://login.example.test"
DISCOVERY = {"issuer": ISSUER, "introspection_endpoint": f"{ISSUER}/introspect"}
ACTIVE = {"active": True, "iss": ISSUER, "sub": "ada", "client_id": "cli", "scope": "abilities", "token_type": "Bearer"}


def answering(discovery: object, introspection: object, status: int = 200) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json=discovery)
        if isinstance(introspection, Exception):
            raise introspection
        if isinstance(introspection, str):
            return httpx.Response(status, text=introspection)
        return httpx.Response(status, json=introspection)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


@pytest.mark.parametrize(
    ("changes", "accepted"),
    [
        ({}, True),
        ({"active": False}, False),
        ({"active": "true"}, False),
        ({"iss": "https://elsewhere.example.test"}, False),
        ({"sub": None}, False),
        ({"exp": "later"}, False),
        ({"exp": -1}, False),
        ({"nbf": 3600}, False),
        ({"token_type": "DPoP"}, False),
        ({"token_type": None}, False),
        ({"token_type": None, "typ": "Bearer"}, True),
        ({"cnf": {"jkt": "x"}}, False),
        ({"iss": None}, True),
        ({"aud": SERVER_URL}, True),
    ],
    ids=[
        "active",
        "inactive",
        "active-as-a-string",
        "another-issuer",
        "no-subject",
        "exp-not-a-number",
        "expired",
        "not-yet-valid",
        "dpop",
        "no-token-type-as-oidc-provider-answers-for-a-refresh-token",
        "keycloaks-typ",
        "sender-constrained",
        "no-iss-from-the-issuers-own-endpoint",
        "with-an-audience",
    ],
)
async def test_only_an_active_unexpired_bearer_token_of_the_issuer_for_a_person_is_accepted(
    changes: dict[str, object], accepted: bool
) -> None:
    now = time.time()
    answer = {**ACTIVE, "exp": int(now) + 600} | {
        key: (int(now) + value if key in ("exp", "nbf") and isinstance(value, int) else value)
        for key, value in changes.items()
    }
    answer = {key: value for key, value in answer.items() if value is not None}
    async with answering(DISCOVERY, answer) as http:
        access = await IntrospectionVerifier(ISSUER, "server", "secret", http=http).verify_token("t")
    assert (access is not None) is accepted


@pytest.mark.parametrize(
    ("discovery", "introspection", "status", "logged"),
    [
        ({**DISCOVERY, "issuer": ISSUER + "/"}, ACTIVE, 200, "not 'https://login.example.test'"),
        ({"issuer": ISSUER}, ACTIVE, 200, "names no introspection_endpoint"),
        ("<html>", ACTIVE, 200, "not a JSON object"),
        (DISCOVERY, "<html>oops</html>", 200, "not a JSON object"),
        (DISCOVERY, {"error": "server_error"}, 500, "HTTP 500"),
        (DISCOVERY, {"error": "invalid_client"}, 401, "check the client id and secret"),
        (DISCOVERY, httpx.ReadTimeout("timed out"), 200, "ReadTimeout"),
        (DISCOVERY, [ACTIVE], 200, "not a JSON object"),
    ],
    ids=[
        "discovery-names-another-issuer",
        "no-introspection",
        "discovery-not-json",
        "introspection-not-json",
        "introspection-fails",
        "wrong-client-secret",
        "introspection-times-out",
        "introspection-a-list",
    ],
)
async def test_a_broken_provider_means_no_access_and_a_log_line_naming_the_problem(
    discovery: object, introspection: object, status: int, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with answering(discovery, introspection, status) as http:
        with caplog.at_level(logging.WARNING, logger="abilities_mcp.server.tokens"):
            assert await IntrospectionVerifier(ISSUER, "server", "secret", http=http).verify_token("t") is None
    assert logged in caplog.text


def test_an_unverified_email_names_nobody() -> None:
    claims = {"iss": ISSUER, "email": "boss@example.test", "email_verified": False, "name": "Ada"}
    access = AccessToken(token="t", client_id="cli", scopes=[], subject="ada", claims=claims)
    assert identity_of(access) == Identity(ISSUER, "ada", None, "Ada")
