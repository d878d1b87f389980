"""The MCP server: `create_server(project)` builds one for a project, with every tool and resource on it."""

from __future__ import annotations

import logging
import secrets
import typing
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver import server as sdk_server
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types import InputRequiredResult
from pydantic import BaseModel

from .. import __version__
from ..abilities.catalog import Catalog
from ..engine.core import Engine
from ..gateway.config import Gateway
from ..gateway.upstreams import upstreams
from ..prerequisites.sessions import DEFAULT_TTL_SECONDS
from ..state.project import Project
from ..state.store import DEFAULT_HISTORY_DAYS, DEFAULT_HISTORY_RUNS, Store
from .ability_tools import add_ability_tools, add_matching_tools
from .hub import Hub, Team
from .lane import Lane
from .page import PageHost
from .session import Session
from .skill_extension import AdvertiseOnHandshake, SkillsExtension
from .skill_tools import SkillServer, add_skill_tools
from .workflow_tools import add_workflow_tools

try:
    from . import schemas
except ImportError:  # another release of the SDK moved what schemas.py builds on: the tools are generated live
    schemas = None  # type: ignore[assignment]

# Clients cut server instructions around 2 KB.
INSTRUCTIONS = """\
abilities-mcp runs project workflows ("abilities") whose steps must happen in order, and serves Agent Skills.
- Find one: ability_match(text) ranks abilities whose triggers fit the request; ability_list shows all.
- Start it: ability_run(name, inputs). Script steps are run by the server; do not run them yourself.
- A run returns when it ends, waits for you, or wait_seconds pass. Then follow `next_calls` exactly:
  usually ability_status(run_id, wait_seconds=30) until it ends.
- Agent and skill steps come back to you as current_step.instructions: do the work (delegate to the named agent,
  follow the skill handed out), then hand it back with ability_step_complete(run_id, step_id, output).
- Out-of-step calls are refused with the legal next call in the message.
- Approval and decision steps are answered by a person (a form your client shows, or `abilities-mcp approve`
  in their terminal), never by you unless the ability is enforcement: loose.
- ability_cancel stops a run and kills its processes; ability_resume continues an interrupted or failed run.
Skills: before a specialised task (documents, spreadsheets, slides, testing, design ...), call
skill_route(task); when it returns a match, skill_load(name) and follow the instructions it returns. Read a
skill's other files only when those instructions point to them: skill_read(name, path). An empty skill_route
means no skill fits: do the task without one. skill_list shows every skill.
Workflows: before calling another server's tool that a workflow gates (workflow_list), call workflow_check(tool,
task). On deny, call the missing tools in order, workflow_record(tool, result) after each, then check again.
"""


def _configure_logging(*args: Any, **kwargs: Any) -> None:
    """The SDK's `configure_logging`, skipped where it would do nothing: it builds rich's handler for
    `logging.basicConfig`, which leaves a root logger that has handlers alone (`serve` set them up, cli/main.py), so
    only rich's import (~2% of a start-up) would remain."""
    if not logging.getLogger().handlers:
        _sdk_configure_logging(*args, **kwargs)


_sdk_configure_logging = getattr(sdk_server, "configure_logging", None)
if _sdk_configure_logging is not None:  # MCPServer.__init__ calls it by this module's name
    sdk_server.configure_logging = _configure_logging


class AbilitiesServer(SkillServer):
    """The MCPServer with skill resources, its tools built from the schemas generated once per version
    (server/schemas.py), else generating each result model's output schema once, not once per tool.

    Seven tools return a Run; generating its JSON Schema for each cost ~5 ms apiece at start-up. FuncMetadata's
    fields are read live (the SDK documents this), so later tools get the first one's schema.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._schemas: dict[type, dict[str, Any]] = {}
        self._known = (schemas.generated() if schemas is not None else None) or {}

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> None:
        name = name or fn.__name__
        entry = self._known.get(name)
        if entry is not None and kwargs.get("structured_output") is None and name not in self._tool_manager._tools:
            kwargs.pop("structured_output", None)
            self._tool_manager._tools[name] = schemas.known_tool(entry, fn, name, **kwargs)  # no public add
            return
        model = _result_model(fn)
        if model is None or model not in self._schemas:
            super().add_tool(fn, name, **kwargs)
            if model is not None:
                self._schemas[model] = self._tool_manager.get_tool(name).fn_metadata.output_schema
            return
        super().add_tool(fn, name, **{**kwargs, "structured_output": False})
        metadata = self._tool_manager.get_tool(name).fn_metadata
        metadata.output_model, metadata.output_schema = model, self._schemas[model]


def _auth(team: Team | None) -> dict[str, Any]:
    """A team server is an OAuth 2.1 resource server: the SDK checks each request's bearer token with the team's
    verifier and serves the RFC 9728 metadata that points clients at the provider."""
    if team is None:
        return {}
    from mcp.server.auth.settings import AuthSettings

    settings = AuthSettings(
        issuer_url=team.issuer,
        resource_server_url=team.resource,
        validate_token_resource=False,  # the verifier checks issuer and expiry; audiences are the provider's policy
    )
    return {"auth": settings, "token_verifier": team.verifier}


def _result_model(fn: Callable[..., Any]) -> type | None:
    """The pydantic model a tool returns (an InputRequiredResult alternative aside), or None for anything else."""
    returned = typing.get_type_hints(fn).get("return")
    found = [t for t in typing.get_args(returned) or (returned,) if t is not InputRequiredResult]
    if len(found) == 1 and isinstance(found[0], type) and issubclass(found[0], BaseModel):
        return found[0]
    return None


def create_server(
    project: Project,
    *,
    retry_base: float | None = None,
    history_runs: int = DEFAULT_HISTORY_RUNS,
    history_days: float = DEFAULT_HISTORY_DAYS,
    session_ttl: float = DEFAULT_TTL_SECONDS,
    team: Team | None = None,
) -> MCPServer:
    """Build a server for one project; each connection gets its own engine over the shared state file. `team`: a
    team server over HTTP (server/http.py), one engine for every caller, each identified by a verified token."""
    catalog = Catalog(project)
    gateway = Gateway(project)
    lane = Lane()

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Session | Hub]:
        store = Store.open(project)
        store.prune(history_runs, history_days)
        options = {"retry_base": retry_base} if retry_base is not None else {}
        engine = Engine(store, catalog, team=team is not None, **options)
        try:
            # nothing connects until a call needs it; the page starts when a client that asks by URL needs it
            async with engine.running(), upstreams() as connections, anyio.create_task_group() as tg:
                if team is not None:  # every caller over HTTP: the hub finds each one's Session
                    yield Hub(engine, store, team.issuer, connections)
                    return
                page = PageHost(project, tg)
                lane.session = Session(engine, store, f"mcp-{secrets.token_hex(6)}", connections, page=page)
                try:
                    yield lane.session
                finally:
                    lane.session = None
                    page.stop()
        finally:
            store.close()

    skills = SkillsExtension(catalog.skillset)
    bus = InMemorySubscriptionBus()  # subscriptions/listen (2026-07-28): how such a client hears the tools changed
    server = AbilitiesServer(
        catalog.skillset,
        "abilities-mcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        extensions=[skills],
        middleware=[AdvertiseOnHandshake({skills.identifier: skills.settings()})],
        subscriptions=bus,
        **_auth(team),
    )
    add_ability_tools(server, catalog)
    add_matching_tools(server, catalog)
    add_skill_tools(server, catalog.skillset)
    add_workflow_tools(server, catalog.workflows, session_ttl, gateway)
    if gateway.file.exists():  # the gateway's tools only for a project that has one (tools/list stays short)
        from .exposed import ExposedTools
        from .gateway_tools import add_gateway_tools

        lane.call_through, lane.call_now = add_gateway_tools(server, gateway, catalog.workflows, session_ttl)
        lane.asks_person = lambda: any(w.approval is not None for w in catalog.workflows.current().enabled())
        own = {tool.name for tool in server._tool_manager.list_tools()}
        lane.exposed = ExposedTools(gateway, catalog.workflows, session_ttl, own, bus)
        server._lowlevel_server.middleware.append(lane.exposed)  # no public add
        lane.server_info = lambda: server._lowlevel_server.server_info_stamp  # what 2026 results are stamped with
        server.lane = lane  # served on stdio, the gateway's calls skip the SDK's per-request machinery
    return server
