"""tool_search offers the upstream tools that fit, even for a short task: the skill router's "no skill" rule (a
lone word is not enough) is for skills, where working without one is a fine answer, not for a gateway."""

from __future__ import annotations

import pytest

from abilities_mcp.gateway.directory import Entry, Listing, search

TOOLS = [
    Entry("everything", "echo", "Echoes back the input", {}),
    Entry("everything", "get-sum", "Returns the sum of two numbers", {}),
    Entry("browser", "click", "Click an element on the page, like a button or a link", {}),
    Entry("github", "merge_pull_request", "Merge a pull request", {}),
    Entry("github", "create_issue", "Open a new issue in a repository", {}),
]


@pytest.mark.parametrize(
    ("task", "tool"),
    [
        ("echo hello", "everything__echo"),
        ("click the submit button", "browser__click"),
        ("merge the PR", "github__merge_pull_request"),
        ("open an issue about the crash", "github__create_issue"),
        ("add two numbers", "everything__get-sum"),
    ],
)
def test_a_short_task_finds_the_tool_that_fits(task: str, tool: str) -> None:
    found = search(Listing(TOOLS, 0.0, [], {}), task, 3)
    assert found and found[0].entry.qualified == tool
