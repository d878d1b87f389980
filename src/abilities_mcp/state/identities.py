"""Who made a call on a team server: a person as the OpenID provider names them, and whether they may approve.

An identity is recorded on every run it starts and every answer it gives, as its `key`: the issuer and the subject,
which the provider promises are unique together (an email can change hands; `sub` never does). Stdlib only: the
engine and the page compare identities, neither needs more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    """A person (or a client acting for one) the team server's OpenID provider vouched for."""

    issuer: str
    subject: str
    email: str | None = None  # only a verified one: an unverified address names nobody
    name: str | None = None

    @property
    def key(self) -> str:
        """What the state records and four-eyes compares: `issuer#subject`."""
        return f"{self.issuer}#{self.subject}"

    @property
    def shown(self) -> str:
        """How a person reads it: the verified email, else the name, else the subject."""
        return self.email or self.name or self.subject


def shown_key(key: str | None) -> str:
    """A recorded key as a person reads it (the subject, without the issuer); `local` for a run without one."""
    if not key:
        return "local"
    return key.rpartition("#")[2] or key


@dataclass(frozen=True)
class Approvers:
    """Who may answer an approval on a team server: subjects or verified emails, set by whoever runs the server
    (a flag or the environment, never a project file the agent could edit)."""

    names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str | Iterable[str] | None) -> Approvers:
        items = text.split(",") if isinstance(text, str) else (text or ())
        return cls(frozenset(item.strip() for item in items if item.strip()))

    def includes(self, identity: Identity) -> bool:
        """An entry with an `@` names a verified email (compared without case, as mail is delivered); any other
        names a subject exactly (a provider's subjects are case-sensitive strings), so `Ada` is not `ada`, and a
        subject spelled like an email never stands for that address."""
        if identity.subject in {name for name in self.names if "@" not in name}:
            return True
        emails = {name.lower() for name in self.names if "@" in name}
        return identity.email is not None and identity.email.lower() in emails
