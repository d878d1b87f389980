"""A plan's next task: the first open checklist item that is work, with its section, hints and parent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from abilities_mcp.skills.plan import PlanError, next_task, plan_path, read_plan, split_hints

PLAN = """\
# Release 2.0

Some prose with a [link](x) and - [ ] a checkbox mid-sentence that is not an item.

## Build
- [x] Bump the version
- [ ] Export the report (skills: xlsx, pdf)
  - [x] Read the data
  - [ ] Write the sheet
- [ ] Publish it

```md
- [ ] an example inside a code fence
```
"""


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        # A parent with an open step waits for it; the step inherits the parent's skill hints.
        (PLAN, ("Write the sheet", 9, "Build", ["xlsx", "pdf"], "Export the report")),
        # Checked items, `[ ]?` items, verification and manual-QA sections and checks are skipped.
        ("## Work\n- [X] done\n- [ ]? maybe later\n- [ ] real work\n", ("real work", 4, "Work", [], None)),
        ("## Verification\n- [ ] run it\n## Next\n- [ ] do it\n", ("do it", 4, "Next", [], None)),
        ("# Plan\n## Manual QA\n- [ ] click around\n## Code\n- [ ] the code\n", ("the code", 5, "Code", [], None)),
        ("- [ ] Verify the output\n- [ ] Manual QA: look\n- [ ] Ship\n", ("Ship", 3, None, [], None)),
        # Numbered lists, `*` and `+` bullets, tabs, CRLF.
        ("1. [x] one\n2. [ ] two [skills: a]\n", ("two", 2, None, ["a"], None)),
        ("* [ ] star\r\n", ("star", 1, None, [], None)),
        ("+ [x] a\n\t+ [ ] tabbed step\n", ("tabbed step", 2, None, [], "a")),
        # A parent whose steps are all done is itself the next task.
        ("- [ ] parent\n  - [x] step\n", ("parent", 1, None, [], None)),
    ],
)
def test_the_next_task_is_the_first_open_item_that_is_work(plan: str, expected) -> None:
    task = next_task(plan)
    assert task is not None
    assert (task.text, task.line, task.section, task.hints, task.parent) == expected


def test_a_plan_with_every_task_done_has_no_next_task() -> None:
    assert next_task("- [x] a\n- [x] b\n## Verification\n- [ ] Verify\n- [ ]? maybe\n") is None


@pytest.mark.parametrize("text", ["", "# Just a heading\n\nProse.\n", "- a plain list\n- [] not a box\n"])
def test_a_plan_without_a_checklist_is_an_error_that_says_how_to_write_one(text: str) -> None:
    with pytest.raises(PlanError, match=r"no checklist items \(`- \[ \] task`\)"):
        next_task(text)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Add the export (skills: xlsx, pdf)", ("Add the export", ["xlsx", "pdf"])),
        ("Add the export [skill: xlsx]", ("Add the export", ["xlsx"])),
        ("Add the export — skills: xlsx,xlsx , pdf", ("Add the export", ["xlsx", "pdf"])),
        ("Document the skills: API", ("Document the skills: API", [])),  # not at the end, not a list of names
        ("skills: a", ("skills: a", [])),  # a line that is only a hint is a task about skills
    ],
)
def test_skill_hints_at_the_end_of_a_task_line(line: str, expected) -> None:
    text, hints = split_hints(line)
    assert (text, hints) == expected


def test_a_plan_outside_the_project_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    with pytest.raises(PlanError, match="is outside the project"):
        plan_path(root, "../elsewhere/PLAN.md")
    assert plan_path(root, "docs/PLAN.md") == (root / "docs" / "PLAN.md").resolve()


def test_unreadable_plans_name_the_file_and_the_problem(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no plan at .*missing.md"):
        read_plan(tmp_path / "missing.md")
    (tmp_path / "bin.md").write_bytes(b"- [ ] \xff\xfe")
    with pytest.raises(PlanError, match="is not UTF-8 text"):
        read_plan(tmp_path / "bin.md")
    os.mkfifo(tmp_path / "fifo.md")
    with pytest.raises(PlanError, match="a FIFO, not a regular file"):
        read_plan(tmp_path / "fifo.md")
