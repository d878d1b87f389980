"""BATCH and CHAIN (the seed's tool-execution reference): several proxied calls in one request, each through the
same gates as tool_call.

A batch runs up to MAX_BATCH calls in order; a failure does not stop the rest, and a read-only tool (the upstream's
readOnlyHint) has READ_ONLY_ATTEMPTS attempts of its own. A chain runs up to MAX_CHAIN steps, a step's result
named by `output_as` for later steps (references.py), and stops at the first failure. Both refuse a request over
their limit, and a chain its unknown `$name`s, before anything is sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from mcp_types import CallToolResult, TextContent

from ..errors import AbilitiesError, Refused
from . import references
from .directory import UnknownTool
from .proxy import BadArguments, Gate, Proxy
from .upstreams import UpstreamError

MAX_BATCH = 10
MAX_CHAIN = 5
# A read-only tool in a batch or a chain is sent up to this many times while it fails; any other tool once.
READ_ONLY_ATTEMPTS = 3
# Errors raised before anything of the call was sent: the gateway refused it.
REFUSALS = (Refused, BadArguments, UnknownTool, references.Unresolved)


class Item(NamedTuple):
    """One call's outcome in a batch or a chain."""

    tool: str
    status: str  # ok | error | refused
    result: Any  # the upstream's structured content if any, else its text (ok only)
    error: str | None
    gate: Gate | None
    duration_ms: float
    bytes: int  # the size of `result` (or `error`) as UTF-8 JSON
    attempts: int


class Chained(NamedTuple):
    """A chain's outcome: the steps run (the failed one last), the named results, the step that failed."""

    items: list[Item]
    variables: dict[str, Any]
    failed_step: int | None


class TooMany(AbilitiesError):
    """A batch or a chain over its limit: nothing was sent."""


def value_of(result: CallToolResult) -> Any:
    """A result as one value: its structured content if any, else its text."""
    if result.structured_content is not None:
        return result.structured_content
    return text_of(result)


def text_of(result: CallToolResult) -> str:
    """A result's text blocks joined, other blocks as `[type]` (whole: not a session record's 200 characters)."""
    return "\n".join(b.text if isinstance(b, TextContent) else f"[{b.type}]" for b in result.content)


async def batch(proxy: Proxy, calls: Sequence[tuple[str, dict[str, Any]]], session_id: str) -> list[Item]:
    """Run every call in order; each one's failure is its own."""
    _limit("tool_batch", "calls", len(calls), MAX_BATCH)
    return [await _one(proxy, tool, arguments, session_id) for tool, arguments in calls]


async def chain(proxy: Proxy, steps: Sequence[tuple[str, dict[str, Any], str | None]], session_id: str) -> Chained:
    """Run the steps in order, each one's arguments filled from the results named before it; stop at a failure."""
    _limit("tool_chain", "steps", len(steps), MAX_CHAIN)
    references.check(steps)
    items: list[Item] = []
    variables: dict[str, Any] = {}
    for number, (tool, template, output_as) in enumerate(steps, start=1):
        item = await _one(proxy, tool, template, session_id, variables)
        items.append(item)
        if item.status != "ok":
            return Chained(items, variables, number)
        if output_as is not None:
            variables[output_as] = item.result
    return Chained(items, variables, None)


async def _one(
    proxy: Proxy, tool: str, arguments: Any, session_id: str, variables: dict[str, Any] | None = None
) -> Item:
    started = time.perf_counter()

    def item(status: str, name: str, result: Any, error: str | None, gate: Gate | None, attempts: int) -> Item:
        size = len(json.dumps(result if error is None else error, ensure_ascii=False, default=str).encode())
        elapsed = round((time.perf_counter() - started) * 1000, 1)
        return Item(name, status, result, error, gate, elapsed, size, attempts)

    try:
        filled = references.substitute(arguments, variables) if variables is not None else arguments
        outcome = await proxy.call(tool, filled, session_id, attempts=READ_ONLY_ATTEMPTS)
    except REFUSALS as exc:
        return item("refused", tool, None, str(exc), None, 0)
    except UpstreamError as exc:
        return item("error", tool, None, _tried(str(exc), exc.attempts), None, exc.attempts)
    except AbilitiesError as exc:  # UpstreamUnavailable, PrerequisiteFailed: the call itself was not sent
        return item("error", tool, None, str(exc), None, 0)
    name, value = outcome.entry.qualified, value_of(outcome.result)
    if outcome.result.is_error:
        error = _tried(str(value) or "the tool reported an error", outcome.attempts)
        return item("error", name, None, error, outcome.gate, outcome.attempts)
    return item("ok", name, value, None, outcome.gate, outcome.attempts)


def _tried(error: str, attempts: int) -> str:
    return f"{error}\n(Tried {attempts} times: a read-only tool.)" if attempts > 1 else error


def _limit(tool: str, what: str, count: int, limit: int) -> None:
    if count > limit:
        raise TooMany(
            f"{tool} takes at most {limit} {what}; this one has {count}. Split it into requests of {limit} or fewer. "
            "Nothing was sent."
        )
