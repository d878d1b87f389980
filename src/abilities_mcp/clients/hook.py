"""`abilities-mcp hook CLIENT EVENT`: the server's gates applied to the client's own tool calls (DESIGN §6, §7).

The client runs this before and after every tool call, on each prompt, at session start and when the agent would
stop. It reads the client's JSON on stdin, looks at the shared state file (the session's live run and recorded
prerequisites) and workflows.json, and answers on stdout in the client's format. Stdout carries nothing else.

    before: a live run's step gate (enforcement.py), then workflows.json (gates.py): deny, ask, or context;
            a call to this server's own tools is announced for the server (state/claims.py: OpenCode's calls
            reach the server without a session id), and one to workflow_record or workflow_check marks the
            session as one the hooks observe; an upstream tool this server's gateway lists directly
            (gateway.json `expose: "all"`) is announced too and left to the gateway's gates, which run its
            missing prerequisites themselves. Whose a tool is, is told by whole names: the server names this
            client's configs give this server (servers.py), the upstreams gateway.json exposes (names.py)
    after:  record a prerequisite that ran and succeeded (sessions.py), as observed, so calling it counts
            without workflow_record; a failed call never counts (the gateway records what went through it)
    prompt: the live run's step, the abilities that fit the prompt, the workflows its words point at
    start:  the live run (after compaction or resume) and a short catalog
    stop:   block while a strict run waits for the agent or a script; never twice in a row

Clients (Claude Code, Codex, Gemini CLI, Cursor, OpenCode) differ only in payloads.py (their event names, their
payload as one Call) and answers.py (an Answer in their format); every gate above is shared.

In team mode the client's hook asks the team server instead (remote.py), which runs this same `main` against its
own project and state for the caller (cli/team_hooks.py): a `Caller` then names whose sessions the payload's are and
which of the caller's configured servers are this one, since neither is on the server's disk.

Failure policy: a strict gate that cannot read its state refuses (exit 2, the reason on stderr: Claude Code gives
it to the model, the OpenCode plugin throws it); a tool call not decided within BUDGET_SECONDS is refused too (the
clients let a call through when a hook outlives their timeout); any other failure lets the call through (exit 1,
the reason on stderr). Stdlib only, no mcp and no pydantic: a Python starts for every tool call.
"""

from __future__ import annotations

import _signal as signals  # signal's C core: the module wraps it in enums, 1 ms more on every hook
import json
import os
import sqlite3
import sys
import time

from .. import tracing
from ..prerequisites.names import MCP_PREFIX, SEPARATOR, UNKNOWN_SERVER, Name, called, opencode, same, through
from ..records import Record
from ..state.database import BUSY_TIMEOUT_MS, Database, trust_store
from ..state.project import GATEWAY_FILE, Project
from . import guards
from .answers import DENY_EXIT, FAIL_OPEN_EXIT, Answer, joined, render
from .enforcement import OWN_TOOLS, Verdict, kind, next_move, stop_verdict, tool_verdict, where
from .payloads import EVENTS, KINDS, BadPayload, Call, event_name, parse
from .position import Position, find, newest_of

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

    from ..prerequisites.gates import Observer
    from ..prerequisites.sessions import SessionState
    from ..prerequisites.workflows import WorkflowSet
    from .servers import Entry

# Imported where a decision needs them, not here: a call no workflow gates and no run holds (a Read) never loads the
# session records, the audit trail, the announcements (claims.py) or the clients' configs (servers.py); one a strict
# run's step refuses never reads workflows.json (gates.py, workflows.py, in_force.py).

# Permission modes in which Claude Code asks the person; elsewhere a `warn` workflow only tells the model.
ASKING_MODES = {"default", "acceptEdits", "plan"}
# Clients whose before-tool answer can hand the call to the person (Codex refuses `ask`: output_parser.rs).
ASKING_CLIENTS = {"claude", "gemini", "cursor"}
# Clients whose calls reach this server without a session id: their hook announces each call to the server.
# Codex and Gemini CLI send no session id with an MCP call either, and run the before-tool hook first
# (tests/clients/test_codex.py, test_gemini.py); so the server files their runs under the client's session too.
ANNOUNCING_CLIENTS = {"opencode", "codex", "gemini"}
# This server's tools whose answers depend on whether the session's hooks run (a self-report is refused where they
# do): the hook marks the session as observed when it sees one of them called (state/claims.py).
MARKING_TOOLS = {"workflow_record", "workflow_check"}


# Seconds the hook has to decide. A hook that outlives the client's timeout lets the call through (Claude Code: "a
# timed-out hook doesn't block the tool call"; Gemini CLI 0.61: a failed hook, the call goes on; Codex and Cursor say
# nothing), so a call not decided by then is refused here: half the timeout init writes (configs.py's
# HOOK_TIMEOUT_SECONDS, the OpenCode plugin's TIMEOUT_MS), leaving room for Python's start on a loaded machine.
# BUDGET_ENV may shorten it, never lengthen it: a shorter budget only refuses sooner.
BUDGET_SECONDS = 5.0
BUDGET_ENV = "ABILITIES_HOOK_BUDGET"
# The state file's WAL past which the hook empties it once its answer is decided. A hook's process ends without
# closing the file (__main__._exit_now); the next process that opens it with no other connection (every hook, when
# no server runs) rebuilds the WAL's index from the whole file, and that rebuild forgets what was checkpointed, so
# SQLite never restarts the WAL: past its 1000 pages every write checkpointed all of it again (3 fdatasyncs, 1000+
# page reads on each open, measured with strace). Emptied here, it stays under this size.
WAL_LIMIT_BYTES = 1024 * 1024


class Caller(Record, fields="owner servers url", defaults=("",)):
    """A team server's caller, when the hook runs on the server for a remote client (cli/team_hooks.py)."""

    __slots__ = ()

    owner: str  # the prefix of the caller's sessions, as the server names them (server/session.py `_team_session`)
    servers: frozenset[str]  # this server's names in the caller's client configs (remote.py reads them there)
    url: str  # = ""; the server's address in the caller's configs (Cursor names a server by its url)

    def session(self, call_session: str) -> str:
        """The caller's session as the server files it: `<owner>:<the client's id>`, so that no one reaches another
        person's records by naming their session."""
        return f"{self.owner}:{call_session}" if call_session else ""


class StateUnreadable(Exception):
    """A strict gate could not read what it needs: the call is refused (exit 2) with this reason."""


class OutOfTime(Exception):
    """The budget ran out before the hook decided."""


def main(client: str, event: str, **options: Any) -> int:
    """Answer one event (`_decide`); returns the exit code. With an OTLP endpoint set, in a span of its own
    (continuing the trace in TRACEPARENT when the client set one); without, nothing of OpenTelemetry is imported."""
    if not tracing.enable_for_short_process():
        return _decide(client, event, **options)
    attributes = {"abilities.client": client, "abilities.event": event}
    with tracing.span(f"hook {client} {event}", attributes, carrier=tracing.from_environment()) as span:
        code = _decide(client, event, **options)
        span.set({"process.exit.code": code})
        return code


def _decide(
    client: str,
    event: str,
    project: Project | None = None,
    root: str | None = None,
    session_ttl: float | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    caller: Caller | None = None,
) -> int:
    """Answer one event; returns the exit code. `root`: the project, as init pins it (`--root`): it wins over the
    environment and the client's working directory, which moves with the call (_project). `caller`: a team
    server's caller (the project then is the server's)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    name = event_name(client, event)
    if name is None:
        known = "; ".join(f"{c}: {', '.join(e)}" for c, e in EVENTS.items())
        print(f"abilities-mcp hook: unknown client or event {client!r} {event!r}; use {known}", file=stderr)
        return FAIL_OPEN_EXIT
    budget = _budget_seconds()
    try:
        with _deadline(budget):
            call = parse(client, KINDS[name], json.loads(stdin.read() or "{}"), name)
            if caller is not None:
                call = call._replace(session_id=caller.session(call.session_id))
            if project is None and root is not None and not os.path.isdir(root):  # moved, or a config from elsewhere
                said = f"abilities-mcp hook {client} {name}: its project, --root {root!r}, is not a folder here"
                fix = f"`abilities-mcp init {client}` in the project pins the hooks to where it is now"
                if KINDS[name] != "before":
                    print(f"{said}; nothing was recorded or added. {fix}", file=stderr)
                    return FAIL_OPEN_EXIT
                refused = f"{said}, so the call is refused (no gate can be read). Tell the user: {fix}."
                return render(client, name, Answer(deny=refused), stdout, stderr)
            hook = Hook(call, project or _project(call, root), session_ttl, time.monotonic() + budget, caller)
            answer = HANDLERS[call.kind](hook)
    except OutOfTime:
        return _refused_undecided(client, name, f"no decision within {budget:g} s", stdout, stderr)
    except RecursionError:  # tool_input is the agent's JSON: 5,000 nested arrays must not let a gated call through
        return _refused_undecided(client, name, "the call's input nests too deep to read", stdout, stderr)
    except StateUnreadable as exc:
        print(exc, file=stderr)
        return DENY_EXIT
    except BadPayload as exc:
        print(f"abilities-mcp hook {client} {event}: {exc}; the call was let through", file=stderr)
        return FAIL_OPEN_EXIT
    except Exception as exc:  # noqa: BLE001 - the failure policy: anything else fails open, said on stderr
        print(
            f"abilities-mcp hook {client} {event}: {type(exc).__name__}: {exc}; the call was let through", file=stderr
        )
        return FAIL_OPEN_EXIT
    tracing.annotate(_decision_attributes(call, answer))
    code = render(client, name, answer, stdout, stderr)
    hook.settle()  # after the answer and outside the budget: it decides nothing
    return code


def _decision_attributes(call: Call, answer: Answer) -> dict[str, Any]:
    """What a person filters a hook decision's span on."""
    verdict = "deny" if answer.deny else "ask" if answer.ask else "block" if answer.block_stop else "allow"
    return {"abilities.verdict": verdict, "gen_ai.tool.name": call.tool or None, "abilities.session": call.session_id}


def _budget_seconds() -> float:
    try:
        return max(0.001, min(BUDGET_SECONDS, float(os.environ.get(BUDGET_ENV) or BUDGET_SECONDS)))
    except ValueError:
        return BUDGET_SECONDS


class _deadline:  # noqa: N801 - used as a function is: `with _deadline(seconds):`
    """OutOfTime raised in the hook's own code once `seconds` pass (a C call that holds on, such as a SQLite wait,
    is bounded by the budget too: Hook.database). A class, not contextlib's: the hook does without contextlib."""

    __slots__ = ("seconds", "previous", "armed")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.previous: Any = None
        self.armed = False

    def __enter__(self) -> None:
        try:
            self.previous = signals.signal(signals.SIGALRM, _expire)
        except (AttributeError, ValueError):  # no SIGALRM (Windows), or not the main thread (a test calling main)
            return
        self.armed = True
        signals.setitimer(signals.ITIMER_REAL, self.seconds)

    def __exit__(self, *_exc: object) -> None:
        if self.armed:
            signals.setitimer(signals.ITIMER_REAL, 0)
            signals.signal(signals.SIGALRM, self.previous)


def _expire(_signum: int, _frame: Any) -> None:
    raise OutOfTime


def _refused_undecided(client: str, name: str, why: str, stdout: IO[str], stderr: IO[str]) -> int:
    """A tool call the hook could not decide is refused (the client would let it through); anything else goes on
    as a failed hook does."""
    said = f"abilities-mcp hook {client} {name}: {why}"
    if KINDS[name] != "before":
        print(f"{said}; nothing was recorded or added", file=stderr)
        return FAIL_OPEN_EXIT
    reason = (
        f"{said}, so the call is refused: a gate that cannot decide refuses rather than lets a call through. "
        "Try again (with plainer input); if this keeps happening, run `abilities-mcp doctor` and tell the user."
    )
    return render(client, name, Answer(deny=reason), stdout, stderr)


def _project(call: Call, root: str | None = None) -> Project:
    """The hook's `--root`, which init writes into every hook it wires; else DESIGN §2's root, with the client's
    working directory where a server would use its own. That directory is the call's, not the project's: Codex sends
    its exec_command's workdir, so a call run from a subfolder (or /tmp) would find no workflows.json there and pass
    ungated. An old hook without `--root` still works that way; `doctor` fails it."""
    env = os.environ
    return Project.resolve(root or env.get("ABILITIES_ROOT") or env.get("CLAUDE_PROJECT_DIR") or call.cwd or None)


class Hook:
    """One event against the project's state, read lazily: most tool calls need no database at all."""

    def __init__(
        self,
        call: Call,
        project: Project,
        session_ttl: float | None = None,
        deadline: float | None = None,
        caller: Caller | None = None,
    ):
        self.call = call
        self.project = project
        self.deadline = deadline  # time.monotonic() by which the hook must have decided
        self.caller = caller
        self._ttl = session_ttl  # worked out when a session's records are read: most calls never need it
        self._db: Database | None = None
        self._workflows: WorkflowSet | None = None
        self._name: Name | None = None
        self._entry: Entry | None = None  # Cursor: the configured server whose command the call came with
        self._ours: dict[str, bool] = {}
        self._servers: dict[str, Any] | None = None

    @property
    def workflows(self) -> WorkflowSet:
        if self._workflows is None:  # the trusted version where an edit would lower a gate (prerequisites/in_force.py)
            from ..prerequisites.in_force import workflows_in_force
            from ..prerequisites.workflows import TOOL_CACHE

            trust = trust_store(self.project, self.database() if self.project.state_url else None)
            cache = os.path.join(self.project.root_dir, TOOL_CACHE)
            self._workflows = workflows_in_force(self.project.workflows_json, cache, trust)
        return self._workflows

    def database(self) -> Database:
        if self._db is None:
            left = BUSY_TIMEOUT_MS if self.deadline is None else (self.deadline - time.monotonic()) * 1000
            self._db = Database.open(self.project, accept_newer=True, busy_ms=max(1, min(BUSY_TIMEOUT_MS, left)))
        return self._db

    def settle(self) -> None:
        """Empty the state file's WAL into the file when it outgrew WAL_LIMIT_BYTES (SQLite only; never waiting:
        while another process reads or writes, it is left for a later call)."""
        if self._db is None or self._db.postgres:
            return
        try:
            if os.stat(f"{self._db.path}-wal").st_size < WAL_LIMIT_BYTES:
                return
            self._db.db.execute("PRAGMA busy_timeout=0")
            self._db.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except (OSError, sqlite3.Error):
            return  # the answer stands: a WAL left as it is only costs the next call time

    def position(self) -> Position | None:
        """The session's live run; None when there is none (or no state file yet)."""
        if self.project.state_url is None and not os.path.exists(self.project.state_file):
            return None
        if self.caller is not None:  # a team server's: the session's run, else the caller's newest (docs/team.md)
            database = self.database()  # a replica on another host owns a run while its lock is held: ask the state
            found = find(database.db, [self.call.session_id], alive=database.owner_alive)
            return found or newest_of(database.db, self.caller.owner + ":", database.owner_alive)
        database = self.database()
        if self.call.client == "opencode":  # one OpenCode process hosts many sessions, each id stable: no fallback
            return find(database.db, [self.call.session_id], alive=database.owner_alive)
        sessions = [self.call.session_id, os.environ.get("CLAUDE_CODE_SESSION_ID", "")]
        return find(database.db, sessions, os.getpid(), alive=database.owner_alive)

    @property
    def name(self) -> Name:
        """The tool called, split whole into its server and its own name (prerequisites/names.py): OpenCode's at a
        server its config knows, Cursor's by the server whose command the call came with, the rest as Claude Code
        spells them (Gemini CLI's from its mcp_context)."""
        if self._name is None:
            self._name = self._split()
        return self._name

    def _split(self) -> Name:
        call, project = self.call, self.project  # its root as a Path only where a client's configs are read
        if call.client == "opencode":
            from .servers import known_names

            return opencode(call.tool, lambda: known_names("opencode", project.root))
        if call.client == "cursor" and call.origin:
            from .servers import cursor_server

            bare = call.tool.removeprefix(MCP_PREFIX)
            if self.caller is not None:  # the caller's .cursor/mcp.json is on their machine: its url names us
                ours = bool(self.caller.url) and call.origin.rstrip("/").startswith(self.caller.url.rstrip("/"))
                server = min(self.caller.servers) if ours and self.caller.servers else UNKNOWN_SERVER
                return Name(server, bare, f"{MCP_PREFIX}{server}{SEPARATOR}{bare}" if ours else call.tool)
            self._entry = cursor_server(project.root, call.origin)
            if self._entry is None:
                return Name(UNKNOWN_SERVER, bare, call.tool)
            return Name(self._entry.name, bare, f"{MCP_PREFIX}{self._entry.name}{SEPARATOR}{bare}")
        return called(call.tool, [call.server] if call.server else ())

    def ours(self) -> bool:
        """Whether the call is one of this server's own tools, by whole names: one of its tool names, on a server
        this client's configs say runs abilities-mcp (read only for a call that could be one)."""
        name = self.name
        return name.tool in OWN_TOOLS and self._is_ours(name.server)

    def _is_ours(self, server: str | None) -> bool:
        if server is None or server == UNKNOWN_SERVER:
            return False
        if server not in self._ours:
            from .servers import is_ours, runs_abilities_mcp

            if self.caller is not None:
                self._ours[server] = same(server, self.caller.servers)
            elif self.call.client == "cursor":
                self._ours[server] = self._entry is not None and runs_abilities_mcp(self._entry.argv)
            else:
                self._ours[server] = is_ours(self.call.client, self.project.root, server)
        return self._ours[server]

    def upstream(self) -> Name | None:
        """The upstream tool the call names through this server's gateway: Claude Code's
        `mcp__abilities__sqlite__read_query`, OpenCode's `abilities_sqlite__read_query` → server sqlite's read_query.
        Whole names: the call's server is this server, the tool's head a server of gateway.json; anything else is
        None, the same upstream configured straight in the client included (`mcp__sqlite__read_query`)."""
        name = self.name
        if name.server is None or SEPARATOR not in name.tool:
            return None
        upstream = through(name, [name.server], self._gateway_servers())
        return upstream if upstream is not None and self._is_ours(name.server) else None

    def gateway_tool(self) -> Name | None:
        """The upstream tool the call stands for when this server's gateway lists it directly (gateway.json
        `expose: "all"`): its gates are the gateway's."""
        upstream = self.upstream()
        return upstream if upstream is not None and same(upstream.server, self._exposed()) else None

    def _gateway_servers(self) -> dict[str, Any]:
        """gateway.json's servers (read with the standard library: the hook imports no pydantic); a missing or
        broken file has none."""
        if self._servers is None:
            from ..prerequisites.workflows import read_json

            data, _ = read_json(os.path.join(self.project.root_dir, GATEWAY_FILE))
            servers = data.get("mcpServers") if isinstance(data, dict) else None
            self._servers = servers if isinstance(servers, dict) else {}
        return self._servers

    def _exposed(self) -> list[str]:
        """The upstreams gateway.json lists directly."""
        servers = self._gateway_servers()
        return [name for name, entry in servers.items() if isinstance(entry, dict) and entry.get("expose") == "all"]

    def session(self) -> SessionState:
        from ..prerequisites.sessions import SessionState

        if self._ttl is None:
            self._ttl = _ttl(self.project)
        return SessionState(self.database(), self._ttl)


def _ttl(project: Project) -> float:
    """$ABILITIES_SESSION_TTL, else the settings file's sessions.ttl (as trust allows), else 24 hours."""
    from ..durations import parse_duration
    from ..prerequisites.sessions import DEFAULT_TTL_SECONDS, TTL_ENV
    from ..state.settings import chosen

    root, state = project.root_dir, project.state_folder
    return chosen(root, "sessions.ttl", None, TTL_ENV, parse_duration, DEFAULT_TTL_SECONDS, state)


def before(hook: Hook) -> Answer:
    """A tool is about to run: the guards first (whatever the run), then the live run's step, then workflows.json."""
    tool = hook.call.tool
    if not tool:
        return Answer()
    if hook.ours():
        _announce(hook, hook.name.tool)
        _mark_observed(hook)
        return Answer()
    guarded = guards.refusal(tool, hook.call.arguments, hook.project.root_dir, hook.project.state_folder)
    if guarded:
        _audit(hook, "deny", "guard", guarded)
        return Answer(deny=guarded)
    verdict = _step_verdict(hook, hook.name)
    if verdict.decision == "deny":
        _audit(hook, "deny", "the live run's step", verdict.reason)
        return Answer(deny=verdict.reason)
    served = hook.gateway_tool()
    if served is not None:  # the gateway gates it, running what is missing first: a deny here would stop that
        _announce(hook, served.raw)
        return Answer(context=verdict.context)
    gate = _workflow_answer(hook, hook.upstream() or hook.name)
    return gate._replace(context=joined(verdict.context, gate.context))


def _announce(hook: Hook, name: str) -> None:
    """Tell the server which session this call to its tool `name` is from, when the client will not (claims.py)."""
    if hook.call.client not in ANNOUNCING_CLIENTS or not hook.call.session_id or hook.caller is not None:
        return  # (a team server names its callers' sessions by who they are, not by what a hook announced)
    from ..state.claims import announce
    from ..state.owners import client_of

    announce(hook.database(), hook.call.session_id, name, hook.call.arguments, client_of(os.getpid()))


def _audit(hook: Hook, verdict: str, rule: str, reason: str) -> None:
    """A decision of the hook's own gates in the audit trail (state/audit.py); a state that cannot be written
    changes no decision."""
    from ..state.audit import append

    call = hook.call
    try:
        fields = {"session_id": call.session_id, "client": call.client, "tool": hook.name.raw, "channel": "hook"}
        append(hook.database(), "gate", verdict=verdict, rule=rule, reason=reason, **fields)
    except (sqlite3.Error, OSError, RuntimeError):
        return


def _mark_observed(hook: Hook) -> None:
    """This session's client runs the hooks: mark it so, for the server's workflow_record and workflow_check,
    before the call reaches the server (claims.py). A state file that cannot be written marks nothing: the call
    goes on, and the server then takes a self-report as one (the gates of the hook and the gateway still count only
    what they saw)."""
    if hook.name.tool not in MARKING_TOOLS or not hook.call.session_id:
        return
    from ..state.claims import mark_observed

    try:
        mark_observed(hook.database(), hook.call.session_id, hook.call.client)
    except (sqlite3.Error, OSError, RuntimeError):
        return


def _step_verdict(hook: Hook, tool: Name) -> Verdict:
    try:
        position = hook.position()
    except (sqlite3.Error, OSError, RuntimeError) as exc:
        if kind(tool) == "read":
            return Verdict("allow")
        raise StateUnreadable(
            f"abilities-mcp: {tool.raw} refused: the state {hook.project.state_shown} cannot be read ({exc}), so "
            "the hook cannot tell whether a strict run is waiting. Read-only tools still work. Run "
            "`abilities-mcp status`, which moves a damaged file aside or says what to fix, then try again."
        ) from exc
    return Verdict("allow") if position is None else tool_verdict(position, tool, hook.call.subagent, hook.call.skill)


def _hooks_see() -> Observer:
    """The hook sees every tool call of its session: a self-report (workflow_record) never counts in its gate."""
    from ..prerequisites.gates import Observer

    return Observer(hooks=True)


def _workflow_answer(hook: Hook, tool: Name) -> Answer:
    """workflows.json for this tool: deny for enforce, ask (or tell) for warn, tell for suggest."""
    from ..prerequisites.gates import RECORDED_BY_HOOK, check

    found, arguments = hook.workflows, hook.call.arguments
    unrecorded = check(found, tool, "", {}, arguments=arguments)
    if not unrecorded.matched:
        return Answer()  # no workflow triggers on this tool: no state needed
    try:
        done = hook.session().done(hook.call.session_id)
    except (sqlite3.Error, OSError, RuntimeError) as exc:
        if unrecorded.verdict == "deny":
            raise StateUnreadable(
                f"abilities-mcp: {tool.raw} refused: an enforced workflow needs this session's recorded steps, "
                f"and {hook.project.state_shown} cannot be read ({exc}). Fix or move the file, then try again."
            ) from exc
        raise
    result = check(found, tool, "", done, how=RECORDED_BY_HOOK, observer=_hooks_see(), arguments=arguments)
    from ..prerequisites.sessions import audited

    try:
        audited(hook.database(), result, hook.call.session_id, "hook", hook.call.client)
    except (sqlite3.Error, OSError, RuntimeError):
        pass  # the trail's write changes no decision
    text = "\n".join([f"abilities-mcp: {result.message}", *found.pending])  # an edit waiting for trust, named
    if result.verdict == "deny":
        return Answer(deny=text)
    if any(m.workflow.approval is not None for m in result.matched):
        from ..prerequisites.approvals import asking

        wanting = asking(result.matched)
        if wanting:
            return _call_approval(hook, tool, wanting, result.verdict, found.pending)
    if result.verdict == "warn":
        asks = hook.call.client in ASKING_CLIENTS and hook.call.permission_mode in ASKING_MODES
        return Answer(ask=text, context=text) if asks else Answer(context=text)
    return Answer(context=text) if result.verdict == "suggest" else Answer()


def _call_approval(hook: Hook, tool: Name, wanting: list[Any], verdict: str, pending: list[str]) -> Answer:
    """A call workflows want a person's yes for: under enforce, the yes a person gave this exact call is used up and
    the call goes on, else the request is left for them and the call refused; under warn, the person is asked
    where the client asks, and the model told elsewhere; under suggest, the model is told."""
    from ..prerequisites.approvals import CallApprovals, TooLong, TooMany, refusal, request_for

    enforced = [m for m in wanting if m.workflow.mode == "enforce"]
    if not enforced:
        names = ", ".join(repr(m.workflow.name) for m in wanting)
        text = f"abilities-mcp: workflow {names} wants a person's approval for this call; ask the user first."
        asks = hook.call.client in ASKING_CLIENTS and hook.call.permission_mode in ASKING_MODES
        if any(m.workflow.mode == "warn" for m in wanting) or verdict == "warn":
            return Answer(ask=text, context=text) if asks else Answer(context=text)
        return Answer(context=text)
    try:
        request = request_for(tool.raw, hook.call.arguments, enforced, hook.call.cwd or hook.project.root_dir)
        approvals = CallApprovals(hook.database())
        taken = approvals.take(hook.call.session_id, request)
        if taken is not None:
            return Answer(
                context=f"abilities-mcp: this call was approved by {taken.answered_by} ({taken.channel}, "
                f"{taken.call_id}); the approval is used now: the same call again needs another."
            )
        asked = approvals.ask(hook.call.session_id, hook.call.client, request)
    except (TooMany, TooLong) as exc:
        return Answer(deny=f"abilities-mcp: Denied: this call needs a person's approval, and {exc}.")
    except (sqlite3.Error, OSError, RuntimeError) as exc:
        raise StateUnreadable(
            f"abilities-mcp: {tool.raw} refused: it needs a person's approval, and {hook.project.state_shown} cannot "
            f"be read ({exc}). Fix or move the file, then try again."
        ) from exc
    except Exception as exc:  # noqa: BLE001 - a call held for a person fails closed, whatever went wrong
        raise StateUnreadable(
            f"abilities-mcp: {tool.raw} refused: it needs a person's approval, and asking for one failed "
            f"({type(exc).__name__}: {exc}). Tell the user; `abilities-mcp doctor` may say why."
        ) from exc
    return Answer(deny="\n".join([f"abilities-mcp: {refusal(asked)}", *pending]))


def after(hook: Hook) -> Answer:
    """A tool ran: if a workflow lists it and it succeeded, record it for this session as seen (in order, where
    the workflow enforces); a failed call never counts, and the model is told so."""
    from ..prerequisites.gates import tool_matches

    name = hook.name
    listed = [(w, p) for w in hook.workflows.enabled() for p in w.prerequisites if tool_matches(name, p.tool)]
    if not listed or not hook.call.session_id or hook.ours() or hook.upstream() is not None:
        return Answer()  # this server's calls, and the gateway's, which records what it saw itself
    if hook.call.failed:
        return Answer(context="\n".join(_failed_note(name, w, p) for w, p in listed))
    plan = hook.session().record(hook.call.session_id, hook.workflows, name, hook.call.result, None, _hooks_see())
    notes = [
        f"abilities-mcp: {name.raw} ran before {earlier.tool} (step {earlier.step} of {workflow.name}, which is "
        f"enforced in order), so it does not count yet: call {earlier.tool}, then {name.raw} again."
        for workflow, _step, earlier in plan.refused
    ]
    return Answer(context="\n".join(notes))


def _failed_note(name: Name, workflow: Any, step: Any) -> str:
    return (
        f"abilities-mcp: {name.raw} failed, so it does not count as step {step.step} of {workflow.name}; a "
        "prerequisite counts once a call of it succeeds."
    )


def prompt(hook: Hook) -> Answer:
    """A prompt was sent: the live run's step, the abilities that fit, the workflows its words point at."""
    from .briefing import abilities, suggest, suggestions_text

    parts = [_run_note(hook.position())]
    found = suggest(abilities(hook.project), hook.call.prompt) if hook.call.prompt.strip() else []
    if found:
        parts.append(suggestions_text(found))
    parts.append(_keyword_note(hook))
    return Answer(context=joined(*parts))


def _keyword_note(hook: Hook) -> str:
    from ..prerequisites.gates import check

    words = check(hook.workflows, "", hook.call.prompt, {})
    pending = [m for m in words.matched if m.missing]
    if not pending:
        return ""
    lines = ["abilities-mcp: this request touches tool prerequisites (workflows.json):"]
    for m in pending:
        steps = " -> ".join(p.tool for p in m.workflow.prerequisites if p.required)
        lines.append(
            f"- {m.workflow.name} ({m.workflow.mode}): before {', '.join(m.workflow.tools) or 'its tools'}, "
            f"run {steps}."
        )
    return "\n".join(lines)


def start(hook: Hook) -> Answer:
    """A session started, resumed, was cleared or compacted: where the live run is, and what there is."""
    from .briefing import abilities, catalog

    return Answer(
        context=joined(_run_note(hook.position()), catalog(hook.project, abilities(hook.project), hook.workflows))
    )


def _run_note(position: Position | None) -> str:
    if position is None:
        return ""
    return f"abilities-mcp: a run is live in this session. {where(position)} {next_move(position)}"


def stop(hook: Hook) -> Answer:
    """The agent would end its turn: not while a strict run waits for it (or runs a script), and never twice."""
    verdict = stop_verdict(hook.position(), hook.call.stop_hook_active)
    return Answer(block_stop=verdict.reason if verdict.block else "", message=verdict.message)


HANDLERS = {"before": before, "after": after, "prompt": prompt, "start": start, "stop": stop}
