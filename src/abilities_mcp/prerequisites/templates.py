"""The built-in workflow templates (`abilities-mcp workflows add --template NAME`): skill-manager's, as written, and
this project's own; fitted to the tools a project's upstreams offer (the tool cache) when it has tools of the
template's category: a workflow whose prerequisite no upstream has could never be met, and every call it gates would
be refused. A template with no category (dangerous-commands: shell rules and a person's approval) is never fitted."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from .names import wanted

# The built-in templates of @nano-step/skill-manager 4.0.0 (workflow-templates.json), verbatim.
TEMPLATES: dict[str, dict[str, Any]] = {
    "database": {
        "name": "database-safe-query",
        "description": "Inspect database structure before executing queries",
        "triggers": {
            "category": "database",
            "tools": ["execute_query", "select_query"],
            "keywords": ["query", "select", "insert", "update", "delete", "sql"],
        },
        "prerequisites": [
            {
                "step": 1,
                "tool": "list_databases",
                "description": "List available databases to know what's accessible",
                "required": True,
            },  # noqa: E501
            {"step": 2, "tool": "list_tables", "description": "List tables in the target database", "required": True},
            {
                "step": 3,
                "tool": "inspect_table",
                "description": "Check column names, types, and constraints",
                "required": True,
            },  # noqa: E501
            {
                "step": 4,
                "tool": "get_indexes",
                "description": "Check indexes for query optimization",
                "required": False,
            },  # noqa: E501
        ],
        "mode": "enforce",
    },
    "browser": {
        "name": "browser-safe-interaction",
        "description": "Take snapshot before interacting with page elements",
        "triggers": {
            "category": "browser",
            "tools": ["click", "fill", "fill_form", "submit"],
            "keywords": ["click", "fill", "submit", "form", "button"],
        },
        "prerequisites": [
            {
                "step": 1,
                "tool": "take_snapshot",
                "description": "Capture current page state and element UIDs",
                "required": True,
            },  # noqa: E501
        ],
        "mode": "enforce",
    },
    "github-pr": {
        "name": "github-pr-review",
        "description": "Gather PR context before reviewing or merging",
        "triggers": {
            "category": "github",
            "tools": ["merge_pull_request", "create_pull_request_review"],
            "keywords": ["merge", "review pr", "approve pr"],
        },
        "prerequisites": [
            {"step": 1, "tool": "get_pull_request", "description": "Get PR details and description", "required": True},
            {"step": 2, "tool": "get_pull_request_files", "description": "List changed files", "required": True},
            {
                "step": 3,
                "tool": "get_pull_request_status",
                "description": "Check CI/CD status and reviews",
                "required": True,
            },  # noqa: E501
        ],
        "mode": "warn",
    },
    "graphql": {
        "name": "graphql-schema-aware",
        "description": "Understand schema before executing queries",
        "triggers": {
            "category": "graphql",
            "tools": ["execute_query", "execute_mutation"],
            "keywords": ["graphql query", "graphql mutation"],
        },
        "prerequisites": [
            {"step": 1, "tool": "get_schema", "description": "Fetch GraphQL schema", "required": True},
            {"step": 2, "tool": "filter_types", "description": "Identify relevant types", "required": False},
        ],
        "mode": "suggest",
    },
    # This project's own: a person's yes before each command that destroys what it cannot give back (issue 31).
    "dangerous-commands": {
        "name": "dangerous-commands",
        "description": "A person approves each destructive command before it runs",
        "triggers": {
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
            ],
        },
        "approval": {"expires": "10m", "prompt": "Run {{command}}?"},
        "mode": "enforce",
    },
}

# What other servers call a template's prerequisites (mcp-server-sqlite's describe_table is the database template's
# inspect_table): each is fitted to the first of these names the project's tools of the category have.
ALSO_CALLED: dict[str, tuple[str, ...]] = {
    "list_databases": ("list_schemas", "list_dbs", "show_databases"),
    "list_tables": ("show_tables", "get_tables", "list-tables"),
    "inspect_table": ("describe_table", "describe-table", "get_table_schema", "table_schema"),
    "get_indexes": ("list_indexes", "get_table_indexes", "show_indexes"),
    "take_snapshot": ("browser_snapshot",),  # Playwright's MCP server
}


class Fitted(NamedTuple):
    """A template as a project's tools can meet it, and what was changed to get there (empty: as written)."""

    entry: dict[str, Any]
    notes: list[str]
    category_tools: list[str]  # the project's tools of the template's category; [] when it knows none


def fit(template: dict[str, Any], categories: Mapping[str, frozenset[str]]) -> Fitted:
    """The template fitted to the tools the tool cache puts in its category (`categories`: tool id -> its
    categories, prerequisites/workflows.py's tool_categories): each prerequisite named as those tools call it
    (ALSO_CALLED), one none of them offers left out, the steps numbered again. With no such tool known (no cache,
    or no tool of that kind behind the gateway, such as a server the client calls directly) it stays as written."""
    entry = json.loads(json.dumps(template))
    category = str(entry.get("triggers", {}).get("category", "")).lower()
    tools = sorted({wanted(t).tool for t, names in categories.items() if category and category in names})
    if not tools or not entry.get("prerequisites"):  # nothing to fit (a person's approval is no upstream's tool)
        return Fitted(entry, [], [])
    kept, notes = [], []
    for step in entry["prerequisites"]:
        found = next((n for n in (step["tool"], *ALSO_CALLED.get(step["tool"], ())) if n in tools), None)
        if found is None:
            notes.append(f"left out step {step['step']} ({step['tool']}): no upstream tool of {category!r} has it")
            continue
        if found != step["tool"]:
            notes.append(f"step {step['step']} ({step['tool']}) is {found} here")
        kept.append({**step, "tool": found})
    entry["prerequisites"] = [{**step, "step": n} for n, step in enumerate(kept, 1)]
    return Fitted(entry, notes, tools)
