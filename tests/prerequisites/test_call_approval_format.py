"""workflows.json's `approval` (issue 31): a workflow whose gate is a person's yes to each call it triggers. The
hot-path reader (workflows.py), the validator (spec.py) and the JSON Schema agree on every entry, and `validate`
names each mistake with its field and the fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from abilities_mcp.prerequisites.spec import check_file, check_warnings, json_schema
from abilities_mcp.prerequisites.workflows import Approval, read_workflows
from support import CLI

KEY = "force-push"
DROP = object()  # entry(key=DROP) leaves the key out
ASKS = {"expires": "10m", "prompt": "Force-push {{command}}?"}


def entry(**changes: Any) -> dict[str, Any]:
    """A valid approval workflow (no prerequisites) with some keys replaced (a value of DROP removes the key)."""
    base: dict[str, Any] = {
        "description": "A person approves every force push",
        "triggers": {"tools": ["Bash(git push --force:*)", "Bash(git push -f:*)", "mcp__github__merge_pull_request"]},
        "approval": ASKS,
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not DROP}


def asks(**changes: Any) -> dict[str, Any]:
    return entry(approval={**ASKS, **changes})


STEP = {"step": 1, "tool": "get_pull_request", "description": "the PR first"}

VALID = [
    pytest.param(entry(), id="approval-no-prerequisites"),
    pytest.param(entry(prerequisites=[]), id="approval-empty-prerequisites"),
    pytest.param(entry(prerequisites=[STEP]), id="approval-and-prerequisites"),
    pytest.param(entry(approval={}), id="approval-all-defaults"),
    pytest.param(asks(expires="1h30m"), id="expires-1h30m"),
    pytest.param(asks(expires="30s"), id="expires-30s"),
    pytest.param(asks(expires=600), id="expires-seconds"),
    pytest.param(asks(expires=0.5), id="expires-half-a-second"),
    pytest.param(asks(expires="24h"), id="expires-the-most"),
    pytest.param(asks(expires=86_400), id="expires-the-most-in-seconds"),
    pytest.param(asks(prompt=""), id="prompt-empty"),
    pytest.param(asks(prompt="{{tool}} with {{ arguments }}, branch {{args.branch}}?"), id="prompt-every-field"),
    pytest.param(asks(prompt="Plain words, no fields"), id="prompt-no-fields"),
    pytest.param(entry(mode="warn"), id="mode-warn"),
    pytest.param(entry(triggers={"tools": ["Bash(npm run deploy)"]}), id="exact-command-rule"),
]

# Invalid for both readers, and the JSON Schema says so too: types, keys, presence, the duration's shape.
STRUCTURAL = [
    pytest.param(entry(approval=DROP), id="no-approval-no-prerequisites"),
    pytest.param(entry(approval=DROP, prerequisites=[]), id="no-approval-empty-prerequisites"),
    pytest.param(entry(approval=None), id="approval-null"),
    pytest.param(entry(approval="yes"), id="approval-a-string"),
    pytest.param(entry(approval=True), id="approval-true"),
    pytest.param(entry(approval=["10m"]), id="approval-a-list"),
    pytest.param(asks(expire="1h"), id="approval-unknown-key"),
    pytest.param(asks(expires="10 minutes"), id="expires-words"),
    pytest.param(asks(expires="soon"), id="expires-not-a-duration"),
    pytest.param(asks(expires=True), id="expires-true"),
    pytest.param(asks(expires=None), id="expires-null"),
    pytest.param(asks(expires=["10m"]), id="expires-a-list"),
    pytest.param(asks(expires=0), id="expires-zero"),
    pytest.param(asks(expires=-5), id="expires-negative"),
    pytest.param(asks(expires=90_000), id="expires-seconds-over-a-day"),
    pytest.param(asks(prompt=5), id="prompt-a-number"),
    pytest.param(asks(prompt=None), id="prompt-null"),
    pytest.param(entry(prerequisites=None), id="prerequisites-null"),
    pytest.param(entry(prerequisites="get_pull_request"), id="prerequisites-a-string"),
]

# Invalid for both readers; the JSON Schema cannot say why (what a duration adds up to, a prompt's fields, a rule's
# grammar): an editor shows these as fine and `abilities-mcp validate` says what is wrong.
MEANING = [
    pytest.param(asks(expires="25h"), id="expires-over-a-day"),
    pytest.param(asks(expires="2d"), id="expires-two-days"),
    pytest.param(asks(expires="0m"), id="expires-zero-minutes"),
    pytest.param(asks(prompt="Run {{cmd}}?"), id="prompt-unknown-field"),
    pytest.param(asks(prompt="Run {{args.}}?"), id="prompt-args-without-a-name"),
    pytest.param(asks(prompt="{{command}} as {{user}}?"), id="prompt-one-unknown-field-of-two"),
]

INVALID = STRUCTURAL + MEANING


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("data", VALID + INVALID)
def test_both_readers_give_the_same_verdict_on_an_approval_workflow(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    assert (KEY in read_workflows(path).workflows) == (check_file(path) == [])


@pytest.mark.parametrize("data", VALID)
def test_a_valid_approval_workflow_is_usable_and_neither_reader_reports_anything(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    found = read_workflows(path)
    assert found.problems == [] and list(found.workflows) == [KEY]
    assert found.workflows[KEY].approval is not None
    assert check_file(path) == []


@pytest.mark.parametrize("data", INVALID)
def test_an_invalid_approval_workflow_is_reported_by_both_readers_under_its_key(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "workflows.json", {KEY: data})
    assert read_workflows(path).workflows == {}
    for problems in (read_workflows(path).problems, check_file(path)):
        assert problems and all(p.path.startswith(KEY) for p in problems), [str(p) for p in problems]


def test_the_approval_is_read_in_seconds_with_its_prompt_and_defaults_to_ten_minutes(tmp_path: Path) -> None:
    path = write_json(tmp_path / "workflows.json", {"set": asks(expires="1h30m"), "bare": entry(approval={})})
    found = read_workflows(path).workflows

    assert found["set"].approval == Approval(5400.0, "Force-push {{command}}?")
    assert found["set"].prerequisites == ()
    assert found["bare"].approval == Approval(600.0, "")


@pytest.fixture(scope="module")
def schema() -> Draft202012Validator:
    document = json_schema()
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


@pytest.mark.parametrize("data", VALID)
def test_the_json_schema_accepts_every_valid_approval_workflow(schema: Draft202012Validator, data: Any) -> None:
    assert list(schema.iter_errors({KEY: data})) == []


@pytest.mark.parametrize("data", STRUCTURAL)
def test_the_json_schema_rejects_a_structurally_invalid_approval(schema: Draft202012Validator, data: Any) -> None:
    assert list(schema.iter_errors({KEY: data}))


@pytest.mark.parametrize("data", MEANING)
def test_the_json_schema_cannot_see_what_an_approval_means(schema: Draft202012Validator, data: Any) -> None:
    assert list(schema.iter_errors({KEY: data})) == []


def test_the_json_schema_tells_editors_what_approval_holds(schema: Draft202012Validator) -> None:
    approval = json_schema()["$defs"]["Approval"]
    assert approval["additionalProperties"] is False
    assert set(approval["properties"]) == {"expires", "prompt", "four_eyes"}
    assert "{{command}}" in approval["properties"]["prompt"]["description"]
    assert "24h" in approval["properties"]["expires"]["description"]
    assert "Bash(git push --force:*)" in json_schema()["$defs"]["Triggers"]["properties"]["tools"]["description"]


# --- shell rules in triggers.tools ------------------------------------------------------------------------------

# A malformed rule: both readers refuse the workflow with commands.rule_of's words, at the rule's place.
MALFORMED_RULES = [
    pytest.param("Bash(*)", "'Bash(*)' is not a rule: write plain 'Bash' to gate every shell call", id="star"),
    pytest.param(
        "Bash()",
        "'Bash()' names no command: write one, as in `Bash(git push --force:*)`, or plain 'Bash' to gate every "
        "shell call",
        id="empty",
    ),
    pytest.param(
        "Bash(git push *)",
        "'Bash(git push *)': only a trailing `:*` is supported, as in Claude Code: `Bash(git push --force:*)`",
        id="inner-star",
    ),
    pytest.param(
        "Bash(git push && rm -rf /:*)",
        "'Bash(git push && rm -rf /:*)' holds the shell operator '&&': a rule names one command; write one rule per "
        "command",
        id="operator",
    ),
    pytest.param(
        'Bash("git push:*)', "'Bash(\"git push:*)' leaves a quote open (or ends in a backslash): close it", id="quote"
    ),
    pytest.param(
        "Bash(FOO=1 git push:*)",
        "'Bash(FOO=1 git push:*)' starts with the assignment 'FOO=1', which matching skips: start with the command",
        id="assignment",
    ),
]


def with_rule(rule: str) -> dict[str, Any]:
    return entry(triggers={"tools": ["mcp__github__merge_pull_request", rule]})


@pytest.mark.parametrize(("rule", "says"), MALFORMED_RULES)
def test_a_malformed_shell_rule_is_refused_by_both_readers_with_the_fix(tmp_path: Path, rule: str, says: str) -> None:
    path = write_json(tmp_path / "workflows.json", {KEY: with_rule(rule)})
    found = read_workflows(path)

    assert found.workflows == {}
    assert [(p.path, p.message) for p in found.problems] == [(f"{KEY}.triggers.tools[1]", says)]
    assert [(p.path, p.message) for p in check_file(path)] == [(f"{KEY}.triggers.tools[1]", says)]


@pytest.mark.parametrize(("rule", "says"), MALFORMED_RULES)
def test_the_json_schema_cannot_see_a_malformed_rule(schema: Draft202012Validator, rule: str, says: str) -> None:
    assert list(schema.iter_errors({KEY: with_rule(rule)})) == []


@pytest.mark.parametrize(
    "tool",
    ["Bash(git push --force:*", "bash(git push --force:*)", "Read(./.env)", " Bash (rm -rf:*)"],
    ids=["unclosed", "lowercase", "another-tools-rule", "spaced"],
)
def test_a_trigger_written_like_a_rule_but_read_as_a_tool_name_is_a_warning(tmp_path: Path, tool: str) -> None:
    """It gates nothing (no tool has that name), but the file works: validate passes and says so."""
    path = write_json(tmp_path / "workflows.json", {KEY: with_rule(tool)})

    assert check_file(path) == [] and list(read_workflows(path).workflows) == [KEY]
    [warning] = check_warnings(path)
    assert warning.path == f"{KEY}.triggers.tools[1]"
    assert warning.message.startswith(f"{tool!r} is read as a tool name, not a rule, so it matches no call")
    assert "Bash(PREFIX:*) or Bash(COMMAND)" in warning.message


def test_well_formed_rules_and_tool_names_give_no_warning(tmp_path: Path) -> None:
    tools = ["Bash", "Bash(git status)", "Bash(git push --force:*)", "mcp__github__merge_pull_request", "run_sql"]
    path = write_json(tmp_path / "workflows.json", {KEY: entry(triggers={"tools": tools})})

    assert check_file(path) == []
    assert check_warnings(path) == []


# --- validate: each mistake with its field and the fix -----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path", "says"),
    [
        pytest.param(
            entry(approval=DROP),
            KEY,
            'a workflow needs prerequisites or an approval: list the tools that must run first under "prerequisites", '
            'or add "approval": {"expires": "10m"} so a person approves each call',
            id="no-gate",
        ),
        pytest.param(
            asks(expire="1h"), f"{KEY}.approval.expire", "unknown key 'expire'; did you mean 'expires'?", id="typo"
        ),
        pytest.param(
            entry(approval=None),
            f"{KEY}.approval",
            'must be an object such as {"expires": "10m", "prompt": "Run {{command}}?"} (got None); leave approval '
            "out for a workflow no person approves",
            id="approval-null",
        ),
        pytest.param(
            asks(expires="10 minutes"),
            f"{KEY}.approval.expires",
            "'10 minutes' is not a duration; write a duration like 500ms, 30s, 5m, 1h, 1h30m or a number of seconds",
            id="expires-words",
        ),
        pytest.param(
            asks(expires=True),
            f"{KEY}.approval.expires",
            'True is not a duration; write one such as "10m", "1h30m" or a number of seconds',
            id="expires-true",
        ),
        pytest.param(
            asks(expires=0),
            f"{KEY}.approval.expires",
            "0 must be positive; write a duration like 500ms, 30s, 5m, 1h, 1h30m or a number of seconds",
            id="expires-zero",
        ),
        pytest.param(
            asks(expires="2d"),
            f"{KEY}.approval.expires",
            "'2d' is longer than 24h: a yes is for one call now, not for the days ahead; write 24h or less, "
            'e.g. "10m"',
            id="expires-two-days",
        ),
        pytest.param(
            asks(prompt="Run {{cmd}} as {{user}}?"),
            f"{KEY}.approval.prompt",
            "{{cmd}} is not a field of the call (did you mean {{command}}?); {{user}} is not a field of the call; "
            "use {{tool}}, {{command}}, {{arguments}} or {{args.NAME}}",
            id="prompt-fields",
        ),
        pytest.param(
            asks(prompt=5), f"{KEY}.approval.prompt", "Input should be a valid string (got 5)", id="prompt-a-number"
        ),
    ],
)
def test_check_file_names_the_field_and_the_fix(tmp_path: Path, data: dict, path: str, says: str) -> None:
    file = write_json(tmp_path / "workflows.json", {KEY: data})

    assert [(p.path, p.message) for p in check_file(file)] == [(path, says)]


def validate(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "--root", str(root), "validate"], capture_output=True, text=True, timeout=60)


def test_validate_accepts_good_approval_workflows_and_names_each_bad_ones_field_and_fix(root: Path) -> None:
    path = write_json(
        root / "workflows.json",
        {
            "force-push": entry(),
            "deploy-after-tests": entry(
                triggers={"tools": ["Bash(npm run deploy)"]},
                prerequisites=[{"step": 1, "tool": "run_tests", "description": "the tests pass first"}],
                approval={"expires": 300},
            ),
            "typo": asks(expirs="1h"),
            "too-long": asks(expires="48h"),
            "no-gate": entry(approval=DROP),
        },
    )

    done = validate(root)

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(f"ERROR workflows workflows.json  ({path})")
    assert sorted(lines[at + 1 : at + 4]) == [
        "      no-gate: a workflow needs prerequisites or an approval: list the tools that must run first under "
        '"prerequisites", or add "approval": {"expires": "10m"} so a person approves each call',
        "      too-long.approval.expires: '48h' is longer than 24h: a yes is for one call now, not for the days "
        'ahead; write 24h or less, e.g. "10m"',
        "      typo.approval.expirs: unknown key 'expirs'; did you mean 'expires'?",
    ]
    assert not any(line.lstrip().startswith(("force-push", "deploy-after-tests")) for line in lines)


def test_validate_accepts_a_file_of_only_good_approval_workflows(root: Path) -> None:
    path = write_json(root / "workflows.json", {"force-push": entry(), "slow": asks(expires="1h")})

    done = validate(root)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok    workflows workflows.json  ({path})" in done.stdout.splitlines()
