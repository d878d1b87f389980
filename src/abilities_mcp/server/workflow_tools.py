"""The workflow tools (DESIGN §5): workflow_list, workflow_check, workflow_record, workflow_status, workflow_reset.

Thin: read the workflows (re-read when the files change), ask gates.py for the verdict, keep each session's
records with sessions.py.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..errors import NextCall, Refused, UnknownName
from ..prerequisites.gates import RecordPlan, check
from ..prerequisites.sessions import MAX_RESULT_CHARS, SessionState
from ..prerequisites.workflows import Workflows
from .results import (
    CompletedStep,
    RecordedStep,
    WorkflowCheck,
    WorkflowList,
    WorkflowRecord,
    WorkflowReset,
    WorkflowStatus,
)
from .views import iso, workflow_check_view, workflow_list_view

READ_ONLY = ToolAnnotations(read_only_hint=True)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False)


def add_workflow_tools(server: MCPServer, workflows: Workflows, ttl_seconds: float) -> None:
    """The five workflow tools over the project's workflows and the connection's state file."""

    def state(ctx: Context) -> tuple[SessionState, str]:
        session = ctx.request_context.lifespan_context
        return SessionState(session.store, ttl_seconds), session.session_id(ctx)

    @server.tool(name="workflow_list", annotations=READ_ONLY)
    async def workflow_list() -> WorkflowList:
        """List the workflows of workflows.json: which tools each gates, and the prerequisite tools in order."""
        return workflow_list_view(workflows.current())

    @server.tool(name="workflow_check", annotations=READ_ONLY)
    async def workflow_check(
        tool: Annotated[str, Field(description="The tool you are about to call, as you call it (namespaced is fine)")],
        ctx: Context,
        task: Annotated[str | None, Field(description="The user's request, for keyword triggers")] = None,
    ) -> WorkflowCheck:
        """Before calling a tool another server offers, ask whether this session may call it now. deny: call the
        missing prerequisites (next_calls) in order, recording each with workflow_record, then check again."""
        sessions, sid = state(ctx)
        found = workflows.current()
        return workflow_check_view(check(found, tool, task or "", sessions.done(sid)), found)

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
        plan = sessions.record(sid, found, tool, result, workflow)
        if not plan.record and plan.refused:
            raise ToolError(str(_refusal(tool, plan)))
        return _record_view(tool, sid, plan)

    @server.tool(name="workflow_status", annotations=READ_ONLY)
    async def workflow_status(ctx: Context) -> WorkflowStatus:
        """This session's recorded prerequisites, by workflow, and when the session's records expire."""
        sessions, sid = state(ctx)
        info = sessions.session(sid)
        completed: dict[str, list[CompletedStep]] = {}
        for name, steps in sessions.done(sid).items():
            completed[name] = [
                CompletedStep(step=c.step, tool=c.tool, result=c.result, at=iso(c.at)) for c in steps.values()
            ]
        return WorkflowStatus(
            session_id=sid, started_at=iso(info.started_at), expires_at=iso(info.expires_at), completed=completed
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


def _refusal(tool: str, plan: RecordPlan) -> Refused:
    """Recorded too early everywhere: name the earlier step that must come first, and how to get there."""
    workflow, step, earlier = plan.refused[0]
    return Refused(
        f"{tool!r} is step {step.step} of workflow {workflow.name!r} (enforce); its earlier required step "
        f"{earlier.tool!r} (step {earlier.step}) must be recorded first",
        f"{earlier.tool} not recorded in this session",
        [NextCall(earlier.tool, dict(earlier.params)), NextCall("workflow_record", {"tool": earlier.tool})],
    )


def _record_view(tool: str, sid: str, plan: RecordPlan) -> WorkflowRecord:
    recorded = [RecordedStep(workflow=w.name, step=p.step, tool=p.tool) for w, p in plan.record]
    already = [RecordedStep(workflow=w.name, step=p.step, tool=p.tool) for w, p in plan.already]
    parts = [f"Recorded {tool!r} as step {r.step} of {r.workflow!r}." for r in recorded]
    parts += [f"Already recorded in this session for {a.workflow!r} (step {a.step})." for a in already]
    parts += [
        f"Not recorded for {w.name!r}: step {e.step} ({e.tool}) must be recorded first." for w, _, e in plan.refused
    ]
    if not parts:
        parts = [f"{tool!r} is not a prerequisite of any enabled workflow; nothing recorded."]
    return WorkflowRecord(recorded=recorded, already=already, session_id=sid, message=" ".join(parts))
