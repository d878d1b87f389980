"""docs/abilities.md's examples run as written: copied into an empty project under the name the page gives them,
each completes (tests/test_docs.py checks that they load; the reference example once failed with exit 127 on a hook
script that does not exist)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from support import REPO, cli

PAGE = REPO / "docs" / "abilities.md"
TEXT = PAGE.read_text(encoding="utf-8")
# (the paragraph above a yaml block, the block): the page says where to save each one just above it.
BLOCKS = [
    (TEXT[: m.start()].strip().rsplit("\n\n", 1)[-1], m.group(1))
    for m in re.finditer(r"^```yaml\n(.*?)^```", TEXT, flags=re.M | re.S)
]
# Each example's inputs for each run: together the runs take every step at least once.
RUNS = {"hello": [["-i", "who=you"]], "check": [[], ["-i", "full=true", "-i", "path=abilities"]]}


def _name(before: str, text: str) -> str:
    """The name the page gives the example: its `name:`, else the file the text above says to save it as."""
    saved = re.findall(r"`abilities/([a-z0-9/_-]+)\.yaml`", before)
    return yaml.safe_load(text).get("name") or (saved[-1] if saved else "")


EXAMPLES = {_name(before, text): text for before, text in BLOCKS}


def test_the_page_shows_the_examples_this_test_runs() -> None:
    assert sorted(EXAMPLES) == sorted(RUNS)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_on_the_format_page_runs_as_written(name: str, root: Path, tmp_path: Path) -> None:
    (root / "abilities" / f"{name}.yaml").write_text(EXAMPLES[name])

    for inputs in RUNS[name]:
        done = subprocess.run(
            [*cli(root, "run", name, *inputs), "--state-dir", str(tmp_path / "state")],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

        assert done.returncode == 0, done.stdout + done.stderr
        assert re.search(rf"{re.escape(name)}\s+completed", done.stdout), done.stdout
        if inputs:  # with full=true (or no condition at all) every step runs
            assert "skipped" not in done.stdout, done.stdout
