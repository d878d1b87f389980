"""The workflow tools (DESIGN §5): workflow_list, workflow_check, workflow_record, workflow_status, workflow_reset.

Thin: read the workflows (re-read when the files change), ask gates.py for the verdict, keep each session's
records with sessions.py.

A self-report is evidence only where nothing sees the tool run (DESIGN §9): a tool of an upstream behind the
gateway (which makes its calls), or any tool of a session whose client runs this server's hooks (the hook marks
such a session when it sees workflow_record or workflow_check called: state/claims.py). There workflow_record of
a step an enforce workflow needs is refused, naming the call that makes it count; under warn and suggest it is
recorded as self-reported, and the result says so.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..errors import NextCall, Refused, UnknownName
from ..gateway.config import Gateway
from ..prerequisites.approvals import CallApprovals
from ..prerequisites.gates import (
    RECORD_YOURSELF,
    RECORDED_BY_HOOK,
    REPORTED,
    RUN_BY_GATEWAY,
    Observer,
    RecordPlan,
    check,
)
from ..prerequisites.in_force import Workflows
from ..prerequisites.names import Name, called, same, wanted
from ..prerequisites.sessions import MAX_RESULT_CHARS, SessionState, audited
from ..state.claims import observed
from .results import (
    CompletedStep,
    RecordedStep,
    WorkflowCheck,
    WorkflowList,
    WorkflowRecord,
    WorkflowReset,
    WorkflowStatus,
)
from .session import session_of
from .views import call_approval_view, iso, workflow_check_view, workflow_list_view

READ_ONLY = ToolAnnotations(read_only_hint=True)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False)


def add_workflow_tools(server: MCPServer, workflows: Workflows, ttl_seconds: float, gateway: Gateway) -> None:
    """The five workflow tools over the project's workflows, its gateway and the connection's state file."""

    def state(ctx: Context) -> tuple[SessionState, str]:
        session = session_of(ctx)
        return SessionState(session.store, ttl_seconds), session.session_id(ctx)

    def seen(ctx: Context, sid: str) -> Observer:
        """Who sees this session's calls: the gateway its upstreams' (only the tools those listed so far offer, for
        the ones that have), the client's hooks every one, when they marked the session."""
        session = session_of(ctx)
        return Observer(frozenset(gateway.current().upstreams), observed(session.store, sid), _offers(session))

    @server.tool(name="workflow_list", annotations=READ_ONLY)
    async def workflow_list() -> WorkflowList:
        """List the workflows of workflows.json: which tools each gates, and the prerequisite tools in order."""
        return workflow_list_view(workflows.current())

    @server.tool(name="workflow_check", annotations=READ_ONLY)
    async def workflow_check(
        tool: Annotated[str, Field(description="The tool you are about to call, as you call it (namespaced is fine)")],
        ctx: Context,
        task: Annotated[str | None, Field(description="The user's request, for keyword triggers")] = None,
        arguments: Annotated[
            dict[str, Any] | None,
            Field(description="The call's arguments (a shell tool's command), for rules that name shell commands"),
        ] = None,
    ) -> WorkflowCheck:
        """Before calling a tool another server offers, ask whether this session may call it now. deny: call the
        missing prerequisites (next_calls) in order, recording each with workflow_record, then check again."""
        sessions, sid = state(ctx)
        found = workflows.current()
        observer = seen(ctx, sid)
        name = called(tool)
        how = RUN_BY_GATEWAY if same(name.server, observer.upstreams) else _how(observer)
        done = sessions.done(sid)
        result = check(found, name, task or "", done, how=how, observer=observer, arguments=arguments)
        audited(sessions.store, result, sid, "workflow_check")
        return workflow_check_view(result, found)

    @server.tool(name="workflow_record", annotations=ACTS)
    async def workflow_record(
        tool: Annotated[str, Field(description="The prerequisite tool that just ran")],
        ctx: Context,
        result: Annotated[
            str | None, Field(description=f"A short summary of its result (kept to {MAX_RESULT_CHARS} characters)")
        ] = None,
        workflow: Annotated[str | None, Field(description="Record for this workflow only (default: every one)")] = None,
    ) -> WorkflowRecord:
        """Record that a prerequisite tool ran in this session. In an enforce workflow, steps are recorded in step
        order: recording one before an earlier required step is refused."""
        sessions, sid = state(ctx)
        found = workflows.current()
        if workflow is not None and workflow not in found.workflows:
            raise ToolError(str(UnknownName("workflow", workflow, found.workflows)))
        observer = seen(ctx, sid)
        name = _reported(tool, observer)
        plan = sessions.record(sid, found, name, result, workflow, observer, REPORTED)
        if not plan.record and (plan.refused or plan.watched):
            raise ToolError(str(_refusal(name, plan)))
        return _record_view(name, sid, plan, observer)

    @server.tool(name="workflow_status", annotations=READ_ONLY)
    async def workflow_status(ctx: Context) -> WorkflowStatus:
        """This session's recorded prerequisites, by workflow, and when the session's records expire."""
        sessions, sid = state(ctx)
        info = sessions.session(sid)
        completed: dict[str, list[CompletedStep]] = {}
        for name, steps in sessions.done(sid).items():
            completed[name] = [
                CompletedStep(step=c.step, tool=c.tool, server=c.server, how=c.how, result=c.result, at=iso(c.at))
                for records in steps.values()
                for c in records
            ]
        calls = [call_approval_view(a) for a in CallApprovals(sessions.store).listed(sid)]
        return WorkflowStatus(
            session_id=sid,
            started_at=iso(info.started_at),
            expires_at=iso(info.expires_at),
            completed=completed,
            call_approvals=calls,
        )

    @server.tool(name="workflow_reset", annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def workflow_reset(
        ctx: Context,
        workflow: Annotated[str | None, Field(description="Clear this workflow only (default: all)")] = None,
    ) -> WorkflowReset:
        """Forget this session's recorded prerequisites (one workflow or all): they must run again."""
        sessions, sid = state(ctx)
        cleared = sessions.reset(sid, workflow)
        if workflow is not None and not cleared and workflow not in workflows.current().workflows:
            raise ToolError(str(UnknownName("workflow", workflow, workflows.current().workflows)))
        return WorkflowReset(session_id=sid, workflow=workflow, cleared=cleared)


def _how(observer: Observer) -> str:
    """What a check's answer tells the model to do about missing steps."""
    return RECORDED_BY_HOOK if observer.hooks else RECORD_YOURSELF


def _offers(session: Any) -> dict[str, frozenset[str]]:
    """The tools of the upstreams this connection has listed already (none is started to know)."""
    connections = session.upstreams.all() if session.upstreams is not None else []
    listed = {c.name.lower(): c.tools_now() for c in connections}
    return {server: frozenset(t.name.lower() for t in tools) for server, tools in listed.items() if tools is not None}


def _reported(tool: str, observer: Observer) -> Name:
    """The tool a self-report names: its server when it names one; a bare name one listed upstream alone offers is
    that upstream's (the gateway would run it there)."""
    name = called(tool)
    if name.server is not None:
        return name
    offering = [server for server, tools in observer.offers.items() if name.tool.lower() in tools]
    upstream = next((u for u in observer.upstreams if len(offering) == 1 and same(u, offering[0])), None)
    return Name(upstream, name.tool, tool) if upstream is not None else name


def _refusal(name: Name, plan: RecordPlan) -> Refused:
    """Recorded too early, or a self-report of a call someone sees: why, and the call that makes the step count."""
    if plan.watched:
        return _watched(name, *plan.watched[0])
    workflow, step, earlier = plan.refused[0]
    return Refused(
        f"{name.raw!r} is step {step.step} of workflow {workflow.name!r} (enforce); its earlier required step "
        f"{earlier.tool!r} (step {earlier.step}) must be recorded first",
        f"{earlier.tool} not recorded in this session",
        [NextCall(earlier.tool, dict(earlier.params)), NextCall("workflow_record", {"tool": earlier.tool})],
    )


def _watched(name: Name, workflow: Any, step: Any, server: str | None) -> Refused:
    """A self-report refused: the gateway (server) or the client's hooks (None) see that tool run."""
    tool = wanted(step.tool).tool
    if server is not None:
        return Refused(
            f"{name.raw!r} is step {step.step} of workflow {workflow.name!r} (enforce) and runs on {server!r}, "
            "behind this server's gateway, which makes its calls: only a call it saw counts, not workflow_record. "
            f"Call it through the gateway (it is recorded when it succeeds), or just call the gated tool with "
            "tool_call: the gateway runs its missing prerequisites itself first",
            f"{server} is behind the gateway",
            [NextCall("tool_call", {"tool": f"{server}__{tool}", "arguments": dict(step.params)})],
        )
    return Refused(
        f"{name.raw!r} is step {step.step} of workflow {workflow.name!r} (enforce), and this session's client runs "
        "this server's hooks, which see every tool call: only a call they saw succeed counts, not workflow_record. "
        f"Call {step.tool} itself; the hook records it when it succeeds",
        "the client's hooks observe this session",
        [NextCall(step.tool, dict(step.params))],
    )


def _record_view(name: Name, sid: str, plan: RecordPlan, observer: Observer) -> WorkflowRecord:
    recorded = [RecordedStep(workflow=w.name, step=p.step, tool=p.tool) for w, p in plan.record]
    already = [RecordedStep(workflow=w.name, step=p.step, tool=p.tool) for w, p in plan.already]
    parts = [f"Recorded {name.raw!r} as step {r.step} of {r.workflow!r}, self-reported." for r in recorded]
    seen = [p for _, p in plan.record if observer.sees(wanted(p.tool).server or name.server, wanted(p.tool).tool)]
    if seen:
        parts.append(
            "It counts only where nothing sees the tool run: the gateway's gate and the client's hooks count a "
            "call they saw, so call it itself for them."
        )
    parts += [f"Already recorded in this session for {a.workflow!r} (step {a.step})." for a in already]
    parts += [
        f"Not recorded for {w.name!r}: step {e.step} ({e.tool}) must be recorded first." for w, _, e in plan.refused
    ]
    parts += [
        f"Not recorded for {w.name!r} (enforce): only a call of {p.tool} that "
        f"{'the gateway' if server else 'the client hooks'} saw counts there."
        for w, p, server in plan.watched
    ]
    if not parts:
        parts = [
            f"{name.raw!r} is not a prerequisite of any enabled workflow; nothing recorded. Name the tool bare "
            "(list_tables) or with its server (mcp__db__list_tables, db__list_tables), as workflows.json does."
        ]
    return WorkflowRecord(
        recorded=recorded, already=already, session_id=sid, self_reported=bool(recorded), message=" ".join(parts)
    )
