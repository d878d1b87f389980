"""Who the current call acts for on a team server: an identity's key (state/identities.py), or None for a local call.

Set by a team server for each request (server/hub.py, cli/team_hooks.py) and read by the writes that record it (a
run's events, a prerequisite's record). A module of its own, stdlib's contextvars alone: the hook imports the writers
on every tool call and must not pay for identities' dataclasses.
"""

from __future__ import annotations

from contextvars import ContextVar

ACTING: ContextVar[str | None] = ContextVar("abilities_acting", default=None)
