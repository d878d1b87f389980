"""A workflows.json (or tool cache) edit that would lower a gate waits for a person's trust; the hook, workflow_check
and the gateway enforce the trusted version meanwhile and say which file waits and the command."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from abilities_mcp.prerequisites.in_force import Workflows
from abilities_mcp.prerequisites.lowering import lowerings
from abilities_mcp.prerequisites.workflows import TOOL_CACHE, WorkflowSet, parse_workflows, read_workflows
from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from support import run_hook, trust_project

TRUSTED: dict[str, Any] = {
    "db-look-first": {
        "description": "Look at the database before querying it",
        "triggers": {"tools": ["execute_query"], "keywords": ["sql"], "category": "database"},
        "prerequisites": [
            {"step": 1, "tool": "list_databases", "description": "which databases"},
            {"step": 2, "tool": "list_tables", "description": "which tables", "arguments": {"db": "$args.db"}},
            {"step": 3, "tool": "get_indexes", "description": "indexes", "required": False},
        ],
        "mode": "enforce",
    },
    "schema-first": {
        "description": "Off for now",
        "enabled": False,
        "triggers": {"tools": ["execute_mutation"]},
        "prerequisites": [{"step": 1, "tool": "get_schema", "description": "the schema"}],
    },
}
CACHE = {"categories": {"database": {"name": "Database", "tools": ["execute_query", "run_sql"]}}}


def entry(data: dict[str, Any]) -> dict[str, Any]:
    return data["db-look-first"]


def prerequisite(data: dict[str, Any], step: int) -> dict[str, Any]:
    return entry(data)["prerequisites"][step - 1]


LOWERING = [
    ("disabled", lambda d: entry(d).update(enabled=False), "workflow 'db-look-first' disabled"),
    ("removed", lambda d: d.pop("db-look-first"), "workflow 'db-look-first' removed"),
    ("broken", lambda d: entry(d).update(mode="sometimes"), "removed (or broken"),
    ("weakened", lambda d: entry(d).update(mode="warn"), "weakened from enforce to warn"),
    ("trigger-dropped", lambda d: entry(d)["triggers"].update(tools=[]), "no longer triggered by tool 'execute_query'"),
    ("keyword-dropped", lambda d: entry(d)["triggers"].update(keywords=[]), "no longer triggered by keyword 'sql'"),
    ("category-changed", lambda d: entry(d)["triggers"].update(category="misc"), "category 'database'"),
    ("step-removed", lambda d: entry(d)["prerequisites"].pop(0), "lost its required prerequisite 'list_databases'"),
    ("made-optional", lambda d: prerequisite(d, 2).update(required=False), "made its prerequisite 'list_tables'"),
    ("re-pointed", lambda d: prerequisite(d, 2).update(arguments={"db": "scratch"}), "with other arguments"),
    (
        "reordered",
        lambda d: (prerequisite(d, 1).update(step=2), prerequisite(d, 2).update(step=1)),
        "reordered its required prerequisites",
    ),
]
TIGHTENING = [
    ("reworded", lambda d: entry(d).update(description="Look first")),
    ("trigger-added", lambda d: entry(d)["triggers"]["tools"].append("run_sql")),
    ("step-added", lambda d: entry(d)["prerequisites"].append({"step": 4, "tool": "x", "description": "x"})),
    ("optional-dropped", lambda d: entry(d)["prerequisites"].pop(2)),
    ("off-one-enabled", lambda d: d["schema-first"].update(enabled=True)),
    ("workflow-added", lambda d: d.update(more={**copy.deepcopy(d["schema-first"]), "enabled": True})),
]


def parsed(data: dict[str, Any], cache: dict[str, Any] | None = None, root: Path = Path("/p")) -> WorkflowSet:
    from abilities_mcp.prerequisites.workflows import Source

    raw = json.dumps(cache).encode() if cache is not None else None
    return parse_workflows(
        Source(root / "workflows.json", json.dumps(data).encode(), []), Source(root / TOOL_CACHE, raw, [])
    )


def changed(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    data = copy.deepcopy(TRUSTED)
    change(data)
    return data


@pytest.mark.parametrize(("change", "reason"), [(c, r) for _, c, r in LOWERING], ids=[i for i, _, _ in LOWERING])
def test_an_edit_that_lowers_a_gate_is_named(change, reason: str) -> None:
    found = lowerings(parsed(TRUSTED), parsed(changed(change)))
    assert any(reason in why for why in found), found


@pytest.mark.parametrize("change", [c for _, c in TIGHTENING], ids=[i for i, _ in TIGHTENING])
def test_an_edit_that_only_tightens_lowers_nothing(change) -> None:
    assert lowerings(parsed(TRUSTED), parsed(changed(change))) == []


def test_a_tool_leaving_a_category_a_workflow_triggers_on_lowers_its_gate() -> None:
    moved = {"categories": {"database": {"name": "Database", "tools": ["execute_query"]}}}
    found = lowerings(parsed(TRUSTED, CACHE), parsed(TRUSTED, moved))
    assert found == ["tool 'run_sql' left category 'database' in the tool cache"]


# A workflow whose gate is a person's yes to each call (issue 31): what an edit of its approval loosens.
APPROVED: dict[str, Any] = {
    "force-push": {
        "description": "A person approves every force push",
        "triggers": {"tools": ["Bash(git push --force:*)", "Bash(git push -f:*)", "mcp__github__merge_pull_request"]},
        "approval": {"expires": "10m", "prompt": "Force-push {{command}}?"},
    }
}
LOOK_FIRST = {"step": 1, "tool": "get_pull_request", "description": "the PR first"}


def approved(data: dict[str, Any]) -> dict[str, Any]:
    return data["force-push"]


def approval(data: dict[str, Any]) -> dict[str, Any]:
    return approved(data)["approval"]


def look_first_instead(data: dict[str, Any]) -> None:
    """The approval swapped for a prerequisite: a valid workflow, no person asked."""
    approved(data).pop("approval")
    approved(data)["prerequisites"] = [LOOK_FIRST]


APPROVAL_LOWERING = [
    ("approval-removed", look_first_instead, ["workflow 'force-push' no longer needs a person's approval"]),
    (
        "approval-removed-leaving-no-gate",
        lambda d: approved(d).pop("approval"),
        ["workflow 'force-push' removed (or broken: `abilities-mcp validate` says why)"],
    ),
    (
        "expires-lengthened",
        lambda d: approval(d).update(expires="1h"),
        ["workflow 'force-push' made its approval last longer: 10m → 1h"],
    ),
    (
        "expires-lengthened-in-seconds",
        lambda d: approval(d).update(expires=5400),
        ["workflow 'force-push' made its approval last longer: 10m → 1h30m"],
    ),
    (
        "rule-dropped",
        lambda d: approved(d)["triggers"]["tools"].remove("Bash(git push -f:*)"),
        ["workflow 'force-push' no longer triggered by command rule 'Bash(git push -f:*)'"],
    ),
    (
        "rule-recased",  # words match case-sensitively: -F is not -f
        lambda d: approved(d)["triggers"].update(
            tools=["Bash(git push --force:*)", "Bash(git push -F:*)", "mcp__github__merge_pull_request"]
        ),
        ["workflow 'force-push' no longer triggered by command rule 'Bash(git push -f:*)'"],
    ),
    (
        "rule-made-exact",
        lambda d: approved(d)["triggers"].update(
            tools=["Bash(git push --force)", "Bash(git push -f:*)", "mcp__github__merge_pull_request"]
        ),
        ["workflow 'force-push' no longer triggered by command rule 'Bash(git push --force:*)'"],
    ),
    (
        "rules-narrowed",
        lambda d: approved(d)["triggers"].update(tools=["Bash(git push --force origin main:*)"]),
        [
            "workflow 'force-push' no longer triggered by tool 'mcp__github__merge_pull_request'",
            "workflow 'force-push' no longer triggered by command rule 'Bash(git push --force:*)'",
            "workflow 'force-push' no longer triggered by command rule 'Bash(git push -f:*)'",
        ],
    ),
    ("weakened", lambda d: approved(d).update(mode="warn"), ["workflow 'force-push' weakened from enforce to warn"]),
    (  # what a person reads before they say yes: an agent's rewording could mislead them
        "prompt-reworded",
        lambda d: approval(d).update(prompt="Show the status (read-only)?"),
        ["workflow 'force-push' changed the question its approval asks a person"],
    ),
    (
        "prompt-dropped",
        lambda d: approval(d).pop("prompt"),
        ["workflow 'force-push' changed the question its approval asks a person"],
    ),
]
APPROVAL_TIGHTENING = [
    ("expires-shortened", lambda d: approval(d).update(expires="30s")),
    ("expires-same-in-seconds", lambda d: approval(d).update(expires=600)),
    ("expires-left-to-the-same-default", lambda d: approval(d).pop("expires")),
    ("prerequisite-added", lambda d: approved(d).update(prerequisites=[LOOK_FIRST])),
    ("rule-added", lambda d: approved(d)["triggers"]["tools"].append("Bash(git push --force-with-lease:*)")),
    (
        "rules-respaced-and-requoted",  # the same words as the shell splits them
        lambda d: approved(d)["triggers"].update(
            tools=["Bash( git  push '--force':*)", 'Bash(git push "-f":*)', "mcp__github__merge_pull_request"]
        ),
    ),
    ("approval-added-elsewhere", lambda d: d.update(deploy={**copy.deepcopy(approved(d)), "description": "more"})),
    ("four-eyes-asked", lambda d: approval(d).update(four_eyes=True)),
]


def approval_changed(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    data = copy.deepcopy(APPROVED)
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "reasons"), [(c, r) for _, c, r in APPROVAL_LOWERING], ids=[i for i, _, _ in APPROVAL_LOWERING]
)
def test_an_edit_that_lowers_an_approval_is_named(change, reasons: list[str]) -> None:
    trusted = parsed(APPROVED)
    assert trusted.problems == [] and trusted.workflows["force-push"].approval is not None

    assert lowerings(trusted, parsed(approval_changed(change))) == reasons


@pytest.mark.parametrize("change", [c for _, c in APPROVAL_TIGHTENING], ids=[i for i, _ in APPROVAL_TIGHTENING])
def test_an_edit_that_keeps_or_tightens_an_approval_lowers_nothing(change) -> None:
    current = parsed(approval_changed(change))
    assert current.problems == []

    assert lowerings(parsed(APPROVED), current) == []


def test_dropping_four_eyes_lowers_the_approval() -> None:
    four_eyes = approval_changed(lambda d: approval(d).update(four_eyes=True))
    for dropped in (lambda d: approval(d).update(four_eyes=False), lambda d: approval(d).pop("four_eyes")):
        after = copy.deepcopy(four_eyes)
        dropped(after)
        assert lowerings(parsed(four_eyes), parsed(after)) == [
            "workflow 'force-push' no longer needs a second person's approval (four_eyes)"
        ]


def test_an_expires_left_out_is_the_default_ten_minutes() -> None:
    shorter = approval_changed(lambda d: approval(d).update(expires="5m"))
    left_out = approval_changed(lambda d: approval(d).pop("expires"))

    assert lowerings(parsed(shorter), parsed(left_out)) == [
        "workflow 'force-push' made its approval last longer: 5m → 10m"
    ]


def test_giving_a_prerequisite_workflow_an_approval_tightens_it() -> None:
    data = changed(lambda d: entry(d).update(approval={"expires": "10m"}))

    assert lowerings(parsed(TRUSTED), parsed(data)) == []


# --- in force -----------------------------------------------------------------------------------------------------


def write(root: Path, data: dict[str, Any]) -> None:
    (root / "workflows.json").write_text(json.dumps(data, indent=2))


def test_never_trusted_workflows_apply_as_written(root: Path, project: Project) -> None:
    write(root, TRUSTED)
    assert Workflows(project).current() == read_workflows(root / "workflows.json", root / TOOL_CACHE)


def test_a_disabled_workflow_still_gates_until_a_person_trusts_the_edit(root: Path, project: Project) -> None:
    write(root, TRUSTED)
    trust_project(project)
    workflows = Workflows(project)
    write(root, changed(lambda d: entry(d).update(enabled=False)))
    waiting = workflows.current()
    assert waiting.workflows["db-look-first"].enabled
    assert "workflows.json has edits that would lower a gate" in waiting.warnings()[0]
    trust_project(project)
    assert not workflows.current().workflows["db-look-first"].enabled


def test_a_deleted_workflows_file_still_gates_until_trusted(root: Path, project: Project) -> None:
    write(root, TRUSTED)
    trust_project(project)
    (root / "workflows.json").unlink()
    assert "db-look-first" in Workflows(project).current().workflows
    assert trust_project(project) == ["workflows.json"]
    assert Workflows(project).current().workflows == {}


def test_a_tightening_edit_applies_at_once(root: Path, project: Project) -> None:
    write(root, TRUSTED)
    trust_project(project)
    write(root, changed(lambda d: d["schema-first"].update(enabled=True)))
    assert Workflows(project).current().workflows["schema-first"].enabled


def test_removing_an_approval_waits_for_a_persons_trust(root: Path, project: Project) -> None:
    write(root, APPROVED)
    trust_project(project)
    workflows = Workflows(project)
    write(root, approval_changed(look_first_instead))

    waiting = workflows.current()

    assert waiting.workflows["force-push"].approval is not None
    assert any("no longer needs a person's approval" in w for w in waiting.warnings()), waiting.warnings()
    trust_project(project)
    assert workflows.current().workflows["force-push"].approval is None


def test_shortening_an_approval_applies_at_once(root: Path, project: Project) -> None:
    write(root, APPROVED)
    trust_project(project)
    write(root, approval_changed(lambda d: approval(d).update(expires="1m")))

    assert Workflows(project).current().workflows["force-push"].approval.expires == 60.0


# --- what the agent meets ---------------------------------------------------------------------------------------


def deny_reason(root: Path, tool: str) -> str | None:
    payload = {"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": {}}
    done = run_hook(root, "claude", "PreToolUse", payload)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout or "{}").get("hookSpecificOutput", {})
    return out.get("permissionDecisionReason") if out.get("permissionDecision") == "deny" else None


def test_the_hook_still_denies_after_the_agent_disables_the_workflow_and_names_the_file(root, project) -> None:
    write(root, TRUSTED)
    trust_project(project)
    write(root, changed(lambda d: entry(d).update(enabled=False)))

    why = deny_reason(root, "mcp__db__execute_query")

    assert why is not None and "list_databases" in why
    assert "workflows.json has edits that would lower a gate" in why and "abilities-mcp trust" in why
    trust_project(project)
    assert deny_reason(root, "mcp__db__execute_query") is None


async def test_workflow_check_enforces_the_trusted_version_and_says_so(root: Path, project: Project) -> None:
    write(root, TRUSTED)
    trust_project(project)
    write(root, changed(lambda d: entry(d).update(mode="suggest")))
    async with Client(create_server(project)) as client:
        check = (await client.call_tool("workflow_check", {"tool": "execute_query"})).structured_content
        listed = (await client.call_tool("workflow_list", {})).structured_content
    assert check["verdict"] == "deny"
    assert any("weakened from enforce to suggest" in w for w in check["warnings"])
    assert any("abilities-mcp trust" in p for p in listed["problems"])
