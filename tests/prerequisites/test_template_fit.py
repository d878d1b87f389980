"""A built-in template fitted to the tools the project's upstreams offer (the tool cache): each prerequisite named as
those tools call it, one none of them has left out, as written when the cache knows no tool of its category, and
refused when none of its required steps could ever be met."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from abilities_mcp.prerequisites.templates import TEMPLATES, fit
from support import CLI

SQLITE = ["read_query", "write_query", "create_table", "list_tables", "describe_table", "append_insight"]


def categories(server: str, tools: list[str], category: str) -> dict[str, frozenset[str]]:
    """tool_categories' answer for a cache that puts these tools of `server` in `category`."""
    found = {tool: frozenset({category}) for tool in tools}
    return {**found, **{f"{server}__{tool}": names for tool, names in found.items()}}


def test_the_database_template_fits_mcp_server_sqlites_tools() -> None:
    fitted = fit(TEMPLATES["database"], categories("sqlite", SQLITE, "database"))

    assert [(p["step"], p["tool"], p["required"]) for p in fitted.entry["prerequisites"]] == [
        (1, "list_tables", True),
        (2, "describe_table", True),
    ]
    assert fitted.notes == [
        "left out step 1 (list_databases): no upstream tool of 'database' has it",
        "step 3 (inspect_table) is describe_table here",
        "left out step 4 (get_indexes): no upstream tool of 'database' has it",
    ]
    assert fitted.entry["triggers"] == TEMPLATES["database"]["triggers"]
    assert TEMPLATES["database"]["prerequisites"][0]["tool"] == "list_databases"  # the template itself unchanged


@pytest.mark.parametrize(
    "known",
    [{}, categories("fetch", ["fetch"], "docs")],
    ids=["no-tool-cache", "no-tool-of-its-category"],
)
def test_with_no_tool_of_its_category_known_a_template_stays_as_written(known) -> None:
    fitted = fit(TEMPLATES["database"], known)

    assert fitted.entry == TEMPLATES["database"] and fitted.notes == [] and fitted.category_tools == []


def test_the_browser_template_fits_playwrights_snapshot_tool() -> None:
    tools = ["browser_snapshot", "browser_click", "browser_type"]

    fitted = fit(TEMPLATES["browser"], categories("playwright", tools, "browser"))

    assert [p["tool"] for p in fitted.entry["prerequisites"]] == ["browser_snapshot"]


def write_cache(root: Path, server: str, tools: list[str], category: str) -> None:
    cache = root / ".opencode" / "agent-skill-tools.json"
    cache.parent.mkdir(parents=True)
    listed = [{"id": tool, "description": "", "prefix": f"{server}__"} for tool in tools]
    document = {
        "version": "1.0.0",
        "refreshed_at": "2026-11-24T08:05:58Z",
        "mcp_servers": [server],
        "tool_count": len(tools),
        "categories": {category: {"description": "", "keywords": [], "tools": listed}},
        "uncategorized": [],
    }
    cache.write_text(json.dumps(document))


def add(root: Path, template: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "--root", str(root), "workflows", "add", "--template", template],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_workflows_add_fits_the_template_to_the_tool_cache(root: Path) -> None:
    write_cache(root, "sqlite", SQLITE, "database")

    done = add(root, "database")

    assert done.returncode == 0, done.stderr
    added = json.loads((root / "workflows.json").read_text())["database-safe-query"]
    assert [p["tool"] for p in added["prerequisites"]] == ["list_tables", "describe_table"]
    assert "left out step 1 (list_databases)" in done.stdout, "the person sees what the template became"


def test_a_template_none_of_whose_steps_the_projects_tools_offer_is_refused(root: Path) -> None:
    write_cache(root, "postgres", ["query"], "database")

    done = add(root, "database")

    assert done.returncode != 0
    assert "this project's tools of its category (query, from .opencode/agent-skill-tools.json)" in done.stderr
    assert "could never be met" in done.stderr and "Nothing was changed" in done.stderr
    assert not (root / "workflows.json").exists()


# --- dangerous-commands: shell rules and a person's approval, no category ----------------------------------------

DANGEROUS = TEMPLATES["dangerous-commands"]


@pytest.mark.parametrize(
    "known",
    [{}, categories("sqlite", SQLITE, "database"), categories("shell", ["Bash", "run_command"], "shell")],
    ids=["no-tool-cache", "tools-of-another-category", "shell-tools"],
)
def test_a_template_of_shell_rules_has_no_category_and_is_never_fitted(known) -> None:
    fitted = fit(DANGEROUS, known)

    assert fitted == (DANGEROUS, [], [])
    assert "category" not in DANGEROUS["triggers"] and "prerequisites" not in DANGEROUS


def test_workflows_add_writes_dangerous_commands_and_validate_accepts_it(root: Path) -> None:
    write_cache(root, "sqlite", SQLITE, "database")  # a tool cache is there: nothing in it touches this template

    done = add(root, "dangerous-commands")

    path = root / "workflows.json"
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Added workflow 'dangerous-commands' (template dangerous-commands) to {path}.\n"
    added = json.loads(path.read_text())["dangerous-commands"]
    assert added["enabled"] is True and added["mode"] == "enforce"
    assert added["description"] == "A person approves each destructive command before it runs"
    assert added["approval"] == {"expires": "10m", "prompt": "Run {{command}}?"}
    assert "prerequisites" not in added
    assert added["triggers"] == {
        "tools": [
            "Bash(git push --force:*)",
            "Bash(git push -f:*)",
            "Bash(git push --mirror:*)",
            "Bash(git reset --hard:*)",
            "Bash(git clean -fdx:*)",
            "Bash(rm -rf:*)",
            "Bash(terraform apply:*)",
            "Bash(terraform destroy:*)",
            "Bash(kubectl delete:*)",
            "Bash(helm uninstall:*)",
            "Bash(dropdb:*)",
        ]
    }
    checked = subprocess.run([*CLI, "--root", str(root), "validate"], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert any(line.startswith("ok ") and line.endswith(f"({path})") for line in checked.stdout.splitlines())
