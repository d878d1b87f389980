"""workflows.json: the hot-path reader (workflows.py) and the validator (spec.py) give the same verdicts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from abilities_mcp.errors import Diagnostic
from abilities_mcp.prerequisites.in_force import Workflows
from abilities_mcp.prerequisites.spec import check_file, json_schema
from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.prerequisites.workflows import (
    TOOL_CACHE,
    Prerequisite,
    WorkflowSet,
    read_workflows,
    tool_categories,
)
from abilities_mcp.state.project import Project
from support import REPO

KEY = "db-safe"
DROP = object()  # entry(key=DROP) leaves the key out


def step(n: int = 1, tool: str = "list_tables", **extra: Any) -> dict[str, Any]:
    return {"step": n, "tool": tool, "description": f"step {n}", **extra}


def entry(**changes: Any) -> dict[str, Any]:
    """A minimal valid workflow with some keys replaced (a value of DROP removes the key)."""
    base: dict[str, Any] = {
        "description": "Inspect the database before querying it",
        "triggers": {"tools": ["execute_query"]},
        "prerequisites": [step()],
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not DROP}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def diagnostics_of_both(path: Path) -> tuple[list[Diagnostic], list[Diagnostic]]:
    return read_workflows(path).problems, check_file(path)


# (entry, readers accept it, the JSON Schema accepts it)
VALID = [
    pytest.param(entry(), id="minimal"),
    pytest.param(
        {
            "enabled": True,
            "name": KEY,
            "description": "Inspect the database before querying it",
            "triggers": {"category": "database", "tools": ["execute_query"], "keywords": ["sql", "select"]},
            "prerequisites": [
                {
                    "step": 1,
                    "tool": "list_tables",
                    "description": "tables",
                    "required": True,
                    "params": {"schema": "x"},
                },
                {"step": 2, "tool": "inspect_table", "description": "columns", "required": False, "params": {}},
            ],
            "mode": "warn",
            "created_at": "2026-01-01T00:00:00+00:00",
        },
        id="all-fields",
    ),
    pytest.param(entry(prerequisites=[step(1), step(2, "get_indexes", required=False)]), id="optional-step"),
    pytest.param(
        entry(prerequisites=[step(params={"database": "main", "limit": 10, "nested": {"a": [1, None]}})]),
        id="params",
    ),
    pytest.param(
        entry(
            prerequisites=[step(params={"limit": 5}, arguments={"table_name": "$args.table", "deep": ["$args.a.b"]})]
        ),
        id="gateway-arguments",
    ),
    pytest.param(entry(enabled=False), id="disabled"),
    pytest.param(entry(triggers={"keywords": ["sql"]}), id="keywords-only"),
    pytest.param(entry(triggers={"category": "database"}), id="category-only"),
    pytest.param(entry(description="Prüfe die Tabellen zuerst — 先检查表 ✓"), id="unicode-description"),
    pytest.param(
        entry(prerequisites=[step(3, "c"), step(1, "a"), step(2, "b")]),
        id="steps-out-of-order",
    ),
    pytest.param(entry(name=KEY), id="name-equals-key"),
    pytest.param(entry(mode="suggest"), id="mode-suggest"),
]

# Invalid for the readers, and the JSON Schema rejects them too: keys, types, bounds, presence.
STRUCTURAL = [
    pytest.param("not an object", id="entry-not-an-object"),
    pytest.param(["a", "list"], id="entry-a-list"),
    pytest.param(entry(description=DROP), id="missing-description"),
    pytest.param(entry(triggers=DROP), id="missing-triggers"),
    pytest.param(entry(prerequisites=DROP), id="missing-prerequisites"),
    pytest.param(entry(prerequisites=[]), id="empty-prerequisites"),
    pytest.param(entry(prerequisites="list_tables"), id="prerequisites-not-a-list"),
    pytest.param(entry(prereqs=[step()]), id="unknown-key-workflow"),
    pytest.param(entry(triggers={"tools": ["execute_query"], "tool": ["x"]}), id="unknown-key-triggers"),
    pytest.param(entry(prerequisites=[step(optional=True)]), id="unknown-key-prerequisite"),
    pytest.param(entry(enabled="yes"), id="enabled-a-string"),
    pytest.param(entry(enabled=1), id="enabled-a-number"),
    pytest.param(entry(mode="block"), id="mode-unknown"),
    pytest.param(entry(mode=1), id="mode-a-number"),
    pytest.param(entry(prerequisites=[step("1")]), id="step-a-string"),
    pytest.param(entry(prerequisites=[step(1.5)]), id="step-a-float"),
    pytest.param(entry(prerequisites=[step(True)]), id="step-true"),
    pytest.param(entry(prerequisites=[step(0)]), id="step-0"),
    pytest.param(entry(prerequisites=[step(-1)]), id="step-negative"),
    pytest.param(entry(prerequisites=[{"tool": "a", "description": "d"}]), id="step-missing"),
    pytest.param(entry(prerequisites=[{"step": 1, "description": "d"}]), id="tool-missing"),
    pytest.param(entry(prerequisites=["list_tables"]), id="prerequisite-a-string"),
    pytest.param(entry(prerequisites=[step(required="true")]), id="required-a-string"),
    pytest.param(entry(prerequisites=[step(params=["a"])]), id="params-a-list"),
    pytest.param(entry(prerequisites=[step(arguments="$args.table")]), id="arguments-a-string"),
    pytest.param(entry(triggers={"tools": "execute_query"}), id="tools-a-string"),
    pytest.param(entry(triggers={"tools": [1]}), id="tools-a-number-item"),
    pytest.param(entry(triggers={"keywords": "sql"}), id="keywords-a-string"),
    pytest.param(entry(triggers={"category": 5}), id="category-a-number"),
    pytest.param(entry(triggers=["execute_query"]), id="triggers-a-list"),
    pytest.param(entry(description=7), id="description-a-number"),
    pytest.param(entry(name=7), id="name-a-number"),
    pytest.param(entry(created_at=20260101), id="created-at-a-number"),
]

# Invalid for the readers, but JSON Schema cannot say why: these rules need the meaning of several fields.
MEANING = [
    pytest.param(entry(prerequisites=[step(1, "a"), step(1, "b")]), id="duplicate-step"),
    pytest.param(
        entry(triggers={"tools": ["execute_query"]}, prerequisites=[step(tool="execute_query")]),
        id="trigger-is-prerequisite",
    ),
    pytest.param(entry(triggers={}), id="empty-triggers"),
    pytest.param(entry(triggers={"tools": [], "keywords": []}), id="empty-trigger-lists"),
    pytest.param(entry(name="other-name"), id="name-differs-from-key"),
]

# Blank text: the models say so in words (a validator), the schema with a pattern for editors.
BLANK = [
    pytest.param(entry(description="  "), id="blank-description"),
    pytest.param(entry(prerequisites=[step(tool=" ")]), id="blank-tool"),
    pytest.param(entry(prerequisites=[{"step": 1, "tool": "a", "description": ""}]), id="blank-step-description"),
    pytest.param(entry(triggers={"category": " "}), id="blank-category"),
    pytest.param(entry(triggers={"keywords": ["sql", ""]}), id="blank-keyword"),
]

# Optional fields set to null: both readers refuse them.
NULLS = [
    pytest.param(entry(name=None), id="name-null"),
    pytest.param(entry(created_at=None), id="created-at-null"),
    pytest.param(entry(triggers={"category": None, "tools": ["execute_query"]}), id="category-null"),
]

INVALID = STRUCTURAL + MEANING + BLANK + NULLS


@pytest.mark.parametrize("data", VALID + INVALID)
def test_both_readers_give_the_same_verdict_on_one_entry(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    assert (KEY in read_workflows(path).workflows) == (check_file(path) == [])


@pytest.mark.parametrize("data", VALID)
def test_a_valid_entry_is_usable_and_neither_reader_reports_anything(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "workflows.json", {"$schema": "./workflows.schema.json", KEY: data})
    found = read_workflows(path)
    assert list(found.workflows) == [KEY]
    assert found.problems == []
    assert check_file(path) == []


@pytest.mark.parametrize("data", INVALID)
def test_an_invalid_entry_is_reported_by_both_readers_under_its_key(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    found = read_workflows(path)
    assert found.workflows == {}
    for problems in diagnostics_of_both(path):
        assert problems, "no diagnostic"
        assert all(p.file == str(path) for p in problems)
        assert any(p.path.startswith(KEY) for p in problems), [str(p) for p in problems]


def test_steps_come_back_sorted_and_omitted_fields_take_their_defaults(tmp_path: Path) -> None:
    data = {
        "description": "d",
        "triggers": {"tools": ["execute_query"]},
        "prerequisites": [step(3, "c"), step(1, "a", required=False), step(2, "b", params={"x": 1})],
    }
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    workflow = read_workflows(path).workflows[KEY]
    assert [p.step for p in workflow.prerequisites] == [1, 2, 3]
    assert [p.tool for p in workflow.prerequisites] == ["a", "b", "c"]
    assert workflow.prerequisite(3) == Prerequisite(3, "c", "step 3", True, {})
    assert workflow.prerequisite(1).required is False
    assert workflow.prerequisite(2).params == {"x": 1}
    assert (workflow.mode, workflow.enabled, workflow.category, workflow.keywords) == ("enforce", True, None, ())
    assert workflow.tools == ("execute_query",)
    assert workflow.source == str(path)


def test_the_gateways_arguments_are_read_by_the_stdlib_reader_and_default_to_none(tmp_path: Path) -> None:
    data = {
        "description": "d",
        "triggers": {"tools": ["read_query"]},
        "prerequisites": [step(1, "a"), step(2, "describe_table", arguments={"table_name": "$args.table"})],
    }
    workflow = read_workflows(write_json(tmp_path / "workflows.json", {KEY: data})).workflows[KEY]

    assert workflow.prerequisite(1).arguments == {}
    assert workflow.prerequisite(2).arguments == {"table_name": "$args.table"}


def test_a_missing_file_is_an_empty_set_with_no_problems(tmp_path: Path) -> None:
    missing = tmp_path / "workflows.json"
    assert read_workflows(missing) == WorkflowSet()
    assert read_workflows(missing, tmp_path / TOOL_CACHE) == WorkflowSet()
    assert read_workflows(None) == WorkflowSet()
    assert check_file(missing) == []


READERS: dict[str, Callable[[Path], list[Diagnostic]]] = {
    "read_workflows": lambda path: read_workflows(path).problems,
    "check_file": check_file,
}
BOTH_READERS = pytest.mark.parametrize("reader", list(READERS.values()), ids=list(READERS))


@BOTH_READERS
def test_invalid_json_is_one_problem_naming_the_file(tmp_path: Path, reader: Callable) -> None:
    path = tmp_path / "workflows.json"
    path.write_text('{"db-safe": {"description": "d",}}')
    problems = reader(path)
    assert len(problems) == 1
    assert problems[0].file == str(path)
    assert "not valid JSON" in problems[0].message
    assert str(path) in str(problems[0])


@BOTH_READERS
@pytest.mark.parametrize(
    "text", ["[]", '[{"db-safe": {}}]', '"db-safe"', "42"], ids=["empty-array", "array", "string", "number"]
)
def test_a_top_level_that_is_not_an_object_is_a_problem(tmp_path: Path, reader: Callable, text: str) -> None:
    path = tmp_path / "workflows.json"
    path.write_text(text)
    problems = reader(path)
    assert problems
    assert any("JSON object keyed by workflow name" in p.message for p in problems)


@BOTH_READERS
def test_a_file_holding_just_null_is_a_problem(tmp_path: Path, reader: Callable) -> None:
    """`null` is not an object keyed by workflow name any more than `[]` is; it is not a missing file."""
    path = tmp_path / "workflows.json"
    path.write_text("null")
    assert reader(path), "a workflows.json holding `null` is reported as fine"


@BOTH_READERS
def test_a_key_appearing_twice_is_a_problem(tmp_path: Path, reader: Callable) -> None:
    one = json.dumps(entry(mode="warn"))
    other = json.dumps(entry())
    path = tmp_path / "workflows.json"
    path.write_text(f'{{"{KEY}": {one}, "{KEY}": {other}}}')
    problems = reader(path)
    assert any(p.path == KEY and "appears twice" in p.message for p in problems), [str(p) for p in problems]


def test_one_broken_entry_never_hides_the_others(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "workflows.json",
        {"good": entry(), "broken": entry(prerequisites=[]), "also-good": entry(mode="warn")},
    )
    found = read_workflows(path)
    assert sorted(found.workflows) == ["also-good", "good"]
    assert found.problems and all(p.path.startswith("broken") for p in found.problems)
    assert any("broken" in w for w in found.warnings())
    checked = check_file(path)
    assert checked and all(p.path.startswith("broken") for p in checked)


def gate_each_other(mode: str, other_mode: str | None = None) -> dict[str, Any]:
    return {
        "reads": entry(mode=mode, triggers={"tools": ["read_rows"]}, prerequisites=[step(tool="write_rows")]),
        "writes": entry(
            mode=other_mode or mode, triggers={"tools": ["write_rows"]}, prerequisites=[step(tool="read_rows")]
        ),
    }


@BOTH_READERS
def test_enforced_workflows_that_wait_on_each_other_are_a_problem(tmp_path: Path, reader: Callable) -> None:
    path = write_json(tmp_path / "workflows.json", gate_each_other("enforce"))
    problems = [p for p in reader(path) if "wait on each other" in p.message]
    assert len(problems) == 1
    assert problems[0].path in {"reads", "writes"}
    assert "read_rows -> write_rows -> read_rows" in problems[0].message


@BOTH_READERS
@pytest.mark.parametrize(("mode", "other"), [("warn", None), ("suggest", None), ("enforce", "warn")], ids=str)
def test_workflows_that_only_warn_cannot_deadlock(tmp_path: Path, reader: Callable, mode: str, other: str) -> None:
    path = write_json(tmp_path / "workflows.json", gate_each_other(mode, other))
    assert reader(path) == []


def test_a_disabled_workflow_cannot_close_a_loop(tmp_path: Path) -> None:
    data = gate_each_other("enforce")
    data["writes"]["enabled"] = False
    path = write_json(tmp_path / "workflows.json", data)
    assert read_workflows(path).problems == []
    assert check_file(path) == []


def test_an_optional_prerequisite_cannot_close_a_loop(tmp_path: Path) -> None:
    data = gate_each_other("enforce")
    data["writes"]["prerequisites"][0]["required"] = False
    path = write_json(tmp_path / "workflows.json", data)
    assert read_workflows(path).problems == []
    assert check_file(path) == []


V2_CACHE = {
    "version": "2.0.0",
    "categories": {
        "db": {
            "name": "Database",
            "description": "SQL databases",
            "keywords": ["sql"],
            "tools": ["postgres__execute_query"],
        }
    },
    "tools": {"postgres__run_sql": {"category": "db", "description": "Run SQL"}},
}
EXECUTION_CACHE = {
    "version": "1",
    "categories": {
        "database": {
            "description": "SQL databases",
            "keywords": [],
            "tools": [{"id": "execute_query", "description": "Run a query", "prefix": "MetaMCP_pg__"}],
        }
    },
    "uncategorized": [],
}


@pytest.mark.parametrize(
    ("cache", "expected"),
    [
        pytest.param(
            V2_CACHE,
            {"postgres__execute_query": {"db", "database"}, "postgres__run_sql": {"db", "database"}},
            id="v2.0.0",
        ),
        pytest.param(
            EXECUTION_CACHE,
            {"execute_query": {"database"}, "MetaMCP_pg__execute_query": {"database"}},
            id="tool-execution.md",
        ),
    ],
)
def test_both_layouts_of_the_routing_cache_give_tool_categories(
    tmp_path: Path, cache: dict, expected: dict[str, set[str]]
) -> None:
    assert tool_categories(cache) == {tool: frozenset(names) for tool, names in expected.items()}
    cache_file = write_json(tmp_path / TOOL_CACHE, cache)
    found = read_workflows(None, cache_file)
    assert found.categories == tool_categories(cache)
    assert found.problems == [] and found.workflows == {}


GOOD = {"id": "good_tool"}


@pytest.mark.parametrize(
    "cache",
    [
        pytest.param({"categories": ["db"], "tools": {"good_tool": {"category": "db"}}}, id="categories-a-list"),
        pytest.param({"categories": {"db": {"tools": [1, 2.5, None, True, GOOD]}}}, id="tools-entries-numbers"),
        pytest.param({"categories": {"y": {"tools": "good_tool"}, "x": 3, "db": {"tools": [GOOD]}}}, id="odd-values"),
        pytest.param({"categories": {"db": {"tools": [GOOD], "name": 5}}, "tools": ["x"]}, id="tools-map-a-list"),
        pytest.param({"categories": {"db": {"tools": [GOOD]}}, "tools": {"t": 3, "u": None}}, id="tools-map-numbers"),
        pytest.param({"categories": {"db": {"tools": [GOOD, {"id": 5, "prefix": 3}]}}}, id="id-a-number"),
        pytest.param({"categories": {"db": {"tools": [GOOD, {"id": ["x"]}]}}}, id="id-a-list"),
        pytest.param({"categories": {"db": {"tools": [GOOD, {"id": {"x": 1}}]}}}, id="id-an-object"),
        pytest.param(
            {"categories": {"db": {"tools": [GOOD]}}, "tools": {"t": {"category": ["db"]}}}, id="category-a-list"
        ),
        pytest.param(
            {"categories": {"db": {"tools": [GOOD]}}, "tools": {"t": {"category": {"db": 1}}}}, id="category-an-object"
        ),
    ],
)
def test_garbage_in_the_routing_cache_never_raises(tmp_path: Path, cache: dict) -> None:
    categories = tool_categories(cache)
    assert "db" in categories.get("good_tool", frozenset())
    assert all(isinstance(tool, str) and isinstance(names, frozenset) for tool, names in categories.items())
    found = read_workflows(None, write_json(tmp_path / TOOL_CACHE, cache))
    assert found.problems == []


def test_a_tool_entry_without_an_id_names_no_tool() -> None:
    cache = {"categories": {"db": {"tools": [{"prefix": "MetaMCP_pg__", "description": "no id"}]}}}
    assert tool_categories(cache) == {}


def test_the_routing_cache_can_add_workflows(tmp_path: Path) -> None:
    wf_file = write_json(tmp_path / "workflows.json", {"from-file": entry()})
    cache = {**V2_CACHE, "workflows": {"from-cache": entry(mode="suggest", triggers={"category": "db"})}}
    found = read_workflows(wf_file, write_json(tmp_path / TOOL_CACHE, cache))
    assert found.problems == []
    assert sorted(found.workflows) == ["from-cache", "from-file"]
    assert found.workflows["from-cache"].mode == "suggest"
    assert found.workflows["from-cache"].source == str(tmp_path / TOOL_CACHE)
    assert found.workflows["from-file"].source == str(wf_file)
    assert found.categories["postgres__run_sql"] == {"db", "database"}


def test_a_name_in_both_files_is_taken_from_workflows_json_and_reported(tmp_path: Path) -> None:
    wf_file = write_json(tmp_path / "workflows.json", {KEY: entry(mode="warn")})
    cache_file = write_json(tmp_path / TOOL_CACHE, {"workflows": {KEY: entry(mode="enforce")}})
    found = read_workflows(wf_file, cache_file)
    assert found.workflows[KEY].mode == "warn"
    assert found.workflows[KEY].source == str(wf_file)
    assert len(found.problems) == 1
    problem = found.problems[0]
    assert problem.file == str(cache_file)
    assert problem.path == f"workflows.{KEY}"
    assert "also in workflows.json" in problem.message and "wins" in problem.message


def test_a_broken_workflow_in_the_cache_is_reported_under_its_key(tmp_path: Path) -> None:
    cache_file = write_json(tmp_path / TOOL_CACHE, {"workflows": {"good": entry(), "bad": entry(mode="block")}})
    found = read_workflows(None, cache_file)
    assert list(found.workflows) == ["good"]
    assert [p.path for p in found.problems] == ["workflows.bad.mode"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param('{"workflows": {', "not valid JSON", id="bad-json"),
        pytest.param('{"workflows": ["db-safe"]}', "JSON object keyed by workflow name", id="workflows-a-list"),
    ],
)
def test_a_broken_cache_is_a_problem_never_an_exception(tmp_path: Path, text: str, says: str) -> None:
    wf_file = write_json(tmp_path / "workflows.json", {KEY: entry()})
    cache_file = tmp_path / TOOL_CACHE
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text(text)
    found = read_workflows(wf_file, cache_file)
    assert list(found.workflows) == [KEY]
    assert len(found.problems) == 1
    assert found.problems[0].file == str(cache_file)
    assert says in found.problems[0].message


def test_current_picks_up_an_edit_of_workflows_json(tmp_path: Path) -> None:
    project = Project(root=tmp_path, state_dir=tmp_path / ".abilities")
    workflows = Workflows(project)
    assert workflows.current().workflows == {}
    write_json(project.workflows_file, {KEY: entry(mode="enforce")})
    first = workflows.current()
    assert first.workflows[KEY].mode == "enforce"
    assert workflows.current() is first  # unchanged on disk: not read again
    write_json(project.workflows_file, {KEY: entry(mode="warn")})  # shorter, so the stamp's size moves
    assert workflows.current().workflows[KEY].mode == "warn"


def test_current_picks_up_a_new_routing_cache(tmp_path: Path) -> None:
    project = Project(root=tmp_path, state_dir=tmp_path / ".abilities")
    workflows = Workflows(project)
    assert workflows.current().categories == {}
    write_json(project.root / TOOL_CACHE, V2_CACHE)
    assert workflows.current().categories["postgres__run_sql"] == {"db", "database"}


def test_the_repos_workflows_json_holds_the_templates_with_dangerous_commands_off() -> None:
    """dangerous-commands would ask a person before each of this repository's own force pushes: shipped off."""
    path = REPO / "workflows.json"
    found = read_workflows(path)
    assert found.problems == []
    assert check_file(path) == []
    modes = {name: (w.mode, w.enabled) for name, w in found.workflows.items()}
    assert modes == {
        "database-safe-query": ("enforce", True),
        "browser-safe-interaction": ("enforce", True),
        "github-pr-review": ("warn", True),
        "graphql-schema-aware": ("suggest", True),
        "dangerous-commands": ("enforce", False),
    }
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    templates = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in TEMPLATES.values()}
    assert set(templates) == set(on_disk)
    for name, template in templates.items():
        assert {k: v for k, v in on_disk[name].items() if k not in {"enabled", "created_at"}} == template, name


def test_every_template_is_a_valid_workflow(tmp_path: Path) -> None:
    data = {t["name"]: t for t in TEMPLATES.values()}
    path = write_json(tmp_path / "workflows.json", data)
    found = read_workflows(path)
    assert found.problems == [] and sorted(found.workflows) == sorted(data)
    assert check_file(path) == []


@pytest.fixture(scope="module")
def schema_validator() -> Draft202012Validator:
    schema = json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_accepts(validator: Draft202012Validator, document: Any) -> bool:
    return not list(validator.iter_errors(document))


@pytest.mark.parametrize("data", VALID)
def test_the_json_schema_accepts_every_valid_entry(schema_validator: Draft202012Validator, data: Any) -> None:
    assert schema_accepts(schema_validator, {"$schema": "https://example.invalid/workflows.json", KEY: data})


@pytest.mark.parametrize("data", STRUCTURAL + BLANK)
def test_the_json_schema_rejects_structurally_invalid_entries(
    schema_validator: Draft202012Validator, data: Any
) -> None:
    assert not schema_accepts(schema_validator, {KEY: data})


@pytest.mark.parametrize("data", MEANING)
def test_the_json_schema_cannot_see_rules_that_need_meaning(schema_validator: Draft202012Validator, data: Any) -> None:
    """Only the readers catch these (check_file adds them after the models pass): the schema has no way to say them."""
    assert schema_accepts(schema_validator, {KEY: data})


@pytest.mark.parametrize("data", NULLS)
def test_the_json_schema_and_the_readers_agree_on_null_optional_fields(
    tmp_path: Path, schema_validator: Draft202012Validator, data: Any
) -> None:
    """An editor showing the file as valid while `abilities-mcp validate` refuses it is a disagreement."""
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    readers_accept = KEY in read_workflows(path).workflows and check_file(path) == []
    assert schema_accepts(schema_validator, {KEY: data}) == readers_accept


@pytest.mark.parametrize(
    "document",
    [
        pytest.param({"$schema": 5}, id="schema-key-not-a-string"),
        pytest.param({"": entry()}, id="empty-workflow-name"),
        pytest.param([{KEY: entry()}], id="top-level-array"),
    ],
)
def test_the_json_schema_rejects_a_bad_top_level(schema_validator: Draft202012Validator, document: Any) -> None:
    assert not schema_accepts(schema_validator, document)
