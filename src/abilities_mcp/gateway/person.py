"""A proxied call a workflow holds for a person's yes (`approval` in workflows.json): the call waits for the answer,
bounded, so the agent needs no retry.

The answer comes from whichever channel a person uses first: the client's form, which the server shows where the
client declares forms (`Ask`), or `abilities-mcp approve CALL` at their terminal, which writes the state file that
the wait reads every POLL_SECONDS. A declined form is a no; a cancelled one (a headless client cancels every form)
leaves the question to the terminal. With no answer by the bound, the call is refused and the request stays open
until it lapses, so that the identical call made again, once a person said yes, goes through.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import Refused
from ..prerequisites.approvals import (
    APPROVED,
    PENDING,
    CallApproval,
    CallApprovals,
    TooLong,
    TooMany,
    asking,
    describe,
    request_for,
)
from ..prerequisites.approvals import person_command as command_for
from ..prerequisites.gates import Matched

if TYPE_CHECKING:
    from .upstreams import Progress

# How often the wait reads the state file for an answer another process (the terminal command) wrote.
POLL_SECONDS = 0.2
# How long a call waits for a person at most (less when its request lapses sooner): a client's own call timeout may
# be shorter (Codex: 60 s unless tool_timeout_sec says more); the request outlives the wait either way.
WAIT_SECONDS = 300.0

# The client's form for one call approval: True (yes), False (no), None (no answer: cancelled, or no form shown).
Ask = Callable[[CallApproval], Awaitable[bool | None]]


class FormFirst(Exception):
    """A 2026-era client shows the form by repeating the call (InputRequiredResult): the server returns the form for
    this request first, and the repeated call carries the answer."""

    def __init__(self, approval: CallApproval):
        self.approval = approval
        super().__init__(approval.call_id)


async def person_says_yes(
    approvals: CallApprovals,
    matched: Sequence[Matched],
    tool: str,
    arguments: dict[str, Any],
    session_id: str,
    ask: Ask | None = None,
    progress: Progress | None = None,
    form_first: bool = False,
) -> CallApproval | None:
    """The yes that lets this call go on, used up; None when no enforced workflow wants one. Raises Refused when a
    person said no, or no one answered in time; FormFirst when the client's form comes first (`form_first`)."""
    wanting = [m for m in asking(matched) if m.workflow.mode == "enforce"]
    if not wanting:
        return None
    try:
        request = request_for(tool, arguments, wanting)
    except TooLong as exc:
        raise Refused(f"this call needs a person's approval, and {exc}", "awaiting a person's approval") from exc
    taken = approvals.take(session_id, request)
    if taken is not None:
        return taken
    try:
        asked = approvals.ask(session_id, "gateway", request)
    except TooMany as exc:
        raise Refused(f"this call needs a person's approval, and {exc}", "awaiting a person's approval") from exc
    if form_first:
        raise FormFirst(asked)
    answered = await _answer(approvals, asked, ask, progress)
    if answered.state() == APPROVED:
        taken = approvals.take(session_id, request)
        if taken is not None:
            return taken
        answered = approvals.get(asked.call_id) or answered  # used by an identical call in the same moment
    raise Refused(_unanswered(answered), "awaiting a person's approval")


async def _answer(approvals: CallApprovals, asked: CallApproval, ask: Ask | None, progress: Progress | None):
    """The request once answered, or as it stands at the bound."""
    bound = max(0.0, min(WAIT_SECONDS, asked.expires_at - time.time()))
    if progress is not None:
        await progress(0, None, f"waiting for a person's approval: `{command_for(asked.call_id)}` at their terminal")
    with anyio.move_on_after(bound):
        async with anyio.create_task_group() as tg:
            if ask is not None:
                tg.start_soon(_by_form, approvals, asked, ask)
            while (found := approvals.get(asked.call_id)) is not None and found.state() == PENDING:
                await anyio.sleep(POLL_SECONDS)
            tg.cancel_scope.cancel()
    return approvals.get(asked.call_id) or asked


async def _by_form(approvals: CallApprovals, asked: CallApproval, ask: Ask) -> None:
    """The client's form; its yes or no recorded as the form's (a cancelled form leaves the terminal to answer)."""
    said = await ask(asked)
    if said is None:
        return
    from ..prerequisites.approvals import NotPending

    try:
        approvals.answer(asked.call_id, said, "a person (the client's form)", "form", "elicitation")
    except NotPending:
        pass  # answered at a terminal meanwhile: the first answer stands


def _unanswered(approval: CallApproval) -> str:
    state = approval.state()
    if state == PENDING:
        return (
            f"no person answered call approval {approval.call_id} in time; it stays open until "
            f"{time.strftime('%H:%M:%S', time.localtime(approval.expires_at))}. Ask the user to run "
            f"`{command_for(approval.call_id)}` at their own terminal, then make the identical call again"
        )
    return f"call approval {approval.call_id} is {describe(approval)}; the call was not sent"
