"""Which of the client's own tools change things: the split DESIGN §7 blocks under normal and strict."""

from __future__ import annotations

import pytest

from abilities_mcp.clients.enforcement import kind

KINDS = [
    ("Read", "read"),
    ("ListMcpResourcesTool", "read"),
    ("ReadMcpResourceTool", "read"),
    ("ReadMcpResourceDirTool", "read"),  # Claude Code: a resource directory, SEP-2640
    ("list_mcp_resources", "read"),  # OpenCode's MCP resource tools
    ("read_mcp_resource", "read"),
    ("list_mcp_resource_templates", "read"),
    ("mcp__db__list_tables", "read"),
    ("db_get_schema", "read"),
    ("Bash", "destructive"),
    ("write", "destructive"),
    ("mcp__db__execute_query", "destructive"),
    ("mcp__db__find_and_replace", "destructive"),
    ("Task", "delegate"),
    ("Skill", "skill"),
]


@pytest.mark.parametrize(("tool", "expected"), KINDS, ids=[t for t, _ in KINDS])
def test_each_client_tool_is_read_only_destructive_or_a_delegate(tool: str, expected: str) -> None:
    assert kind(tool) == expected
