"""The order the suite's tests go to xdist's workers in: the known-long modules first, each worker starting on an even
share of them, so that no worker is left running a long test after the others ran out of work.

`--dist worksteal` (README's command) first hands each worker one contiguous slice of the collected tests, then moves
tests from the end of a busy worker's queue to an idle one. So the long modules, whole (a module's scenario fixtures
run once per worker that runs its tests), go to the start of the slices, shared out longest first onto the slice with
the least long work so far; every other test keeps its place after them. Under other `--dist` modes (one queue that
hands out tests from its front), the long modules simply come first. A test's outcome never depends on the order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

# Worker-seconds of the modules with long tests or long scenario fixtures (at most 40 tests, 8 s a test on average or
# one of 30 s): the junit times of one run of README's command on the shared 2-core machine (41 min, loaded; the
# proportions are what count), summed per module, before OpenCode stopped installing npm packages per run. A module
# missing here keeps its place among the short tests, which fill the slices and are what idle workers steal.
LONG_MODULES: dict[str, float] = {
    "clients/test_opencode.py": 814,
    "clients/test_init_gateway.py": 414,
    "clients/test_edited_rules.py": 297,
    "server/test_inspector.py": 272,
    "clients/test_call_approvals.py": 262,
    "gateway/test_everything_upstream.py": 234,
    "clients/test_sandboxes.py": 232,
    "server/test_stdio.py": 193,
    "gateway/test_sqlite_gates.py": 155,
    "engine/test_processes.py": 155,
    "clients/test_claude_code.py": 138,
    "clients/test_opencode_plugin.py": 116,
    "ui/test_browser.py": 88,
    "clients/test_codex.py": 86,
    "gateway/test_tool_cache.py": 83,
    "clients/test_gemini.py": 79,
    "team/test_team_inspector.py": 78,
    "gateway/test_gateway_call_approvals.py": 73,
    "cli/test_package.py": 69,
    "clients/test_claude_code_four_eyes.py": 60,
    "gateway/test_sqlite_template.py": 59,
    "team/test_team_browser.py": 51,
    "team/test_replicas.py": 48,
    "skills/test_skills_ref_parity.py": 45,
    "gateway/test_link.py": 43,
}


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0].removeprefix("tests/")


def order(items: Sequence[pytest.Item], workers: int, worksteal: bool) -> list[pytest.Item]:
    """`items` reordered: the long modules first (in their collected order within a module), as described above."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        if _module(item) in LONG_MODULES:
            groups.setdefault(_module(item), []).append(item)
    long = sorted(groups, key=lambda module: -LONG_MODULES[module])
    rest = [item for item in items if _module(item) not in groups]
    if not worksteal or workers < 2:
        return [item for module in long for item in groups[module]] + rest
    return _in_slices(groups, long, rest, _slice_sizes(len(items), workers))


def _slice_sizes(count: int, workers: int) -> list[int]:
    """The sizes of the slices worksteal hands out first (xdist 3.x: each idle worker gets remaining // idle ones)."""
    sizes = []
    for remaining_workers in range(workers, 0, -1):
        sizes.append((count - sum(sizes)) // remaining_workers)
    return sizes


def _in_slices(
    groups: dict[str, list[pytest.Item]], long: list[str], rest: list[pytest.Item], sizes: list[int]
) -> list[pytest.Item]:
    """Each slice: its share of the long modules (longest first onto the least loaded), then short tests to fill."""
    shares: list[list[pytest.Item]] = [[] for _ in sizes]
    seconds = [0.0] * len(sizes)
    for module in long:
        fits = [i for i in range(len(sizes)) if len(shares[i]) + len(groups[module]) <= sizes[i]] or range(len(sizes))
        slot = min(fits, key=lambda i: seconds[i])
        shares[slot] += groups[module]
        seconds[slot] += LONG_MODULES[module]
    ordered: list[pytest.Item] = []
    start = 0
    for share, size in zip(shares, sizes, strict=True):
        fill = max(0, size - len(share))
        ordered += share + rest[start : start + fill]
        start += fill
    return ordered + rest[start:]


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` took their tests out: the slices are of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker (each collects the same tests and orders them the same way), put them in the order above."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        items[:] = order(items, workers, worksteal=_worksteal(config))


def _worksteal(config: pytest.Config) -> bool:
    """Whether the controller schedules by worksteal: a worker's own `--dist` is "no"; its controller's is in the
    command line xdist hands it."""
    argv = getattr(config, "workerinput", {}).get("mainargv", [])
    return any(arg in ("worksteal", "--dist=worksteal") for arg in argv)
