"""An ability's steps drawn as an SVG graph on the server: no script, no stylesheet, no dependency.

Layout, top to bottom:
- a step's layer is its longest path from a root over `needs`; in an ability that runs one step at a time, a step
  without needs also waits for the step before it in run order (a dotted "then" edge), so the picture reads in run
  order, while under `settings.parallel` independent steps sit side by side in one layer;
- within a layer, steps keep their YAML order; a need naming no step becomes a red ghost just above the first step
  that names it; a cycle is broken for the layout by leaving out its needs on steps later in the file;
- an edge between neighbouring layers is one curve through the gap; a longer one runs straight where no step is in
  its way, else down a lane right of the layers it passes; a need that points back up runs up a lane on the nearer
  side.

It draws whatever a broken file still holds and never raises. Every text is escaped and stripped of characters XML
forbids; colors are presentation attributes only (the page's Content-Security-Policy blocks `style` attributes and
`<style>` elements).
"""

from __future__ import annotations

import hashlib
import heapq
import html
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

STEP_TYPES = ("script", "agent", "skill", "approval", "workflow")
NODE_W, NODE_H = 240, 64  # wide enough for a workflow's target or a `when` of about 40 characters
NODE_GAP = 28  # between the steps of one layer
LAYER_GAP = 56  # between layers: room for a curve, and for a lane's turns in its upper and lower halves
LANE_GAP = 14  # between a lane and the steps or lanes beside it
MARGIN = 24
LINE_HEIGHT = 16
HEX_INSET = 14  # an approval's hexagon: how far its side points stand out from its top and bottom edges
TEXT_INSET = 12  # text from a node's sides (a hexagon's: from its corners, where its text lines end)
TITLE_CHARS = 400  # a field quoted in a tooltip or in the description is cut to this
MIN_TEXT_WIDTH = 320  # the problem list and the legend wrap to the graph's width, but no narrower than this
MAX_LISTED_PROBLEMS = 40  # problems tied to no step, listed above the graph; the rest are counted

INK, INK_SOFT, INK_WHEN, RED, LINK = "#111827", "#374151", "#92400e", "#b91c1c", "#1d4ed8"
# (fill, stroke) by step type; each stroke is at least 4.5:1 against white and against its fill.
TYPE_COLORS = {
    "script": ("#f1f5f9", "#334155"),
    "agent": ("#eff6ff", "#1d4ed8"),
    "skill": ("#f5f3ff", "#6d28d9"),
    "approval": ("#fffbeb", "#b45309"),
    "workflow": ("#ecfdf5", "#047857"),
    "unknown": ("#f9fafb", "#4b5563"),
    "missing": ("#fef2f2", RED),
}
# (fill, stroke and text) by a step's status in a run; a `status-<name>` class lets a page's CSS restyle them.
STATUS_COLORS = {
    "pending": ("#ffffff", "#4b5563"),
    "running": ("#dbeafe", "#1d4ed8"),
    "awaiting": ("#fef3c7", "#92400e"),
    "completed": ("#dcfce7", "#166534"),
    "failed": ("#fee2e2", RED),
    "skipped": ("#f3f4f6", "#4b5563"),
    "cancelled": ("#e5e7eb", "#374151"),
}
EDGE_STYLES = {  # kind: (stroke, width, dasharray, marker)
    "needs": ("#4b5563", 1.5, "", "arrow"),
    "then": ("#6b7280", 1.2, "2 4", "arrow"),
    "missing": (RED, 1.5, "6 4", "arrow-red"),
    "cycle": (RED, 2.0, "", "arrow-red"),
}
EDGE_WORDS = {
    "needs": "{to} needs {frm}",
    "cycle": "{to} needs {frm}, which closes a cycle",
    "missing": "{to} needs {frm}, which is no step of this ability",
    "then": "{to} runs after {frm} (file order)",
}
_GLYPH_EMS = {
    **dict.fromkeys("ijl.,:;'|!", 0.3),
    **dict.fromkeys(" -/", 0.36),
    **dict.fromkeys("frt()[]", 0.42),
    **dict.fromkeys("mwMW@%", 0.95),
    **dict.fromkeys("0123456789{}", 0.64),
    **dict.fromkeys('"_', 0.5),
    **dict.fromkeys("=<>+~→×", 0.84),
}
_FIELD_WORDS = (("description", ""), ("run", "runs: "), ("prompt", "prompt: "), ("when", "if "))
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_STEP_PATH = re.compile(r"^steps(?:\[(\d+)\]|\.([^.\[\]]+))")  # steps[2].needs[0] | steps.deploy.when
# A link to a nested ability that would run code when followed is dropped: the ability's name came from a file.
_UNSAFE_HREF = re.compile(r"(javascript|data|vbscript):", re.IGNORECASE)


@dataclass
class _Node:
    label: str  # the step id as written ("" when it has none); a ghost's: the missing name
    kind: str  # a step type, "unknown", or "missing" for a ghost
    sort: float  # place within its layer: YAML position (a ghost: just before the first step naming it)
    step: Mapping[str, Any] = field(default_factory=dict)
    needs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    number: int = 0  # place in run order, from 1; 0 for a ghost
    layer: int = 0
    x: float = 0.0
    y: float = 0.0

    @property
    def name(self) -> str:
        return self.label or f"steps[{int(self.sort)}]"


@dataclass
class _Edge:
    src: int
    dst: int
    kind: str  # needs | cycle | missing | then
    path: str = ""


def ability_svg(
    definition: Mapping[str, Any],
    problems: Sequence[tuple[str, str]] = (),
    name: str = "",
    *,
    link: Callable[[str], str] | None = None,
    status: Mapping[str, str] | None = None,
) -> str:
    """The ability's steps as an inline SVG: nodes by type, `needs` edges, `when` conditions, parallel branches,
    approvals, nested abilities; validation problems marked on the node they belong to.

    `link` gives the href of a nested ability by its name; `status` (step id → status) colors a run's live picture.
    """
    definition = definition if isinstance(definition, Mapping) else {}
    settings = definition.get("settings")
    settings = settings if isinstance(settings, Mapping) else {}
    nodes = _read_steps(definition.get("steps"))
    unplaced = _place_problems(nodes, problems)
    edges = _connect(nodes, parallel=settings.get("parallel") is True)
    _layer(nodes, edges)
    _position(nodes)
    box = _route(nodes, edges)
    drawing = _Drawing(
        _text(name or definition.get("name") or ""),
        settings.get("parallel") is True,
        _text(settings.get("on_failure") or ""),
        link,
        status or {},
    )
    return drawing.render(nodes, edges, unplaced, box)


# --- reading the definition -------------------------------------------------------------------------------------


def _read_steps(raw_steps: Any) -> list[_Node]:
    nodes = []
    for i, raw in enumerate(raw_steps if isinstance(raw_steps, list) else []):
        step = raw if isinstance(raw, Mapping) else {}
        sid, kind, needs = step.get("id"), step.get("type"), step.get("needs")
        needs = [needs] if isinstance(needs, str) else needs if isinstance(needs, list) else []
        nodes.append(
            _Node(
                label=_text(sid) if sid not in (None, "") else "",
                kind=kind if kind in STEP_TYPES else "unknown",
                sort=i,
                step=step,
                needs=list(dict.fromkeys(_text(n) for n in needs if n not in (None, ""))),
            )
        )
    return nodes


def _place_problems(nodes: list[_Node], problems: Sequence[tuple[str, str]]) -> list[str]:
    """Attach each problem to the step its path points at; return the others as text."""
    by_id: dict[str, _Node] = {}
    for node in nodes:
        by_id.setdefault(node.label, node)
    unplaced = []
    for path, message in problems:
        path, message = _text(path), _text(message)
        found = _STEP_PATH.match(path)
        target = None
        if found and found[1] is not None:
            target = nodes[int(found[1])] if int(found[1]) < len(nodes) else None
        elif found:
            target = by_id.get(found[2])
        if target is not None:
            target.problems.append(f"{path}: {message}")
        else:
            unplaced.append(f"{path}: {message}" if path else message)
    return unplaced


# --- the graph and its layers -----------------------------------------------------------------------------------


def _connect(nodes: list[_Node], parallel: bool) -> list[_Edge]:
    """An edge per need (a need naming no step through a ghost node added to `nodes`), the cycles' marked; the run
    order numbered; and when steps run one at a time, a "then" edge into each step without needs."""
    first: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if node.label:
            first.setdefault(node.label, i)
    steps, ghosts, edges = len(nodes), {}, []
    for i in range(steps):
        for need in nodes[i].needs:
            if need in first:
                edges.append(_Edge(first[need], i, "needs"))
                continue
            if need not in ghosts:
                ghosts[need] = len(nodes)
                nodes.append(_Node(label=need, kind="missing", sort=i - 0.5))
            edges.append(_Edge(ghosts[need], i, "missing"))
    succ: list[list[int]] = [[] for _ in range(steps)]
    for e in edges:
        if e.kind == "needs":
            succ[e.src].append(e.dst)
    component = _components(succ)
    for e in edges:
        if e.kind == "needs" and component[e.src] == component[e.dst]:  # a step that needs itself, too
            e.kind = "cycle"
    order = _run_order(steps, [e for e in edges if _kept(e) and e.kind != "missing"])
    for number, i in enumerate(order, 1):
        nodes[i].number = number
    if not parallel:
        edges += [_Edge(a, b, "then") for a, b in zip(order, order[1:], strict=False) if not nodes[b].needs]
    return edges


def _kept(edge: _Edge) -> bool:
    """Whether the layout keeps this edge: of a cycle's needs, only those on a step earlier in the file, which
    leaves no cycle (every need kept within one would lead up the file)."""
    return edge.kind != "cycle" or edge.src < edge.dst


def _components(succ: list[list[int]]) -> list[int]:
    """The strongly connected component of each node (Kosaraju's, iterative: no chain is too long)."""
    finished, seen = [], [False] * len(succ)
    for start in range(len(succ)):
        if seen[start]:
            continue
        seen[start], stack = True, [(start, iter(succ[start]))]
        while stack:
            node, rest = stack[-1]
            nxt = next(rest, None)
            if nxt is None:
                finished.append(stack.pop()[0])
            elif not seen[nxt]:
                seen[nxt] = True
                stack.append((nxt, iter(succ[nxt])))
    pred: list[list[int]] = [[] for _ in succ]
    for node, targets in enumerate(succ):
        for t in targets:
            pred[t].append(node)
    component = [-1] * len(succ)
    for root in reversed(finished):
        if component[root] == -1:
            component[root], todo = root, [root]
            while todo:
                for p in pred[todo.pop()]:
                    if component[p] == -1:
                        component[p] = root
                        todo.append(p)
    return component


def _run_order(steps: int, edges: list[_Edge]) -> list[int]:
    """Topological over the needs, YAML order breaking ties: the order the engine hands the steps out."""
    waiting, after = [0] * steps, [[] for _ in range(steps)]
    for e in edges:
        waiting[e.dst] += 1
        after[e.src].append(e.dst)
    ready = [i for i in range(steps) if waiting[i] == 0]
    order: list[int] = []
    while ready:
        order.append(heapq.heappop(ready))
        for later in after[order[-1]]:
            waiting[later] -= 1
            if waiting[later] == 0:
                heapq.heappush(ready, later)
    return order


def _layer(nodes: list[_Node], edges: list[_Edge]) -> None:
    """Each step one layer below the lowest step it waits for; each ghost just above the first step naming it."""
    preds: dict[int, list[int]] = {}
    for e in edges:
        if _kept(e):
            preds.setdefault(e.dst, []).append(e.src)
    for i in sorted((i for i, n in enumerate(nodes) if n.number), key=lambda i: nodes[i].number):
        nodes[i].layer = max((nodes[p].layer + 1 for p in preds.get(i, ())), default=0)  # ghosts are at 0 yet
    ghost_layers: dict[int, int] = {}
    for e in edges:
        if e.kind == "missing":
            below = nodes[e.dst].layer - 1
            ghost_layers[e.src] = min(ghost_layers.get(e.src, below), below)
    for i, layer in ghost_layers.items():
        nodes[i].layer = layer
    rank = {layer: r for r, layer in enumerate(sorted({n.layer for n in nodes}))}  # no empty layer, come what may
    for n in nodes:
        n.layer = rank[n.layer]


def _layers(nodes: list[_Node]) -> list[list[int]]:
    rows: list[list[int]] = [[] for _ in range(max((n.layer for n in nodes), default=-1) + 1)]
    for i in sorted(range(len(nodes)), key=lambda i: nodes[i].sort):
        rows[nodes[i].layer].append(i)
    return rows


def _position(nodes: list[_Node]) -> None:
    """Each layer a centred row; the rows one under another."""
    layers = _layers(nodes)
    full = max((len(row) for row in layers), default=0) * (NODE_W + NODE_GAP)
    for depth, row in enumerate(layers):
        for k, i in enumerate(row):
            nodes[i].x = (full - len(row) * (NODE_W + NODE_GAP)) / 2 + k * (NODE_W + NODE_GAP)
            nodes[i].y = depth * (NODE_H + LAYER_GAP)


# --- edges ------------------------------------------------------------------------------------------------------


def _route(nodes: list[_Node], edges: list[_Edge]) -> tuple[float, float, float, float]:
    """Give every edge its path, the shorter first (nearer lanes); return the box (left, top, right, bottom) the
    nodes and the paths fill."""
    layers = _layers(nodes)
    right = [nodes[row[-1]].x + NODE_W for row in layers]
    left = [nodes[row[0]].x for row in layers]
    ways = [_way(nodes, layers, e, left, right) for e in edges]
    outs, ins = _ports(nodes, edges, ways, True), _ports(nodes, edges, ways, False)
    xs = [v for n in nodes for v in (n.x, n.x + NODE_W)]
    ys = [v for n in nodes for v in (n.y, n.y + NODE_H)]
    for k in sorted(range(len(edges)), key=lambda k: abs(nodes[edges[k].dst].layer - nodes[edges[k].src].layer)):
        e, (sx, sy), (tx, ty) = edges[k], outs[k], ins[k]
        a, b = nodes[e.src].layer, nodes[e.dst].layer
        if ways[k] in ("up-left", "up-right"):
            lx = _lane(left, b, a + 1, -1) if ways[k] == "up-left" else _lane(right, b, a + 1, 1)
            below, above = sy + LAYER_GAP / 3, ty - LAYER_GAP / 3
            points = [(sx, sy), (sx, below), (lx, below), (lx, above), (tx, above), (tx, ty)]
            e.path = "M" + " L".join(f"{x:g},{y:g}" for x, y in points)
        elif ways[k] == "next":
            mid = (sy + ty) / 2
            points = [(sx, sy), (tx, ty)]
            e.path = f"M{sx:g},{sy:g} C{sx:g},{mid:g} {tx:g},{mid:g} {tx:g},{ty:g}"
        elif ways[k] == "straight" and _clear(nodes, layers[a + 1 : b], sx, sy, tx, ty):
            points = [(sx, sy), (tx, ty)]
            e.path = f"M{sx:g},{sy:g} L{tx:g},{ty:g}"
        else:
            lx = _lane(right, a + 1, b, 1)
            below, above = sy + LAYER_GAP / 2, ty - LAYER_GAP / 2
            points = [(sx, sy), (lx, below), (lx, above), (tx, ty)]
            e.path = (
                f"M{sx:g},{sy:g} C{sx:g},{below:g} {lx:g},{sy:g} {lx:g},{below:g} L{lx:g},{above:g} "
                f"C{lx:g},{ty:g} {tx:g},{above:g} {tx:g},{ty:g}"
            )
        xs += [x for x, _ in points]
        ys += [y for _, y in points]
    return (min(xs, default=0), min(ys, default=0), max(xs, default=0), max(ys, default=0))


def _way(nodes: list[_Node], layers: list[list[int]], e: _Edge, left: list[float], right: list[float]) -> str:
    """How an edge runs: to the next layer, straight down, down a lane on the right, or back up a lane on the
    nearer side."""
    src, dst, half = nodes[e.src], nodes[e.dst], NODE_W / 2
    if dst.layer <= src.layer:
        rows = range(dst.layer, src.layer + 1)
        to_left = src.x + dst.x + NODE_W - 2 * min(left[r] for r in rows)
        return "up-left" if to_left <= 2 * max(right[r] for r in rows) - src.x - dst.x - NODE_W else "up-right"
    if dst.layer == src.layer + 1:
        return "next"
    clear = _clear(nodes, layers[src.layer + 1 : dst.layer], src.x + half, src.y + NODE_H, dst.x + half, dst.y)
    return "straight" if clear else "lane"


def _ports(nodes: list[_Node], edges: list[_Edge], ways: list[str], out: bool) -> list[tuple[float, float]]:
    """Where each edge leaves its source's bottom (`out`) or enters its target's top, spread along the side in the
    order of the other ends; an edge down a lane goes on the lane's side, the longer outside, as the lanes run."""
    groups: dict[int, list[int]] = {}
    keys = []
    for k, e in enumerate(edges):
        here, there = (e.src, e.dst) if out else (e.dst, e.src)
        groups.setdefault(here, []).append(k)
        span = abs(nodes[e.dst].layer - nodes[e.src].layer)
        far = {"up-left": (float("-inf"), -span), "up-right": (float("inf"), span), "lane": (float("inf"), span)}
        keys.append(far.get(ways[k], (nodes[there].x, 0)))
    spots = [(0.0, 0.0)] * len(edges)
    for i, ks in groups.items():
        node = nodes[i]
        inset = HEX_INSET + 4 if node.kind == "approval" else 8
        for j, k in enumerate(sorted(ks, key=keys.__getitem__)):
            x = min(max(node.x + NODE_W * (j + 1) / (len(ks) + 1), node.x + inset), node.x + NODE_W - inset)
            spots[k] = (x, node.y + (NODE_H if out else 0))
    return spots


def _clear(nodes: list[_Node], between: list[list[int]], sx: float, sy: float, tx: float, ty: float) -> bool:
    """Whether the straight line from (sx, sy) down to (tx, ty) misses every step of the layers it crosses."""
    for row in between:
        y0 = nodes[row[0]].y
        xs = [sx + (tx - sx) * (y - sy) / (ty - sy) for y in (y0, y0 + NODE_H)]
        lo, hi = min(xs) - LANE_GAP / 2, max(xs) + LANE_GAP / 2
        if any(nodes[i].x < hi and nodes[i].x + NODE_W > lo for i in row):
            return False
    return True


def _lane(extent: list[float], first: int, stop: int, side: int) -> float:
    """A free lane beside layers first..stop-1 (side 1: right of them, -1: left), taken: the next goes beyond it."""
    rows = range(first, stop)
    x = (max if side > 0 else min)(extent[r] for r in rows) + side * LANE_GAP
    for r in rows:
        extent[r] = x
    return x


# --- drawing ----------------------------------------------------------------------------------------------------


class _Drawing:
    """The SVG text of laid-out nodes and routed edges."""

    def __init__(self, name: str, parallel: bool, on_failure: str, link, status: Mapping[str, str]):
        self.name, self.parallel, self.on_failure, self.link = name, parallel, on_failure, link
        self.status = {_text(k): _text(v) for k, v in status.items()}
        digest = hashlib.blake2s(name.encode("utf-8", "replace"), digest_size=4).hexdigest()
        self.ids = f"graph-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')[:40] or 'ability'}-{digest}"

    def render(self, nodes: list[_Node], edges: list[_Edge], unplaced: list[str], box: tuple) -> str:
        left, top, right, bottom = box
        room = max(right - left, MIN_TEXT_WIDTH)
        header = _problem_lines(unplaced, int(room / _width("n", 12)))
        top -= MARGIN + len(header) * LINE_HEIGHT + (MARGIN if header else 0)
        legend, legend_height = self._legend(nodes, edges, left, bottom + MARGIN, room)
        view = (left - MARGIN, top, room + 2 * MARGIN, bottom + legend_height + 2 * MARGIN - top)
        title = f"Steps of {self.name}" if self.name else "Steps of the ability"
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="ability-graph" role="img" '
            f'viewBox="{" ".join(f"{v:g}" for v in view)}" width="{view[2]:g}" height="{view[3]:g}" '
            f'aria-labelledby="{self.ids}-title {self.ids}-desc" font-family="system-ui, sans-serif">',
            f'<title id="{self.ids}-title">{_esc(title)}</title>',
            f'<desc id="{self.ids}-desc">{_esc(self._describe(nodes, unplaced))}</desc>',
            self._markers(),
        ]
        if header:
            lines = "".join(
                f'<tspan x="{left:g}" dy="{LINE_HEIGHT if j else 0}">{_esc(line)}</tspan>'
                for j, line in enumerate(header)
            )
            parts.append(
                f'<text class="problems" x="{left:g}" y="{top + MARGIN:g}" font-size="12" fill="{RED}">{lines}</text>'
            )
        if not nodes:
            parts.append(f'<text x="{left:g}" y="20" font-size="13" fill="{INK_SOFT}">No steps to draw.</text>')
        parts += [self._edge(nodes, e) for e in edges]
        parts += [self._ghost(n) if n.kind == "missing" else self._node(n) for n in nodes]
        parts += [legend, "</svg>"]
        return "\n".join(parts)

    def _markers(self) -> str:
        marks = "".join(
            f'<marker id="{self.ids}-{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
            for marker, color in (("arrow", EDGE_STYLES["needs"][0]), ("arrow-red", RED))
        )
        return f"<defs>{marks}</defs>"

    def _edge(self, nodes: list[_Node], e: _Edge) -> str:
        stroke, width, dash, marker = EDGE_STYLES[e.kind]
        src, dst = nodes[e.src].name, nodes[e.dst].name
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        return (
            f'<path class="edge {"needs cycle" if e.kind == "cycle" else e.kind}" data-from="{_esc(src)}" '
            f'data-to="{_esc(dst)}" d="{e.path}" fill="none" stroke="{stroke}" stroke-width="{width:g}"{dashes} '
            f'marker-end="url(#{self.ids}-{marker})"><title>{_esc(EDGE_WORDS[e.kind].format(frm=src, to=dst))}</title>'
            "</path>"
        )

    def _node(self, n: _Node) -> str:
        state = self.status.get(n.label, "") if n.label else ""
        known = "awaiting" if state.startswith("awaiting") else state  # a run's awaiting_agent and the like
        palette = STATUS_COLORS.get(known) if state else None
        fill, stroke = palette or TYPE_COLORS[n.kind]
        width = 3.0 if n.problems else 2.0 if state else 1.5
        label = f"step {n.name}: {self._kind(n)}" + (f", {state}" if state else "")
        if n.problems:
            label += f", {len(n.problems)} problem{'s' if len(n.problems) > 1 else ''}"
        classes = ["node", f"type-{n.kind}", *([f"status-{_token(known)}"] if state else [])]
        parts = [
            f'<g class="{" ".join(classes + ["problem"] * bool(n.problems))}" data-step="{_esc(n.name)}" '
            f'data-type="{n.kind}" tabindex="0" role="group" aria-label="{_esc(label)}" '
            f'transform="translate({n.x:g},{n.y:g})">',
            f"<title>{_esc(self._tooltip(n))}</title>",
            _shape(n.kind, fill, RED if n.problems else stroke, width),
            *self._texts(n, state, palette[1] if palette else INK_SOFT),
        ]
        if n.problems:
            parts.append(
                f'<circle cx="0" cy="0" r="9" fill="{RED}"/>'
                '<text x="0" y="4" font-size="12" font-weight="700" fill="#ffffff" text-anchor="middle">!</text>'
            )
        return "".join(parts) + "</g>"

    def _ghost(self, n: _Node) -> str:
        fill, stroke = TYPE_COLORS["missing"]
        return (
            f'<g class="ghost" data-missing="{_esc(n.label)}" data-type="missing" tabindex="0" role="group" '
            f'aria-label="{_esc(f"missing step {n.label}")}" transform="translate({n.x:g},{n.y:g})">'
            f"<title>{_esc(f'No step has the id {_cut(n.label, TITLE_CHARS)!r}, which a step needs')}</title>"
            f'<rect width="{NODE_W}" height="{NODE_H}" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5" '
            f'stroke-dasharray="6 4"/><text x="12" y="26" font-size="13" font-weight="700" fill="{RED}">'
            f"{_esc(_fit(n.label, 13, NODE_W - 24, bold=True))}</text>"
            f'<text x="12" y="44" font-size="11" fill="{RED}">missing: no step has '
            "this id</text></g>"
        )

    def _texts(self, n: _Node, state: str, state_color: str) -> list[str]:
        """The id (with its run-order number), the status, the type and its target, the on_failure badge, the when."""
        inset = HEX_INSET + 2 if n.kind == "approval" else TEXT_INSET
        room = NODE_W - 2 * inset
        number = f"{n.number}. " if not self.parallel else ""
        room_left = room - (_width(state, 10, bold=True) + 8 if state else 0)
        shown = _fit(number + (n.label or "(no id)"), 13, room_left, bold=True)
        number = number if shown.startswith(number) else ""
        texts = [
            f'<text class="id" x="{inset}" y="19" font-size="13" font-weight="700" fill="{INK}"><tspan '
            f'font-weight="400" fill="#4b5563">{_esc(number)}</tspan>{_esc(shown[len(number) :])}</text>'
        ]
        if state:
            texts.append(
                f'<text class="status" x="{NODE_W - inset}" y="19" font-size="10" font-weight="700" '
                f'fill="{state_color}" text-anchor="end">{_esc(_fit(state, 10, room / 2, bold=True))}</text>'
            )
        badge = self._badge(n)
        badge_w = _width(badge, 10) + 10 if badge else 0
        texts.append(self._type_text(n, inset, room - badge_w - 4))
        if badge:
            x = NODE_W - inset - badge_w
            texts.append(
                f'<g class="badge"><rect x="{x:g}" y="27" width="{badge_w:g}" height="15" rx="7.5" fill="#ffffff" '
                f'stroke="{INK_SOFT}" stroke-width="0.8"/><text x="{x + badge_w / 2:g}" y="38" font-size="10" '
                f'fill="{INK_SOFT}" text-anchor="middle">{_esc(badge)}</text></g>'
            )
        if n.step.get("when") not in (None, ""):
            texts.append(
                f'<text class="when" x="{inset}" y="{NODE_H - 9}" font-size="10.5" font-style="italic" '
                f'fill="{INK_WHEN}">{_esc(_fit("if " + _text(n.step["when"]), 10.5, room))}</text>'
            )
        return texts

    def _type_text(self, n: _Node, inset: float, room: float) -> str:
        start = f'<text class="type" x="{inset}" y="39" font-size="11"'
        target = n.step.get("workflow") if n.kind == "workflow" else None
        if not isinstance(target, str) or not target:
            return f'{start} fill="{INK_SOFT}">{_esc(_fit(self._kind(n, detail=True), 11, room))}</text>'
        target_room = room - _width("workflow → ", 11)
        shown = (
            f'workflow → <tspan class="target" font-weight="700">{_esc(_fit(target, 11, target_room, True))}</tspan>'
        )
        href = self.link(target) if self.link else None
        if not href or _UNSAFE_HREF.match(re.sub(r"[\x00-\x20]", "", href)):
            return f'{start} fill="{INK_SOFT}">{shown}</text>'
        return (
            f'<a href="{_esc(href)}" aria-label="{_esc(f"open the ability {target}")}">'
            f'{start} fill="{LINK}" text-decoration="underline">{shown}</text></a>'
        )

    def _kind(self, n: _Node, detail: bool = False) -> str:
        """The step's type in words; with `detail`, its agent, skill or nested ability too."""
        if n.kind == "unknown":
            written = n.step.get("type")
            return f"unknown type {_cut(_text(written), 40)!r}" if written not in (None, "") else "no type"
        value = n.step.get(n.kind) if detail and n.kind in ("agent", "skill", "workflow") else None
        if not isinstance(value, str) or not value:
            return n.kind
        return f"{n.kind} → {value}" if n.kind == "workflow" else f"{n.kind} · {value}"

    def _badge(self, n: _Node) -> str:
        policy = n.step.get("on_failure") or self.on_failure
        if policy == "retry":
            retries = n.step.get("max_retries", 1)
            return "retry" if retries == 1 else f"retry ×{_cut(_text(retries), 6)}"
        return policy if policy in ("ask", "continue") else ""

    def _facts(self, n: _Node, tooltip: bool) -> list[str]:
        """What a step's tooltip and its sentence in the description say (the tooltip: its commands and prompt)."""
        keys = ("description", "run", "prompt", "when") if tooltip else ("when",)
        facts = [
            f"{label}{_cut(_text(n.step[k]), TITLE_CHARS)}"
            for k, label in _FIELD_WORDS
            if k in keys and n.step.get(k) not in (None, "")
        ]
        facts += [f"needs {', '.join(n.needs)}"] if n.needs else []
        facts += [f"on failure {badge}" for badge in [self._badge(n)] if badge]
        facts += [f"status {state}" for state in [self.status.get(n.label)] if state and n.label]
        return facts + [f"problem {_cut(p, TITLE_CHARS)}" for p in n.problems]

    def _tooltip(self, n: _Node) -> str:
        return "\n".join([f"{n.label or '(no id)'} — {self._kind(n, detail=True)}", *self._facts(n, tooltip=True)])

    def _describe(self, nodes: list[_Node], unplaced: list[str]) -> str:
        """The steps in run order in words, for screen readers."""
        steps = sorted((n for n in nodes if n.number), key=lambda n: n.number)
        mode = "steps side by side may run at once" if self.parallel else "run one at a time in this order"
        words = [f"{len(steps)} step{'' if len(steps) == 1 else 's'}, {mode}:" if steps else "No steps."]
        for n in steps:
            facts = [
                f"{n.number}. {n.label or '(no id)'}, {self._kind(n, detail=True)}",
                *self._facts(n, tooltip=False),
            ]
            words.append("; ".join(facts) + ".")
        if unplaced:
            words.append("Problems not tied to one step: " + "; ".join(_cut(p, TITLE_CHARS) for p in unplaced))
        return " ".join(words)

    def _legend(self, nodes: list[_Node], edges: list[_Edge], x: float, y: float, room: float) -> tuple[str, float]:
        """A key to the shapes and edges drawn, in rows that fit `room`; and its height."""
        kinds = {n.kind for n in nodes}
        items = [(k, _shape(k, *TYPE_COLORS[k], 1.0, 24, 12)) for k in (*STEP_TYPES, "unknown") if k in kinds]
        for kind, words in (("then", "then (file order)"), ("missing", "missing step"), ("cycle", "cycle")):
            if any(e.kind == kind for e in edges):
                stroke, width, dash, _ = EDGE_STYLES[kind]
                dashes = f' stroke-dasharray="{dash}"' if dash else ""
                items.append((words, f'<path d="M0,6 L24,6" stroke="{stroke}" stroke-width="{width:g}"{dashes}/>'))
        items.append(("side by side: may run at once" if self.parallel else "numbered: run one at a time", ""))
        out, cx, cy = [f'<g class="legend" aria-hidden="true" transform="translate({x:g},{y:g})">'], 0.0, 0.0
        for words, mark in items:
            width = (30 if mark else 0) + _width(words, 11)
            if cx and cx + width > room:
                cx, cy = 0.0, cy + LINE_HEIGHT + 4
            out.append(
                f'<g transform="translate({cx:g},{cy:g})">{mark}<text x="{30 if mark else 0}" y="10" font-size="11" '
                f'fill="{INK_SOFT}">{_esc(words)}</text></g>'
            )
            cx += width + 18
        return "".join(out) + "</g>", cy + LINE_HEIGHT


def _shape(kind: str, fill: str, stroke: str, width: float, w: float = NODE_W, h: float = NODE_H) -> str:
    """script: rectangle; agent: rounded; skill: rounded with a bar; approval: hexagon; workflow: double border;
    unknown: dashed rectangle."""
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="{width:g}"'
    if kind == "approval":
        i, m = min(HEX_INSET, h / 2), h / 2
        points = f"{i:g},0 {w - i:g},0 {w:g},{m:g} {w - i:g},{h:g} {i:g},{h:g} 0,{m:g}"
        return f'<polygon class="shape" points="{points}" {paint}/>'
    if kind == "workflow":
        inner = f'<rect x="3" y="3" width="{w - 6:g}" height="{h - 6:g}" rx="2" fill="none" stroke="{stroke}"/>'
        return f'<rect class="shape" width="{w:g}" height="{h:g}" rx="4" {paint}/>{inner}'
    rounded = h / 3.5 if kind in ("agent", "skill") else 3
    dashes = ' stroke-dasharray="4 3"' if kind == "unknown" else ""
    rect = f'<rect class="shape" width="{w:g}" height="{h:g}" rx="{rounded:g}" {paint}{dashes}/>'
    if kind == "skill":  # a band along the bottom tells a skill from an agent without relying on color
        rect += f'<rect x="{w / 8:g}" y="{h - h / 8:g}" width="{w * 3 / 4:g}" height="{h / 16:g}" fill="{stroke}"/>'
    return rect


def _problem_lines(unplaced: list[str], chars: int) -> list[str]:
    """The problems tied to no step, wrapped to `chars` a line, under a heading."""
    if not unplaced:
        return []
    lines = [f"Problems not tied to one step ({len(unplaced)}):"]
    for problem in unplaced[:MAX_LISTED_PROBLEMS]:
        wrapped = textwrap.wrap(_cut(problem, TITLE_CHARS), chars) or [""]
        lines += ["• " + wrapped[0], *("  " + w for w in wrapped[1:])]
    if len(unplaced) > MAX_LISTED_PROBLEMS:
        lines.append(f"… and {len(unplaced) - MAX_LISTED_PROBLEMS} more")
    return lines


# --- text -------------------------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """Any YAML value as text, without the characters XML cannot hold."""
    return _NOT_XML.sub("\ufffd", value if isinstance(value, str) else str(value))


def _esc(text: str) -> str:
    return html.escape(_NOT_XML.sub("\ufffd", text), quote=True)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _width(text: str, px: float, bold: bool = False) -> float:
    """About how wide the text is drawn, erring wide: glyph widths in ems of DejaVu Sans, the widest usual sans."""
    ems = sum(_GLYPH_EMS.get(c, 0.6 if c.islower() else 0.72 if c.isascii() else 1.0) for c in text)
    return ems * px * (1.13 if bold else 1.0)


def _fit(text: str, px: float, room: float, bold: bool = False) -> str:
    """The text on one line, cut with an ellipsis to what fits in `room` pixels at this font size."""
    text = " ".join(_cut(text, TITLE_CHARS).split())
    if _width(text, px, bold) <= room:
        return text
    used, limit = 0.0, room - _width("…", px, bold)
    for i, c in enumerate(text):
        used += _width(c, px, bold)
        if used > limit:
            return text[:i].rstrip() + "…"
    return text


def _token(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-") or "other"
