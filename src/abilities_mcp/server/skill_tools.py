"""The skill tools and the skill:// resources (DESIGN §5).

Progressive disclosure as the agentskills.io client guide lays it out: skill_list / skill_route show names and
descriptions, skill_load hands out one body with its file list (not the files), skill_read and the skill://
resources give one file at a time, never anything outside the skill's folder.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote

import anyio
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    Resource,
    ResourceTemplate,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field

from ..errors import AbilitiesError
from ..skills.plan import PlanError
from ..skills.selection import DEFAULT_BODY_BUDGET, Selection, for_step, selection_event
from ..skills.skillset import SkillSet, bundled_files, read_skill_file, skill_content
from ..state import skill_events
from .results import (
    ChosenSkill,
    PlanTask,
    SkillFileRead,
    SkillList,
    SkillLoaded,
    SkillMatch,
    SkillPlan,
    SkillProblem,
    SkillRoute,
)
from .session import session_of
from .views import skill_list_view

logger = logging.getLogger(__name__)
READ_ONLY = ToolAnnotations(read_only_hint=True)
SKILL_SCHEME = "skill://"
SKILL_TEMPLATE = "skill://{name}/{+path}"
# skill_route returns at most this many matches, whatever the caller asks.
MAX_ROUTE_LIMIT = 20


class SkillServer(MCPServer):
    """MCPServer whose resource list follows the skills on disk: every skill file is skill://<name>/<path>."""

    def __init__(self, skillset: SkillSet, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.skillset = skillset

    async def list_resources(self) -> list[Resource]:
        skills = await anyio.to_thread.run_sync(self.skillset.refresh)  # off the event loop, like the catalog
        return [*await super().list_resources(), *skill_resources(skills)]

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        template = ResourceTemplate(
            uri_template=SKILL_TEMPLATE,
            name="skill-file",
            description="A file inside a skill's folder: skill://<name>/SKILL.md or skill://<name>/<path>",
        )
        return [*await super().list_resource_templates(), template]

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        if not str(uri).startswith(SKILL_SCHEME):
            return await super().read_resource(uri, context)
        name, _, path = str(uri)[len(SKILL_SCHEME) :].partition("/")
        try:
            skill = self.skillset.get(unquote(name))
            found = await anyio.to_thread.run_sync(read_skill_file, skill, unquote(path))  # never on the loop
        except AbilitiesError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        return [
            ReadResourceContents(content=found.text if found.data is None else found.data, mime_type=found.mime_type)
        ]


def skill_resources(skillset: SkillSet) -> Iterable[Resource]:
    """SKILL.md of every skill (described by the skill's description) and its bundled files."""
    for skill in skillset.skills.values():
        yield Resource(
            uri=skill_uri(skill.name, "SKILL.md"),
            name=f"{skill.name}/SKILL.md",
            description=skill.description,
            mime_type="text/markdown",
        )
        for path in bundled_files(skill)[0]:
            yield Resource(uri=skill_uri(skill.name, path), name=f"{skill.name}/{path}")


def skill_uri(name: str, path: str) -> str:
    """skill://<name>/<path>, percent-encoded so that reading a listed URI gives back the file it was listed for
    (a file literally named `a%20b.md` must not read as `a b.md`)."""
    return f"{SKILL_SCHEME}{quote(name, safe='')}/{quote(path)}"


def add_skill_tools(server: MCPServer, skillset: SkillSet) -> None:
    """skill_list, skill_route, skill_plan, skill_load and skill_read; loads are remembered per session to say
    'already loaded', and what each session found and chose is recorded as skill events (state/skill_events.py)."""
    loaded: dict[str, set[str]] = {}
    seen: dict[str, tuple | None] = {}

    def observe(ctx: Context) -> str:
        """Record what this session has not seen of the skill set yet: the skills found, those that failed."""
        session = _session_key(ctx)
        if seen.get(session, ()) != skillset.version:
            seen[session] = skillset.version
            _record_discovery(ctx, skillset, session)
        return session

    @server.tool(name="skill_list", annotations=READ_ONLY)
    async def skill_list(ctx: Context) -> SkillList:
        """List the project's and the user's Agent Skills: name, description, where it is, loading warnings."""
        view = skill_list_view(await anyio.to_thread.run_sync(skillset.refresh))
        observe(ctx)
        return view

    @server.tool(name="skill_route", annotations=READ_ONLY)
    async def skill_route(
        task: Annotated[str, Field(description="The task in the user's words")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=MAX_ROUTE_LIMIT, description="How many skills at most")] = 3,
    ) -> SkillRoute:
        """Find the skills that fit a task, best first, with a score and the reasons. Empty when none fits: then
        work without a skill. Load the one you use with skill_load."""
        router = await anyio.to_thread.run_sync(skillset.router)  # built (or rebuilt) off the event loop
        observe(ctx)
        matches = router.route(task, limit)
        return SkillRoute(matches=[SkillMatch(**vars(m)) for m in matches])

    @server.tool(name="skill_plan", annotations=READ_ONLY)
    async def skill_plan(
        ctx: Context,
        plan: Annotated[str | None, Field(description="A Markdown checklist under the project (e.g. PLAN.md)")] = None,
        task: Annotated[str | None, Field(description="The task, instead of a plan")] = None,
        step_kind: Annotated[Literal["implementation", "review"], Field(description="The step's kind")] = (
            "implementation"
        ),
        max_skills: Annotated[int | None, Field(ge=0, le=10, description="Default 2, or 1 for review")] = None,
        budget: Annotated[
            int | None, Field(ge=1000, le=200_000, description=f"Characters per file (default {DEFAULT_BODY_BUDGET})")
        ] = None,
        include_references: Annotated[bool | None, Field(description="Add each skill's references/ files")] = None,
    ) -> SkillPlan:
        """For one step of a plan: the plan's next unchecked task (or the task given), the skills for it (those
        the task names, `(skills: a, b)`, then the best matches), and a prompt block with the skills to paste into
        the step's instructions. task is null when every task of the plan is done."""
        try:
            step = await anyio.to_thread.run_sync(
                lambda: for_step(skillset, plan, task, step_kind, max_skills, budget, include_references)
            )
        except PlanError as exc:
            raise ToolError(f"{exc}. Without a task from the plan, pick the task yourself.") from exc
        found, chosen = step.task, step.selection
        _record_selection(ctx, observe(ctx), found.text if found else None, chosen)
        return SkillPlan(
            task=PlanTask(text=found.text, line=found.line, section=found.section, parent=found.parent)
            if found
            else None,
            step_kind=chosen.step_kind,
            skills=[ChosenSkill(name=c.name, reason=c.reason) for c in chosen.skills],
            strategy=chosen.strategy,
            errors=[SkillProblem(**e) for e in chosen.errors],
            truncated=chosen.truncated,
            prompt=chosen.prompt,
        )

    @server.tool(name="skill_load", annotations=READ_ONLY)
    async def skill_load(
        name: Annotated[str, Field(description="Skill name from skill_list or skill_route")],
        ctx: Context,
    ) -> SkillLoaded:
        """Load a skill's instructions (SKILL.md body) to follow now, with its folder and the list of its files."""
        await anyio.to_thread.run_sync(skillset.refresh)
        skill = _get(skillset, name)
        done = loaded.setdefault(observe(ctx), set())
        already = skill.name in done
        done.add(skill.name)
        text = skill_content(skill)
        if already:
            text = f"(Skill {skill.name!r} was already loaded in this session; here it is again.)\n{text}"
        result = SkillLoaded(
            name=skill.name,
            directory=str(skill.directory),
            content=skill.body,
            resources=bundled_files(skill)[0],
            text=text,
            already_loaded=already,
        )
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result.model_dump())

    @server.tool(name="skill_read", annotations=READ_ONLY)
    async def skill_read(
        name: Annotated[str, Field(description="The skill")],
        path: Annotated[str, Field(description="A file inside the skill's folder, e.g. references/forms.md")],
    ) -> SkillFileRead:
        """Read one file of a skill (a path relative to its folder). Binary files come back as a resource."""
        try:
            await anyio.to_thread.run_sync(skillset.refresh)
            found = await anyio.to_thread.run_sync(read_skill_file, _get(skillset, name), path)  # never on the loop
        except AbilitiesError as exc:
            raise ToolError(str(exc)) from exc
        uri = skill_uri(found.skill, found.path)
        model = SkillFileRead(
            name=found.skill,
            path=found.path,
            uri=uri,
            mime_type=found.mime_type,
            size=found.size,
            text=found.text,
            truncated=found.truncated,
        )
        if found.data is None:
            note = f"\n[truncated: the file has {found.size} bytes]" if found.truncated else ""
            block: Any = TextContent(type="text", text=(found.text or "") + note)
        else:
            blob = BlobResourceContents(uri=uri, mime_type=found.mime_type, blob=base64.b64encode(found.data).decode())
            block = EmbeddedResource(type="resource", resource=blob)
        return CallToolResult(content=[block], structured_content=model.model_dump())


def _get(skillset: SkillSet, name: str):
    try:
        return skillset.get(name)
    except AbilitiesError as exc:
        raise ToolError(str(exc)) from exc


def _record_discovery(ctx: Context, skillset: SkillSet, session: str) -> None:
    scopes, names, failures = skillset.discovery()
    for failure in failures:
        logger.warning("skill %s did not load: %s", failure["path"], failure["error"])
    skill_events.record_discovery(session_of(ctx).store, session, scopes, names, failures)


def _record_selection(ctx: Context, session: str, task: str | None, chosen: Selection) -> None:
    for error in chosen.errors:
        logger.warning("skill_plan: skill %s: %s", error["name"], error["error"])
    store = session_of(ctx).store
    skill_events.record_selection(store, session, selection_event(chosen, task), chosen.truncated, chosen.budget)


def _session_key(ctx: Context) -> str:
    """The session the load belongs to (DESIGN §6), as the connection's Session works it out."""
    return session_of(ctx).session_id(ctx)
