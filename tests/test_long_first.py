"""The suite's order for xdist (tests/long_first.py): every test kept once, the long modules whole at the slices' starts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import long_first
from long_first import LONG_MODULES, order
from quick_subset import TESTS


def items(*counts: tuple[str, int]) -> list:
    return [SimpleNamespace(nodeid=f"tests/{module}::test_{i}") for module, n in counts for i in range(n)]


@pytest.fixture
def long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_first, "LONG_MODULES", {"a.py": 300.0, "b.py": 200.0, "c.py": 150.0, "d.py": 100.0})


def modules(ordered: list) -> list[str]:
    return [item.nodeid.split("::")[0].removeprefix("tests/") for item in ordered]


def test_every_long_module_named_exists() -> None:
    assert not [module for module in LONG_MODULES if not (TESTS / module).is_file()]


@pytest.mark.usefixtures("long")
def test_under_worksteal_each_slice_starts_with_its_share_of_the_long_modules_and_keeps_every_test_once() -> None:
    collected = items(("x.py", 10), ("a.py", 3), ("y.py", 20), ("b.py", 2), ("c.py", 2), ("d.py", 1), ("z.py", 2))

    ordered = order(collected, workers=2, worksteal=True)

    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in collected)
    # 40 tests in two slices of 20: a (300 s) and d onto the first, b and c (350 s together) onto the second.
    first, second = modules(ordered[:20]), modules(ordered[20:])
    assert first[:4] == ["a.py"] * 3 + ["d.py"] and set(first[4:]) == {"x.py", "y.py"}
    assert second[:4] == ["b.py"] * 2 + ["c.py"] * 2 and set(second[4:]) == {"y.py", "z.py"}
    short = [i.nodeid for i in ordered if modules([i])[0] in {"x.py", "y.py", "z.py"}]
    assert short == [i.nodeid for i in collected if modules([i])[0] in {"x.py", "y.py", "z.py"}]


@pytest.mark.usefixtures("long")
def test_with_one_queue_the_long_modules_come_first_longest_first() -> None:
    collected = items(("x.py", 3), ("d.py", 1), ("a.py", 2), ("y.py", 1))

    ordered = order(collected, workers=4, worksteal=False)

    assert modules(ordered) == ["a.py", "a.py", "d.py", "x.py", "x.py", "x.py", "y.py"]
