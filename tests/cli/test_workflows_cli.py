"""workflows.json from a terminal: `abilities-mcp workflows list|add|enable|disable|remove`, `schema workflows` and
`validate`, each run as a person runs it (a subprocess), with the file's bytes, order, indentation and mode checked."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

from abilities_mcp.prerequisites.templates import TEMPLATES
from support import REPO

# Generous: a cold interpreter imports pydantic and the SDK.
CLI_TIMEOUT_SECONDS = 60
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# What an edit may leave behind if it is not atomic: tempfile.mkstemp(prefix=".workflows.json.", suffix=".tmp").
TEMP_FILE = re.compile(r"^\.workflows\.json\..*\.tmp$")
# One workflow header line of `workflows list`: name, mode, description.
LIST_HEADER = re.compile(r"^  (\S+) +(enforce|warn|suggest) +(.+)$")

TEMPLATE_NAMES = {key: spec["name"] for key, spec in TEMPLATES.items()}


def cli(root: Path, *args: str, umask: int = -1) -> subprocess.CompletedProcess:
    """`python -m abilities_mcp --root ROOT ARGS` with HOME in the test's tmp dir, its output captured."""
    home = Path(os.environ["HOME"])  # tmp/home, set by conftest's autouse fixture
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    for var in ("ABILITIES_ROOT", "CLAUDE_PROJECT_DIR", "ABILITIES_STATE_DIR"):
        env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "abilities_mcp", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        env=env,
        umask=umask,
    )


def step(n: int, tool: str, required: bool = True, **extra) -> dict:
    return {"step": n, "tool": tool, "description": f"Run {tool} first", "required": required, **extra}


def workflow(tools: list[str], *steps: dict, **extra) -> dict:
    return {"description": "A workflow", "triggers": {"tools": tools}, "prerequisites": list(steps), **extra}


def write_json(path: Path, data, indent: int | str = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMP_FILE.match(p.name))


def workflows_report(result: subprocess.CompletedProcess) -> dict:
    """The workflows.json entry of `validate --json`."""
    reports = [f for f in json.loads(result.stdout)["files"] if f["kind"] == "workflows"]
    assert len(reports) == 1, result.stdout
    return reports[0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty project folder: no abilities, no skills, no workflows.json."""
    path = tmp_path / "project"
    path.mkdir()
    return path


# A hand-written workflows.json: "$schema" first, workflows not in alphabetical order, params, unicode text.
HAND_WRITTEN = {
    "$schema": "./schema/workflows.schema.json",
    "zeta-deploy": {
        "enabled": True,
        "description": "Vérifier l'état du déploiement — 部署前检查 ✓",
        "triggers": {"tools": ["deploy"], "keywords": ["ship it"]},
        "prerequisites": [
            step(1, "run_tests", params={"suite": "smoke", "retries": 2, "tags": ["fast", "ünïcode"]}),
            step(2, "check_status", required=False),
        ],
        "mode": "warn",
    },
    "alpha-migrate": {
        "description": "Back up before a migration",
        "mode": "enforce",
        "triggers": {"category": "database", "tools": ["migrate"]},
        "prerequisites": [step(1, "backup_db", params={"target": "s3://bucket/dump"})],
        "created_at": "2024-01-02T03:04:05+00:00",
    },
}


# --- add --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", list(TEMPLATE_NAMES), ids=list(TEMPLATE_NAMES))
def test_add_template_creates_workflows_json_with_the_entry_under_the_templates_name(
    folder: Path, template: str
) -> None:
    path = folder / "workflows.json"
    name = TEMPLATE_NAMES[template]

    result = cli(folder, "workflows", "add", "--template", template)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Added workflow {name!r} (template {template}) to {path}.\n"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data) == [name]
    entry = data[name]
    assert "name" not in entry
    assert entry["enabled"] is True
    assert datetime.fromisoformat(entry["created_at"]).tzinfo is not None
    expected = {k: v for k, v in TEMPLATES[template].items() if k != "name"}
    assert {k: v for k, v in entry.items() if k not in ("enabled", "created_at")} == expected
    checked = cli(folder, "validate")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"ok    workflows workflows.json  ({path})" in checked.stdout.splitlines()


def test_adding_a_template_twice_is_refused_and_leaves_the_file_as_it_was(folder: Path) -> None:
    path = folder / "workflows.json"
    assert cli(folder, "workflows", "add", "--template", "database").returncode == 0
    before = path.read_bytes()

    again = cli(folder, "workflows", "add", "--template", "database")

    assert again.returncode == 2
    assert "'database-safe-query' already exists" in again.stderr
    assert "--name" in again.stderr
    assert again.stdout == ""
    assert path.read_bytes() == before

    other = cli(folder, "workflows", "add", "--template", "database", "--name", "other")

    assert other.returncode == 0, other.stderr
    assert other.stdout.startswith("Added workflow 'other' (template database)")
    data = json.loads(path.read_text())
    assert list(data) == ["database-safe-query", "other"]
    assert data["other"]["prerequisites"] == data["database-safe-query"]["prerequisites"]
    assert cli(folder, "validate").returncode == 0


def test_an_unknown_template_is_refused_with_a_did_you_mean(folder: Path) -> None:
    result = cli(folder, "workflows", "add", "--template", "databse")

    assert result.returncode == 2
    assert "Unknown template 'databse'; did you mean 'database'?" in result.stderr
    assert not (folder / "workflows.json").exists()


@pytest.mark.parametrize("name", ["", "   ", "$schema"], ids=["empty", "blank", "meta-key"])
def test_add_refuses_a_name_that_cannot_name_a_workflow(folder: Path, name: str) -> None:
    result = cli(folder, "workflows", "add", "--template", "database", "--name", name)

    assert result.returncode == 2, result.stdout
    assert "cannot name a workflow" in result.stderr
    assert not (folder / "workflows.json").exists()


# --- enable / disable / remove ----------------------------------------------------------------------------------


def test_disable_turns_off_only_enabled_and_a_second_disable_says_already_disabled(folder: Path) -> None:
    path = folder / "workflows.json"
    assert cli(folder, "workflows", "add", "--template", "browser").returncode == 0
    original = json.loads(path.read_text())

    first = cli(folder, "workflows", "disable", "browser-safe-interaction")

    assert first.returncode == 0, first.stderr
    assert first.stdout == "Workflow 'browser-safe-interaction' disabled.\n"
    after = json.loads(path.read_text())
    assert after["browser-safe-interaction"] == {**original["browser-safe-interaction"], "enabled": False}
    assert list(after["browser-safe-interaction"]) == list(original["browser-safe-interaction"])
    before_second = path.read_bytes()

    second = cli(folder, "workflows", "disable", "browser-safe-interaction")

    assert second.returncode == 0, second.stderr
    assert second.stdout == "Workflow 'browser-safe-interaction' was already disabled.\n"
    assert path.read_bytes() == before_second
    listed = cli(folder, "workflows", "list")
    assert re.search(r"^  browser-safe-interaction +enforce +.*  \[disabled\]$", listed.stdout, re.M), listed.stdout

    enabled = cli(folder, "workflows", "enable", "browser-safe-interaction")

    assert enabled.returncode == 0, enabled.stderr
    assert enabled.stdout == "Workflow 'browser-safe-interaction' enabled.\n"
    assert json.loads(path.read_text()) == original
    assert "[disabled]" not in cli(folder, "workflows", "list").stdout


@pytest.mark.parametrize("action", ["enable", "disable", "remove"], ids=["enable", "disable", "remove"])
def test_a_misspelled_workflow_name_is_not_found_and_the_right_one_suggested(folder: Path, action: str) -> None:
    path = folder / "workflows.json"
    assert cli(folder, "workflows", "add", "--template", "database").returncode == 0
    before = path.read_bytes()

    result = cli(folder, "workflows", action, "database-safe-qurey")

    assert result.returncode == 2
    assert "'database-safe-qurey' not found" in result.stderr
    assert str(path) in result.stderr
    assert "Did you mean 'database-safe-query'" in result.stderr
    assert path.read_bytes() == before


def test_remove_deletes_one_entry(folder: Path) -> None:
    path = folder / "workflows.json"
    for template in ("database", "github-pr", "graphql"):
        assert cli(folder, "workflows", "add", "--template", template).returncode == 0
    before = json.loads(path.read_text())

    result = cli(folder, "workflows", "remove", "github-pr-review")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Removed workflow 'github-pr-review' from {path}.\n"
    after = json.loads(path.read_text())
    assert after == {k: v for k, v in before.items() if k != "github-pr-review"}
    assert list(after) == ["database-safe-query", "graphql-schema-aware"]


# --- edits keep the rest of the file ----------------------------------------------------------------------------


def test_edits_keep_every_other_entry_the_key_order_and_the_four_space_indentation(folder: Path) -> None:
    path = write_json(folder / "workflows.json", HAND_WRITTEN, indent=4)
    original_text = path.read_text(encoding="utf-8")
    keys = list(HAND_WRITTEN)

    def assert_rest_intact(expected_keys: list[str]) -> dict:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        assert list(data) == expected_keys
        for key in keys:
            assert data[key] == HAND_WRITTEN[key], key
            if isinstance(HAND_WRITTEN[key], dict):
                assert list(data[key]) == list(HAND_WRITTEN[key]), key
        indents = {len(line) - len(line.lstrip(" ")) for line in text.splitlines()}
        assert indents and all(n % 4 == 0 for n in indents), sorted(indents)
        assert text.splitlines()[1].startswith('    "$schema"')
        assert "Vérifier l'état du déploiement — 部署前检查 ✓" in text  # not \u-escaped
        return data

    steps = [
        ("add", "--template", "database"),
        ("disable", "database-safe-query"),
        ("enable", "database-safe-query"),
    ]
    for args in steps:
        result = cli(folder, "workflows", *args)
        assert result.returncode == 0, (args, result.stderr)
        data = assert_rest_intact([*keys, "database-safe-query"])
    assert data["database-safe-query"]["enabled"] is True

    result = cli(folder, "workflows", "remove", "database-safe-query")

    assert result.returncode == 0, result.stderr
    assert assert_rest_intact(keys) == HAND_WRITTEN
    assert path.read_text(encoding="utf-8") == original_text


@pytest.mark.parametrize("indent", [2, 4, "\t"], ids=["two-spaces", "four-spaces", "tab"])
def test_an_edit_keeps_the_indentation_the_file_uses(folder: Path, indent: int | str) -> None:
    path = write_json(folder / "workflows.json", HAND_WRITTEN, indent=indent)

    result = cli(folder, "workflows", "add", "--template", "graphql")

    assert result.returncode == 0, result.stderr
    data = json.loads(path.read_text(encoding="utf-8"))
    assert path.read_text(encoding="utf-8") == json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


# --- malformed files are never rewritten -------------------------------------------------------------------------

MALFORMED = {
    "invalid-json": ('{\n  "db": {"description": "x",}\n}\n', "not valid JSON"),
    "array": ('[\n  {"description": "x"}\n]\n', "must be a JSON object keyed by workflow name"),
    "duplicate-key": (
        '{\n  "db": {"description": "first"},\n  "db": {"description": "second"}\n}\n',
        "db: appears twice in one object",
    ),
}
EDITS = {
    "add": ("add", "--template", "database"),
    "enable": ("enable", "db"),
    "disable": ("disable", "db"),
    "remove": ("remove", "db"),
}


@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
@pytest.mark.parametrize("kind", list(MALFORMED), ids=list(MALFORMED))
def test_an_edit_never_rewrites_a_malformed_workflows_json(folder: Path, kind: str, edit: str) -> None:
    text, problem = MALFORMED[kind]
    path = folder / "workflows.json"
    path.write_text(text, encoding="utf-8")

    result = cli(folder, "workflows", *EDITS[edit])

    assert result.returncode == 2, result.stdout
    assert str(path) in result.stderr
    assert problem in result.stderr
    assert "nothing was changed" in result.stderr
    assert path.read_bytes() == text.encode()
    assert temp_files(folder) == []


@pytest.mark.parametrize(
    ("kind", "error_path", "message"),
    [
        ("invalid-json", "", "not valid JSON"),
        ("array", "", "must be a JSON object keyed by workflow name"),
        ("duplicate-key", "db", "appears twice in one object"),
    ],
    ids=list(MALFORMED),
)
def test_validate_reports_a_malformed_workflows_json(folder: Path, kind: str, error_path: str, message: str) -> None:
    path = folder / "workflows.json"
    path.write_text(MALFORMED[kind][0], encoding="utf-8")

    result = cli(folder, "validate", "--json")

    assert result.returncode == 1, result.stdout
    report = workflows_report(result)
    assert report["valid"] is False and report["path"] == str(path)
    assert any(e["path"] == error_path and message in e["message"] for e in report["errors"]), report["errors"]
    text = cli(folder, "validate")
    assert text.returncode == 1
    assert f"ERROR workflows workflows.json  ({path})" in text.stdout


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("invalid-json", "not valid JSON"),
        ("array", "must be a JSON object keyed by workflow name"),
        ("duplicate-key", "db: appears twice"),
    ],
    ids=list(MALFORMED),
)
def test_workflows_list_reports_a_malformed_file_without_crashing(folder: Path, kind: str, problem: str) -> None:
    (folder / "workflows.json").write_text(MALFORMED[kind][0], encoding="utf-8")

    result = cli(folder, "workflows", "list")

    assert result.returncode == 1, result.stderr  # nothing listed, and the file has problems: not a success
    assert "Traceback" not in result.stderr
    assert "can be applied: every entry has a problem" in result.stdout
    problems = [line for line in result.stderr.splitlines() if line.startswith("problem: ")]
    assert any(problem in line for line in problems), result.stderr


def test_workflows_list_on_invalid_json_says_no_workflow_can_be_applied(folder: Path) -> None:
    path = folder / "workflows.json"
    path.write_text(MALFORMED["invalid-json"][0], encoding="utf-8")

    result = cli(folder, "workflows", "list", "--json")

    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert listed["workflows"] == []
    assert len(listed["problems"]) == 1 and "not valid JSON" in listed["problems"][0]
    assert "No workflow in" in cli(folder, "workflows", "list").stdout


# --- atomic writes ----------------------------------------------------------------------------------------------


def test_edits_leave_no_temp_files_and_keep_the_files_mode(folder: Path) -> None:
    path = write_json(folder / "workflows.json", HAND_WRITTEN)
    path.chmod(0o640)
    edits = [
        ("add", "--template", "database"),
        ("add", "--template", "browser"),
        ("disable", "database-safe-query"),
        ("enable", "database-safe-query"),
        ("remove", "browser-safe-interaction"),
        ("add", "--template", "graphql", "--name", "gql"),
    ]

    for args in edits:
        result = cli(folder, "workflows", *args)
        assert result.returncode == 0, (args, result.stderr)
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, args

    assert sorted(p.name for p in folder.iterdir()) == ["workflows.json"]
    assert temp_files(folder) == []
    assert list(json.loads(path.read_text())) == [*HAND_WRITTEN, "database-safe-query", "gql"]


def test_a_new_workflows_json_gets_the_permissions_of_any_new_file(folder: Path) -> None:
    path = folder / "workflows.json"

    result = cli(folder, "workflows", "add", "--template", "database", umask=0o022)

    assert result.returncode == 0, result.stderr
    assert oct(stat.S_IMODE(path.stat().st_mode)) == oct(0o666 & ~0o022)
    assert temp_files(folder) == []


# --- schema workflows -------------------------------------------------------------------------------------------


@pytest.fixture
def workflows_schema(tmp_path: Path) -> dict:
    result = cli(tmp_path, "schema", "workflows")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_schema_workflows_is_a_draft_2020_12_schema_the_repos_own_file_passes(workflows_schema: dict) -> None:
    assert workflows_schema["$schema"] == DRAFT_2020_12
    jsonschema.Draft202012Validator.check_schema(workflows_schema)
    validator = jsonschema.Draft202012Validator(workflows_schema)
    repo_file = json.loads((REPO / "workflows.json").read_text(encoding="utf-8"))

    assert [e.message for e in validator.iter_errors(repo_file)] == []
    assert [e.message for e in validator.iter_errors(HAND_WRITTEN)] == []


def _one_valid() -> dict:
    return {"db": workflow(["execute_query"], step(1, "list_tables"))}


def _with(change) -> dict:
    data = _one_valid()
    change(data["db"])
    return data


@pytest.mark.parametrize(
    "document",
    [
        _with(lambda w: w.update(when="always")),
        _with(lambda w: w.update(mode="block")),
        _with(lambda w: w["prerequisites"][0].update(step=0)),
        _with(lambda w: w["triggers"].update(keyword=["sql"])),
        _with(lambda w: w.pop("description")),
        _with(lambda w: w.update(prerequisites=[])),
        {"": _one_valid()["db"]},
    ],
    ids=[
        "unknown-workflow-key",
        "mode-block",
        "step-zero",
        "unknown-trigger-key",
        "no-description",
        "no-prerequisites",
        "empty-name",
    ],
)
def test_the_schema_and_validate_both_refuse_a_broken_workflows_json(
    workflows_schema: dict, folder: Path, document: dict
) -> None:
    validator = jsonschema.Draft202012Validator(workflows_schema)
    assert validator.is_valid(_one_valid())

    assert list(validator.iter_errors(document)), document
    write_json(folder / "workflows.json", document)
    assert cli(folder, "validate").returncode == 1


# --- validate: each mistake with the workflow, the field and the fix --------------------------------------------

GOOD = workflow(["execute_query"], step(1, "list_tables"))


@pytest.mark.parametrize(
    ("entries", "paths", "message"),
    [
        (
            {"typo": {**GOOD, "triggers": {"keyword": ["sql"]}}},
            {"typo.triggers.keyword"},
            "unknown key 'keyword'; did you mean 'keywords'?",
        ),
        (
            {"req": workflow(["run"], step(1, "prepare", required="yes"))},
            {"req.prerequisites[0].required"},
            "valid boolean",
        ),
        (
            {"nodesc": {k: v for k, v in GOOD.items() if k != "description"}},
            {"nodesc.description"},
            "missing required key 'description'",
        ),
        (
            {"twice": workflow(["run"], step(1, "a"), step(1, "b"))},
            {"twice.prerequisites"},
            "step 1 is used twice",
        ),
        (
            {"self": workflow(["a"], step(1, "a"))},
            {"self.triggers.tools"},
            "'a' is both a trigger and a prerequisite",
        ),
        (
            {"never": {**GOOD, "triggers": {}}},
            {"never.triggers"},
            "never applies",
        ),
        (
            {"named": {**GOOD, "name": "other"}},
            {"named.name"},
            "'other' differs from the key 'named'",
        ),
        (
            {
                "gate-x": workflow(["x"], step(1, "y"), mode="enforce"),
                "gate-y": workflow(["y"], step(1, "x"), mode="enforce"),
            },
            {"gate-x", "gate-y"},
            "wait on each other",
        ),
    ],
    ids=[
        "unknown-trigger-key",
        "required-yes",
        "missing-description",
        "step-twice",
        "trigger-is-prerequisite",
        "empty-triggers",
        "name-differs-from-key",
        "enforced-gates-wait-on-each-other",
    ],
)
def test_validate_names_the_workflow_the_field_and_the_fix(
    folder: Path, entries: dict, paths: set[str], message: str
) -> None:
    path = write_json(folder / "workflows.json", {"fine": GOOD, **entries})

    result = cli(folder, "validate", "--json")

    assert result.returncode == 1, result.stdout
    assert json.loads(result.stdout)["valid"] is False
    report = workflows_report(result)
    assert report["path"] == str(path) and report["valid"] is False
    assert len(report["errors"]) == 1, report["errors"]
    error = report["errors"][0]
    assert error["path"] in paths
    assert message in error["message"]
    assert not any(e["path"].startswith("fine") for e in report["errors"])


def test_validate_prints_each_workflow_error_under_the_files_error_line(folder: Path) -> None:
    path = write_json(
        folder / "workflows.json",
        {
            "fine": GOOD,
            "typo": {**GOOD, "triggers": {"keyword": ["sql"]}},
            "never": {**GOOD, "triggers": {}},
        },
    )

    result = cli(folder, "validate")

    assert result.returncode == 1
    lines = result.stdout.splitlines()
    at = lines.index(f"ERROR workflows workflows.json  ({path})")
    assert lines[at + 1 : at + 3] == [
        "      typo.triggers.keyword: unknown key 'keyword'; did you mean 'keywords'?",
        "      never.triggers: has no category, tools or keywords, so the workflow never applies; add one",
    ]
    assert lines[-1] == "1 file(s) checked, 1 with errors."


# --- workflows list ---------------------------------------------------------------------------------------------


def test_workflows_list_on_the_repo_shows_the_templates_with_modes_chains_and_approvals() -> None:
    result = cli(REPO, "workflows", "list")

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    modes = {m.group(1): m.group(2) for m in map(LIST_HEADER.match, lines) if m}
    assert modes == {
        "database-safe-query": "enforce",
        "browser-safe-interaction": "enforce",
        "github-pr-review": "warn",
        "graphql-schema-aware": "suggest",
        "dangerous-commands": "enforce",
    }
    at = next(i for i, line in enumerate(lines) if line.startswith("  database-safe-query "))
    assert lines[at + 1] == (
        "    when  category: database; tools: execute_query, select_query; "
        "keywords: query, select, insert, update, delete, sql"
    )
    assert lines[at + 2] == "    first list_databases -> list_tables -> inspect_table -> [get_indexes]"
    assert "    first get_schema -> [filter_types]" in lines
    at = next(i for i, line in enumerate(lines) if line.startswith("  dangerous-commands "))
    assert lines[at].endswith("[disabled]") and "Bash(git push --force:*)" in lines[at + 1]
    assert lines[at + 2] == "    asks  a person, each call (a yes lasts 10 min): Run {{command}}?"


def test_workflows_list_json_on_the_repo_has_the_templates_with_prerequisites_in_step_order() -> None:
    result = cli(REPO, "workflows", "list", "--json")

    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert set(listed) == {"workflows", "problems"}
    assert listed["problems"] == []
    assert [w["name"] for w in listed["workflows"]] == list(TEMPLATE_NAMES.values())
    for w in listed["workflows"]:
        steps = [p["step"] for p in w["prerequisites"]]
        assert steps == list(range(1, len(steps) + 1)), w["name"]
    database = listed["workflows"][0]
    assert [p["tool"] for p in database["prerequisites"]] == [
        "list_databases",
        "list_tables",
        "inspect_table",
        "get_indexes",
    ]
    assert [p["required"] for p in database["prerequisites"]] == [True, True, True, False]
    assert database["path"] == str(REPO / "workflows.json")


def test_workflows_list_puts_prerequisites_in_step_order_whatever_the_files_order(folder: Path) -> None:
    write_json(
        folder / "workflows.json", {"deploy": workflow(["deploy"], step(3, "c"), step(1, "a"), step(2, "b", False))}
    )

    text = cli(folder, "workflows", "list")
    as_json = cli(folder, "workflows", "list", "--json")

    assert text.returncode == 0 and as_json.returncode == 0
    assert "    first a -> [b] -> c" in text.stdout.splitlines()
    prerequisites = json.loads(as_json.stdout)["workflows"][0]["prerequisites"]
    assert [(p["step"], p["tool"]) for p in prerequisites] == [(1, "a"), (2, "b"), (3, "c")]


def test_workflows_list_on_an_empty_folder_says_how_to_add_one(folder: Path) -> None:
    result = cli(folder, "workflows", "list")

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"No workflows in {folder / 'workflows.json'}. Add one: abilities-mcp workflows add --template database\n"
    )
    assert json.loads(cli(folder, "workflows", "list", "--json").stdout) == {"workflows": [], "problems": []}


def test_workflows_list_does_not_call_a_listed_workflow_not_applied(folder: Path) -> None:
    """Two enforced workflows that wait on each other: either they are left out, or the problem must not claim so."""
    write_json(
        folder / "workflows.json",
        {"gate-x": workflow(["x"], step(1, "y")), "gate-y": workflow(["y"], step(1, "x"))},
    )

    listed = json.loads(cli(folder, "workflows", "list", "--json").stdout)

    assert any("wait on each other" in p for p in listed["problems"]), listed["problems"]
    applied = {w["name"] for w in listed["workflows"]}
    contradictions = [
        p for p in listed["problems"] if "not applied" in p and any(f": {name}:" in p for name in applied)
    ]
    assert contradictions == [], f"listed as applied: {sorted(applied)}"
