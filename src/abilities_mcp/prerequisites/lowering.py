"""What an edit of workflows.json (or the tool cache) loosens of the gates a person trusted, in words.

A trusted, enabled workflow loses its gate when it is removed (or broken), disabled, its mode weakened, a trigger
dropped (a tool name or a shell rule such as `Bash(git push --force:*)`), a required prerequisite removed, made
optional, re-pointed (other arguments) or moved later in the order, its approval removed or made to last longer,
or a tool it triggers on by category leaves that category. A new workflow, a stronger mode, more triggers, more
prerequisites, an approval added or made shorter tighten, and apply at once; a reworded prompt changes no gate.
Stdlib only: the hook decides this on its path.
"""

from __future__ import annotations

from collections.abc import Iterator

from .workflows import Workflow, WorkflowSet

# Weakest first: a workflow moved left on this list lowers its gate.
MODE_ORDER = ("suggest", "warn", "enforce")


def lowerings(trusted: WorkflowSet, current: WorkflowSet) -> list[str]:
    """Each way `current` loosens `trusted`'s gates; empty when every gate holds or tightens."""
    found: list[str] = []
    for name, then in trusted.workflows.items():
        if not then.enabled:
            continue
        now = current.workflows.get(name)
        if now is None:
            found.append(f"workflow {name!r} removed (or broken: `abilities-mcp validate` says why)")
            continue
        found += [f"workflow {name!r} {why}" for why in _loosened(then, now)]
    used = {w.category.lower() for w in trusted.enabled() if w.category}
    found += _categories_dropped(trusted.categories, current.categories, used)
    return found


def _loosened(then: Workflow, now: Workflow) -> Iterator[str]:
    if not now.enabled:
        yield "disabled"
    if MODE_ORDER.index(now.mode) < MODE_ORDER.index(then.mode):
        yield f"weakened from {then.mode} to {now.mode}"
    if then.category and (now.category or "").lower() != then.category.lower():
        yield f"no longer triggered by category {then.category!r}"
    ruled = {r.raw for w in (then, now) for r in w.commands}  # the shell rules, compared as parsed below
    plain_then, plain_now = (tuple(t for t in w.tools if t not in ruled) for w in (then, now))
    yield from (f"no longer triggered by tool {t!r}" for t in _missing(plain_then, plain_now))
    yield from _rules_dropped(then, now)
    yield from (f"no longer triggered by keyword {k!r}" for k in _missing(then.keywords, now.keywords))
    yield from _prerequisites_loosened(then, now)
    yield from _approval_loosened(then, now)


def _prerequisites_loosened(then: Workflow, now: Workflow) -> Iterator[str]:
    required = [p for p in then.prerequisites if p.required]
    by_tool = {p.tool.lower(): p for p in now.prerequisites}
    for p in required:
        same = by_tool.get(p.tool.lower())
        if same is None:
            yield f"lost its required prerequisite {p.tool!r}"
        elif not same.required:
            yield f"made its prerequisite {p.tool!r} optional"
        elif (same.params, same.arguments) != (p.params, p.arguments):
            yield f"runs its prerequisite {p.tool!r} with other arguments"
    kept = [p.tool.lower() for p in sorted(now.prerequisites, key=lambda p: p.step) if p.required]
    wanted = [p.tool.lower() for p in required]
    if then.mode == "enforce" and [t for t in kept if t in wanted] != [t for t in wanted if t in kept]:
        yield "reordered its required prerequisites"


def _rules_dropped(then: Workflow, now: Workflow) -> Iterator[str]:
    """A shell rule gone from the triggers. Rules are compared as parsed, case-sensitively like their words when
    matched: respacing or requoting one changes nothing, `Bash(git push -F:*)` for `Bash(git push -f:*)` drops it."""
    kept = {(r.words, r.prefix) for r in now.commands}
    yield from (
        f"no longer triggered by command rule {r.raw!r}" for r in then.commands if (r.words, r.prefix) not in kept
    )


def _approval_loosened(then: Workflow, now: Workflow) -> Iterator[str]:
    if then.approval is None:
        return
    if now.approval is None:
        yield "no longer needs a person's approval"
    elif now.approval.expires > then.approval.expires:
        from ..durations import format_duration  # only here: the hook's path imports no more than it must

        was, becomes = format_duration(then.approval.expires), format_duration(now.approval.expires)
        yield f"made its approval last longer: {was} → {becomes}"
    if now.approval is not None and then.approval.four_eyes and not now.approval.four_eyes:
        yield "no longer needs a second person's approval (four_eyes)"
    if now.approval is not None and now.approval.prompt != then.approval.prompt:
        # The question is what a person reads before they say yes: an agent's rewording could mislead them.
        yield "changed the question its approval asks a person"


def _categories_dropped(
    trusted: dict[str, frozenset[str]], current: dict[str, frozenset[str]], used: set[str]
) -> list[str]:
    """A tool leaving a category a trusted workflow triggers on (the tool cache decides categories)."""
    return [
        f"tool {tool!r} left category {category!r} in the tool cache"
        for tool, categories in sorted(trusted.items())
        for category in sorted(categories & used)
        if category not in current.get(tool, frozenset())
    ]


def _missing(then: tuple[str, ...], now: tuple[str, ...]) -> list[str]:
    kept = {n.lower() for n in now}
    return [t for t in then if t.lower() not in kept]
