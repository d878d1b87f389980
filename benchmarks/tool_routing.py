"""tool_search's routing over 2,000 upstream tools (as a tool cache holds them): per query, `directory.search` (the
skill router over `server__tool` names and descriptions, its index built once per tool list) against a naive
keyword-overlap router on the same tools (the floor), interleaved.

    .venv/bin/python benchmarks/tool_routing.py [--quick]

Quality: tool_eval/tasks.yaml's labeled tasks (dev and test alternate; tune on dev only) routed over the 118
real tools of 15 servers in tool_eval/tools.json, as their tools/list gave them: top-1 and top-3 (of tasks some
tool does), no-match recall and precision (of tasks no tool does), for tool_search and the keyword baseline.

Questions about data: tool_eval/data_questions.yaml (the user's own names, "which users are in the shop database"),
routed over mcp-server-sqlite's tools alone, as a project with only that server has them, and over the 118: top-1
and top-3, dev (read when the rule was chosen) and held-out.

Speed: those real tools, copied onto servers named after them with a suffix until there are 2,000, so names and
descriptions repeat as they do when several instances of a server are configured. The MCP round trip is not timed
here (see gateway_roundtrip.py); the index build is reported apart, and so, on detail lines, are searches of the
same tools listed anew (a new list of the same entries, as live discovery gives) and read again (equal new entries,
as a rewritten tool cache gives), which find the index by the entries' identities or by their contents, and searched
from the tool cache file as tool_search reads it (`cache.read`, the file unchanged since the last search).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import yaml

from _harness import log, ms, spread
from abilities_mcp.gateway import cache
from abilities_mcp.gateway.config import GatewayConfig, Upstream
from abilities_mcp.gateway.directory import ROUTERS_KEPT, Entry, Listing, search
from abilities_mcp.skills.router import Router
from routing_bench import Baseline

TOOLS = 2_000
MS_PER_QUERY_GOAL = 2.0
ROUNDS, QUICK_ROUNDS = 20, 2
# Copies of the tool list for the "read again" line: more than directory.ROUTERS_KEPT, so no copy's identities are
# still remembered when it comes round again.
REREAD_COPIES = ROUTERS_KEPT + 2
BUILDS, QUICK_BUILDS = 3, 1
LIMIT = 5
SUFFIXES = ("prod", "staging", "eu", "us", "team", "legacy", "next", "local", "cloud", "internal", "ci", "archive")
EVAL = Path(__file__).resolve().parent / "tool_eval"
# The real servers' tool lists as tools/list gave them (tool_eval/list_tools.py regenerates it).
REAL = [
    Entry(server["server"], tool["name"], tool["description"], tool["inputSchema"])
    for server in json.loads((EVAL / "tools.json").read_text())
    for tool in server["tools"]
]
# (task, the tools that would do it: any of them counts, or none when no tool does); dev and test alternate.
LABELED = [(task, set((expect or "").split())) for task, expect in yaml.safe_load((EVAL / "tasks.yaml").read_text())]
TASKS = [task for task, _ in LABELED]
# Questions about the data in a database, by split: (question, the tools that would answer it).
DATA_QUESTIONS = {
    split: [(task, set(expect.split())) for task, expect in tasks]
    for split, tasks in yaml.safe_load((EVAL / "data_questions.yaml").read_text()).items()
}


class Quality(NamedTuple):
    """A router's figures on one split."""

    top1: float  # of tasks some tool does, the share whose first tool is one of them
    top3: float  # ... the share with one of them among the first three
    nm_recall: float  # of tasks no tool does, the share that got no tool
    nm_precision: float  # of tasks that got no tool, the share no tool does
    tasks: int


def quality(route: Callable[[str], list[str]]) -> dict[str, Quality]:
    """A router's figures per split and over all, for a router naming tools best first."""
    split: dict[str, list[tuple[set[str], list[str]]]] = {"dev": [], "test": [], "all": []}
    for i, (task, wanted) in enumerate(LABELED):
        names = route(task)[:3]
        split["dev" if i % 2 == 0 else "test"].append((wanted, names))
        split["all"].append((wanted, names))
    return {k: _figures(v) for k, v in split.items()}


def _figures(routed: list[tuple[set[str], list[str]]]) -> Quality:
    some = [(w, n) for w, n in routed if w]
    none = [n for w, n in routed if not w]
    declined = [w for w, n in routed if not n]
    return Quality(
        top1=sum(bool(n) and n[0] in w for w, n in some) / len(some),
        top3=sum(bool(w & set(n)) for w, n in some) / len(some),
        nm_recall=sum(not n for n in none) / len(none) if none else 1.0,
        nm_precision=sum(not w for w in declined) / len(declined) if declined else 1.0,
        tasks=len(routed),
    )


def data_quality(listing: Listing) -> dict[str, tuple[float, float]]:
    """(top-1, top-3) of tool_search on the data questions of each split, over one tool list."""
    figures = {}
    for split, questions in DATA_QUESTIONS.items():
        routed = [(wanted, [f.entry.qualified for f in search(listing, task, 3)]) for task, wanted in questions]
        top1 = sum(bool(names) and names[0] in wanted for wanted, names in routed) / len(routed)
        figures[split] = (top1, sum(bool(wanted & set(names)) for wanted, names in routed) / len(routed))
    return figures


def tools(count: int) -> list[Entry]:
    """`count` tools: the real ones, then copies on servers named `<server>-<suffix>-<n>`."""
    found: list[Entry] = []
    copy = 0
    while len(found) < count:
        suffix = f"-{SUFFIXES[copy % len(SUFFIXES)]}-{copy // len(SUFFIXES)}" if copy else ""
        found += [e._replace(server=f"{e.server}{suffix}") for e in REAL[: count - len(found)]]
        copy += 1
    return found


def listed_again(entries: list[Entry]) -> tuple[list[float], list[float]]:
    """Per-query times of a search over the same tools listed anew (a new list) and read again (new entries)."""
    copies = [Listing([e._replace() for e in entries], time.time(), [], {}) for _ in range(REREAD_COPIES)]
    anew: list[float] = []
    again: list[float] = []
    for i, task in enumerate(TASKS):
        for samples, listing in ((anew, Listing(list(entries), 0.0, [], {})), (again, copies[i % REREAD_COPIES])):
            started = time.perf_counter()
            search(listing, task, LIMIT)
            samples.append(time.perf_counter() - started)
    return anew, again


def from_the_cache_file(entries: list[Entry]) -> list[float]:
    """Per-query times of tool_search's way with a tool cache: the file read (unchanged), then searched."""
    servers = sorted({e.server for e in entries})
    config = GatewayConfig({s: Upstream(s, "true", (), {}, None, None, {}, 60.0) for s in servers}, [])
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-tool-cache-") as tmp:
        path = Path(tmp) / "agent-skill-tools.json"
        cache.write(path, cache.document(Listing(entries, time.time(), [], {}), config, servers, time.time()))
        for task in TASKS:
            started = time.perf_counter()
            found = cache.read(path, config)
            assert found is not None
            search(found.listing, task, LIMIT)
            samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds instead of {ROUNDS}")
    args = parser.parse_args()
    rounds, builds = (QUICK_ROUNDS, QUICK_BUILDS) if args.quick else (ROUNDS, BUILDS)

    entries = tools(TOOLS)
    listing = Listing(entries, time.time(), [], {})
    pairs = [(e.qualified, e.description) for e in entries]
    build_times = []
    for _ in range(builds):
        started = time.perf_counter()
        Router(pairs)
        build_times.append(time.perf_counter() - started)
    baseline = Baseline(pairs)
    search(listing, TASKS[0], LIMIT)  # the index, built once for this tool list
    ours: list[float] = []
    floor: list[float] = []
    contenders = [
        (ours, lambda task: search(listing, task, LIMIT)),
        (floor, lambda task: baseline.route(task, LIMIT)),
    ]
    for r in range(rounds):
        for i, task in enumerate(TASKS):
            order = contenders if (r + i) % 2 == 0 else contenders[::-1]
            for samples, route in order:
                started = time.perf_counter()
                route(task)
                samples.append(time.perf_counter() - started)

    log(f"tool routing: {TOOLS:,} tools on {len({e.server for e in entries})} servers, {len(TASKS)} tasks x {rounds}")
    log(f"  index build     {spread(build_times)} (once per tool list)")
    log(f"  tool_search     {spread(ours)}")
    log(f"  keyword floor   {spread(floor)}")
    anew, again = listed_again(entries)
    log(f"  listed anew     {spread(anew)} (the same entries in a new list: live discovery)")
    log(f"  read again      {spread(again)} (equal new entries: a rewritten tool cache)")
    log(f"  cache file      {spread(from_the_cache_file(entries))} (cache.read of the unchanged file, then search)")
    for task in TASKS[:3]:
        log(f"  {task!r}: {[f.entry.qualified for f in search(listing, task, 3)]}")
    real_listing = Listing(REAL, time.time(), [], {})
    real_baseline = Baseline([(e.qualified, e.description) for e in REAL])
    ranked = {
        "tool_search": quality(lambda task: [f.entry.qualified for f in search(real_listing, task, 3)]),
        "keyword baseline": quality(lambda task: real_baseline.route(task, 3)),
    }
    servers = len({e.server for e in REAL})
    log(f"tool routing quality: {len(LABELED)} labeled tasks over {len(REAL)} real tools of {servers} servers")
    for name, figures in ranked.items():
        for split, q in figures.items():
            log(
                f"  {name:16} {split:4} ({q.tasks:3} tasks) top-1 {q.top1:.3f} top-3 {q.top3:.3f} "
                f"no-match recall {q.nm_recall:.3f} precision {q.nm_precision:.3f}"
            )
    sqlite_alone = Listing([e for e in REAL if e.server == "sqlite"], time.time(), [], {})
    for name, over in (("sqlite alone", sqlite_alone), ("all 118 tools", real_listing)):
        for split, (top1, top3) in data_quality(over).items():
            log(f"  data questions   {split:8} over {name:13} top-1 {top1:.3f} top-3 {top3:.3f}")
    mine, base = statistics.median(ours), statistics.median(floor)
    ours_all, base_all = ranked["tool_search"]["all"], ranked["keyword baseline"]["all"]
    print(
        f"tool routing quality: top-1 {ours_all.top1:.2f} top-3 {ours_all.top3:.2f} no-match recall "
        f"{ours_all.nm_recall:.2f} on {len(LABELED)} tasks over {len(REAL)} real tools (keyword baseline top-1 "
        f"{base_all.top1:.2f} top-3 {base_all.top3:.2f} no-match recall {base_all.nm_recall:.2f})",
        flush=True,
    )
    print(
        f"tool routing: ratio {mine / base:.2f} (no goal) median {ms(mine)} ms vs floor {ms(base)} ms over "
        f"{len(ours)} queries | {ms(mine)} ms/query at {TOOLS:,} tools (goal <= {MS_PER_QUERY_GOAL:g} ms)",
        flush=True,
    )


if __name__ == "__main__":
    main()
