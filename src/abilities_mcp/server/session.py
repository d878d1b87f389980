"""One client connection: its engine, its store, its session id, and how a call waits for the run to settle."""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import InputRequiredResult

from ..engine.core import Engine
from ..errors import AbilitiesError, Refused
from ..state import audit
from ..state.claims import Client, claim
from ..state.identities import Identity
from ..state.owners import client_of
from ..state.store import Store
from .forms import MAX_FORMS_PER_CALL, ask_by_form, ask_by_url, form_era, input_required, open_question, url_era
from .results import Run
from .views import run_view

if TYPE_CHECKING:  # imported when a gateway is configured: start-up does not pay for it
    from ..gateway.upstreams import Upstreams
    from .page import PageHost

# Requests whose claimed session is remembered (a tool may ask for its session more than once per call).
REMEMBERED_REQUESTS = 256


@dataclass
class Session:
    """Per-connection state: the engine and this client's session id."""

    engine: Engine
    store: Store
    default_session_id: str
    upstreams: Upstreams | None = None  # the gateway's connections (gateway/upstreams.py)
    forms_work: bool = True  # cleared when this client failed a form: its runs wait for the terminal command
    exposed_servers: set[str] | None = None  # the exposed upstreams when this client last listed (server/exposed.py)
    page: PageHost | None = None  # the page a client that asks by URL is sent to (server/page.py)
    declined: set[str] = field(default_factory=set)  # questions whose link the person declined: the terminal's now
    # The client process that started this server, to claim only the calls its own hook announced.
    client: Client = field(default_factory=lambda: client_of(os.getpid()))
    # On a team server (server/hub.py): who calls, as the provider vouched for them. Their session ids are theirs
    # alone, no hook of theirs announces calls on this machine, and the env of the server names no client session.
    identity: Identity | None = None
    _claimed: OrderedDict[Any, str | None] = field(default_factory=OrderedDict)

    def view(self, run_id: str, warning: str | None = None) -> Run:
        view = run_view(self.store.get_run(run_id), self.store.get_run)
        if warning:
            view.warnings.append(warning)
        return view

    async def settle(
        self, ctx: Context, run_id: str, wait_seconds: float, progress=None, *, first_change: bool = False
    ) -> Run | InputRequiredResult:
        """Wait as the caller asked; when the run then waits for a person and the client shows forms (or, showing
        none, opens URLs), ask there."""
        await self.engine.wait(run_id, wait_seconds, progress, first_change=first_change)
        for _ in range(MAX_FORMS_PER_CALL):
            asking = open_question(self.engine, run_id)
            # A resumed run's questions go to the terminal: the client that resumed it proves no person (live.py).
            if asking is None or not self.forms_work or not asking[0].forms_allowed:
                break
            era = form_era(ctx)
            if era == "modern":
                return input_required(run_id, *asking)
            if era == "legacy":
                if not await ask_by_form(self.engine, ctx, *asking):
                    self.forms_work = False
                    break
            elif self.page is not None and url_era(ctx) and asking[1].id not in self.declined:
                outcome = await ask_by_url(self.engine, ctx, *asking, self.page)
                if outcome == "failed":
                    self.forms_work = False
                if outcome != "asked":
                    if outcome == "declined":
                        self.declined.add(asking[1].id)
                    break
            else:
                break
            await self.engine.wait(run_id, wait_seconds, progress)
        return self.view(run_id)

    async def act_then_settle(
        self, ctx: Context, run_id: str, wait_seconds: float, act: Callable[[], object]
    ) -> Run | InputRequiredResult:
        """Do what the call asks (refused or, under loose, warned), then wait as the caller asked."""
        try:
            act()
        except Refused as refusal:
            return self.refused_or_warned(run_id, refusal)
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        return await self.settle(ctx, run_id, wait_seconds)

    def refused_or_warned(self, run_id: str | None, refusal: Refused) -> Run:
        """Under enforcement: loose an out-of-step call is answered with a warning and changes nothing."""
        record = self.store.get_run(run_id) if run_id else None
        loose = record is not None and record.enforcement == "loose"
        session = record.session_id if record is not None else self.default_session_id
        fields = {"session_id": session, "reason": str(refusal), "detail": {"run_id": run_id, "state": refusal.state}}
        audit.append(self.store, "refused", verdict="warned" if loose else "refused", channel="mcp", **fields)
        if not loose:
            note = f" ({record.trust_note}.)" if record is not None and record.trust_note else ""
            raise ToolError(f"{refusal}{note}") from refusal  # why the file's own level does not hold, if it does not
        return self.view(record.run_id, f"Not done (enforcement: loose, so this is a warning): {refusal}")

    def session_id(self, ctx: Context) -> str:
        """$CLAUDE_CODE_SESSION_ID, else the call's _meta.sessionID, else the session the client's hook announced
        this call for (state/claims.py: OpenCode sends none), else the id minted for this connection."""
        request = ctx.request_context
        return self.session_of_request(request.meta or {}, request.method, request.params or {}, request.request_id)

    def session_of_request(self, meta: Mapping[str, Any], method: str, params: Mapping[str, Any], key: Any) -> str:
        """session_id for a request known by its parts (`key`: its JSON-RPC id)."""
        if self.identity is not None:
            return self._team_session(meta)
        if env := os.environ.get("CLAUDE_CODE_SESSION_ID"):
            return env
        if meta.get("sessionID"):
            return str(meta["sessionID"])
        return self._announced(method, params, key) or self.default_session_id

    @property
    def started_by(self) -> str | None:
        """What a run this connection starts records as its starter: the identity's key; None for a local run."""
        return self.identity.key if self.identity is not None else None

    def _team_session(self, meta: Mapping[str, Any]) -> str:
        """A team caller's session: the one its client names, else this connection's, within the caller's own
        space, so that no one reaches another person's records by naming their session."""
        named = str(meta.get("sessionID") or "") or self.default_session_id
        owner = hashlib.sha256(self.identity.key.encode()).hexdigest()[:12] if self.identity else ""
        return f"{owner}:{named}"

    def _announced(self, method: str, params: Mapping[str, Any], key: Any) -> str | None:
        """The announced session of this tool call, claimed once per request and remembered for the rest of it."""
        if method != "tools/call" or not isinstance(params.get("name"), str):
            return None
        if key is not None and key in self._claimed:
            return self._claimed[key]
        found = claim(self.store, params["name"], params.get("arguments"), self.client)
        if key is not None:
            self._claimed[key] = found
            while len(self._claimed) > REMEMBERED_REQUESTS:
                self._claimed.popitem(last=False)
        return found


def session_of(ctx: Context) -> Session:
    """The connection's Session, which the server's lifespan made (on HTTP, the hub finds the caller's)."""
    return session_of_request(ctx.request_context)


def session_of_request(request: Any) -> Session:
    """The Session of a request context (a tool's `ctx.request_context`, or what a middleware is handed)."""
    found = request.lifespan_context
    return found if isinstance(found, Session) else found.session_for(request)
