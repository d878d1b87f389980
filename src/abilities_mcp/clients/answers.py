"""The hook's answer in each client's shape: deny, ask, context for the model, a blocked stop, a message for the
person (Claude Code and Codex's hookSpecificOutput, Gemini CLI's decision, Cursor's permission, OpenCode's exit
code and context). Stdlib only (the hook's path).
"""

from __future__ import annotations

import json

from ..records import Record

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

# Claude Code cuts hook output strings here.
MAX_OUTPUT_CHARS = 10_000
# Exit codes: 2 makes the client refuse the call; 1 is an error the client reports and goes on from.
DENY_EXIT, FAIL_OPEN_EXIT = 2, 1


class Answer(Record, fields="deny ask context block_stop message", defaults=("", "", "", "", "")):
    """What the hook says; empty fields say nothing."""

    __slots__ = ()

    deny: str  # = ""; refuse the tool call, telling the model why
    ask: str  # = ""; let the person decide (Claude Code), telling them why
    context: str  # = ""; for the model, the call going ahead
    block_stop: str  # = ""; keep the agent working, telling it why
    message: str  # = ""; for the person


def joined(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


def render(client: str, event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """The answer in the client's format; returns the exit code."""
    return RENDERERS[client](event, answer, stdout, stderr)


def _render_claude(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    return _write(stdout, _claude_output(event, answer))


def _render_codex(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """Claude Code's shape; Codex refuses `ask` (output_parser.rs: "unsupported permissionDecision:ask"), so a
    warn workflow's question reaches the model as context."""
    if answer.ask:
        answer = answer._replace(ask="", context=answer.context or answer.ask)
    return _write(stdout, _claude_output(event, answer))


def _render_gemini(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """Gemini CLI: `decision` deny|ask with a `reason` (BeforeTool), deny to keep the agent going (AfterAgent),
    hookSpecificOutput.additionalContext where the event reads it (AfterTool, BeforeAgent, SessionStart);
    BeforeTool has no context for the model, so its advice goes to the person."""
    out: dict[str, Any] = {}
    if answer.deny:
        out |= {"decision": "deny", "reason": _cut(answer.deny)}
    elif answer.ask:
        out |= {"decision": "ask", "reason": _cut(answer.ask), "systemMessage": _cut(answer.ask)}
    elif answer.block_stop:
        out |= {"decision": "deny", "reason": _cut(answer.block_stop)}
    if answer.context and not (answer.deny or answer.ask):
        if event == "BeforeTool":
            out["systemMessage"] = _cut(answer.context)
        elif event != "AfterAgent":
            out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": _cut(answer.context)}
    if answer.message and "systemMessage" not in out:
        out["systemMessage"] = _cut(answer.message)
    return _write(stdout, out)


def _render_cursor(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    """Cursor: `permission` deny|ask with a message for the person and one for the agent (before events; nothing
    on allow, so Cursor's own approval still decides), `followup_message` to keep the agent going (stop),
    `additional_context` (postToolUse, sessionStart); beforeSubmitPrompt and the after-execution events take
    nothing back."""
    out: dict[str, Any] = {}
    if answer.deny or answer.ask:
        text = _cut(answer.deny or answer.ask)
        out = {"permission": "deny" if answer.deny else "ask", "user_message": text, "agent_message": text}
    elif answer.block_stop:
        out = {"followup_message": _cut(answer.block_stop)}
    elif answer.context and event in ("postToolUse", "sessionStart"):
        out = {"additional_context": _cut(answer.context)}
    return _write(stdout, out)


def _write(stdout: IO[str], out: dict[str, Any]) -> int:
    if out:
        stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


def _claude_output(event: str, answer: Answer) -> dict[str, Any]:
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {"hookEventName": event}
    if answer.deny:
        specific |= {"permissionDecision": "deny", "permissionDecisionReason": _cut(answer.deny)}
    elif answer.ask:
        specific |= {"permissionDecision": "ask", "permissionDecisionReason": _cut(answer.ask)}
    if answer.context and not answer.deny and event != "Stop":
        specific["additionalContext"] = _cut(answer.context)
    if len(specific) > 1:
        out["hookSpecificOutput"] = specific
    if answer.block_stop:
        out |= {"decision": "block", "reason": _cut(answer.block_stop)}
    if answer.message:
        out["systemMessage"] = _cut(answer.message)
    return out


def _render_opencode(event: str, answer: Answer, stdout: IO[str], stderr: IO[str]) -> int:
    if answer.deny:
        print(answer.deny, file=stderr)
        return DENY_EXIT
    text = joined(answer.context or answer.ask, answer.message)
    if text:
        stdout.write(json.dumps({"context": _cut(text)}, ensure_ascii=False) + "\n")
    return 0


RENDERERS = {
    "claude": _render_claude,
    "codex": _render_codex,
    "gemini": _render_gemini,
    "cursor": _render_cursor,
    "opencode": _render_opencode,
}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT_CHARS else text[: MAX_OUTPUT_CHARS - 20] + " [... truncated]"
