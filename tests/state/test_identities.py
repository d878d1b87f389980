"""Who may approve on a team server: subjects exactly, verified emails without case, never one for the other."""

from __future__ import annotations

import pytest

from abilities_mcp.state.identities import Approvers, Identity, shown_key

ISSUER = "https://login.example.test"


@pytest.mark.parametrize(
    ("identity", "approver"),
    [
        (Identity(ISSUER, "ada"), True),
        (Identity(ISSUER, "Ada"), False),  # subjects are case-sensitive: another person
        (Identity(ISSUER, "x1", email="Grace@Example.test"), True),  # mail is delivered whatever the case
        (Identity(ISSUER, "grace@example.test"), False),  # a subject spelled like an email is no verified email
        (Identity(ISSUER, "mallory", email="mallory@example.test"), False),
        (Identity(ISSUER, "ada@x", email=None), False),
    ],
    ids=["subject", "subject-other-case", "email-any-case", "subject-like-an-email", "stranger", "no-email"],
)
def test_approvers_are_subjects_exactly_or_verified_emails(identity: Identity, approver: bool) -> None:
    assert Approvers.parse(" ada , grace@example.test,,").includes(identity) is approver


def test_an_identity_is_its_issuer_and_subject_and_shows_its_email_first() -> None:
    ada = Identity(ISSUER, "u-1", email="ada@example.test", name="Ada")
    assert ada.key == f"{ISSUER}#u-1" and ada.shown == "ada@example.test"
    assert Identity(ISSUER, "u-2", name="Grace").shown == "Grace" and shown_key(ada.key) == "u-1"
    assert shown_key(None) == "local"
