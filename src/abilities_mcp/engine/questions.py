"""Questions only a person may answer: approvals, the plan, and decisions after a failure.

A question is asked in one of three ways — an MCP elicitation form, the `abilities-mcp approve` / `decide`
terminal commands, or (under `enforcement: loose` only) the agent's `ability_approve` / `ability_decide` — and all
three end in the same Answer, written to the store with a compare-and-set so that only the first one counts.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..errors import NextCall

Kind = Literal["approval", "plan", "decision"]
DECISIONS = ("retry", "continue", "stop")
# Option values that mean "no" when an option does not say `approves:` itself.
REJECTING_VALUES = frozenset({"reject", "rejected", "no", "deny", "denied", "decline", "declined", "abort", "stop"})
# The step id a plan approval goes by (it precedes every step).
PLAN_STEP = "plan"


@dataclass(frozen=True)
class Option:
    label: str
    value: str
    approves: bool


@dataclass(frozen=True)
class Answer:
    """What a person said, and through which channel."""

    question_id: str
    value: str
    approved: bool
    by: str  # "elicitation" | "terminal" | "agent" | "timeout"
    note: str | None = None
    # Where it came from, for the record: the terminal and its process chain, or the client that showed the form.
    origin: str | None = None
    # Who, on a team server: the identity the page's sign-in vouched for (state/identities.py `Identity.key`).
    identity: str | None = None

    @classmethod
    def stored(cls, data: object) -> Answer | None:
        """An answer as the state file holds it; None for anything else (a damaged or forged row must not crash
        the run: it is ignored, and the run goes on waiting for a real one)."""
        if not isinstance(data, dict):
            return None
        texts = ("question_id", "value", "by")
        if not all(isinstance(data.get(k), str) for k in texts) or not isinstance(data.get("approved"), bool):
            return None
        if any(data.get(k) is not None and not isinstance(data.get(k), str) for k in ("note", "origin", "identity")):
            return None
        return cls(**{k: data.get(k) for k in (*texts, "approved", "note", "origin", "identity")})

    def summary(self) -> str:
        verb = "approved" if self.approved else "rejected"
        if self.value not in ("approved", "rejected"):
            verb = f"answered {self.value!r}"
        return f"{verb} by {self.by}" + (f": {self.note}" if self.note else "")


@dataclass(frozen=True)
class Question:
    """One pending question of a run; stored as JSON on the run while it waits."""

    kind: Kind
    step_id: str
    prompt: str
    options: tuple[Option, ...]
    deadline: float | None = None
    id: str = field(default_factory=lambda: secrets.token_hex(6))
    # `approval: four-eyes`: a yes counts only from a signed-in person other than whoever started the run.
    four_eyes: bool = False

    # --- building ------------------------------------------------------------------------------------------

    @classmethod
    def approval(
        cls, step_id: str, prompt: str, options: list[Any] | None, deadline: float | None, four_eyes: bool = False
    ) -> Question:
        chosen = tuple(
            Option(o.label, o.value, o.approves if o.approves is not None else o.value.lower() not in REJECTING_VALUES)
            for o in options or []
        )
        if not any(o.approves for o in chosen) or not any(not o.approves for o in chosen):
            chosen = (Option("Approve", "approved", True), Option("Reject", "rejected", False), *chosen)
        kind: Kind = "approval" if step_id != PLAN_STEP else "plan"
        return cls(kind, step_id, prompt, chosen, deadline, four_eyes=four_eyes)

    @classmethod
    def decision(cls, step_id: str, problem: str) -> Question:
        prompt = f"Step {step_id!r} failed: {problem}\nRetry it, continue without it, or stop the run?"
        options = tuple(Option(d.capitalize(), d, d != "stop") for d in DECISIONS)
        return cls("decision", step_id, prompt, options)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Question:
        return cls(**{**data, "options": tuple(Option(**o) for o in data["options"])})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    # --- asking ---------------------------------------------------------------------------------------------

    @property
    def is_yes_no(self) -> bool:
        """Two options, one approving: a single boolean field, the form every client can show."""
        return self.kind != "decision" and len(self.options) == 2

    def form(self) -> dict[str, Any]:
        """The elicitation's requested schema: one boolean field, or one enum field."""
        if self.is_yes_no:
            field_schema: dict[str, Any] = {"type": "boolean", "title": self._yes().label, "default": False}
            name = "approve"
        else:
            field_schema = {
                "type": "string",
                "title": "Decision" if self.kind == "decision" else "Answer",
                "oneOf": [{"const": o.value, "title": o.label} for o in self.options],
            }
            name = "decision" if self.kind == "decision" else "answer"
        return {"type": "object", "properties": {name: field_schema}, "required": [name]}

    def terminal_command(self, run_id: str) -> str:
        """What a person types to answer."""
        if self.kind == "decision":
            return f"abilities-mcp decide {run_id} retry|continue|stop"
        return f"abilities-mcp approve {run_id}"

    def typed(self, run_id: str) -> str:
        """terminal_command in backticks, as a message quotes it; the way to say no stays outside the command."""
        return f"`{self.terminal_command(run_id)}`" + ("" if self.kind == "decision" else " (`--reject` to say no)")

    def relay_call(self, run_id: str) -> NextCall:
        """The call an agent relays a person's answer with (accepted under enforcement: loose only)."""
        if self.kind == "decision":
            return NextCall(
                "ability_decide", {"run_id": run_id, "step_id": self.step_id, "decision": "<retry|continue|stop>"}
            )
        return NextCall("ability_approve", {"run_id": run_id, "step_id": self.step_id, "approved": "<true|false>"})

    def message(self, run_id: str, ability: str) -> str:
        what = {"approval": "Approval", "plan": "Plan approval", "decision": "Decision"}[self.kind]
        return f"{what} needed — ability {ability!r}, run {run_id}, step {self.step_id!r}:\n\n{self.prompt}"

    # --- answering ------------------------------------------------------------------------------------------

    def from_form(self, action: str, content: dict[str, Any] | None, origin: str | None = None) -> Answer:
        """An elicitation's result; a declined or cancelled form (or one we cannot read) is a rejection."""
        content = content or {}
        if action == "accept" and self.is_yes_no and isinstance(content.get("approve"), bool):
            return self._answer(self._yes() if content["approve"] else self._no(), "elicitation", origin=origin)
        chosen = next((o for o in self.options if o.value == content.get("decision", content.get("answer"))), None)
        if action == "accept" and chosen is not None:
            return self._answer(chosen, "elicitation", origin=origin)
        why = {"decline": "form declined", "cancel": "form cancelled"}.get(action, "form gave no valid choice")
        fallback = self.option("stop") if self.kind == "decision" else self._no()
        return self._answer(fallback, "elicitation", why, origin)

    def from_yes_no(self, approved: bool, by: str, note: str | None = None, origin: str | None = None) -> Answer:
        return self._answer(self._yes() if approved else self._no(), by, note, origin)

    def from_choice(self, value: str, by: str, note: str | None = None, origin: str | None = None) -> Answer:
        """A named option (a decision, or an approval option); raises ValueError naming the valid ones."""
        chosen = self.option(value)
        if chosen is None:
            raise ValueError(f"{value!r} is not an answer to this question; choose one of {self.values()}")
        return self._answer(chosen, by, note, origin)

    def timed_out(self, limit: str) -> Answer:
        fallback = self.option("stop") if self.kind == "decision" else self._no()
        return self._answer(fallback, "timeout", f"no answer within {limit}")

    def option(self, value: str) -> Option | None:
        return next((o for o in self.options if o.value == value), None)

    def values(self) -> list[str]:
        return [o.value for o in self.options]

    def _yes(self) -> Option:
        return next(o for o in self.options if o.approves)

    def _no(self) -> Option:
        return next(o for o in self.options if not o.approves)

    def _answer(self, option: Option, by: str, note: str | None = None, origin: str | None = None) -> Answer:
        return Answer(self.id, option.value, option.approves, by, note, origin)
