"""ability_match: abilities ranked by their trigger keywords (whole words) and patterns (regexes)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from abilities_mcp.abilities.catalog import Catalog
from abilities_mcp.abilities.triggers import Matcher
from abilities_mcp.phrases import MAX_PATTERN_TEXT_CHARS, MAX_TEXT_CHARS, compile_triggers
from abilities_mcp.state.project import Project

STEPS = "steps:\n  - {id: s, type: script, run: 'true'}\n"


@pytest.fixture
def ability(write) -> Callable[..., Path]:
    """ability("name", keywords=[...], patterns=[...]) writes a runnable ability with those triggers."""

    def _ability(name: str, keywords: Sequence[str] = (), patterns: Sequence[str] = (), extra: str = "") -> Path:
        found = json.dumps({"keywords": list(keywords), "patterns": list(patterns)})  # JSON is YAML, quoting included
        return write(name, f"description: {name}\ntriggers: {found}\n{extra}{STEPS}")

    return _ability


@pytest.fixture
def matcher(project: Project) -> Matcher:
    return Matcher(Catalog(project))


def ranked(matcher: Matcher, text: str) -> list[tuple[str, int, list[str]]]:
    return [(m.name, m.score, m.matched) for m in matcher.match(text).matches]


@pytest.mark.parametrize(
    ("keyword", "text", "fits"),
    [
        ("deploy", "Please deploy v1", True),
        ("deploy", "DEPLOY!", True),
        ("Deploy", "deploy", True),
        ("deploy", "redeploy now", False),
        ("deploy", "the deployment", False),
        ("deploy", "deploy_all", False),
        ("ship it", "ok, ship it.", True),
        ("ship it", "Ship \n\t IT", True),
        ("ship it", "shipit", False),
        ("ship it", "ship items", False),
        ("ship it", "relationship it", False),
        ("a.b", "axb", False),
        ("a.b", "see a.b here", True),
        ("(x)", "call (x) now", True),
        ("c++", "I write C++ daily", True),
        ("*", "anything", False),
    ],
    ids=[
        "word",
        "upper-case-text",
        "upper-case-keyword",
        "not-a-prefix-of-a-word",
        "not-a-stem",
        "underscore-is-a-word-character",
        "phrase",
        "phrase-any-whitespace",
        "phrase-needs-its-space",
        "phrase-last-word-whole",
        "phrase-first-word-whole",
        "dot-is-literal",
        "dot-matches-a-dot",
        "parentheses-are-literal",
        "trailing-punctuation",
        "star-is-literal",
    ],
)
def test_keywords_match_whole_words_and_phrases_case_insensitively_and_literally(
    ability, matcher: Matcher, keyword: str, text: str, fits: bool
) -> None:
    ability("one", keywords=[keyword])
    assert ranked(matcher, text) == ([("one", len(keyword.split()), [f"keyword:{keyword}"])] if fits else [])


def test_patterns_are_searched_case_insensitively(ability, matcher: Matcher) -> None:
    ability("prod", patterns=["deploy.*to.*prod", r"^release\b"])
    assert ranked(matcher, "Please DEPLOY v1 to Production") == [("prod", 3, ["pattern:deploy.*to.*prod"])]
    assert ranked(matcher, "Release v2") == [("prod", 3, [r"pattern:^release\b"])]
    assert ranked(matcher, "deploy to staging; release v2") == []


def test_every_fitting_ability_is_returned_by_score_then_name(ability, matcher: Matcher) -> None:
    ability("word", keywords=["deploy"])
    ability("phrase", keywords=["deploy to prod"])
    ability("pattern", patterns=["deploy.*prod"])
    ability("both", keywords=["deploy", "prod", "rollback"], patterns=["deploy.*prod", "^nothing$"])
    ability("unrelated", keywords=["review"], patterns=["lint"])
    ability("silent")
    assert ranked(matcher, "Please deploy to prod") == [
        ("both", 5, ["keyword:deploy", "keyword:prod", "pattern:deploy.*prod"]),
        ("pattern", 3, ["pattern:deploy.*prod"]),
        ("phrase", 3, ["keyword:deploy to prod"]),
        ("word", 1, ["keyword:deploy"]),
    ]


def test_a_keyword_counts_once_however_often_it_is_written_or_occurs(ability, matcher: Matcher) -> None:
    ability("dup", keywords=["deploy", "Deploy", "ship  it", "ship it"], patterns=["x", "x"])
    assert ranked(matcher, "deploy deploy, ship it, deploy x x") == [
        ("dup", 6, ["keyword:deploy", "keyword:ship  it", "pattern:x"])
    ]


def test_broken_abilities_are_never_matched(ability, write, matcher: Matcher, project: Project) -> None:
    ability("good", keywords=["deploy"])
    ability("bad-regex", keywords=["deploy"], patterns=["deploy("])
    ability("bad-step", keywords=["deploy"], extra="inputs: {v: {type: string, default: b, enum: [a]}}\n")
    write("bad-yaml", "description: [deploy\ntriggers: {keywords: [deploy]}\n")
    catalog = Catalog(project).refresh()
    regex_problems = catalog.diagnostics(catalog.winners["bad-regex"])
    assert [d.path for d in regex_problems] == ["triggers.patterns[0]"], "a bad pattern is a load-time diagnostic"
    assert not catalog.is_valid(catalog.winners["bad-step"]) and catalog.winners["bad-yaml"].ability is None
    assert ranked(matcher, "deploy") == [("good", 1, ["keyword:deploy"])]


def test_a_pattern_that_does_not_compile_is_skipped_not_raised() -> None:
    compiled = compile_triggers(["x"], ["(", "ok"])
    assert [t.label for t in compiled] == ["keyword:x", "pattern:ok"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t "], ids=["empty", "spaces", "whitespace"])
def test_blank_text_matches_nothing(ability, matcher: Matcher, text: str) -> None:
    ability("any", patterns=[".*", "^$"])
    assert ranked(matcher, text) == []


def test_triggers_are_compiled_once_per_version_of_the_file(
    ability, matcher: Matcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = ability("deploy", keywords=["deploy"], patterns=["to prod"])
    assert ranked(matcher, "deploy to prod")[0][1] == 4  # first look: files load, triggers compile
    compiles: list[str] = []
    real_compile = re.compile
    monkeypatch.setattr(re, "compile", lambda p, flags=0: compiles.append(p) or real_compile(p, flags))
    for _ in range(3):
        assert ranked(matcher, "deploy to prod")[0][1] == 4
    assert compiles == []
    path.write_text(path.read_text().replace('"keywords": [', '"keywords": ["ship it", '))
    assert ranked(matcher, "ship it to prod") == [("deploy", 5, ["keyword:ship it", "pattern:to prod"])]
    assert any("ship" in p for p in compiles), "an edited file's triggers are compiled again"


def test_a_removed_file_is_forgotten(ability, matcher: Matcher) -> None:
    path = ability("gone", keywords=["deploy"])
    assert ranked(matcher, "deploy")
    path.unlink()
    assert ranked(matcher, "deploy") == []
    assert matcher._compiled == {}


def test_only_the_head_of_a_long_request_is_searched(ability, matcher: Matcher) -> None:
    ability("kw", keywords=["deploy"])
    ability("re", patterns=["deploy"])
    assert [m[0] for m in ranked(matcher, "deploy " + "x" * 1_000_000)] == ["re", "kw"]
    assert [m[0] for m in ranked(matcher, "x" * (MAX_PATTERN_TEXT_CHARS + 10) + " deploy")] == ["kw"]
    assert ranked(matcher, "x" * MAX_TEXT_CHARS + " deploy") == []


def test_a_backtracking_pattern_stays_fast_on_long_unlucky_text(ability, matcher: Matcher) -> None:
    # Uncapped, this search takes about half a minute: the pattern is cubic on this text.
    ability("slow", keywords=["deploy"], patterns=["deploy.*to.*prod"])
    started = time.monotonic()
    assert ranked(matcher, "deploy to " * 1_200) == [("slow", 1, ["keyword:deploy"])]
    assert time.monotonic() - started < 3


# Through the MCP tool.


async def test_ability_match_tool_returns_ranked_matches(client, ability) -> None:
    ability("deploy/production", keywords=["deploy", "ship it"], patterns=["deploy.*to.*prod"])
    ability("deploy/staging", keywords=["deploy", "staging"])
    ability("review", keywords=["review"])
    result = await client.call_tool("ability_match", {"text": "Ship it: deploy v1.2 to production"})
    assert not result.is_error, result.content[0].text
    assert result.structured_content == {
        "matches": [
            {
                "name": "deploy/production",
                "score": 6,
                "matched": ["keyword:deploy", "keyword:ship it", "pattern:deploy.*to.*prod"],
            },
            {"name": "deploy/staging", "score": 1, "matched": ["keyword:deploy"]},
        ]
    }


async def test_ability_match_tool_answers_nothing_fits_with_an_empty_list(client, ability) -> None:
    ability("review", keywords=["review"])
    for text in ("", "write the docs"):
        result = await client.call_tool("ability_match", {"text": text})
        assert not result.is_error and result.structured_content == {"matches": []}


async def test_ability_match_tool_sees_files_changed_on_disk(client, ability) -> None:
    path = ability("review", keywords=["review"])
    assert (await client.call_tool("ability_match", {"text": "lint it"})).structured_content["matches"] == []
    path.write_text(path.read_text().replace('["review"]', '["review", "lint"]'))
    found = (await client.call_tool("ability_match", {"text": "lint it"})).structured_content["matches"]
    assert found == [{"name": "review", "score": 1, "matched": ["keyword:lint"]}]


async def test_ability_match_is_listed_read_only_with_a_description_and_output_schema(client) -> None:
    tool = next(t for t in (await client.list_tools()).tools if t.name == "ability_match")
    assert tool.annotations.read_only_hint is True
    assert "ability_run" in tool.description
    assert tool.input_schema["required"] == ["text"]
    assert set(tool.output_schema["$defs"]["Match"]["properties"]) == {"name", "score", "matched"}
