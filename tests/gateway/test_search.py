"""tool_search offers the upstream tools that fit, even for a short task: the skill router's "no skill" rule (a
lone word is not enough) is for skills, where working without one is a fine answer, not for a gateway."""

from __future__ import annotations

from collections.abc import Callable

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


def test_a_tool_its_own_description_calls_deprecated_goes_after_the_others_that_fit() -> None:
    tools = [
        Entry("fs", "read_file", "Read a file. Deprecated: use read_text_file instead.", {}),
        Entry("fs", "read_text_file", "Read a text file", {}),
        *TOOLS,
    ]
    found = search(Listing(tools, 0.0, [], {}), "read the file", 2)  # read_file scores higher: it says "file" twice
    assert [f.entry.name for f in found] == ["read_text_file", "read_file"]


def test_a_listing_read_again_answers_with_its_own_entries_not_those_of_the_first() -> None:
    # The tool cache gives new entries on each read, equal but for what the router does not read.
    first = Entry("db", "query", "Run a query", {"properties": {"sql": {"type": "string"}}})
    again = first._replace(input_schema={"properties": {"sql": {"type": "string", "maxLength": 100}}})
    search(Listing([first], 0.0, [], {}), "run a query", 1)
    found = search(Listing([again], 0.0, [], {}), "run a query", 1)
    assert found[0].entry is again


# A listing's entries made again: the same entries in a new list, or equal new ones (as the tool cache reads them).
Rebuild = Callable[[list[Entry]], list[Entry]]


@pytest.mark.parametrize("build", [list, lambda entries: [e._replace() for e in entries]], ids=["same", "equal"])
def test_a_tool_whose_parameters_changed_is_found_by_its_new_parameters(build: Rebuild) -> None:
    old = [Entry("kv", "put", "Store a value", {"properties": {"key": {}}}), *TOOLS]
    new = [old[0]._replace(input_schema={"properties": {"ttlSeconds": {}}}), *TOOLS]
    assert search(Listing(build(old), 0.0, [], {}), "ttl seconds", 1) == []
    found = search(Listing(build(new), 0.0, [], {}), "ttl seconds", 1)
    assert [f.entry.qualified for f in found] == ["kv__put"]
