"""Asking a person through the client's elicitation form, in both protocol eras.

Handshake era (≤ 2025-11-25): the tool call that finds the run waiting sends `elicitation/create` mid-call and
waits for the form, racing the other ways the question can end (the terminal command, the timeout, a cancel).
2026-07-28 era: the server may not send requests, so the call returns an `InputRequiredResult` carrying the form;
the client shows it and repeats the same call with the answer, which `answer_from_retry` applies before the call
does anything else (so a repeated ability_run does not start a second run).

A client that declares no form elicitation is never sent one: its run waits for `abilities-mcp approve`. One that
declares URL-mode elicitation and no forms is, in the handshake era, sent a one-time link to the page this process
hosts (server/page.py) instead, raced the same way (`ask_by_url`); in the 2026-07-28 era it waits for the terminal.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least

from ..engine.core import Engine
from ..engine.live import LiveRun
from ..engine.questions import Question
from ..errors import Refused
from ..prerequisites.approvals import CallApproval, CallApprovals, NotPending

if TYPE_CHECKING:
    from ..gateway.person import Ask
    from .page import PageHost

log = logging.getLogger(__name__)
# The key of our one form in an InputRequiredResult, and the first protocol version that uses them.
FORM_KEY = "abilities_mcp_answer"
INPUT_REQUIRED_VERSION = "2026-07-28"
# What the URL elicitation adds to the question: the person answers on the page the link opens.
URL_HINT = " Open the link to answer on your own screen."
# Forms one tool call may show in a row (an approval, then a decision, ...), before it returns the run as it is.
MAX_FORMS_PER_CALL = 8


def form_era(ctx: Context) -> str | None:
    """'legacy' or 'modern' when the client can show a form; None when it declared no form elicitation."""
    return era_of(ctx.client_capabilities, ctx.protocol_version)


def era_of(caps: Any, version: str | None) -> str | None:
    """form_era for a connection known by its declared capabilities and protocol version."""
    form = caps.elicitation if caps is not None else None
    if form is None or (form.form is None and form.url is not None):  # bare `elicitation: {}` means form
        return None
    return "modern" if version and is_version_at_least(version, INPUT_REQUIRED_VERSION) else "legacy"


def url_era(ctx: Context) -> str | None:
    """'legacy' when the client asks by URL and shows no forms in the handshake era (the page answers then); None
    otherwise (a client that shows forms gets them; a 2026-07-28 client that shows none waits for the terminal)."""
    caps = ctx.client_capabilities
    asks = caps.elicitation if caps is not None else None
    if asks is None or asks.url is None or asks.form is not None:
        return None
    version = ctx.protocol_version
    return None if version and is_version_at_least(version, INPUT_REQUIRED_VERSION) else "legacy"


def form_origin(ctx: Context) -> str:
    """Which client showed the form, for the record: its name and version as it introduced itself."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    client = f"{info.name} {info.version}" if info is not None else "an unnamed client"
    return f"form shown by {client}"


def open_question(engine: Engine, run_id: str) -> tuple[LiveRun, Question] | None:
    """The question a run (or the child run it waits on) asks a person now, if this process drives it."""
    live = engine.live.get(run_id)
    asking = live.innermost() if live is not None else None
    if asking is None or asking.question is None or asking.question_answered.is_set():
        return None
    return asking, asking.question


def input_required(run_id: str, live: LiveRun, question: Question) -> InputRequiredResult:
    """The 2026-era form: the client shows it and repeats the call with the answer and this state."""
    form = ElicitRequest(
        params=ElicitRequestFormParams(
            message=question.message(live.run_id, live.name), requested_schema=question.form()
        )
    )
    state = json.dumps({"view": run_id, "run": live.run_id, "question": question.id})
    return InputRequiredResult(input_requests={FORM_KEY: form}, request_state=state)


def answer_from_retry(engine: Engine, ctx: Context) -> str | None:
    """Apply the form answer a 2026-era client sent back; returns the run the call is about, or None."""
    try:
        state: dict[str, Any] = json.loads(ctx.request_state or "")
        view, run_id, question_id = state["view"], state["run"], state["question"]
    except (ValueError, KeyError, TypeError):
        return None
    response = (ctx.input_responses or {}).get(FORM_KEY)
    if isinstance(response, dict):
        response = ElicitResult.model_validate(response)
    record = engine.store.get_run(run_id)
    live = engine.live.get(run_id)
    trusted = live is None or live.forms_allowed  # a resumed run takes no form answer (engine/live.py)
    if isinstance(response, ElicitResult) and record is not None and record.question_id == question_id and trusted:
        question = Question.from_json(record.question or {})
        try:
            engine.record_answer(
                run_id, question, question.from_form(response.action, response.content, form_origin(ctx))
            )
        except Refused:
            pass  # answered meanwhile (terminal, timeout): the first answer stands
    return str(view)


async def ask_by_form(engine: Engine, ctx: Context, live: LiveRun, question: Question) -> bool:
    """Show the form mid-call (handshake era); returns False when the client cannot take it."""
    if question.id in live.forms_open:
        return False  # another call shows this form already
    live.forms_open.add(question.id)
    outcome: dict[str, Any] = {}

    async def show(scope: anyio.CancelScope) -> None:
        try:
            outcome["result"] = await ctx.session.elicit_form(
                question.message(live.run_id, live.name), question.form(), related_request_id=ctx.request_id
            )
        except Exception as exc:  # method not found, no back channel, a broken client: fall back to waiting
            log.warning("elicitation failed, the run waits for `abilities-mcp approve`: %r", exc)
            outcome["failed"] = exc
        scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(show, tg.cancel_scope)
            while live.question is question and not live.done.is_set():
                await live.changed.wait()
            tg.cancel_scope.cancel()  # answered some other way: stop waiting for the form
    finally:
        live.forms_open.discard(question.id)
    result = outcome.get("result")
    if result is not None:
        try:
            engine.record_answer(
                live.run_id, question, question.from_form(result.action, result.content, form_origin(ctx))
            )
        except Refused:
            pass
    return "failed" not in outcome


async def ask_by_url(engine: Engine, ctx: Context, live: LiveRun, question: Question, page: PageHost) -> str:
    """Point the person to the page's item for this question through a one-time link (handshake era), racing the
    other channels as ask_by_form does: 'asked' once the question is answered (by any channel) or the run ended,
    'declined' when the person declined or cancelled (the question stays open for the terminal), 'busy' when
    another call asks it already, 'failed' when the client cannot take it. The link is in memory and in the request
    to the client only; unspent, it is revoked once the question is settled."""
    if question.id in live.forms_open:
        return "busy"
    live.forms_open.add(question.id)
    outcome: dict[str, Any] = {}
    token: str | None = None

    async def show(scope: anyio.CancelScope, url: str) -> None:
        try:
            result = await ctx.session.elicit_url(
                question.message(live.run_id, live.name) + URL_HINT,
                url,
                question.id,
                related_request_id=ctx.request_id,
            )
        except Exception as exc:  # method not found, no back channel, a broken client: fall back to waiting
            log.warning("URL elicitation failed, the run waits for `abilities-mcp approve`: %r", exc)
            outcome["failed"] = exc
            scope.cancel()
            return
        if result.action != "accept":  # not opened: the terminal answers; the link goes
            outcome["declined"] = result.action
            scope.cancel()
        # accepted: the person answers on the page, or anywhere else; the wait below sees it

    try:
        try:
            url, token = await page.link(live.run_id)
        except OSError as exc:
            log.warning("the page could not start, the run waits for `abilities-mcp approve`: %r", exc)
            return "failed"
        async with anyio.create_task_group() as tg:
            tg.start_soon(show, tg.cancel_scope, url)
            while live.question is question and not live.done.is_set():
                await live.changed.wait()
            tg.cancel_scope.cancel()  # answered: stop waiting for the client
    finally:
        live.forms_open.discard(question.id)
        if token is not None:
            page.revoke(token)
    if "failed" in outcome:
        return "failed"
    if "declined" in outcome:
        return "declined"
    try:
        await ctx.session.send_elicit_complete(question.id, related_request_id=ctx.request_id)
    except Exception as exc:  # the client went away: nothing to tell
        log.debug("elicitation/complete not sent: %r", exc)
    return "asked"


# --- a person's yes to one proxied call (gateway/person.py) --------------------------------------------------------

CALL_FORM_KEY = "abilities_mcp_call_answer"
_CALL_FORM = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this one call", "default": False}},
    "required": ["approve"],
}


def call_message(approval: CallApproval) -> str:
    """What the form says: the workflow's question, then the call exactly as it will be sent."""
    return (
        f"Call approval {approval.call_id} ({', '.join(approval.workflows)}):\n\n{approval.prompt}\n\n"
        f"The call, exactly:\n{approval.shown}\n\n(Or, at your terminal: `abilities-mcp approve {approval.call_id}`.)"
    )


def call_asker(ctx: Context) -> Ask | None:
    """The handshake-era form for a call approval, when the client shows forms: yes, no, or None (cancelled, or the
    form failed: the terminal answers then)."""
    if form_era(ctx) != "legacy":
        return None
    return session_asker(ctx.session, ctx.request_id)


def session_asker(session: Any, request_id: Any) -> Ask:
    """The same, for a call known by its SDK session and request id (the exposed tools' middleware)."""

    async def ask(approval: CallApproval) -> bool | None:
        try:
            result = await session.elicit_form(call_message(approval), _CALL_FORM, related_request_id=request_id)
        except Exception as exc:  # no back channel, a broken client: the terminal answers
            log.warning("the call approval form failed, the call waits for `abilities-mcp approve`: %r", exc)
            return None
        return _said(result)

    return ask


def _said(result: Any) -> bool | None:
    if result.action == "accept" and isinstance((result.content or {}).get("approve"), bool):
        return bool(result.content["approve"])
    return False if result.action == "decline" else None  # cancelled: not an answer


def call_input_required(approval: CallApproval) -> InputRequiredResult:
    """The 2026-era form for a call approval: the client shows it and repeats the call with the answer."""
    form = ElicitRequest(params=ElicitRequestFormParams(message=call_message(approval), requested_schema=_CALL_FORM))
    return InputRequiredResult(
        input_requests={CALL_FORM_KEY: form}, request_state=json.dumps({"call_approval": approval.call_id})
    )


def call_answer_from_retry(ctx: Context, approvals: CallApprovals) -> CallApproval | bool:
    """Apply the answer a 2026-era client sent back with the repeated call: the request as it stands after it, or
    True for a repeat whose form gave no answer (cancelled: the call then waits for the terminal instead of showing
    the form again); False when the call is no such repeat."""
    try:
        call_id = json.loads(ctx.request_state or "")["call_approval"]
    except (ValueError, KeyError, TypeError):
        return False
    response = (ctx.input_responses or {}).get(CALL_FORM_KEY)
    if isinstance(response, dict):
        response = ElicitResult.model_validate(response)
    said = _said(response) if isinstance(response, ElicitResult) else None
    if said is None or not isinstance(call_id, str):
        return True
    try:
        approvals.answer(call_id, said, "a person (the client's form)", "form", form_origin(ctx))
    except NotPending:
        pass  # answered at a terminal meanwhile, or lapsed: the first answer stands
    return approvals.get(call_id) or True
