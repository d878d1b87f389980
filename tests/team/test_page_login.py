"""The run page's OpenID Connect login against a real provider: a person signs in at the provider and comes back as
themselves; a callback that is not this login's (another state, a spent code, another nonce) names nobody."""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qs, urlsplit

import pytest

from abilities_mcp.state.identities import Identity
from abilities_mcp.ui.oidc import LoginFailed, PendingLogin, RelyingParty, discover
from provider_support import OidcProvider, login_in_browser

# Where a test's page would be: any port and path the provider allows for a loopback callback.
CALLBACK = "http://127.0.0.1:8765/s/prefix/login/callback"


async def page(provider: OidcProvider) -> RelyingParty:
    endpoints = await discover(provider.issuer)
    return RelyingParty(endpoints, provider.server.client_id, str(provider.server.secret), CALLBACK)


def came_back(provider: OidcProvider, rp: RelyingParty, user: str) -> tuple[PendingLogin, dict[str, str]]:
    """A login begun by the page and finished by `user` in a browser: what the page kept, and the callback's query."""
    url, pending = rp.begin()
    callback = login_in_browser(provider, url, user)
    assert callback.startswith(CALLBACK + "?"), callback
    return pending, {key: values[0] for key, values in parse_qs(urlsplit(callback).query).items()}


async def test_a_person_who_signs_in_at_the_provider_comes_back_as_themselves(oidc_provider: OidcProvider) -> None:
    rp = await page(oidc_provider)
    pending, callback = came_back(oidc_provider, rp, "hana")
    identity = await rp.finish(pending, callback)
    assert identity == Identity(oidc_provider.issuer, "hana", "hana@example.test", "Hana")


async def test_each_login_leaves_with_its_own_state_nonce_and_an_s256_challenge(oidc_provider: OidcProvider) -> None:
    rp = await page(oidc_provider)
    (first_url, first), (_, second) = rp.begin(), rp.begin()
    query = parse_qs(urlsplit(first_url).query)
    assert query["code_challenge_method"] == ["S256"] and query["state"] == [first.state]
    assert query["nonce"] == [first.nonce] and query["redirect_uri"] == [CALLBACK]
    assert "code_verifier" not in query and first.code_verifier not in first_url
    assert {first.state, first.nonce}.isdisjoint({second.state, second.nonce})


@pytest.mark.parametrize("state", ["someone-elses", "", None], ids=["another-state", "empty-state", "no-state"])
async def test_a_callback_with_another_state_is_refused_before_its_code_is_spent(
    oidc_provider: OidcProvider, state: str | None
) -> None:
    rp = await page(oidc_provider)
    pending, callback = came_back(oidc_provider, rp, "ivan")
    forged = {key: value for key, value in callback.items() if key != "state"}
    if state is not None:
        forged["state"] = state
    with pytest.raises(LoginFailed, match="another state"):
        await rp.finish(pending, forged)
    assert (await rp.finish(pending, callback)).subject == "ivan"  # the code was never sent to the provider


async def test_a_code_used_twice_is_refused_the_second_time(oidc_provider: OidcProvider) -> None:
    rp = await page(oidc_provider)
    pending, callback = came_back(oidc_provider, rp, "jill")
    assert (await rp.finish(pending, callback)).subject == "jill"
    with pytest.raises(LoginFailed, match="invalid_grant"):
        await rp.finish(pending, callback)


@pytest.mark.parametrize(
    ("kept", "refusal"),
    [({"nonce": "another-logins-nonce"}, "nonce"), ({"code_verifier": "x" * 43}, "invalid_grant")],
    ids=["another-nonce", "another-pkce-verifier"],
)
async def test_a_callback_for_another_login_is_refused(
    oidc_provider: OidcProvider, kept: dict[str, str], refusal: str
) -> None:
    rp = await page(oidc_provider)
    pending, callback = came_back(oidc_provider, rp, "kim")
    with pytest.raises(LoginFailed, match=refusal):
        await rp.finish(dataclasses.replace(pending, **kept), callback)


async def test_a_provider_that_refuses_the_login_names_its_error(oidc_provider: OidcProvider) -> None:
    rp = await page(oidc_provider)
    url, pending = rp.begin()
    callback = login_in_browser(oidc_provider, url + "&prompt=none", "lee")  # no session at the provider yet
    query = {key: values[0] for key, values in parse_qs(urlsplit(callback).query).items()}
    with pytest.raises(LoginFailed, match="login_required"):
        await rp.finish(pending, query)


async def test_a_callback_from_another_issuer_is_refused(oidc_provider: OidcProvider) -> None:
    rp = await page(oidc_provider)
    pending, callback = came_back(oidc_provider, rp, "max")
    with pytest.raises(LoginFailed, match="RFC 9207"):
        await rp.finish(pending, callback | {"iss": "https://mixed-up.example.test"})


async def test_the_issuer_must_be_spelled_as_the_provider_spells_it(oidc_provider: OidcProvider) -> None:
    with pytest.raises(LoginFailed, match="names the issuer"):
        await discover(oidc_provider.issuer + "/")
