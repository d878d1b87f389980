"""The next task of a Markdown plan: the first unchecked checklist item that is work, not a check of work.

A plan is the checklist an orchestrator keeps (`- [ ]` open, `- [x]` done, nested by indentation, under `#`
headings). The next task is the first open item in document order whose own open sub-items are all done (so a
parent waits for its children), skipping what the orchestrator's seed says to skip: items in a verification or
manual-QA section, items that are themselves checks (`Verify …`, `Manual QA: …`), and `[ ]?` items (optional or
undecided). A task may name the skills it wants at the end of its line: `… (skills: pdf, xlsx)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..files import Unreadable, read_text

# A plan larger than this is not a plan a person keeps by hand.
MAX_PLAN_BYTES = 2 * 1024 * 1024
# `- [ ] text`, `* [x] text`, `1. [ ]? text`, indented for nesting.
ITEM = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*+]|\d+[.)])[ \t]+\[(?P<mark>[ xX])\](?P<maybe>\?)?(?:[ \t]+(?P<text>.*))?$"
)
HEADING = re.compile(r"^(?P<hashes>#{1,6})[ \t]+(?P<title>.+?)[ \t#]*$")
FENCE = re.compile(r"^[ \t]*(```|~~~)")
# Sections whose items check the work rather than do it (the seed: "ignoring verification and manual QA items").
CHECK_SECTION = re.compile(r"\b(verif\w*|manual[ -]?qa|qa|acceptance|smoke[ -]?tests?|testing checklist)\b", re.I)
CHECK_ITEM = re.compile(r"^(verify|manual[ -]?qa\b|qa:|check that)\b", re.I)
# `… (skills: a, b)` / `… [skills: a]` / `… skills: a, b` at the end of a task line (skill names are lowercase).
_NAME = r"[a-z0-9][a-z0-9._-]*"
HINT = re.compile(rf"[ \t]*[(\[]?\b(?i:skills?):[ \t]*(?P<names>{_NAME}(?:[ \t]*,[ \t]*{_NAME})*)[ \t]*[)\]]?[ \t]*$")


class PlanError(Exception):
    """Why a plan gives no task; the caller falls back to choosing one itself."""


@dataclass
class Task:
    text: str  # the item's text, hints removed
    line: int  # 1-based
    section: str | None  # the nearest heading above, or None
    hints: list[str] = field(default_factory=list)
    parent: str | None = None  # the open item this one is a step of


@dataclass
class _Item:
    indent: int
    line: int
    text: str
    done: bool
    optional: bool
    sections: tuple[str, ...]
    children: list[_Item] = field(default_factory=list)
    parent: _Item | None = None


# Characters of a caller's path a message shows.
SHOWN_PATH_CHARS = 200


def plan_path(root: Path, given: str) -> Path:
    """The plan file a caller names, inside the project: a relative path is under the root."""
    if not given.strip() or "\0" in given:
        what = "is empty" if not given.strip() else "holds a NUL character, which no file name does"
        raise PlanError(f"the plan path {_shown(given)} {what}; give the path of a Markdown file such as PLAN.md")
    try:
        path = (root / given).resolve()
    except (OSError, RuntimeError) as exc:  # a link loop; a name too long for the OS
        raise PlanError(f"the plan {_shown(given)} cannot be found ({exc}); give a path under {root}") from None
    if not path.is_relative_to(root.resolve()):
        raise PlanError(f"the plan {_shown(given)} is outside the project {root}; give a path under it")
    return path


def _shown(given: str) -> str:
    """A caller's path as a message shows it: quoted, and cut (a 5,000-character path is not echoed back)."""
    return repr(given if len(given) <= SHOWN_PATH_CHARS else given[:SHOWN_PATH_CHARS] + "...")


def read_plan(path: Path) -> str:
    shown = _shown(str(path))
    try:
        return read_text(path, MAX_PLAN_BYTES)
    except FileNotFoundError:
        raise PlanError(f"no plan at {shown}; give the path of a Markdown file under the project") from None
    except Unreadable as exc:
        raise PlanError(f"the plan {shown} {exc}") from None


def next_task(text: str) -> Task | None:
    """The next task, or None when every task is done; PlanError when the text holds no checklist at all."""
    items = _items(text)
    if not items:
        raise PlanError("the plan has no checklist items (`- [ ] task`); write the tasks as a Markdown checklist")
    for item in items:
        if _is_next(item):
            text, hints = split_hints(item.text)
            parent, parent_hints = split_hints(item.parent.text) if item.parent else (None, [])
            section = item.sections[-1] if item.sections else None
            return Task(text, item.line, section, hints or parent_hints, parent)  # a step inherits its task's hints
    return None


def split_hints(text: str) -> tuple[str, list[str]]:
    """`Add the export (skills: xlsx, pdf)` → ("Add the export", ["xlsx", "pdf"])."""
    found = HINT.search(text)
    if not found or not text[: found.start()].strip():
        return text.strip(), []
    names = [n.strip() for n in found.group("names").split(",") if n.strip()]
    return text[: found.start()].rstrip(" \t-—:"), list(dict.fromkeys(names))


def _is_next(item: _Item) -> bool:
    if item.done or item.optional or not item.text.strip():
        return False
    if any(CHECK_SECTION.search(s) for s in item.sections) or CHECK_ITEM.search(item.text.strip()):
        return False
    return not any(_open(child) for child in item.children)


def _open(item: _Item) -> bool:
    return (not item.done and not item.optional) or any(_open(c) for c in item.children)


def _items(text: str) -> list[_Item]:
    """Every checklist item in document order, with its parent, children and the headings above it."""
    items: list[_Item] = []
    stack: list[_Item] = []
    headings: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if heading := HEADING.match(line):
            level = len(heading.group("hashes"))
            headings = [h for h in headings if h[0] < level] + [(level, heading.group("title").strip())]
            stack.clear()
            continue
        found = ITEM.match(line)
        if not found:
            continue
        indent = len(found.group("indent").expandtabs(4))
        item = _Item(
            indent=indent,
            line=number,
            text=(found.group("text") or "").strip(),
            done=found.group("mark") in "xX",
            optional=bool(found.group("maybe")),
            sections=tuple(title for _, title in headings),
        )
        while stack and stack[-1].indent >= indent:
            stack.pop()
        if stack:
            item.parent = stack[-1]
            stack[-1].children.append(item)
        stack.append(item)
        items.append(item)
    return items
