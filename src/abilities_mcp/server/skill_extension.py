"""The MCP skills extension, SEP-2640 v1 (`io.modelcontextprotocol/skills`): skills/list, skills/get and
resources/directory/read over the same skill:// resources the skill tools serve.

Entries carry the SKILL.md frontmatter verbatim and the complete manifest (skills/manifest.py). A skill the
extension cannot describe faithfully — its folder name differs from its `name`, its frontmatter lacks a name or a
description, it breaks the 512-file or 16 MiB limit — is left out of the listing and answered -32602 by skills/get
with the reason; the skill_* tools still reach it. `allowed-tools` passes through as the author wrote it: the
extension reports it, never widens anything.
"""

import json
import mimetypes
from typing import Any, Literal
from urllib.parse import unquote

import anyio.to_thread
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CacheableResult, PaginatedRequestParams, PaginatedResult, RequestParams, Resource
from pydantic import BaseModel, ConfigDict, Field

from ..errors import AbilitiesError
from ..skills.manifest import OverLimit, children, manifest
from ..skills.skillset import SkillSet
from ..skills.spec import Skill
from .skill_tools import SKILL_SCHEME, skill_uri

IDENTIFIER = "io.modelcontextprotocol/skills"
# Skills are re-read when their files change, so a host should not hold a listing long.
TTL_MS = 60_000
# Entries a skills/list page carries; the cursor is the offset of the next one.
PAGE_SIZE = 100
# Entries a resources/directory/read page carries (a folder of 20,000 files is 40 pages, not one 1.7 MB answer).
DIRECTORY_PAGE_SIZE = 500
DIRECTORY_MIME = "inode/directory"
# Built on first use (a client that asks skills/list), not at start-up; annotations are evaluated when each class is
# made, not parsed from strings, for the same reason.
LAZY = ConfigDict(defer_build=True)


class SkillResourceEntry(BaseModel):
    model_config = LAZY

    uri: str
    digest: str
    size: int


class SkillEntry(BaseModel):
    model_config = LAZY

    uri: str
    frontmatter: dict[str, Any]
    resources: list[SkillResourceEntry]


class ListSkillsResult(CacheableResult, PaginatedResult):
    model_config = LAZY

    result_type: Literal["complete"] = Field(default="complete", alias="resultType")
    skills: list[SkillEntry]


class GetSkillParams(RequestParams):
    model_config = LAZY

    uri: str


class GetSkillResult(CacheableResult):
    model_config = LAZY

    result_type: Literal["complete"] = Field(default="complete", alias="resultType")
    skill: SkillEntry


class ReadDirectoryParams(PaginatedRequestParams):
    model_config = LAZY

    uri: str


class ReadDirectoryResult(PaginatedResult):
    model_config = LAZY

    result_type: Literal["complete"] = Field(default="complete", alias="resultType")
    resources: list[Resource]


class AdvertiseOnHandshake:
    """Server middleware: the handshake-era `initialize` result keeps `capabilities.extensions`.

    The SDK advertises extensions on 2026-07-28 connections only: its 2025-11-25 schema has no `extensions` field,
    so the result is sieved. But the clients that ask `skills/list` today (the MCP Inspector 2.12) open with the
    2025-11-25 handshake and send `extensions` in their own capabilities; an unknown field is ignored by the rest.
    """

    def __init__(self, extensions: dict[str, dict[str, Any]]):
        self.extensions = extensions

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict) and "extensions" not in capabilities:
                capabilities["extensions"] = self.extensions
        return result


class SkillsExtension(Extension):
    """skills/list, skills/get, resources/directory/read for the project's skills."""

    identifier = IDENTIFIER

    def __init__(self, skillset: SkillSet):
        self.skillset = skillset

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("skills/list", PaginatedRequestParams, self._list),
            MethodBinding("skills/get", GetSkillParams, self._get),
            MethodBinding("resources/directory/read", ReadDirectoryParams, self._read_directory),
        ]

    async def _list(self, _ctx: Any, params: PaginatedRequestParams) -> ListSkillsResult:
        start = _offset(params.cursor)
        entries = await anyio.to_thread.run_sync(self._entries)
        page = entries[start : start + PAGE_SIZE]
        more = start + PAGE_SIZE < len(entries)
        return ListSkillsResult(
            skills=page, next_cursor=str(start + PAGE_SIZE) if more else None, ttl_ms=TTL_MS, cache_scope="private"
        )

    async def _get(self, _ctx: Any, params: GetSkillParams) -> GetSkillResult:
        name, path = _split(params.uri)
        if path != "SKILL.md":
            raise _invalid(f"{params.uri} is not a skill's SKILL.md URI; skills/get takes skill://<name>/SKILL.md")
        skill = self._skill(name, params.uri)
        entry = await anyio.to_thread.run_sync(_entry_or_reason, skill)
        if isinstance(entry, str):
            raise _invalid(f"No skill is served at {params.uri}: {entry}")
        return GetSkillResult(skill=entry, ttl_ms=TTL_MS, cache_scope="private")

    async def _read_directory(self, _ctx: Any, params: ReadDirectoryParams) -> ReadDirectoryResult:
        name, path = _split(params.uri)
        skill = self._skill(name, params.uri)
        start = _offset(params.cursor)
        try:
            found = await anyio.to_thread.run_sync(children, skill, path.rstrip("/"))
        except (NotADirectoryError, OSError):
            raise _invalid(f"{params.uri} is not a directory resource of skill {skill.name!r}") from None
        prefix = f"{path.rstrip('/')}/" if path else ""
        page, end = found[start : start + DIRECTORY_PAGE_SIZE], start + DIRECTORY_PAGE_SIZE
        return ReadDirectoryResult(
            resources=[_child(skill, prefix + n, n, is_dir) for n, is_dir in page],
            next_cursor=str(end) if end < len(found) else None,
        )

    def _entries(self) -> list[SkillEntry]:
        skills = sorted(self.skillset.refresh().skills.values(), key=lambda s: s.name)
        return [e for e in map(_entry_or_reason, skills) if not isinstance(e, str)]

    def _skill(self, name: str, uri: str) -> Skill:
        try:
            return self.skillset.get(name)
        except AbilitiesError:
            raise _invalid(f"No skill is served at {uri}") from None


def _entry_or_reason(skill: Skill) -> SkillEntry | str:
    """The skill's entry, or why the extension cannot describe it faithfully."""
    front = skill.frontmatter
    if front.get("name") != skill.name or skill.directory.name != skill.name:
        return f"its folder '{skill.directory.name}' and its frontmatter name must both be {skill.name!r}"
    if not isinstance(front.get("description"), str) or not front["description"]:
        return "its frontmatter has no description"
    try:
        files = manifest(skill)
    except OverLimit as exc:
        return str(exc)
    except OSError as exc:
        return f"a file of it cannot be read ({exc.strerror or exc})"
    resources = [SkillResourceEntry(uri=skill_uri(skill.name, f.path), digest=f.digest, size=f.size) for f in files]
    return SkillEntry(uri=skill_uri(skill.name, "SKILL.md"), frontmatter=_as_json(front), resources=resources)


def _as_json(frontmatter: dict[str, Any]) -> dict[str, Any]:
    """The frontmatter as JSON values: YAML dates and the like become the text the author wrote them as."""
    return json.loads(json.dumps(frontmatter, default=str))


def _child(skill: Skill, relative: str, name: str, is_dir: bool) -> Resource:
    if is_dir:
        return Resource(uri=skill_uri(skill.name, relative), name=name, mime_type=DIRECTORY_MIME)
    guessed = "text/markdown" if name.endswith(".md") else mimetypes.guess_type(name)[0]
    return Resource(uri=skill_uri(skill.name, relative), name=name, mime_type=guessed or "application/octet-stream")


def _split(uri: str) -> tuple[str, str]:
    """skill://<name>/<path> → (name, path); the skill's own folder is skill://<name> with path ""."""
    if not uri.startswith(SKILL_SCHEME):
        raise _invalid(f"{uri!r} is not a skill:// URI; this server serves skills as skill://<name>/<path>")
    name, _, path = uri[len(SKILL_SCHEME) :].partition("/")
    return unquote(name), unquote(path)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise _invalid(f"cursor {cursor[:40]!r} was not given by this server; start again without one")
    return int(cursor)


def _invalid(message: str) -> MCPError:
    return MCPError(INVALID_PARAMS, message)
