"""The real agent clients from npm, pinned and installed once into a cache shared by test runs and CI.

`REQUIRE_ENV` set (as `.ci/run` sets it): a client that cannot be installed fails the test instead of skipping it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from abilities_mcp.clients.versions import VERIFIED

# Pinned in one place, src/abilities_mcp/clients/versions.py, which `abilities-mcp doctor` compares clients with.
CLAUDE_CODE = VERIFIED["claude"]
OPENCODE = VERIFIED["opencode"]
CODEX = VERIFIED["codex"]
GEMINI_CLI = VERIFIED["gemini"]
REQUIRE_ENV = "ABILITIES_REQUIRE_REAL_CLIENTS"
# Captured at import, before the tests point HOME at a scratch folder: installs outlive a test run.
CACHE = Path(os.environ.get("ABILITIES_TEST_CACHE") or Path("~/.cache/abilities-mcp-tests").expanduser())
NPM_CACHE = Path(os.environ.get("npm_config_cache") or Path("~/.npm").expanduser())
# A first install downloads the client's native binary (tens of MB); later runs find it in CACHE at once.
INSTALL_TIMEOUT_SECONDS = 600


def installed(client: tuple[str, ...]) -> Path:
    """The client's executable, installed on first use; fails (or skips, outside CI) when that cannot be done.
    `client`: (npm package, version, the command it installs), a versions.Pin or a plain tuple."""
    package, version, binary = client[:3]
    prefix = CACHE / "npm" / f"{package.replace('/', '+')}@{version}"
    executable = prefix / "node_modules" / ".bin" / binary
    if executable.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        _unavailable(f"npm is not on PATH; install Node.js 20 to run {package}")
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes installing at once would corrupt node_modules
        if not executable.exists():
            result = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-save", "--no-audit", "--no-fund"]
                + ["--engine-strict=false", f"{package}@{version}"],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_SECONDS,
                env={**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"},
            )
            if result.returncode != 0 or not executable.exists():
                _unavailable(f"npm install {package}@{version} failed: {result.stderr[-2000:]}")
    return executable


def _unavailable(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but {why}")
    pytest.skip(f"{why} (set {REQUIRE_ENV}=1 to make this a failure)")
