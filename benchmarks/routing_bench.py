"""Skill routing (skill_route): quality on the labeled eval set next to a naive keyword-overlap baseline, a
label-free check on 144 real public skills, and speed with 10,000 skills against that baseline (the floor).

    .venv/bin/python benchmarks/routing_bench.py [--quick]

Quality, per split (dev is for tuning, test is held out):
  top-1      of queries with an expected skill, the share whose first match is that skill
  top-3      of the same queries, the share with that skill among the first three
  nm-prec    no-match precision: of queries that got [], the share whose expected skill is null
  nm-recall  no-match recall: of queries whose expected skill is null, the share that got []
  wrong      wrong-pick rate: of queries whose expected skill is null, the share that got a match anyway
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from _harness import log, ms
from abilities_mcp.skills.router import Router

HERE = Path(__file__).resolve().parent
EVAL = HERE / "routing"
# 144 real skills (frontmatter only), read in place; see its README.
CATALOG = HERE.parent.parent / "shared" / "routing-catalog"
# The goals.
TOP1_GOAL, NO_MATCH_PRECISION_GOAL, NO_MATCH_RECALL_GOAL, MS_PER_QUERY_GOAL = 0.90, 0.95, 0.7, 2.0
SPEED_SKILLS = 10_000
# Each eval query is routed this many times per contender for the speed figure (quick: once).
ROUNDS, QUICK_ROUNDS = 5, 1
BUILDS, QUICK_BUILDS = 3, 1
# Fixed, so every run times the same synthetic catalog.
SEED = 20_251_121
SUFFIXES = ("pro", "lite", "team", "internal", "legacy", "next", "cli", "cloud", "local", "fast", "plus", "review")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Query:
    """One labeled query of benchmarks/routing/queries.yaml."""

    query: str
    expect: str | None
    kind: str
    split: str


class Baseline:
    """Naive keyword overlap: lowercase words of the query ∩ words of name + description, most shared words first."""

    def __init__(self, skills: Iterable[tuple[str, str]]):
        self.names = []
        self.index: dict[str, list[int]] = {}
        for i, (name, description) in enumerate(skills):
            self.names.append(name)
            for word in set(words(f"{name} {description}")):
                self.index.setdefault(word, []).append(i)

    def route(self, task: str, limit: int = 3) -> list[str]:
        """Names of the skills sharing most words with the task; [] when none shares one."""
        counts: Counter[int] = Counter()
        for word in set(words(task)):
            counts.update(self.index.get(word, ()))
        best = heapq.nsmallest(limit, counts.items(), key=lambda item: (-item[1], item[0]))  # ties: catalog order
        return [self.names[i] for i, _ in best]


def words(text: str) -> list[str]:
    """Lowercase runs of letters and digits."""
    return _WORD.findall(text.lower())


def load_eval() -> tuple[list[tuple[str, str]], list[Query]]:
    """The eval set's skills as (name, description) and its labeled queries."""
    skills = [(s["name"], s["description"]) for s in yaml.safe_load((EVAL / "skills.yaml").read_text())]
    queries = [
        Query(q["query"], q.get("expect"), q["kind"], q["split"])
        for q in yaml.safe_load((EVAL / "queries.yaml").read_text())
    ]
    return skills, queries


def load_catalog() -> list[tuple[str, str]]:
    """(name, description) of each real skill in the shared catalog, from its SKILL.md frontmatter."""
    skills = []
    for path in sorted(CATALOG.glob("*/SKILL.md")):
        front = yaml.safe_load(path.read_text().split("---")[1])
        skills.append((front["name"], " ".join(str(front["description"]).split())))
    return skills


def quality(route: Callable[[str], list[str]], queries: Sequence[Query]) -> dict[str, float]:
    """top-1, top-3, no-match precision and recall, wrong-pick rate (see the module docstring)."""
    picks = [(q, route(q.query)) for q in queries]
    fits = [(q, names) for q, names in picks if q.expect is not None]
    nulls = [names for q, names in picks if q.expect is None]
    empty = [q for q, names in picks if not names]
    share = lambda part, whole: part / whole if whole else float("nan")  # noqa: E731
    return {
        "n": len(queries),
        "top-1": share(sum(bool(names) and names[0] == q.expect for q, names in fits), len(fits)),
        "top-3": share(sum(q.expect in names[:3] for q, names in fits), len(fits)),
        "nm-prec": share(sum(q.expect is None for q in empty), len(empty)),
        "nm-recall": share(sum(not names for names in nulls), len(nulls)),
        "wrong": share(sum(bool(names) for names in nulls), len(nulls)),
    }


def quality_table(router: Router, baseline: Baseline, queries: list[Query]) -> dict[str, dict[str, float]]:
    """Print ours and the baseline on dev, test and all, and top-1 by kind; returns ours by split."""
    ours = lambda text: [m.name for m in router.route(text)]  # noqa: E731
    splits = {"dev": [q for q in queries if q.split == "dev"], "test": [q for q in queries if q.split == "test"]}
    splits["all"] = queries
    columns = ("top-1", "top-3", "nm-prec", "nm-recall", "wrong")
    log(f"  {'':9}{'split':6}{'n':>5}" + "".join(f"{c:>10}" for c in columns))
    results = {}
    for label, route in (("router", ours), ("baseline", baseline.route)):
        for split, part in splits.items():
            figures = quality(route, part)
            results.setdefault(label, {})[split] = figures
            log(f"  {label:9}{split:6}{figures['n']:>5}" + "".join(f"{_figure(figures[c]):>10}" for c in columns))
    kinds = sorted({q.kind for q in queries})
    by_kind = {k: quality(ours, [q for q in queries if q.kind == k]) for k in kinds}
    log("  router by kind (all splits): " + ", ".join(f"{k} {_kind_figure(f)}" for k, f in by_kind.items()))
    return results["router"]


def _figure(value: float) -> str:
    """Three decimals; "-" where the share is undefined (the baseline never returns [], so it has no precision)."""
    return "-" if math.isnan(value) else f"{value:.3f}"


def _kind_figure(figures: dict[str, float]) -> str:
    if not math.isnan(figures["top-1"]):  # the kind has expected skills
        return f"top-1 {figures['top-1']:.2f} (n={figures['n']:g})"
    return f"no-match recall {figures['nm-recall']:.2f} (n={figures['n']:g})"


def wild_check(catalog: list[tuple[str, str]]) -> str:
    """Label-free: each real skill's first description clause, its name's words removed, should route to it."""
    router = Router(catalog)
    hits = top3 = 0
    for name, description in catalog:
        clause = description.split(". ")[0]
        name_words = set(words(name))
        task = " ".join(w for w in clause.split() if not set(words(w)) & name_words)
        found = [m.name for m in router.route(task)]
        hits += bool(found) and found[0] == name
        top3 += name in found
    named = sum(bool(m := router.route(f"use the {name} skill")) and m[0].name == name for name, _ in catalog)
    return (
        f"in the wild ({len(catalog)} real skills, no labels): own first clause without the name -> itself "
        f"top-1 {hits / len(catalog):.2f}, top-3 {top3 / len(catalog):.2f}; 'use the NAME skill' -> it first "
        f"{named}/{len(catalog)}"
    )


def synthesize(catalog: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    """count skills from the real ones: suffixed names, sentences shuffled and thinned, words of another mixed in."""
    rng = random.Random(SEED)
    skills = []
    for i in range(count):
        name, description = catalog[i % len(catalog)]
        sentences = [s for s in description.split(". ") if s]
        rng.shuffle(sentences)
        if len(sentences) > 1:
            sentences.pop()
        other = rng.choice(catalog)[1].split()
        borrowed = " ".join(rng.sample(other, min(len(other), rng.randint(3, 12))))
        suffix = rng.choice(SUFFIXES)
        skills.append((f"{name}-{suffix}-{i}", f"{'. '.join(sentences)}. Also {borrowed}."))
    return skills


def speed(catalog: list[tuple[str, str]], tasks: list[str], rounds: int, builds: int) -> tuple[list[float], ...]:
    """Build times of our index at SPEED_SKILLS, then per-query times of ours and the baseline, interleaved."""
    skills = synthesize(catalog, SPEED_SKILLS)
    build_times = []
    for _ in range(builds):
        started = time.perf_counter()
        router = Router(skills)
        build_times.append(time.perf_counter() - started)
    baseline = Baseline(skills)
    contenders = {"router": router.route, "baseline": baseline.route}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for task in tasks[:20]:  # warm-up
        for route in contenders.values():
            route(task)
    for r in range(rounds):
        for k, task in enumerate(tasks):
            order = list(contenders) if (k + r) % 2 else list(contenders)[::-1]
            for name in order:
                started = time.perf_counter()
                contenders[name](task)
                samples[name].append(time.perf_counter() - started)
    return build_times, samples["router"], samples["baseline"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} round and {QUICK_BUILDS} build only")
    args = parser.parse_args()
    skills, queries = load_eval()
    catalog = load_catalog()

    log(f"routing quality: {len(skills)} skills, {len(queries)} labeled queries")
    ours = quality_table(Router(skills), Baseline(skills), queries)
    log(wild_check(catalog))

    rounds, builds = (QUICK_ROUNDS, QUICK_BUILDS) if args.quick else (ROUNDS, BUILDS)
    build_times, mine, floor = speed(catalog, [q.query for q in queries], rounds, builds)
    per_query, per_floor = statistics.median(mine), statistics.median(floor)
    log(
        f"routing speed at {SPEED_SKILLS:,} synthetic skills: index build median {ms(statistics.median(build_times))} "
        f"ms over {builds}; per query over {len(mine)} routes: router median {ms(per_query)} ms "
        f"(p90 {ms(sorted(mine)[len(mine) * 9 // 10])}), keyword baseline (floor) median {ms(per_floor)} ms"
    )
    print(
        f"routing on all {len(queries)} queries (dev / test): top-1 {_splits(ours, 'top-1')} (goal >= "
        f"{TOP1_GOAL:.2f}), top-3 {_splits(ours, 'top-3')}, no-match precision {_splits(ours, 'nm-prec')} (goal >= "
        f"{NO_MATCH_PRECISION_GOAL:.2f}), no-match recall {_splits(ours, 'nm-recall')} (goal >= "
        f"{NO_MATCH_RECALL_GOAL:.2f}) | {ms(per_query)} ms/query at {SPEED_SKILLS:,} skills (goal <= "
        f"{MS_PER_QUERY_GOAL:g} ms), {per_query / per_floor:.1f}x the keyword baseline",
        flush=True,
    )


def _splits(ours: dict[str, dict[str, float]], column: str) -> str:
    """All, then dev / test: "0.87 (0.89 / 0.84)"."""
    return f"{ours['all'][column]:.2f} ({ours['dev'][column]:.2f} / {ours['test'][column]:.2f})"


if __name__ == "__main__":
    main()
