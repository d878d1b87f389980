"""The OpenAgents plugin-abilities files (tests/abilities/openagents/, copied unchanged, MIT): each loads here as it
is, and the one their own tests expect refused (`steps: []`) is refused in this product's words, with the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.server.app import create_server
from abilities_mcp.server.views import validation_report
from abilities_mcp.state.project import Project
from support import TEST_RETRY_BASE

FILES = Path(__file__).parent / "openagents"
LOADING = sorted(p.name for p in FILES.glob("*.yaml") if p.name != "test-invalid.yaml")


def report(root: Path, name: str, text: str | None = None) -> list:
    """validate's report of a project holding just that file (where OpenAgents' loader would find it)."""
    folder = root / ".opencode" / "abilities"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if text is None:
        shutil.copy(FILES / name, target)
    else:
        target.write_text(text)
    return validation_report(Catalog(Project.resolve(root)).refresh()).files


def test_the_set_is_all_there() -> None:
    assert len(LOADING) == 12 and (FILES / "LICENSE").exists()


@pytest.mark.parametrize("name", LOADING)
def test_each_openagents_file_loads_unchanged(tmp_path: Path, name: str) -> None:
    [found] = report(tmp_path, name)
    assert found.valid, [f"{e.path}: {e.message}" for e in found.errors]


def test_an_ability_with_no_steps_is_refused_with_the_field_and_the_fix(tmp_path: Path) -> None:
    [found] = report(tmp_path, "test-invalid.yaml")
    assert not found.valid and found.path.endswith("test-invalid.yaml")
    [error] = found.errors
    assert error.path == "steps"
    assert error.message.startswith("the ability has no steps; add at least one, e.g. steps: [{id:")
    assert "List should have" not in error.message


def test_settings_approval_checkpoint_is_accepted(tmp_path: Path) -> None:
    text = (FILES / "example-deploy.yaml").read_text()
    assert "\nsettings:\n" in text
    [found] = report(tmp_path, "deploy.yaml", text.replace("\nsettings:\n", "\nsettings:\n  approval: checkpoint\n"))
    assert found.valid, [f"{e.path}: {e.message}" for e in found.errors]


def test_an_approval_setting_that_is_no_one_s_is_still_refused_with_the_choices(tmp_path: Path) -> None:
    text = (FILES / "doc-quick-reference-hello.yaml").read_text() + "settings:\n  approval: always\n"
    [found] = report(tmp_path, "hello.yaml", text)
    [error] = found.errors
    assert error.path == "settings.approval" and "'none', 'plan' or 'checkpoint'" in error.message


@pytest.mark.parametrize(
    ("name", "ability", "inputs", "made"),
    [
        ("example-test.yaml", "test", {}, ["step1", "step2", "step3"]),
        ("example-deploy.yaml", "deploy", {"version": "v1.2.3"}, ["test", "build", "deploy-staging"]),
    ],
)
async def test_the_examples_run_unchanged(tmp_path: Path, name, ability, inputs, made) -> None:
    report(tmp_path, name)
    server = create_server(Project.resolve(tmp_path), retry_base=TEST_RETRY_BASE)
    async with Client(server) as client:
        run = (await client.call_tool("ability_run", {"name": ability, "inputs": inputs})).structured_content
    assert run["status"] == "completed", run
    assert [s["id"] for s in run["steps"] if s["status"] == "completed"] == made
