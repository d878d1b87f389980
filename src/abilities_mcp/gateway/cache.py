"""The tool cache: `.opencode/agent-skill-tools.json` in the skill-manager seed's format, so a project that already
has one keeps using it, and `tool_search` routes over it without starting a single upstream.

Format (the seed's tool-execution reference): `version`, `refreshed_at` (ISO), `mcp_servers`, `tool_count`,
`categories: {NAME: {description, keywords, tools: [{id, description, prefix}]}}`, `uncategorized: [{id,
description}]`. Ours adds `prefix` to uncategorized tools too (the seed's readers ignore it) and keeps every other key
of the file (its `workflows`, say). A tool's category: the first rule whose server or tool-name glob fits, the
project's rules (gateway.json `categories`) before the built-in ones.

Read rules: a cache that is missing, malformed, or lists other servers than gateway.json is not used (live
discovery instead, never an error); one older than STALE_SECONDS is used and refreshed in the background. Write
rule: only a refresh that listed every server writes it; one that could not leaves the file as it was.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from ..files import Unreadable, read_text
from ..prerequisites.edits import indentation, write_atomically
from ..prerequisites.workflows import TOOL_CACHE, parse_json
from .config import SEPARATOR, CategoryRule, GatewayConfig
from .directory import Entry, Listing, discover
from .upstreams import Upstreams

VERSION = "1.0.0"
# The seed's staleness rule: older than a day, refresh.
STALE_SECONDS = 24 * 3600
# A cache bigger than this is not read (2,000 tools take about 400 KB).
MAX_CACHE_BYTES = 20_000_000
# Cache files whose last read is kept (a server has one project, so one).
READS_KEPT = 4
# The seed's categories, as rules over server and tool names.
DEFAULT_RULES: dict[str, CategoryRule] = {
    "browser": CategoryRule(
        description="Drive a web browser: open pages, click, type, take screenshots, read the console",
        keywords=["browser", "page", "click", "navigate", "screenshot", "tab", "dom", "console", "url", "website"],
        servers=["*browser*", "*playwright*", "*puppeteer*", "*chrome*", "*devtools*"],
        tools=["browser_*", "*navigate*", "*screenshot*", "*click*"],
    ),
    "github": CategoryRule(
        description="GitHub: repositories, issues, pull requests, branches, commits, code search",
        keywords=["github", "issue", "pull", "pr", "repository", "repo", "branch", "commit", "merge"],
        servers=["*github*"],
        tools=["*pull_request*", "*_issue*", "*repositor*"],
    ),
    "database": CategoryRule(
        description="Databases: tables, schemas, SQL queries",
        keywords=["database", "db", "sql", "query", "table", "schema", "select", "rows"],
        servers=["*sqlite*", "*postgres*", "*mysql*", "*database*", "*db*", "*sql*"],
        tools=["*_query", "*query_*", "*table*", "*sql*"],
    ),
    "graphql": CategoryRule(
        description="GraphQL endpoints: introspection, types, queries and mutations",
        keywords=["graphql", "mutation", "introspect", "type", "schema"],
        servers=["*graphql*"],
        tools=["*graphql*", "*mutation*", "introspect*"],
    ),
    "docs": CategoryRule(
        description="Library documentation lookup",
        keywords=["docs", "documentation", "library", "api", "reference"],
        servers=["*context7*", "*docs*"],
        tools=["*-docs", "*_docs", "resolve-library-id", "*documentation*"],
    ),
    "reasoning": CategoryRule(
        description="Structured step-by-step thinking",
        keywords=["think", "reason", "step", "analyze", "plan"],
        servers=["*thinking*", "*reason*"],
        tools=["*thinking*"],
    ),
}


class Cached(NamedTuple):
    """A usable cache: its tools as a listing, the category of each tool, and whether it is stale."""

    listing: Listing
    categories: dict[str, str]  # server__tool -> category
    stale: bool


def cache_path(root: Path) -> Path:
    return root / TOOL_CACHE


def rules(config: GatewayConfig) -> dict[str, CategoryRule]:
    """The project's category rules first (one named like a built-in replaces it), then the built-in ones."""
    return {**config.categories, **{k: v for k, v in DEFAULT_RULES.items() if k not in config.categories}}


def category(entry: Entry, found: dict[str, CategoryRule]) -> str | None:
    """The first category whose server or tool-name pattern fits the tool."""
    for name, rule in found.items():
        if any(fnmatch.fnmatchcase(entry.server, p) for p in rule.servers):
            return name
        if any(fnmatch.fnmatchcase(entry.name, p) for p in rule.tools):
            return name
    return None


def document(listing: Listing, config: GatewayConfig, servers: list[str], now: float) -> dict[str, Any]:
    """The cache for these tools, in the seed's format (plus each tool's input schema, for tool_search)."""
    found = rules(config)
    categories: dict[str, Any] = {
        name: {"description": rule.description, "keywords": list(rule.keywords), "tools": []}
        for name, rule in found.items()
    }
    uncategorized = []
    for entry in listing.entries:
        tool = {
            "id": entry.name,
            "description": entry.description,
            "prefix": entry.server + SEPARATOR,
            "input_schema": entry.input_schema,
        }
        name = category(entry, found)
        (categories[name]["tools"] if name is not None else uncategorized).append(tool)
    return {
        "version": VERSION,
        "refreshed_at": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "mcp_servers": servers,
        "tool_count": len(listing.entries),
        "categories": {name: c for name, c in categories.items() if c["tools"]},
        "uncategorized": uncategorized,
    }


def write(path: Path, fresh: dict[str, Any]) -> None:
    """Write the cache, keeping every key of an existing file that is not the cache's own (its `workflows`)."""
    old: dict[str, Any] = {}
    indent: int | str = 2
    try:
        text = path.read_text(encoding="utf-8")
        data, problems = parse_json(text, path)
        if not problems and isinstance(data, dict):
            old, indent = data, indentation(text)
    except (OSError, UnicodeDecodeError):
        pass
    kept = {k: v for k, v in old.items() if k not in fresh}
    write_atomically(path, json.dumps({**fresh, **kept}, indent=indent, ensure_ascii=False) + "\n")


class _Read(NamedTuple):
    """What one read of the cache file made of it: its tools and their categories, and when it was refreshed."""

    listing: Listing
    categories: dict[str, str]
    refreshed: float


# The last read of each cache file, with the file's stat signature and the upstreams it was read for.
_READS: dict[str, tuple[tuple[int, ...], frozenset[str], _Read | None]] = {}


def read(path: Path, config: GatewayConfig, now: float | None = None) -> Cached | None:
    """The cache, if it can be used for these upstreams; None when it is missing, malformed or outdated by
    gateway.json (then tools are discovered live). While the file and the upstreams' names are unchanged this is
    the same listing as the last read's, not a new one of equal entries: tool_search then finds its router by the
    listing's identity (gateway/directory.py `_index`), not by hashing every tool's text."""
    key, signature = str(path), _signature(path)
    if signature is None:  # missing, or not a file stat can see: read it as it is, without keeping anything
        found = _read(path, config)
    else:
        servers = frozenset(config.upstreams)
        kept = _READS.get(key)
        if kept is not None and kept[:2] == (signature, servers):
            found = kept[2]
        else:
            found = _read(path, config)  # read after the stat: a newer file is read again at the next stat
            _READS.pop(key, None)
            if len(_READS) >= READS_KEPT:
                del _READS[next(iter(_READS))]
            _READS[key] = (signature, servers, found)
    if found is None:
        return None
    stale = (time.time() if now is None else now) - found.refreshed > STALE_SECONDS
    return Cached(found.listing, found.categories, stale)


def _signature(path: Path) -> tuple[int, ...] | None:
    """Changes when the file does (a rewrite moves its ctime; an atomic replace, its inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def _read(path: Path, config: GatewayConfig) -> _Read | None:
    try:
        data, problems = parse_json(read_text(path, MAX_CACHE_BYTES), path)
    except (FileNotFoundError, Unreadable):
        return None
    if problems or not isinstance(data, dict):
        return None
    refreshed = _timestamp(data.get("refreshed_at"))
    servers, categories = data.get("mcp_servers"), data.get("categories")
    if not isinstance(data.get("version"), str) or refreshed is None or not isinstance(data.get("tool_count"), int):
        return None
    if not isinstance(categories, dict) or not isinstance(servers, list) or set(servers) != set(config.upstreams):
        return None
    entries: list[Entry] = []
    of: dict[str, str] = {}
    groups = [(name, c.get("tools")) for name, c in categories.items() if isinstance(c, dict)]
    for group, tools in [*groups, (None, data.get("uncategorized"))]:
        for tool in tools if isinstance(tools, list) else ():
            entry = _entry(tool, config)
            if entry is not None:
                entries.append(entry)
                if group is not None:
                    of[entry.qualified] = group
    return _Read(Listing(entries, refreshed, [], {}), of, refreshed)


def _entry(tool: Any, config: GatewayConfig) -> Entry | None:
    """One cached tool, named by `prefix` + `id` or by a fully qualified `id`; None when its server is not ours."""
    if not isinstance(tool, dict) or not isinstance(tool.get("id"), str):
        return None
    prefix = tool.get("prefix") if isinstance(tool.get("prefix"), str) else ""
    server, _, name = (prefix + tool["id"]).partition(SEPARATOR)
    if server not in config.upstreams or not name:
        return None
    schema = tool.get("input_schema")
    description = tool.get("description") if isinstance(tool.get("description"), str) else ""
    return Entry(server, name, description, schema if isinstance(schema, dict) else {})


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


class Refreshed(NamedTuple):
    """What a refresh found, and whether it wrote the cache."""

    tools: int
    servers: int  # the upstreams that listed their tools
    problems: list[str]  # why the others could not be listed, and gateway.json's broken entries
    written: bool


async def refresh(path: Path, config: GatewayConfig, connections: Upstreams) -> Refreshed:
    """List every upstream's tools and write the cache. When one cannot be listed nothing is written: the cache is
    one listing of every server, and one written without a server's tools would take them out of the categories
    workflows trigger on (a gate lowered, which waits for trust) and, with every server failing, hold no tool."""
    listing = await discover(config, connections)
    answered = [name for name in config.upstreams if name not in listing.failed]
    if listing.failed:
        return Refreshed(len(listing.entries), len(answered), listing.problems, False)
    write(path, document(listing, config, answered, time.time()))
    return Refreshed(len(listing.entries), len(answered), listing.problems, True)
