"""Debian's headless Chromium through Playwright, for the tests of the pages: launched once per module, or skipped
(a failure under $ABILITIES_REQUIRE_BROWSER, as .ci/run sets it) where it is not installed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, sync_playwright

REQUIRE_ENV = "ABILITIES_REQUIRE_BROWSER"
# The machine's network is closed: without these Chromium stalls on connections it makes on its own (updates, sync,
# QUIC probes); the sandbox needs user namespaces that CI's root does not get.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    """The system's Chromium, headless, until the block ends."""
    found = shutil.which("chromium")
    if found is None:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but chromium is not installed (as root: apt-get install -y chromium)")
        pytest.skip(f"chromium is not installed (set {REQUIRE_ENV}=1 to make this a failure)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=found, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
