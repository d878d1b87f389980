"""HTML built so that text is escaped unless it says otherwise: `el("p", text)` escapes `text`, a `Safe` string (what
`el` returns) goes in as it is. Text from a run, a step, an agent or a file is also made inert: control characters
and the marks that reorder text are shown as escapes, as the CLI shows them (cli/inert.py), so no output can draw
over what a person reads before they approve.

Every link into the page is built by `path`, on the page's secret prefix (`/s/<prefix>`, auth.Gate.base) that the app
sets for the request it answers (`links_under`): a page never links outside its prefix, and never names it unless the
request that asked for it did.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import quote

# C0 controls but newline and tab, DEL, C1 controls, and the Unicode marks that reorder or hide text (cli/inert.py's
# table: the page may not import the CLI).
_UNSAFE = [c for c in range(0x20) if c not in (0x09, 0x0A)] + list(range(0x7F, 0xA0))
_UNSAFE += [0x061C, 0x200B, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF, 0x2028, 0x2029]
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}
# HTML elements that have no closing tag, and SVG ones written self-closed (inside <svg> the parser wants the slash).
_VOID = {"br", "hr", "img", "input", "link", "meta"}
_SVG_EMPTY = {"rect", "line", "circle", "path"}

# The sections, by their path within the page ("" is the runs, the page's first) and name.
NAV = [("", "Runs"), ("waiting", "Waiting for you"), ("abilities", "Abilities"), ("skills", "Skills")]
NAV += [("prerequisites", "Prerequisites")]
# The page's base path (`/s/<prefix>`) for the request being answered; unset, `path` raises rather than link outside.
BASE: ContextVar[str] = ContextVar("BASE")


class Safe(str):
    """Markup that is already escaped."""


def inert(text: str) -> str:
    """The text with every unsafe character written as its escape."""
    return text.translate(_TABLE)


def escape(value: object) -> Safe:
    """Text as HTML: inert, then escaped (quotes too, so it is safe in an attribute)."""
    if isinstance(value, Safe):
        return value
    return Safe(html.escape(inert(str(value)), quote=True))


def el(tag: str, *children: object, **attrs: object) -> Safe:
    """One element: attributes escaped (`class_` for class, `data_run` for data-run; True for a bare attribute,
    None or False left out), children escaped unless Safe, lists flattened."""
    shown = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        shown.append(f" {name}" if value is True else f' {name}="{escape(value)}"')
    opening = f"<{tag}{''.join(shown)}>"
    if tag in _VOID and not children:
        return Safe(opening)
    if tag in _SVG_EMPTY and not children:
        return Safe(f"<{tag}{''.join(shown)}/>")
    return Safe(f"{opening}{join(children)}</{tag}>")


def join(children: Iterable[object]) -> Safe:
    """Children in a row, each escaped unless Safe; None left out; nested lists flattened."""
    out = []
    for child in children:
        if child is None:
            continue
        if isinstance(child, str):
            out.append(escape(child))
        elif isinstance(child, Iterable):
            out.append(join(child))
        else:
            out.append(escape(child))
    return Safe("".join(out))


def scroll(content: object, label: str) -> Safe:
    """A box that scrolls sideways on its own (a wide table on a narrow window), never the page; keyboard users can
    focus it to scroll it."""
    return el("div", content, class_="scroll", role="region", aria_label=label, tabindex="0")


@contextmanager
def links_under(base: str) -> Iterator[None]:
    """Within it, `path` builds links under `base` (the page's prefix, `/s/<prefix>`)."""
    token = BASE.set(base)
    try:
        yield
    finally:
        BASE.reset(token)


def path(*parts: str, keep_slashes: bool = False) -> str:
    """A link into the page: its base, then the segments, each quoted (an ability's name keeps its slashes);
    `path()` is the page's first, the runs."""
    return f"{BASE.get()}/" + "/".join(quote(p, safe="/" if keep_slashes else "") for p in parts)


def clock(at: float | None) -> Safe | None:
    """A moment as local time, machine-readable too."""
    if at is None:
        return None
    stamp = time.localtime(at)
    return el("time", time.strftime("%Y-%m-%d %H:%M:%S", stamp), datetime=time.strftime("%Y-%m-%dT%H:%M:%S%z", stamp))


def seconds(value: float | None) -> str:
    """A duration in a person's words: 850 ms, 4.2 s, 3 min 5 s, 1 h 2 min."""
    if value is None:
        return ""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    return f"{minutes // 60} h {minutes % 60} min"


def layout(title: str, body: object, *, current: str | None, session_csrf: str | None, project: str = "") -> str:
    """A whole page: the header with the navigation (`current`: the section's path within the page, as in NAV) and
    the live status, then `body` under the title. Without a session (a refusal) the page names no data and opens no
    event stream."""
    nav = None
    if session_csrf is not None:
        nav = el(
            "nav",
            el(
                "ul",
                [
                    el("li", el("a", label, href=path(at), aria_current="page" if at == current else None))
                    for at, label in NAV
                ],
            ),
            aria_label="Sections",
        )
    live = el("span", "not live", id="live", aria_live="polite") if session_csrf is not None else None
    header = el(
        "header",
        el(
            "p",
            el("a", "abilities-mcp", href=path()),
            " ",
            el("span", project, class_="project") if project else None,
            class_="brand",
        ),
        nav,
        live,
    )
    head = join(
        [
            Safe('<meta charset="utf-8">'),
            Safe('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            el("title", f"{title} · abilities-mcp"),
            el("link", rel="icon", href=path("favicon.ico")),  # else the browser asks for /favicon.ico: not the page
            el("link", rel="stylesheet", href=path("static", "app.css")),
            el("script", src=path("static", "app.js"), defer=True) if session_csrf is not None else None,
        ]
    )
    body_attrs = {"data_events": path("events"), "data_csrf": session_csrf} if session_csrf is not None else {}
    page = el(
        "body",
        el("a", "Skip to the content", href="#main", class_="skip"),
        header,
        el("main", el("h1", title), body, id="main", tabindex="-1"),
        **body_attrs,
    )
    return f'<!doctype html>\n<html lang="en">\n<head>{head}</head>\n{page}\n</html>\n'


def refusal_page(status: int, title: str, message: str) -> str:
    """A page for a request that was refused: what happened and what to do, nothing else."""
    return layout(
        title, join([el("p", message), el("p", el("a", "Open the page", href=path()))]), current=None, session_csrf=None
    )
