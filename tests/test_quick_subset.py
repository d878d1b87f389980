"""The quick subset's lists name tests that exist: a renamed module or test would otherwise turn slow again."""

from __future__ import annotations

import re

from quick_subset import SLOW_CASES, SLOW_MODULES, SLOW_TESTS, TESTS


def test_every_slow_module_and_test_exists() -> None:
    missing = [module for module in {*SLOW_MODULES, *SLOW_CASES} if not (TESTS / module).is_file()]
    for entry in SLOW_TESTS:
        module, name = entry.split("::")
        path = TESTS / module
        if not path.is_file() or not re.search(rf"^(async )?def {re.escape(name)}\(", path.read_text(), re.M):
            missing.append(entry)
    assert not missing, f"tests/quick_subset.py names what is not there: {missing}"
