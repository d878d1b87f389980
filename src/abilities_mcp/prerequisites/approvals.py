"""Call approvals: a person's yes to one tool call, bound to the session, the tool and a digest of the exact
arguments, used once, lapsing after the workflow's `approval.expires` (DESIGN §10).

A call that a workflow with `approval` triggers is refused until a person answers the request it leaves: at a
terminal (`abilities-mcp approve CALL`), or in the client's form (the gateway's calls). The hook and the gateway ask
for it and take it. Answering is a compare-and-set in the state file, and so is taking: of two identical calls
racing for one yes, one wins. A changed argument is another call, with its own request; the same call again needs
a new yes. Stdlib only: the hook decides with it (hashlib is imported only for a call that needs a person).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..state import audit
from ..state.acting import ACTING
from ..state.database import Database
from .commands import shell_command
from .gates import Matched
from .workflows import PROMPT_FIELD

PENDING, APPROVED, REJECTED, USED, EXPIRED = "pending", "approved", "rejected", "used", "expired"
ID_PREFIX = "call_"
# A call's text as shown to a person is cut here (it is stored, and printed at their terminal, made inert there).
MAX_SHOWN_CHARS = 4_000
CHANNELS = ("terminal", "form", "web")

_COLUMNS = (
    "call_id, session_id, client, tool, digest, shown, workflows, prompt, status, lifetime, requested_at, "
    "expires_at, answered_at, answered_by, channel, origin, note, used_at, four_eyes, requested_by"
)


class CallApproval(NamedTuple):
    """One request for a person's yes to one call, and what became of it."""

    call_id: str
    session_id: str
    client: str
    tool: str
    digest: str
    shown: str  # the call as a person reads it: a shell command's line, else the tool and its arguments as JSON
    workflows: tuple[str, ...]
    prompt: str
    status: str  # pending | approved | rejected | used (expired is worked out: `state`)
    lifetime: float  # seconds a request waits for an answer, and a yes stays usable
    requested_at: float
    expires_at: float
    answered_at: float | None = None
    answered_by: str | None = None
    channel: str | None = None  # terminal | form | web
    origin: str | None = None  # where the answer came from: the terminal, the client that showed the form
    note: str | None = None
    used_at: float | None = None
    four_eyes: bool = False  # a yes only from a signed-in approver other than the caller (approval.four_eyes)
    requested_by: str | None = None  # the caller whose call waits (an identity's key on a team server)

    def state(self, now: float | None = None) -> str:
        """The status as of `now`: a pending request or an unused yes past its time has expired."""
        if self.status in (PENDING, APPROVED) and (time.time() if now is None else now) >= self.expires_at:
            return EXPIRED
        return self.status

    @classmethod
    def of(cls, row: Sequence[Any]) -> CallApproval:
        values = list(row)
        values[6] = tuple(json.loads(values[6]))
        values[18] = bool(values[18])
        return cls(*values)


class Request(NamedTuple):
    """What a gate asks of a person for one call: the workflows that want the yes, and how the call reads."""

    tool: str
    digest: str
    shown: str
    workflows: tuple[str, ...]
    prompt: str
    lifetime: float
    four_eyes: bool = False


def asking(matched: Sequence[Matched]) -> list[Matched]:
    """The workflows among those a call triggered that want a person's yes for it now: their prerequisites done
    (a call still missing them is refused for those first)."""
    return [m for m in matched if m.workflow.approval is not None and not m.missing]


def request_for(tool: str, arguments: Mapping[str, Any], wanting: Sequence[Matched], cwd: str | None = None) -> Request:
    """The request a call leaves: bound to the tool and a digest of its exact arguments (a shell call's command
    line and the folder it runs in: the same words in another repository are another call), lasting as long as the
    strictest workflow allows, asked in the first workflow's words."""
    command = shell_command(tool, arguments)
    if command is not None:
        where = next((v for k in WORKDIR_KEYS if isinstance(v := arguments.get(k), str) and v), cwd or "")
        exact = f"{command}\0{where}"
        shown = f"{command}\n  (in {where})" if where else command
    else:
        exact = shown = _canonical(arguments)
        shown = f"{tool} {exact}"
    if len(shown) > MAX_SHOWN_CHARS:
        raise TooLong(
            f"the call is {len(shown):,} characters, more than a person can be shown whole ({MAX_SHOWN_CHARS:,}), "
            "so no one is asked to approve it: split it into shorter calls"
        )
    first = wanting[0].workflow
    approval = first.approval
    assert approval is not None
    prompt = (
        _prompt(approval.prompt, tool, command, arguments)
        or f"Allow this call of {tool}: {_one_line(_cut(shown, 400))}?"
    )
    return Request(
        tool,
        _digest(tool, exact),
        _storable(shown),
        tuple(m.workflow.name for m in wanting),
        _storable(_cut(_one_line(prompt), MAX_PROMPT_CHARS)),
        min(m.workflow.approval.expires for m in wanting if m.workflow.approval is not None),
        any(m.workflow.approval.four_eyes for m in wanting if m.workflow.approval is not None),
    )


# Where a shell tool's arguments name the folder its command runs in (Codex's workdir, Gemini CLI's directory).
WORKDIR_KEYS = ("workdir", "cwd", "dir_path", "directory")
# The question is one line this long at most: it comes from a file the agent may edit, so it must not draw the call.
MAX_PROMPT_CHARS = 300
# Requests a session may leave waiting at once: an agent that asks for more is flooding the person, not working.
MAX_WAITING = 20
# Answered and lapsed requests are kept this long for the record, then forgotten (the runs' history default).
KEEP_SECONDS = 30 * 86400.0


def _canonical(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _digest(tool: str, exact: str) -> str:
    import hashlib  # here: the hook needs it only for a call that needs a person

    return hashlib.sha256(f"{tool}\0{exact}".encode("utf-8", "surrogatepass")).hexdigest()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 40] + f" [{len(text) - limit + 40} characters cut]"


def _prompt(template: str, tool: str, command: str | None, arguments: Mapping[str, Any]) -> str:
    """The workflow's prompt with the call's fields filled in (plain text: nothing in it is run)."""

    def field(match: Any) -> str:
        return _one_line(value_of(match.group(1)))

    def value_of(name: str) -> str:
        if name == "tool":
            return tool
        if name == "command":
            return command if command is not None else _canonical(arguments)
        if name == "arguments":
            return _canonical(arguments)
        value = arguments.get(name[5:]) if name.startswith("args.") else None
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)

    return PROMPT_FIELD.sub(field, template)


def _storable(text: str) -> str:
    """Text SQLite can store as UTF-8: a lone surrogate (JSON's "\\ud800", valid in a payload) as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# Every character that breaks a line somewhere (str.splitlines' list), written as its escape.
_LINE_BREAKS = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in (0x0B, 0x0C, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)
}
_LINE_BREAKS |= {0x0A: "\\n", 0x0D: "\\r"}


def _one_line(value: str) -> str:
    """Text on one line: a command's own newlines must not draw lines of the question around it."""
    return value.translate(_LINE_BREAKS)


class CallApprovals:
    """The call approvals in the state file: asked for, answered, taken."""

    def __init__(self, db: Database):
        self.db = db

    def take(self, session_id: str, request: Request) -> CallApproval | None:
        """The yes a person gave this exact call in this session, used up now; None when there is none to use (never
        given, rejected, used, or lapsed)."""
        now = time.time()
        with self.db.transaction() as db:
            taken = self._standing(db, session_id, request, APPROVED, "answered_at", now)
            if taken is None:
                return None
            db.execute("UPDATE call_approvals SET status=?, used_at=? WHERE call_id=?", (USED, now, taken.call_id))
            _audit(self.db, taken, "used", actor=taken.answered_by, channel=taken.channel)
        return taken._replace(status=USED, used_at=now)

    def ask(self, session_id: str, client: str, request: Request) -> CallApproval:
        """The request waiting for a person's answer to this exact call in this session: the one already open, or a
        new one."""
        now = time.time()
        with self.db.transaction() as db:
            found = self._standing(db, session_id, request, PENDING, "requested_at DESC", now)
            if found is not None:
                return found
            db.execute("DELETE FROM call_approvals WHERE expires_at<?", (now - KEEP_SECONDS,))
            waiting = db.execute(
                "SELECT count(*) FROM call_approvals WHERE session_id=? AND status=? AND expires_at>?",
                (session_id, PENDING, now),
            ).fetchone()[0]
            if waiting >= MAX_WAITING:
                raise TooMany(
                    f"{waiting} calls of this session already wait for a person's answer, so no other is asked "
                    "for: ask the user to answer or reject them (`abilities-mcp approve` lists them) before more"
                )
            made = CallApproval(
                ID_PREFIX + os.urandom(5).hex(),
                session_id,
                client,
                request.tool,
                request.digest,
                request.shown,
                request.workflows,
                request.prompt,
                PENDING,
                request.lifetime,
                now,
                now + request.lifetime,
                four_eyes=request.four_eyes,
                requested_by=ACTING.get(),
            )
            values = list(made)
            values[6] = json.dumps(list(made.workflows))
            values[18] = int(made.four_eyes)
            db.execute(f"INSERT INTO call_approvals ({_COLUMNS}) VALUES ({', '.join('?' * len(values))})", values)
            _audit(self.db, made, "asked")
        return made

    @staticmethod
    def _standing(db: Any, session_id: str, request: Request, status: str, order: str, now: float):
        """This call's request in this session with `status`, not lapsed by `now`: the first by `order`."""
        row = db.execute(
            f"SELECT {_COLUMNS} FROM call_approvals WHERE session_id=? AND tool=? AND digest=? AND status=? "
            f"AND expires_at>? ORDER BY {order} LIMIT 1",
            (session_id, request.tool, request.digest, status, now),
        ).fetchone()
        return CallApproval.of(row) if row is not None else None

    def answer(
        self,
        call_id: str,
        approved: bool,
        by: str,
        channel: str,
        origin: str,
        note: str | None = None,
        identity: str | None = None,
    ) -> CallApproval:
        """A person's answer to a pending request (the first answer wins); a yes lasts the request's lifetime from
        now. Raises NotPending, saying what became of it, when it is not waiting for one, and SameEyes for a yes to
        a four-eyes call that names nobody (`identity`: who signed in) or the caller themself."""
        now = time.time()
        with self.db.transaction() as db:
            found = self.get(call_id)
            if found is None:
                raise NotPending(f"no call approval {call_id!r} was asked for in this project")
            if found.state(now) != PENDING:
                raise NotPending(f"call approval {call_id} is not waiting for an answer: it is {describe(found, now)}")
            if approved and found.four_eyes:
                _refuse_same_eyes(found, identity)
            status = APPROVED if approved else REJECTED
            expires = now + found.lifetime if approved else found.expires_at
            db.execute(
                "UPDATE call_approvals SET status=?, answered_at=?, answered_by=?, channel=?, origin=?, note=?, "
                "expires_at=? WHERE call_id=? AND status=?",
                (status, now, by, channel, origin, note, expires, call_id, PENDING),
            )
            _audit(self.db, found, status, actor=identity or by, channel=channel, reason=note, origin=origin)
        return found._replace(
            status=status,
            answered_at=now,
            answered_by=by,
            channel=channel,
            origin=origin,
            note=note,
            expires_at=expires,
        )

    def get(self, call_id: str) -> CallApproval | None:
        row = self.db.db.execute(f"SELECT {_COLUMNS} FROM call_approvals WHERE call_id=?", (call_id,)).fetchone()
        return CallApproval.of(row) if row is not None else None

    def listed(self, session_id: str | None = None, limit: int = 50) -> list[CallApproval]:
        """The latest requests, newest first; one session's when `session_id` is given."""
        where, values = ("WHERE session_id=?", [session_id]) if session_id is not None else ("", [])
        rows = self.db.db.execute(
            f"SELECT {_COLUMNS} FROM call_approvals {where} ORDER BY requested_at DESC LIMIT ?", (*values, limit)
        )
        return [CallApproval.of(row) for row in rows]

    def waiting(self) -> list[CallApproval]:
        """Every request a person has yet to answer, oldest first."""
        rows = self.db.db.execute(
            f"SELECT {_COLUMNS} FROM call_approvals WHERE status=? AND expires_at>? ORDER BY requested_at",
            (PENDING, time.time()),
        )
        return [CallApproval.of(row) for row in rows]


def _audit(db: Database, approval: CallApproval, verdict: str, origin: str | None = None, **fields: Any) -> None:
    """A call approval asked for, answered or used, in the audit trail (state/audit.py)."""
    detail = {"call_id": approval.call_id, "workflows": list(approval.workflows), "origin": origin}
    rule = ", ".join(approval.workflows)
    session = {"session_id": approval.session_id, "client": approval.client, "tool": approval.tool}
    audit.append(db, "approval", verdict=verdict, rule=rule, detail=detail, **session, **fields)


class TooLong(ValueError):
    """A call too long to show a person whole: refused without asking."""


class TooMany(ValueError):
    """A session asks a person about too many calls at once: the call is refused without asking."""


class NotPending(ValueError):
    """The call approval named is not waiting for an answer (none such, answered, used, lapsed)."""


class SameEyes(NotPending):
    """A yes to a four-eyes call from nobody signed in, or from the caller whose call it is."""


def _refuse_same_eyes(found: CallApproval, identity: str | None) -> None:
    if identity is None:
        raise SameEyes(
            f"call approval {found.call_id} needs four eyes: a yes from a person signed in on the team server's run "
            "page, other than whoever made the call; this answer names nobody"
        )
    if identity == found.requested_by:
        raise SameEyes(
            f"call approval {found.call_id} needs four eyes: the call is yours, so your yes does not count; another "
            "approver approves it on the run page"
        )


def describe(approval: CallApproval, now: float | None = None) -> str:
    """What became of a request, in a few words."""
    state = approval.state(now)
    when = _clock(approval.answered_at) if approval.answered_at else ""
    if state == PENDING:
        return f"pending, asked at {_clock(approval.requested_at)}, lapses at {_clock(approval.expires_at)}"
    if state == APPROVED:
        return f"approved by {approval.answered_by} ({approval.channel}) at {when}, not used yet"
    if state == REJECTED:
        return f"rejected by {approval.answered_by} ({approval.channel}) at {when}"
    if state == USED:
        return f"approved by {approval.answered_by} ({approval.channel}) at {when}, used at {_clock(approval.used_at)}"
    return f"expired at {_clock(approval.expires_at)}" + (f" (approved at {when}, never used)" if when else "")


def _clock(at: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else "?"


def person_command(call_id: str) -> str:
    """The command a person types to answer."""
    return f"abilities-mcp approve {call_id}"


def refusal(approval: CallApproval) -> str:
    """What a gate tells the model about a call waiting for a person's yes: why, and what the person does."""
    workflows = ", ".join(repr(w) for w in approval.workflows)
    if approval.four_eyes:
        return (
            f"Denied: this call needs a second person's approval first (workflow {workflows}, four eyes).\n"
            f"  {approval.prompt}\n"
            f"An approver other than the user approves {approval.call_id} on the team server's run page (/ui/waiting); "
            "then make the identical call again: it runs once. Neither you nor the user can approve it. This request "
            f"lapses at {_clock(approval.expires_at)}."
        )
    return (
        f"Denied: this call needs a person's approval first (workflow {workflows}).\n"
        f"  {approval.prompt}\n"
        f"Ask the user to run, at their own terminal: `{person_command(approval.call_id)}` (`--reject` to say no). "
        "Once they approve, make the identical call again: it runs once. A call with other arguments needs its own "
        f"approval, and so does the same call made again. This request lapses at {_clock(approval.expires_at)}. "
        "You cannot approve it yourself: not with ability_approve, workflow_record or your shell."
    )


def view(approval: CallApproval, now: float | None = None) -> dict[str, Any]:
    """One call approval as the tools and `history --json` show it."""
    return {
        "call_id": approval.call_id,
        "session_id": approval.session_id,
        "client": approval.client,
        "tool": approval.tool,
        "call": approval.shown,
        "digest": approval.digest,
        "workflows": list(approval.workflows),
        "status": approval.state(now),
        "requested_at": approval.requested_at,
        "expires_at": approval.expires_at,
        "answered_at": approval.answered_at,
        "answered_by": approval.answered_by,
        "channel": approval.channel,
        "used_at": approval.used_at,
        "note": approval.note,
    }
