"""Tool names split whole into the server a tool runs on and the tool's own name, in each spelling in use.

    mcp__SERVER__TOOL   Claude Code and Codex (Gemini CLI's mcp_context and Cursor's matched server are put so)
    SERVER__TOOL        the gateway's name for an upstream tool (tool_call, exposed tools), and workflows.json's
    SERVER_TOOL         OpenCode: split only at a server name its config knows
    TOOL                a client's own tool (Bash, Edit), or a tool named without its server

Whole names only (DESIGN §9): the tool part is compared whole, the server part whole; no suffix or substring
decides whose a tool is. The one exception is a trigger meeting a called name nobody could split (`whole` false):
there the end of the name may match, since matching more only gates more; evidence never matches that way.
Stdlib only: the hook splits the name of every tool call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ..records import Record

MCP_PREFIX = "mcp__"
SEPARATOR = "__"
# The server of an MCP tool whose server could not be told (Cursor's command matched no configured server). No
# client lets a server name hold "?", so no workflow can name it: such a call's records count only where the gated
# call names no server either.
UNKNOWN_SERVER = "?"


class Name(Record, fields="server tool raw whole", defaults=(True,)):
    """A tool as called (or as a workflow names it): its server and its own name."""

    __slots__ = ()

    server: str | None  # None: no server (a client's own tool; in a workflow, a tool of any server)
    tool: str  # the tool's own name, whole
    raw: str  # as written
    whole: bool  # = True; False: a name nobody could split (OpenCode's, of no known server): `tool` is all of it


def wanted(name: str) -> Name:
    """A name as workflows.json (or a step's `tools:`) writes it: `mcp__S__T` and `S__T` name server S's tool T;
    anything else is the bare tool, on any server."""
    rest = name[len(MCP_PREFIX) :] if name.lower().startswith(MCP_PREFIX) else name
    server, sep, tool = rest.partition(SEPARATOR)
    if sep and server and tool:
        return Name(server, tool, name)
    return Name(None, rest if rest else name, name)


def called(name: str, servers: Collection[str] = ()) -> Name:
    """A name as a client calls it in Claude Code's spelling (`mcp__S__T`; `mcp__T` for an MCP tool whose server is
    unknown), or the gateway's (`S__T`), or a bare client tool. `servers`: server names known to hold `__`."""
    if name.lower().startswith(MCP_PREFIX):
        rest = name[len(MCP_PREFIX) :]
        server = _longest_prefix(rest, servers, SEPARATOR)
        if server is None:
            server, sep, tool = rest.partition(SEPARATOR)
            if not (sep and server and tool):
                return Name(UNKNOWN_SERVER, rest, name)
        return Name(server, rest[len(server) + len(SEPARATOR) :], name)
    server, sep, tool = name.partition(SEPARATOR)
    if sep and server and tool:
        return Name(server, tool, name)
    return Name(None, name, name)


def name_of(tool: str | Name) -> Name:
    """A called name as given, or split as the server's callers spell it (mcp__S__T, S__T, bare)."""
    return tool if isinstance(tool, Name) else called(tool)


def opencode(name: str, servers: Callable[[], Collection[str]]) -> Name:
    """OpenCode's `SERVER_TOOL`, split at the longest server name its config knows (`servers`, asked only for a
    name with "_" in it); a name with no known server is taken whole (its own tools are bare: bash, edit)."""
    if "_" not in name:
        return Name(None, name, name)
    server = _longest_prefix(name, servers(), "_")
    if server is None:
        return Name(None, name, name, whole=False)
    return Name(server, name[len(server) + 1 :], name)


def _longest_prefix(name: str, servers: Collection[str], separator: str) -> str | None:
    """The longest known server that `name` starts with, followed by `separator` and something more."""
    lowered = name.lower()
    fits = [s for s in servers if len(name) > len(s) + len(separator) and lowered.startswith(s.lower() + separator)]
    return name[: len(max(fits, key=len))] if fits else None


def through(name: Name, own: Collection[str], upstreams: Collection[str]) -> Name | None:
    """The upstream tool an exposed tool of this server stands for (server `abilities`, tool `db__read_query` →
    server `db`, tool `read_query`), when `name` is one: its server is this server and the tool names an upstream."""
    if name.server is None or not same(name.server, own):
        return None
    upstream, sep, tool = name.tool.partition(SEPARATOR)
    if not (sep and tool) or not same(upstream, upstreams):
        return None
    return Name(upstream, tool, name.tool)


def same(a: str | None, b: str | Collection[str]) -> bool:
    """Whether server (or tool) name `a` is `b`, or one of `b`, whole and ignoring case."""
    if a is None:
        return False
    if isinstance(b, str):
        return a.lower() == b.lower()
    return any(a.lower() == x.lower() for x in b)


def matches(name: Name, want: Name, trigger: bool = False) -> bool:
    """Whether the called `name` is the tool `want` names: the same tool, on its server when it names one. A
    trigger (`trigger`) also matches where the called name cannot say more: a tool of an unknown server by its own
    name, a tool another gateway names `UPSTREAM__TOOL` as that upstream's, a name nobody could split by its end
    (`_` + the wanted tool). Matching more there only gates more; evidence never matches so."""
    if not want.tool:
        return False
    if name.raw.lower() == want.raw.lower():
        return True
    if same(name.tool, want.tool) and (want.server is None or same(name.server, want.server)):
        return True
    if not trigger:
        return False
    if name.server == UNKNOWN_SERVER and same(name.tool, want.tool):
        return True
    if name.server is not None and SEPARATOR in name.tool and matches(called(name.tool), want):
        return True
    return not name.whole and name.raw.lower().endswith("_" + want.tool.lower())
