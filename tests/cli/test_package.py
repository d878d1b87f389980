"""The package as PyPI would get it: an sdist and a wheel built from a clean copy of the repository, both passing
`twine check`, each carrying the built-in skills, the ability schema and the OpenCode plugin, and the wheel working
outside any clone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What the installed package needs beside its code: (path inside the package, why)
DATA = {
    "abilities_mcp/schema/ability.schema.json": "the README's $schema hint and `schema ability`",
    "abilities_mcp/builtin_skills/ability-author/SKILL.md": "the built-in skills",
    "abilities_mcp/builtin_skills/ability-author/references/format.md": "a built-in skill's resource",
    "abilities_mcp/clients/opencode_plugin.js": "`init opencode` writes it",
    "abilities_mcp/ui/static/app.js": "the local page's script (`abilities-mcp ui`)",
    "abilities_mcp/ui/static/app.css": "the local page's styles",
}
BUILD_TIMEOUT_SECONDS = 300


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel, built (the wheel from the sdist, as `python -m build` does) from a copy of the tree."""
    work = tmp_path_factory.mktemp("package")
    clone = work / "clone"
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    # The files git knows or would add (not the venv, caches or build leftovers), as they are now, symlinks kept.
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source, copy = REPO / name, clone / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted, not yet committed
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(clone)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "deprecated" not in built.stderr + built.stdout, "the build warns: fix pyproject.toml"
    return work / "dist"


def test_twine_check_passes_on_the_sdist_and_the_wheel(dist: Path) -> None:
    files = sorted(str(f) for f in dist.iterdir())
    assert sorted(Path(f).suffix for f in files) == [".gz", ".whl"], files
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_the_sdist_and_the_wheel_carry_the_skills_the_schema_and_the_plugin(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    with tarfile.open(sdist) as tar:
        in_sdist = {name.partition("/")[2] for name in tar.getnames()}
    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
        metadata = whl.read(next(n for n in in_wheel if n.endswith(".dist-info/METADATA"))).decode()

    for path, why in DATA.items():
        assert f"src/{path}" in in_sdist, f"the sdist lacks {path} ({why})"
        assert path in in_wheel, f"the wheel lacks {path} ({why})"
    assert "README.md" in in_sdist and "Description-Content-Type: text/markdown" in metadata
    assert "License-Expression: MIT" in metadata
    assert not [n for n in in_wheel if n.startswith(("tests/", "benchmarks/"))]


def test_the_wheel_works_outside_any_clone(dist: Path, tmp_path: Path) -> None:
    """Installed alone (its dependencies are this interpreter's), run from a folder that is no project."""
    (wheel,) = dist.glob("*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "HOME": str(tmp_path / "home"), "ABILITIES_BUILTIN_SKILLS": "1"}
    env.pop("ABILITIES_ROOT", None)

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "abilities_mcp", *args], cwd=elsewhere, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = subprocess.run(
        [sys.executable, "-c", "import abilities_mcp; print(abilities_mcp.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    assert where.startswith(str(target)), f"the test ran the repository's copy, not the wheel's: {where}"
    assert cli("--version").startswith("abilities-mcp ")
    assert json.loads(cli("schema", "ability"))["title"]
    assert "ability-author" in cli("skills", "list")
