"""The upstream tools found by live discovery: named `server__tool`, resolved from what a caller writes, ranked
for a task by the skill router's engine (name, description, parameter names and everyday words for the name's; a
task about the data in a database also by the SQL words it asks for)."""

from __future__ import annotations

import functools
import operator
import re
import time
from typing import Any, NamedTuple

import anyio

from ..errors import AbilitiesError, did_you_mean
from ..skills.router import Router, stem, words
from .config import SEPARATOR, GatewayConfig
from .memo import by_identity
from .upstreams import UpstreamError, Upstreams

# Upstream tool lists whose entries are kept (one per connection, and the one before it while it is replaced).
LISTINGS_KEPT = 64
# Routers kept for the tool lists seen last (one per distinct list: a server rarely sees more than a couple).
ROUTERS_KEPT = 4
# A search looks this many tools past its limit, so a deprecated one can give its place to the next that fits.
DEPRECATED_SLACK = 3
_DEPRECATED = re.compile(r"\bdeprecated\b", re.IGNORECASE)
# Everyday words for what a word of a tool's name says: tasks say "make a table", "show the columns", "forget bob",
# "what did reviewers say on PR 5" where tools say create_table, describe_table, delete_entities,
# get_pull_request_reviews. Read with the tool's description; general software words only, not one server's
# vocabulary. Chosen on the dev split of benchmarks/tool_eval (with parameter names, top-1 0.50 -> 0.69).
ALSO_SAID = {
    "create": "make new add open start",
    "add": "make new put",
    "get": "show view see fetch look",
    "read": "show view open see print contents",
    "list": "show",
    "delete": "remove forget drop erase",
    "update": "change edit modify set close",
    "edit": "change modify replace",
    "search": "find look lookup",
    "write": "save put",
    "describe": "show columns fields structure",
    "navigate": "go open visit browse",
    "directory": "folder",
    "query": "sql select",
    "move": "rename",
    "run": "execute",
    "evaluate": "run execute",
    "show": "view display see",
    "diff": "compare changes difference",
    "log": "history",
    "fill": "type enter input",
    "select": "choose pick",
    "reset": "undo unstage",
    "user": "people member",
    "pull": "pr",  # the router's "pr" = "pull request" synonym reaches no one-word term
}
_ALSO_SAID = {stem(word): said for word, said in ALSO_SAID.items()}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A task about the data in a database ("which users are in the shop database", "delete old rows from the logs
# table") is mostly the user's own names (users, shop, logs), which no tool's description has: it is searched with
# the words of the SQL it asks for too, "write query" and the SQL verb for a change, else "read query select". Not
# one about the structure (tables, columns, a new table): list_tables, describe_table and create_table say that in
# their names. Chosen on natural data questions over mcp-server-sqlite alone and over benchmarks/tool_eval's 118
# tools (held-out questions: top-1 4/12 -> 12/12 and 5/12 -> 12/12); the benchmark's own figures rose a little.
DATA_WORDS = frozenset(map(stem, "database databases db table row rows record records sql".split()))
STRUCTURE_WORDS = frozenset("tables columns column schema schemas fields structure indexes".split())
CREATE_WORDS = frozenset(map(stem, "create make".split()))
CHANGE_SAID = {
    **dict.fromkeys(map(stem, "add insert new put".split()), "insert"),
    **dict.fromkeys(map(stem, "remove delete drop erase".split()), "delete"),
    **dict.fromkeys(map(stem, "change update set edit modify rename".split()), "update"),
}
READ_SAID, WRITE_SAID = "read query select", "write query"


class Entry(NamedTuple):
    """One upstream tool."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False  # the upstream says so (readOnlyHint): tool_batch may retry it

    @property
    def qualified(self) -> str:
        return f"{self.server}{SEPARATOR}{self.name}"


class Listing(NamedTuple):
    """The tools of the upstreams that answered, and why the others are missing."""

    entries: list[Entry]
    refreshed_at: float
    problems: list[str]
    failed: dict[str, str]  # upstream -> why it could not be listed


class UnknownTool(AbilitiesError):
    """A tool name no upstream offers, or one several offer, with what the caller may mean."""


async def discover(config: GatewayConfig, upstreams: Upstreams, only: str | None = None) -> Listing:
    """List the tools of every upstream (or only one), concurrently; a failing upstream is a problem, not an error."""
    names = [only] if only is not None else list(config.upstreams)
    found: dict[str, list[Entry]] = {}
    failed: dict[str, str] = {}

    async def one(name: str) -> None:
        try:
            tools = await upstreams.connection(config.upstreams[name]).tools()
        except UpstreamError as exc:
            failed[name] = str(exc)
            return
        found[name] = _entries(tools, name)

    if len(names) == 1:  # a call names its server: no task group for it (this runs on every proxied call)
        await one(names[0])
    else:
        async with anyio.create_task_group() as tasks:
            for name in names:
                tasks.start_soon(one, name)
    entries = [e for name in names for e in found.get(name, [])]
    return Listing(entries, time.time(), [failed[n] for n in names if n in failed] + broken(config), failed)


def discover_now(config: GatewayConfig, upstreams: Upstreams, only: str | None = None) -> Listing | None:
    """discover's listing when every upstream it needs is already up and listed (no task needed); else None."""
    names = [only] if only is not None else list(config.upstreams)
    entries: list[Entry] = []
    for name in names:
        tools = upstreams.connection(config.upstreams[name]).tools_now()
        if tools is None:
            return None
        entries += _entries(tools, name)
    return Listing(entries, time.time(), broken(config), {})


@by_identity(LISTINGS_KEPT)
def _entries(tools: list[Any], server: str) -> list[Entry]:
    """One upstream's tools as entries, made once per listing (a connection lists its tools once)."""
    return [Entry(server, t.name, t.description or "", dict(t.input_schema or {}), _read_only(t)) for t in tools]


def broken(config: GatewayConfig) -> list[str]:
    """gateway.json's edit waiting for trust and its broken entries, as a search's warnings name them."""
    return [*config.pending, *(f"{d} (this server is left out until gateway.json is fixed)" for d in config.problems)]


def _read_only(tool: Any) -> bool:
    annotations = getattr(tool, "annotations", None)
    return bool(annotations is not None and annotations.read_only_hint)


def split(name: str, config: GatewayConfig) -> tuple[str | None, str]:
    """(server, tool) for `server__tool` naming a configured server, else (None, name)."""
    server, sep, tool = name.partition(SEPARATOR)
    if sep and server in config.upstreams and tool:
        return server, tool
    return None, name


def resolve(name: str, listing: Listing) -> Entry:
    """The tool a caller means: `server__tool`, or a bare name one upstream alone offers."""
    for entry in listing.entries:
        if entry.qualified == name:
            return entry
    bare = [e for e in listing.entries if e.name == name]
    if len(bare) == 1:
        return bare[0]
    if bare:
        choices = ", ".join(repr(e.qualified) for e in bare)
        raise UnknownTool(f"Tool {name!r} is offered by several upstream servers; name one: {choices}.")
    known = [e.qualified for e in listing.entries] + [e.name for e in listing.entries]
    close = did_you_mean(name, known)
    hint = f" Did you mean {close!r}?" if close else " Call tool_search(task) to find one."
    missing = "".join(f"\n{p}" for p in listing.problems)
    raise UnknownTool(f"Unknown tool {name!r}: no upstream server offers it.{hint}{missing}")


class Found(NamedTuple):
    """One tool that fits a task."""

    entry: Entry
    score: float
    reasons: list[str]


def search(listing: Listing, task: str, limit: int) -> list[Found]:
    """The tools that fit a task, best first (the skill router over `server__tool` and `_text`); a tool its
    own description calls deprecated goes after the others that fit (server-filesystem's read_file, which says to
    use read_text_file instead, shares all its words)."""
    index = _index(listing.entries)
    said = data_said(task)
    routed = index.router.route(f"{task}. {said}" if said else task, limit + DEPRECATED_SLACK)
    why = [f"a task about data: searched as {said!r} too"] if said else []
    found = [(index.position[m.name], m) for m in routed]
    found.sort(key=lambda pair: pair[0] in index.deprecated)  # stable: the router's order otherwise
    return [Found(listing.entries[i], m.score, m.reasons + why) for i, m in found[:limit]]


def data_said(task: str) -> str:
    """The SQL words a task about the data in a database asks for (DATA_WORDS); "" for any other task."""
    found = words(task)
    stems = set(map(stem, found))
    if stems.isdisjoint(DATA_WORDS) or not STRUCTURE_WORDS.isdisjoint(found) or not stems.isdisjoint(CREATE_WORDS):
        return ""
    verbs = sorted({CHANGE_SAID[s] for s in stems if s in CHANGE_SAID})
    return " ".join([WRITE_SAID, *verbs]) if verbs else READ_SAID


def _parameters(entry: Entry) -> tuple[str, ...]:
    properties = entry.input_schema.get("properties") if isinstance(entry.input_schema, dict) else None
    return tuple(properties) if isinstance(properties, dict) else ()


class _Index(NamedTuple):
    """What a search needs from one tool list, worked out once for it."""

    router: Router
    position: dict[str, int]  # server__tool -> its place in the list (the last, for a name listed twice)
    deprecated: frozenset[int]  # the places of tools whose own description calls them deprecated


_HEAD = operator.itemgetter(0, 1, 2)  # an entry's server, name and description
# Indexes by the identities of the entries they were built from, the entries held with them so no id is reused.
_BY_IDENTITY: dict[tuple[int, ...], tuple[list[Entry], _Index]] = {}


@by_identity(ROUTERS_KEPT)
def _index(entries: list[Entry]) -> _Index:
    """The index for a list of entries: by the list (a listing searched again), else by its entries' identities (a
    listing discovered again: each upstream's entries are made once per tool list), else by their contents (a
    listing read from the tool cache has new entries each time); each much cheaper than the next."""
    ids = tuple(map(id, entries))
    kept = _BY_IDENTITY.get(ids)
    if kept is not None:
        return kept[1]
    index = _index_of(tuple(map(_HEAD, entries)), tuple(map(_parameters, entries)))  # C loops, but for parameters
    if len(_BY_IDENTITY) >= ROUTERS_KEPT:
        del _BY_IDENTITY[next(iter(_BY_IDENTITY))]
    _BY_IDENTITY[ids] = (list(entries), index)
    return index


@functools.lru_cache(maxsize=ROUTERS_KEPT)
def _index_of(heads: tuple[tuple[str, str, str], ...], parameters: tuple[tuple[str, ...], ...]) -> _Index:
    """The router's index over these tools (server, name, description; parameter names), built once: indexing 2,000
    tools takes far longer than a query."""
    qualified = [f"{server}{SEPARATOR}{name}" for server, name, _ in heads]
    texts = [_text(name, description, names) for (_, name, description), names in zip(heads, parameters, strict=True)]
    # No "nothing fits" test: a gateway offers its best tools; declining is for skills, where none is a fine answer.
    router = Router(zip(qualified, texts, strict=True), fit_test=False)
    deprecated = frozenset(i for i, (_, _, description) in enumerate(heads) if _DEPRECATED.search(description))
    return _Index(router, {q: i for i, q in enumerate(qualified)}, deprecated)


def _text(name: str, description: str, parameters: tuple[str, ...]) -> str:
    """What the router reads for a tool beside `server__tool`: its description, its parameters' names as words
    (entityNames: entity names; table_name splits by itself) and ALSO_SAID's words for its name's words."""
    said = dict.fromkeys(_ALSO_SAID[term] for term in map(stem, words(name)) if term in _ALSO_SAID)
    # Clauses of their own: after a description's "use other_tool instead", they are still this tool's words.
    return ". ".join([description, " ".join(_CAMEL.sub(" ", p) for p in parameters), " ".join(said)])
