"""A proxied tool call behind the gates: resolve the tool, check its arguments, apply every workflow it triggers
(enforce: run the missing prerequisites first, on the gated call's upstream or the one a prerequisite names; warn
and suggest: say so), call it, record what it saw succeed.

The gateway makes its upstreams' calls, so its gate counts only those it saw (DESIGN §9): a self-report
(workflow_record) of an upstream tool never stands in for running it, and a record made on another upstream never
stands in for this one's (prerequisites/gates.py `counts`).

Nothing reaches an upstream before the gate allows it (DESIGN §9): a refusal or a bad argument sends nothing, and
the main call is sent only after every prerequisite an enforce workflow needed has run and been recorded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from mcp_types import CallToolResult, TextContent

from ..errors import AbilitiesError, NextCall, Refused
from ..prerequisites.approvals import CallApprovals, asking
from ..prerequisites.gates import Check, Matched, Observer, check, tool_matches
from ..prerequisites.in_force import Workflows
from ..prerequisites.names import Name, same, wanted
from ..prerequisites.sessions import MAX_RESULT_CHARS, SessionState, audited
from ..prerequisites.workflows import Prerequisite, WorkflowSet
from ..state.claims import observed
from .arguments import Unfilled, fill, schema_problems
from .config import Gateway, GatewayConfig
from .directory import Entry, Listing, UnknownTool, discover, discover_now, resolve, split
from .memo import by_identity
from .person import Ask, person_says_yes
from .upstreams import Progress, Started, UpstreamError, Upstreams

# A prerequisite the gateway runs is tried this many times before the workflow is aborted (the seed's rule).
PREREQUISITE_ATTEMPTS = 3
# What the gates say of an upstream tool no workflow triggers on, kept for this many (workflows version, tool) pairs.
GATES_KEPT = 4096


class BadArguments(AbilitiesError):
    """Arguments that do not fit the upstream tool's input schema: nothing was sent."""


class UpstreamUnavailable(AbilitiesError):
    """The upstream a call names could not be reached (its UpstreamError's words)."""


class PrerequisiteFailed(AbilitiesError):
    """A prerequisite the gateway ran failed every attempt: the main call was not sent."""


class Ran(NamedTuple):
    """One prerequisite the gateway ran before the main call."""

    workflow: str
    step: int
    tool: str
    arguments: dict[str, Any]
    attempts: int


class Gate(NamedTuple):
    """What the gates did to one call."""

    verdict: str
    ran: list[Ran]
    warnings: list[str]


class Outcome(NamedTuple):
    """A proxied call's upstream result and its gate."""

    entry: Entry
    result: CallToolResult
    gate: Gate
    attempts: int = 1  # how many times the main call was sent (more only when retried: read-only, tool_batch)


# Where a call started without a task ends (Proxy.ready_now): handed a function that returns its Outcome or raises.
Finished = Callable[[Callable[[], "Outcome"]], None]
# A call's session id, found when first asked for (server/lane.py claims the hook's announcement then, once).
SessionOf = Callable[[], str]
# A call Proxy.ready_now found ready, started for a session: (session_id_of, done, progress) -> Started, or None when it
# must wait after all (prerequisites to run first). It asks for the session only when a workflow triggers on the
# call (its gate reads the session's records) or its result is to be recorded.
Ready = Callable[[SessionOf, Finished, Progress | None], Started | None]


class Planned(NamedTuple):
    """A prerequisite to run: which workflow wants it, on which upstream tool, with what arguments."""

    workflow: str
    prerequisite: Prerequisite
    entry: Entry
    arguments: dict[str, Any]


class Proxy:
    """The gateway's calls for one server: its upstreams, the project's workflows and the session records."""

    def __init__(self, gateway: Gateway, workflows: Workflows, upstreams: Upstreams, sessions: SessionState):
        self.gateway = gateway
        self.workflows = workflows
        self.upstreams = upstreams
        self.sessions = sessions

    @functools.cached_property
    def config(self) -> GatewayConfig:
        """gateway.json as this proxy's calls see it: read once (a batch's calls all see the same)."""
        return self.gateway.current()

    def _notes(self, found: WorkflowSet) -> list[str]:
        """What every gate answer says besides its verdict: edits waiting for trust, broken workflows."""
        return [*found.warnings(), *self.config.pending]

    async def listing(self, name: str | None = None) -> Listing:
        """The upstream tools; for `server__tool`, only that server's (the others are not started)."""
        server = split(name, self.config)[0] if name else None
        return await discover(self.config, self.upstreams, only=server)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        session_id: str,
        attempts: int = 1,
        progress: Progress | None = None,
        ask: Ask | None = None,
        form_first: bool = False,
    ) -> Outcome:
        """Call an upstream tool through the gates. Raises (each an AbilitiesError): UnknownTool, UpstreamUnavailable,
        BadArguments, Refused, PrerequisiteFailed, UpstreamError.

        `attempts` > 1: a read-only tool (the upstream's readOnlyHint) whose call fails (an error result, a timeout,
        a dead connection) is sent again, up to that many times in all; any other tool is sent once. `progress`
        gets the upstream's progress notifications for the main call (not for the prerequisites). A call a workflow
        holds for a person's yes waits for it (gateway/person.py: `ask` shows the client's form; `form_first` raises
        FormFirst for a 2026-era client to show it first), and is Refused without it."""
        listing = await self.listing(name)
        server = split(name, self.config)[0]
        if server in listing.failed:
            raise UpstreamUnavailable(listing.failed[server])  # the server named could not list its tools
        entry = resolve(name, listing)
        problems = schema_problems(entry.input_schema, arguments)
        if problems:
            raise BadArguments(_bad_arguments(entry, problems))
        found = self.workflows.current()
        first = self._gate(found, entry, lambda: session_id, listing, arguments)
        ran: list[Ran] = []
        after = first
        if first.verdict == "deny":
            plan = await self._plan(first, entry, arguments, listing)
            ran = [await self._run(step, session_id, listing) for step in plan]
            after = self._gate(found, entry, lambda: session_id, listing, arguments)
        if after.verdict == "deny":  # only if the records were cleared meanwhile; whatever the cause, never send
            raise Refused(f"{entry.qualified!r} is still gated: {after.message}", "prerequisites missing")
        approvals = CallApprovals(self.sessions.store)
        said = await person_says_yes(
            approvals, after.matched, entry.qualified, arguments, session_id, ask, progress, form_first
        )
        result, sent = await self._main_call(entry, arguments, attempts if entry.read_only else 1, progress)
        if not result.is_error and _is_prerequisite(found, gated(entry)):  # else there is nothing to record
            self._record(session_id, found, entry, result, listing)
        notes = [f"approved by {said.answered_by} ({said.channel}, {said.call_id}), used by this call"] if said else []
        return Outcome(entry, result, Gate(first.verdict, ran, _warnings(after) + notes + self._notes(found)), sent)

    def ready_now(self, name: str, arguments: dict[str, Any]) -> Ready | None:
        """`call` from a loop callback, without a task, for a call that needs nothing waited for before it is sent:
        its upstream up and listed, its arguments fitting, no prerequisite to run, no workflow that may ask a
        person. This half reads and writes nothing of a session (the call resolved against a listing already made,
        its arguments checked, the workflows in force read once); the Ready it returns gates and sends the call for
        a session, and hands `done` a function that returns the Outcome or raises as `call` does. None, here or
        from the Ready, when the call is not such a call (nothing was sent, nothing was recorded): `call` is the
        way then, and says why when it fails. A workflow that may ask a person makes every call the SDK's, whose
        context shows the client's form (server/lane.py)."""
        server = split(name, self.config)[0]
        listing = discover_now(self.config, self.upstreams, only=server)
        if listing is None:
            return None
        try:
            entry = resolve(name, listing)
        except UnknownTool:
            return None
        if schema_problems(entry.input_schema, arguments):
            return None
        found = self.workflows.current()
        if _asks_a_person(found):
            return None
        upstream = self.config.upstreams[entry.server]

        def go(session_id_of: SessionOf, done: Finished, progress: Progress | None = None) -> Started | None:
            first = self._gate(found, entry, session_id_of, listing, arguments)
            if first.verdict == "deny" or asking(first.matched):  # prerequisites to run, or a person to wait for
                return None
            gate = Gate(first.verdict, [], _warnings(first) + self._notes(found))

            def outcome(result: CallToolResult) -> Outcome:
                if not result.is_error and _is_prerequisite(found, gated(entry)):
                    self._record(session_id_of(), found, entry, result, listing)
                return Outcome(entry, result, gate)

            return self.upstreams.connection(upstream).call_now(
                entry.name, arguments, lambda result: done(lambda: outcome(result())), progress
            )

        return go

    def _gate(
        self, found: WorkflowSet, entry: Entry, session_id_of: SessionOf, listing: Listing, arguments: dict[str, Any]
    ) -> Check:
        """Every workflow's verdict for calling `entry` in this session; the session and its records are read only
        when a workflow is triggered (most calls trigger none: that answer is worked out once per workflows version
        and tool), and count only where the gateway (or a hook) saw them run."""
        tool = gated(entry)
        if tool.server:  # an upstream's tool, as always: what triggers on it never reads the call's arguments
            untriggered = _untriggered(found, tool)
            if untriggered is not None:
                return untriggered
        elif not (unrecorded := check(found, tool, "", {}, arguments=arguments)).matched:
            return unrecorded
        session_id = session_id_of()
        done = self.sessions.done(session_id)
        result = check(found, gated(entry), "", done, observer=self._seen(session_id, listing), arguments=arguments)
        audited(self.sessions.store, result, session_id, "gateway")
        return result

    def _seen(self, session_id: str, listing: Listing | None = None) -> Observer:
        """Who sees this session's calls: the gateway its upstreams' (those `listing` lists: only the tools they
        offer), the client's hooks every one when they marked the session (state/claims.py)."""
        offers = {}
        for e in listing.entries if listing is not None else ():
            offers.setdefault(e.server.lower(), set()).add(e.name.lower())
        upstreams = frozenset(self.config.upstreams)
        hooks = observed(self.sessions.store, session_id)
        return Observer(upstreams, hooks, {server: frozenset(tools) for server, tools in offers.items()})

    def _record(
        self, session_id: str, found: WorkflowSet, entry: Entry, result: CallToolResult, listing: Listing
    ) -> None:
        """A call the gateway made and saw succeed, recorded as seen on its upstream."""
        self.sessions.record(session_id, found, gated(entry), text_of(result), None, self._seen(session_id, listing))

    async def _main_call(
        self, entry: Entry, arguments: dict[str, Any], attempts: int, progress: Progress | None
    ) -> tuple[CallToolResult, int]:
        """The gated call itself, sent up to `attempts` times while it fails; the last failure is what remains."""
        for attempt in range(1, attempts + 1):
            try:
                result = await self._upstream_call(entry, arguments, progress)
            except UpstreamError as exc:
                if attempt == attempts:
                    exc.attempts = attempt
                    raise
                continue
            if not result.is_error or attempt == attempts:
                return result, attempt
        raise AssertionError("unreachable: attempts >= 1")

    async def _plan(self, gate: Check, entry: Entry, arguments: dict[str, Any], listing: Listing) -> list[Planned]:
        """The missing prerequisites of every enforce workflow, in step order, each tool once, arguments filled;
        Refused naming the calls to make when one cannot be run. A bare prerequisite runs on the gated call's
        upstream; one naming its server (`sqlite__list_tables`), on that one."""
        wanted_steps: dict[str, tuple[Matched, Prerequisite]] = {}
        for m in gate.matched:
            if m.verdict == "deny":
                for p in m.missing:
                    wanted_steps.setdefault(p.tool, (m, p))
        if any(_upstream_tool(tool, entry.server, listing) is None for tool in wanted_steps):
            listing = await self.listing()  # some prerequisite lives elsewhere: only now start the other upstreams
        plan, blocked, steps = [], [], []
        for m, p in wanted_steps.values():
            target = _upstream_tool(p.tool, entry.server, listing)
            steps.append((p, target))
            try:
                filled = {**p.params, **fill(p.arguments, arguments)}
            except Unfilled as exc:
                blocked.append((m, p, target, f"{exc.reference} is not an argument of this call"))
                continue
            if target is None:
                blocked.append((m, p, None, _not_offered(p.tool, entry.server, listing)))
                continue
            problems = schema_problems(target.input_schema, filled)
            if problems:
                blocked.append((m, p, target, "its arguments cannot be filled (" + "; ".join(problems) + ")"))
                continue
            held = self._held_for_a_person(target, filled)
            if held:
                blocked.append((m, p, target, held))
                continue
            plan.append(Planned(m.workflow.name, p, target, filled))
        if blocked:
            raise _cannot_run(entry, blocked, steps, arguments)
        return plan

    def _held_for_a_person(self, target: Entry, arguments: dict[str, Any]) -> str | None:
        """Why the gateway may not run this prerequisite call itself: a workflow holds each such call for a person's
        yes (the gateway asks for one only for the call the agent makes), or None."""
        matched = check(self.workflows.current(), gated(target), "", {}, arguments=arguments).matched
        held = [m.workflow.name for m in matched if m.workflow.approval is not None and m.workflow.mode == "enforce"]
        if not held:
            return None
        return (
            f"a person approves each call of it (workflow {', '.join(map(repr, held))}), so the gateway does not "
            "make it itself: call it yourself with tool_call, which asks them"
        )

    async def _run(self, step: Planned, session_id: str, listing: Listing) -> Ran:
        """Run one prerequisite, up to PREREQUISITE_ATTEMPTS times, and record it; abort the workflow if it fails."""
        error = ""
        for attempt in range(1, PREREQUISITE_ATTEMPTS + 1):
            try:
                result = await self._upstream_call(step.entry, step.arguments)
            except UpstreamError as exc:
                error = str(exc)
                continue
            if result.is_error:
                error = text_of(result) or "the tool reported an error"
                continue
            self._record(session_id, self.workflows.current(), step.entry, result, listing)
            return Ran(step.workflow, step.prerequisite.step, step.entry.qualified, step.arguments, attempt)
        p = step.prerequisite
        raise PrerequisiteFailed(
            f"Workflow {step.workflow!r} failed at step {p.step} ({p.tool}): {error}\n"
            f"Tried {PREREQUISITE_ATTEMPTS} times as {step.entry.qualified}({_args(step.arguments)}); the gated call "
            "was not sent."
        )

    async def _upstream_call(
        self, entry: Entry, arguments: dict[str, Any], progress: Progress | None = None
    ) -> CallToolResult:
        upstream = self.config.upstreams[entry.server]
        return await self.upstreams.connection(upstream).call(entry.name, arguments, progress)


def gated(entry: Entry) -> Name:
    """An upstream tool's name as the gates read it: its server and its own name, whole."""
    return Name(entry.server, entry.name, entry.qualified)


@by_identity(GATES_KEPT)
def _untriggered(found: WorkflowSet, tool: Name) -> Check | None:
    """The gates' answer for a call of an upstream tool that no workflow triggers on; None when one does. What
    triggers on an upstream tool is its name and its category, never its arguments (a shell rule is for the client's
    own shell tool) nor a task (a call has none), so the answer holds for a workflows version."""
    unrecorded = check(found, tool, "", {})
    return None if unrecorded.matched else unrecorded


@by_identity(GATES_KEPT)
def _asks_a_person(found: WorkflowSet) -> bool:
    """Whether any enabled workflow wants a person's yes for the calls it gates, once per workflows version."""
    return any(w.approval is not None for w in found.enabled())


@by_identity(GATES_KEPT)
def _is_prerequisite(found: WorkflowSet, tool: Name) -> bool:
    """Whether any enabled workflow lists the tool as a prerequisite (only then has a call of it to be recorded),
    worked out once per workflows version and tool."""
    return any(tool_matches(tool, p.tool) for w in found.enabled() for p in w.prerequisites)


def _upstream_tool(want: str, server: str, listing: Listing) -> Entry | None:
    """The tool a prerequisite names, whole: on the server it names, else on the gated call's server (`server`)."""
    name = wanted(want)
    target = name.server or server
    return next((e for e in listing.entries if same(e.server, target) and same(e.name, name.tool)), None)


def _not_offered(want: str, server: str, listing: Listing) -> str:
    name = wanted(want)
    if name.server is not None:
        return f"no upstream server {name.server!r} offers {name.tool!r}"
    elsewhere = sorted({e.server for e in listing.entries if same(e.name, name.tool)})
    if not elsewhere:
        return f"no upstream server offers {name.tool!r}"
    return (
        f"{server!r} offers no {name.tool!r}, and a bare prerequisite runs on the gated call's server; "
        f"{', '.join(map(repr, elsewhere))} offers one, which a workflow names {elsewhere[0]}__{name.tool}"
    )


def _cannot_run(entry: Entry, blocked: list, steps: list, arguments: dict[str, Any]) -> Refused:
    """Refuse the call (nothing was sent), naming each prerequisite the gateway could not run. When every missing
    step is a tool an upstream offers, the legal next calls are those steps in order, made by the caller with the
    arguments each needs, then the call again; a step no upstream can run is never named as a call to make, but as
    a workflow to fix."""
    why = "; ".join(
        f"step {p.step} ({p.tool}) of workflow {m.workflow.name!r}: {reason}" for m, p, _, reason in blocked
    )
    head = f"{entry.qualified!r} is gated by an enforce workflow whose prerequisites the gateway cannot run itself"
    unmet = [(m, p) for m, p, target, _ in blocked if target is None]
    if unmet:
        tools = list(dict.fromkeys(repr(p.tool) for _, p in unmet))
        workflows = ", ".join(dict.fromkeys(repr(m.workflow.name) for m, _ in unmet))
        which = tools[0] if len(tools) == 1 else f"one of {', '.join(tools)}"
        fix = (
            f" If {which} is a tool of your client, not of an upstream, call it directly (your client's hook records "
            f"it), then call {entry.qualified!r} again. Otherwise workflow {workflows} names a tool no upstream has, "
            "and no call can meet it: ask the user to fix it in workflows.json (name a tool an upstream offers, "
            "make the step optional or remove it; a person then runs `abilities-mcp trust`, as that loosens a gate)"
        )
        return Refused(f"{head}: {why}.{fix}", "prerequisites missing in this session", [NextCall("workflow_list", {})])
    calls = [NextCall("tool_call", {"tool": target.qualified, "arguments": dict(p.params)}) for p, target in steps]
    calls.append(NextCall("tool_call", {"tool": entry.qualified, "arguments": arguments}))
    fix = " Nothing was sent: make these calls in order yourself, each with the arguments it needs, then this one."
    return Refused(f"{head}: {why}.{fix}", "prerequisites missing in this session", calls)


def _bad_arguments(entry: Entry, problems: list[str]) -> str:
    return (
        f"Arguments for {entry.qualified!r} do not fit its input schema; nothing was sent: " + "; ".join(problems) + "."
        f" Its schema: {entry.input_schema}"
    )


def _warnings(gate: Check) -> list[str]:
    """What the call ran without: a warn workflow's missing steps as a warning, a suggest workflow's as a note."""
    out = []
    for m in gate.matched:
        missing = ", ".join(f"{p.tool} (step {p.step})" for p in m.missing)
        if m.verdict == "warn":
            out.append(f"Warning: workflow {m.workflow.name!r} (warn) expects {missing} to run first in this session.")
        elif m.verdict == "suggest":
            out.append(f"Note: workflow {m.workflow.name!r} suggests {missing} first.")
    return out


def _args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


def text_of(result: CallToolResult) -> str:
    """A result as the short text a session record keeps: its text blocks, else a word for each other block."""
    parts = [b.text if isinstance(b, TextContent) else f"[{b.type}]" for b in result.content]
    return " ".join(parts).strip()[:MAX_RESULT_CHARS]
