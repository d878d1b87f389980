"""The prerequisite gate as pure functions: matching a call to workflows, verdicts, ordered recording."""

from __future__ import annotations

from typing import Any

import pytest

from abilities_mcp.prerequisites.gates import (
    OBSERVED,
    REPORTED,
    Observer,
    check,
    plan_record,
    tool_matches,
    triggers,
)
from abilities_mcp.prerequisites.names import Name
from abilities_mcp.prerequisites.sessions import Completion
from abilities_mcp.prerequisites.templates import TEMPLATES
from abilities_mcp.prerequisites.workflows import WorkflowSet, parse_workflow, tool_categories


def workflow(name: str, mode: str = "enforce", *, tools=(), keywords=(), category=None, steps=None, enabled=True):
    entry: dict[str, Any] = {
        "enabled": enabled,
        "description": f"{name} workflow",
        "triggers": {
            k: v for k, v in {"tools": list(tools), "keywords": list(keywords), "category": category}.items() if v
        },
        "prerequisites": steps
        or [
            {"step": 1, "tool": "first", "description": "one"},
            {"step": 2, "tool": "second", "description": "two"},
        ],
        "mode": mode,
    }
    parsed, problems = parse_workflow(name, entry, "workflows.json")
    assert parsed is not None, problems
    return parsed


def templates(*names: str, categories=None) -> WorkflowSet:
    found = WorkflowSet(categories=categories or {})
    for key in names:
        entry = {k: v for k, v in TEMPLATES[key].items() if k != "name"}
        parsed, problems = parse_workflow(TEMPLATES[key]["name"], entry, "workflows.json")
        assert parsed is not None, problems
        found.workflows[parsed.name] = parsed
    return found


def only(*workflows) -> WorkflowSet:
    return WorkflowSet(workflows={w.name: w for w in workflows})


def record(step: int, server: str | None = None, how: str = OBSERVED, workflow: str = "w") -> Completion:
    return Completion(workflow, step, "t", None, 0.0, server, how)


def recorded(workflow_name: str, *steps: int, server: str | None = None, how: str = OBSERVED) -> dict[str, Any]:
    """The session's records of these steps of one workflow, each made on `server`, known `how`."""
    return {workflow_name: {s: [record(s, server, how, workflow_name)] for s in steps}}


@pytest.mark.parametrize(
    ("called", "wanted", "expected"),
    [
        ("execute_query", "execute_query", True),
        ("mcp__db__execute_query", "execute_query", True),
        ("mcp__plugin_tools_db__execute_query", "execute_query", True),
        ("db__execute_query", "execute_query", True),
        ("Execute_Query", "execute_query", True),
        ("mcp__db__execute_query", "mcp__db__execute_query", True),
        ("db__execute_query", "mcp__db__execute_query", True),
        ("mcp__db__execute_query", "db__execute_query", True),
        ("mcp__scratch__execute_query", "mcp__db__execute_query", False),
        ("scratch__execute_query", "db__execute_query", False),
        ("execute_query", "mcp__db__execute_query", False),
        ("mcp__db__execute_query_v2", "execute_query", False),
        ("mcp__db__my_execute_query", "execute_query", False),
        ("mcp__x__prod_execute_query", "execute_query", False),
        ("postgres_execute_query", "execute_query", False),
        ("execute", "execute_query", False),
        ("anything", "", False),
    ],
    ids=[
        "bare",
        "claude-code",
        "claude-code-plugin",
        "gateway",
        "case",
        "named-server",
        "gateway-name-of-the-named-server",
        "hook-name-of-a-gateway-named-server",
        "another-server",
        "another-upstream",
        "client-tool-for-a-named-server",
        "suffix-is-not-a-match",
        "a-longer-tool-ending-the-same",
        "a-tool-ending-in-_-plus-the-name",
        "an-unsplit-name-is-no-evidence",
        "prefix-only",
        "empty-wanted",
    ],
)
def test_a_tool_matches_as_a_whole_name_on_the_server_the_workflow_names(
    called: str, wanted: str, expected: bool
) -> None:
    assert tool_matches(called, wanted) is expected


@pytest.mark.parametrize(
    ("task", "keyword", "expected"),
    [
        ("Query the users table", "query", True),
        ("run this SQL for me", "sql", True),
        ("fix the queryset in views.py", "query", False),
        ("please review   PR 12", "review pr", True),
        ("review the PRs", "review pr", False),
        ("", "query", False),
    ],
    ids=["case-insensitive", "upper", "not-inside-a-word", "phrase-any-space", "phrase-whole-words", "no-task"],
)
def test_keywords_match_whole_words_in_the_task(task: str, keyword: str, expected: bool) -> None:
    w = workflow("kw", keywords=[keyword])
    assert bool(triggers(w, "some_tool", task, {})) is expected


def test_a_category_comes_from_the_routing_cache_in_either_layout() -> None:
    v2 = tool_categories(
        {
            "categories": {"db": {"name": "Database", "tools": ["pg__run_sql"]}},
            "tools": {"pg__vacuum": {"category": "db"}},
        }
    )
    v1 = tool_categories({"categories": {"database": {"tools": [{"id": "run_sql", "prefix": "MetaMCP_pg__"}]}}})
    w = workflow("db", category="database")
    for categories in (v2, v1):
        assert triggers(w, "mcp__pg__run_sql", "", categories) == ["category database"]
    assert triggers(w, "pg__vacuum", "", v2) == ["category database"]
    assert triggers(w, "mcp__fs__read_file", "", v2) == []


@pytest.mark.parametrize(
    ("mode", "verdict"),
    [("enforce", "deny"), ("warn", "warn"), ("suggest", "suggest")],
    ids=["enforce-denies", "warn-warns", "suggest-suggests"],
)
def test_each_mode_gives_its_verdict_until_the_required_steps_are_recorded(mode: str, verdict: str) -> None:
    w = workflow("w", mode, tools=["act"])
    before = check(only(w), "act", "", {})
    assert before.verdict == verdict
    assert [p.tool for p in before.matched[0].missing] == ["first", "second"]
    assert [tool for tool, _ in before.next_calls] == ["first", "second"]
    after = check(only(w), "act", "", recorded("w", 1, 2))
    assert after.verdict == "allow"
    assert after.next_calls == []


def test_an_optional_step_never_holds_the_tool_back_but_is_mentioned() -> None:
    steps = [
        {"step": 1, "tool": "first", "description": "one"},
        {"step": 2, "tool": "extra", "description": "nice to have", "required": False},
    ]
    w = workflow("w", tools=["act"], steps=steps)
    result = check(only(w), "act", "", recorded("w", 1))
    assert result.verdict == "allow"
    assert [p.tool for p in result.matched[0].optional] == ["extra"]
    assert "Optional: extra" in result.message


def test_a_tool_no_workflow_gates_is_allowed() -> None:
    result = check(templates("database", "browser"), "read_file", "", {})
    assert (result.verdict, result.matched) == ("allow", [])
    assert "no workflow gates 'read_file'" in result.message


def test_every_matching_workflow_applies_and_the_strictest_verdict_wins() -> None:
    found = templates("graphql", "github-pr", "database")  # graphql defined first: no first-defined-wins
    result = check(found, "mcp__db__execute_query", "", {})
    assert result.verdict == "deny"
    assert {m.workflow.name: m.verdict for m in result.matched} == {
        "graphql-schema-aware": "suggest",
        "database-safe-query": "deny",
    }
    assert [tool for tool, _ in result.next_calls] == ["list_databases", "list_tables", "inspect_table", "get_schema"]
    assert "graphql-schema-aware" in result.message and "database-safe-query" in result.message


def test_a_disabled_workflow_is_not_triggered() -> None:
    w = workflow("off", tools=["act"], enabled=False)
    assert check(only(w), "act", "", {}).verdict == "allow"


def test_a_keyword_alone_can_warn_but_never_deny() -> None:
    found = templates("database")
    by_word = check(found, "Edit", "update the README", {})
    assert by_word.verdict == "warn"
    assert by_word.matched[0].reasons == ["keyword 'update'"]
    by_tool = check(found, "execute_query", "update the README", {})
    assert by_tool.verdict == "deny"


def test_a_workflow_never_gates_its_own_prerequisites() -> None:
    found = templates("database")
    assert check(found, "mcp__db__list_databases", "select the active users", {}).verdict == "allow"


def test_next_calls_carry_each_prerequisites_default_params() -> None:
    steps = [{"step": 1, "tool": "take_snapshot", "description": "see", "params": {"verbose": True}}]
    w = workflow("snap", tools=["click"], steps=steps)
    assert check(only(w), "click", "", {}).next_calls == [("take_snapshot", {"verbose": True})]


def test_recording_a_required_step_before_an_earlier_one_is_refused_in_enforce_mode() -> None:
    found = templates("database")
    plan = plan_record(found, "inspect_table", recorded("database-safe-query", 1))
    assert plan.record == []
    (wf, step, earlier) = plan.refused[0]
    assert (wf.name, step.tool, earlier.tool) == ("database-safe-query", "inspect_table", "list_tables")


def test_warn_and_suggest_workflows_record_in_any_order() -> None:
    found = templates("github-pr", "graphql")
    assert [p.tool for _, p in plan_record(found, "get_pull_request_status", {}).record] == ["get_pull_request_status"]
    assert [p.tool for _, p in plan_record(found, "filter_types", {}).record] == ["filter_types"]


def test_an_optional_step_may_be_skipped_on_the_way_to_a_later_one() -> None:
    steps = [
        {"step": 1, "tool": "first", "description": "one"},
        {"step": 2, "tool": "extra", "description": "optional", "required": False},
        {"step": 3, "tool": "third", "description": "three"},
    ]
    w = workflow("w", tools=["act"], steps=steps)
    assert [p.step for _, p in plan_record(only(w), "third", recorded("w", 1)).record] == [3]


def test_a_tool_that_several_workflows_need_is_recorded_in_each() -> None:
    a = workflow("a", tools=["x"], steps=[{"step": 1, "tool": "shared", "description": "s"}])
    b = workflow("b", "warn", tools=["y"], steps=[{"step": 1, "tool": "shared", "description": "s"}])
    assert sorted(w.name for w, _ in plan_record(only(a, b), "mcp__srv__shared", {}).record) == ["a", "b"]


def test_a_tool_listed_twice_fills_one_step_per_call() -> None:
    steps = [
        {"step": 1, "tool": "snapshot", "description": "before"},
        {"step": 2, "tool": "scroll", "description": "move"},
        {"step": 3, "tool": "snapshot", "description": "after"},
    ]
    w = workflow("w", "warn", tools=["act"], steps=steps)
    assert [p.step for _, p in plan_record(only(w), "snapshot", {}).record] == [1]
    assert [p.step for _, p in plan_record(only(w), "snapshot", recorded("w", 1, 2)).record] == [3]
    assert [p.step for _, p in plan_record(only(w), "snapshot", recorded("w", 1, 2, 3)).already] == [1]


def test_recording_an_unrelated_tool_plans_nothing() -> None:
    plan = plan_record(templates("database"), "read_file", {})
    assert (plan.record, plan.already, plan.refused) == ([], [], [])


# --- evidence: where a record counts (DESIGN §9) ---

DB_QUERY = Name("db", "execute_query", "mcp__db__execute_query")
DATABASE = "database-safe-query"


def all_three(server: str | None, how: str = OBSERVED) -> dict[str, Any]:
    return recorded(DATABASE, 1, 2, 3, server=server, how=how)


def test_a_record_made_on_another_server_is_no_evidence_for_a_call_on_a_named_server() -> None:
    assert check(templates("database"), DB_QUERY, "", all_three("scratch")).verdict == "deny"
    assert check(templates("database"), DB_QUERY, "", all_three("db")).verdict == "allow"
    assert check(templates("database"), "execute_query", "", all_three("scratch")).verdict == "allow"  # names none


def test_a_prerequisite_naming_a_server_counts_only_when_that_server_ran_it() -> None:
    steps = [{"step": 1, "tool": "mcp__catalog__list_tables", "description": "the catalog's tables"}]
    w = workflow("w", tools=["execute_query"], steps=steps)

    assert check(only(w), DB_QUERY, "", recorded("w", 1, server="db")).verdict == "deny"
    assert check(only(w), DB_QUERY, "", recorded("w", 1, server="catalog")).verdict == "allow"


def test_a_client_tools_record_counts_for_a_call_on_any_server() -> None:
    steps = [{"step": 1, "tool": "Bash", "description": "run the tests"}]
    w = workflow("w", tools=["execute_query"], steps=steps)

    assert check(only(w), DB_QUERY, "", recorded("w", 1, server=None)).verdict == "allow"


@pytest.mark.parametrize(
    ("observer", "verdict"),
    [
        (Observer(), "allow"),
        (Observer(upstreams=frozenset({"db"})), "deny"),
        (Observer(hooks=True), "deny"),
        (Observer(upstreams=frozenset({"other"})), "allow"),
    ],
    ids=["nobody-sees", "behind-the-gateway", "the-clients-hooks", "another-upstream"],
)
def test_a_self_report_does_not_count_where_someone_sees_the_tool_run(observer: Observer, verdict: str) -> None:
    reported = all_three(None, REPORTED)

    assert check(templates("database"), DB_QUERY, "", reported, observer=observer).verdict == verdict


def test_at_the_gateway_a_self_report_counts_for_a_client_tool_its_upstream_does_not_offer() -> None:
    steps = [
        {"step": 1, "tool": "Bash", "description": "run the tests"},
        {"step": 2, "tool": "list_tables", "description": "the tables"},
    ]
    w = workflow("w", tools=["execute_query"], steps=steps)
    gateway = Observer(upstreams=frozenset({"db"}), offers={"db": frozenset({"list_tables", "execute_query"})})

    result = check(only(w), DB_QUERY, "", recorded("w", 1, 2, how=REPORTED), observer=gateway)

    assert [p.tool for p in result.matched[0].missing] == ["list_tables"]


def test_a_report_of_a_step_someone_sees_is_watched_under_enforce_and_recorded_under_warn() -> None:
    enforced = workflow("e", tools=["act"], steps=[{"step": 1, "tool": "list_tables", "description": "t"}])
    warned = workflow("v", "warn", tools=["act"], steps=[{"step": 1, "tool": "list_tables", "description": "t"}])
    tool = Name("db", "list_tables", "db__list_tables")

    plan = plan_record(only(enforced, warned), tool, {}, observer=Observer(frozenset({"db"})), how=REPORTED)

    assert [(w.name, server) for w, _, server in plan.watched] == [("e", "db")]
    assert [w.name for w, _ in plan.record] == ["v"]


def test_a_step_seen_on_one_server_is_recorded_again_when_another_server_runs_it() -> None:
    found = templates("database")

    plan = plan_record(found, Name("scratch", "list_databases", "mcp__scratch__list_databases"), all_three("db"))

    assert [p.step for _, p in plan.record] == [1] and plan.already == []
