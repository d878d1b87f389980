"""An ability edit that would lower a gate runs only after a person's trust; one nobody trusted runs at the strictest
reading; tightening applies at once (abilities/lowering.py, abilities/in_force.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.abilities.lowering import lowerings
from abilities_mcp.abilities.models import Ability
from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from support import TEST_RETRY_BASE, trust_project

TRUSTED: dict[str, Any] = {
    "description": "Deploy with tests, review and a production approval",
    "inputs": {"environment": {"type": "string", "enum": ["staging", "production"], "default": "staging"}},
    "steps": [
        {"id": "test", "type": "script", "run": "echo 12 passed", "validation": {"stdout_contains": "passed"}},
        {"id": "review", "type": "agent", "prompt": "Review it", "needs": ["test"], "tools": ["Read"]},
        {
            "id": "approve",
            "type": "approval",
            "prompt": "Ship it?",
            "needs": ["review"],
            "when": 'inputs.environment == "production"',
        },
        {"id": "deploy", "type": "script", "run": "echo deployed", "needs": ["approve"]},
    ],
    "settings": {"enforcement": "strict", "approval": "plan"},
    "hooks": {"before": ["true"]},
    "compatible_agents": ["deployer"],
}


def edited(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    data = copy.deepcopy(TRUSTED)
    change(data)
    return data


def step(data: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in data["steps"] if s["id"] == step_id)


# (id, the edit, words of the reason it lowers a gate)
LOWERING = [
    ("enforcement-loose", lambda d: d["settings"].update(enforcement="loose"), "settings.enforcement strict → loose"),
    ("enforcement-normal", lambda d: d["settings"].update(enforcement="normal"), "strict → normal"),
    ("plan-approval-dropped", lambda d: d["settings"].update(approval="none"), "settings.approval plan → none"),
    ("approval-removed", lambda d: d["steps"].pop(2), "step 'approve' (approval) removed"),
    ("approval-when-changed", lambda d: step(d, "approve").update(when='inputs.environment == "x"'), "runs only when"),
    ("approval-becomes-agent", lambda d: step(d, "approve").update(type="agent"), "changed from approval to agent"),
    ("need-dropped", lambda d: step(d, "deploy").update(needs=[]), "no longer waits for approve"),
    ("command-changed", lambda d: step(d, "test").update(run="true"), "step 'test': run changed"),
    ("validation-removed", lambda d: step(d, "test").pop("validation"), "validation loosened"),
    ("exit-code-relaxed", lambda d: step(d, "test")["validation"].update(exit_code=1), "validation loosened"),
    ("on-failure-continue", lambda d: step(d, "test").update(on_failure="continue"), "on_failure stop → continue"),
    ("tools-widened", lambda d: step(d, "review").update(tools=["Read", "Bash"]), "allows more tools (Bash)"),
    ("enum-widened", lambda d: d["inputs"]["environment"]["enum"].append("prod"), "input 'environment' changed"),
    ("default-changed", lambda d: d["inputs"]["environment"].update(default="production"), "input 'environment'"),
    ("hook-changed", lambda d: d["hooks"].update(before=["./check.sh"]), "hooks.before changed"),
    ("script-added", lambda d: d["steps"].append({"id": "x", "type": "script", "run": "rm -rf ."}), "'x' (script)"),
    ("agents-widened", lambda d: d.update(compatible_agents=["deployer", "intern"]), "more agents may run it"),
    ("agents-dropped", lambda d: d.pop("compatible_agents"), "more agents may run it (any agent)"),
    ("renamed", lambda d: d.update(name="deploy/other"), "name None → 'deploy/other'"),
]
# (id, the edit): each only tightens or rewords, so it applies at once.
TIGHTENING = [
    ("description", lambda d: d.update(description="Deploy, carefully")),
    ("prompt", lambda d: step(d, "review").update(prompt="Review it twice")),
    ("triggers", lambda d: d.update(triggers={"keywords": ["ship"]})),
    ("approval-added", lambda d: d["steps"].append({"id": "again", "type": "approval", "prompt": "Sure?"})),
    ("when-dropped", lambda d: step(d, "approve").pop("when")),
    ("tools-narrowed", lambda d: step(d, "review").update(tools=[])),
    ("validation-added", lambda d: step(d, "review").update(validation={"output_contains": "APPROVED"})),
    ("checkpoint", lambda d: d["settings"].update(approval="checkpoint")),
    ("max-retries", lambda d: step(d, "test").update(max_retries=3)),
]


@pytest.mark.parametrize(("change", "reason"), [(c, r) for _, c, r in LOWERING], ids=[i for i, _, _ in LOWERING])
def test_an_edit_that_lowers_a_gate_is_named(change, reason: str) -> None:
    found = lowerings(Ability.model_validate(TRUSTED), Ability.model_validate(edited(change)))
    assert any(reason in why for why in found), found


@pytest.mark.parametrize("change", [c for _, c in TIGHTENING], ids=[i for i, _ in TIGHTENING])
def test_an_edit_that_only_tightens_or_rewords_lowers_nothing(change) -> None:
    assert lowerings(Ability.model_validate(TRUSTED), Ability.model_validate(edited(change))) == []


# --- the catalog: which version runs ----------------------------------------------------------------------------

GATED = """
description: A production deploy a person approves
steps:
  - {id: approve, type: approval, prompt: Deploy to production?}
  - {id: deploy, type: script, run: touch deployed, needs: [approve]}
settings: {enforcement: strict}
"""


def write(root: Path, text: str, name: str = "deploy/production/ability.yaml") -> Path:
    path = root / "abilities" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_nobody_trusted_runs_at_the_strictest_reading_and_says_so(root: Path, project: Project) -> None:
    write(root, GATED.replace("strict", "loose"))
    definition = Catalog(project).get("deploy/production")
    assert definition.trust == "new"
    assert definition.ability is not None and definition.ability.settings.enforcement == "strict"
    assert "abilities/deploy/production/ability.yaml is new" in (definition.trust_note or "")
    assert "`abilities-mcp trust`" in (definition.trust_note or "")


def test_a_lowering_edit_runs_the_trusted_version_until_trust(root: Path, project: Project) -> None:
    path = write(root, GATED)
    trust_project(project)
    catalog = Catalog(project)
    assert catalog.get("deploy/production").trust == "trusted"
    path.write_text(GATED.replace("enforcement: strict", "enforcement: loose"))  # the agent's sed
    waiting = catalog.get("deploy/production")
    assert waiting.trust == "waiting" and waiting.ability is not None
    assert waiting.ability.settings.enforcement == "strict"
    assert "settings.enforcement strict → loose" in (waiting.trust_note or "")
    trust_project(project)  # a person read the diff and trusted it
    assert catalog.get("deploy/production").ability.settings.enforcement == "loose"


def test_a_tightening_edit_applies_at_once(root: Path, project: Project) -> None:
    path = write(root, GATED.replace("strict", "normal"))
    trust_project(project)
    path.write_text(GATED)  # normal → strict: tighter
    definition = Catalog(project).get("deploy/production")
    assert definition.trust == "tightened" and definition.ability.settings.enforcement == "strict"


def test_a_file_unreadable_at_its_read_is_not_read_again_and_runs_nothing(
    root: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import abilities_mcp.abilities.in_force as in_force

    write(root, GATED.replace("strict", "loose"))  # what a second read would find: swapped back in time
    monkeypatch.setattr(in_force, "read_raw", lambda path: "the file is a FIFO, not a regular file")
    catalog = Catalog(project)
    definition = catalog.get("deploy/production")
    assert definition.ability is None and not catalog.is_valid(definition)
    assert "FIFO" in definition.diagnostics[0].message


def test_a_file_swapped_for_a_broken_one_runs_nothing(root: Path, project: Project) -> None:
    path = write(root, GATED)
    trust_project(project)
    path.write_text("description: [unclosed")
    catalog = Catalog(project)
    assert not catalog.is_valid(catalog.get("deploy/production"))


# --- through the protocol: the attack --------------------------------------------------------------------


async def test_an_agent_that_edits_the_ability_to_loose_cannot_approve_its_own_deploy(root: Path, project: Project):
    path = write(root, GATED)
    trust_project(project)
    path.write_text(GATED.replace("enforcement: strict", "enforcement: loose"))
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE), mode="legacy") as client:
        run = (await client.call_tool("ability_run", {"name": "deploy/production"})).structured_content
        assert run["status"] == "awaiting_approval" and run["enforcement"] == "strict"
        assert any("strict → loose" in w and "abilities-mcp trust" in w for w in run["warnings"])
        args = {"run_id": run["run_id"], "step_id": "approve", "approved": True}
        refused = await client.call_tool("ability_approve", args)
        assert refused.is_error
        assert "strict → loose" in refused.content[0].text and "`abilities-mcp trust`" in refused.content[0].text
        await client.call_tool("ability_cancel", {"run_id": run["run_id"]})
    assert not (root / "deployed").exists()


async def test_after_a_persons_trust_the_edit_takes_effect(root: Path, project: Project) -> None:
    path = write(root, GATED)
    trust_project(project)
    path.write_text(GATED.replace("enforcement: strict", "enforcement: loose"))
    trust_project(project)
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE), mode="legacy") as client:
        run = (await client.call_tool("ability_run", {"name": "deploy/production"})).structured_content
        assert run["enforcement"] == "loose" and run["warnings"] == []
        args = {"run_id": run["run_id"], "step_id": "approve", "approved": True}
        done = (await client.call_tool("ability_approve", args)).structured_content
    assert done["status"] == "completed" and (root / "deployed").exists()


async def test_ability_list_shows_each_files_trust(root: Path, project: Project) -> None:
    write(root, GATED)
    trust_project(project)
    write(root, GATED, "fresh.yaml")
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as client:
        listed = (await client.call_tool("ability_list", {})).structured_content["abilities"]
    by_name = {a["name"]: a for a in listed}
    assert by_name["deploy/production"]["trust"] == "trusted" and by_name["deploy/production"]["warnings"] == []
    assert by_name["fresh"]["trust"] == "new" and "abilities/fresh.yaml is new" in by_name["fresh"]["warnings"][0]


def test_the_trusted_yaml_is_the_yaml_shown(root: Path, project: Project) -> None:
    write(root, yaml.safe_dump(TRUSTED))
    assert trust_project(project) == ["abilities/deploy/production/ability.yaml"]
    assert trust_project(project) == []  # nothing differs any more
