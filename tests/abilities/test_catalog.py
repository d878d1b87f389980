"""The project's abilities as a whole (DESIGN §2 and §3): discovery, scopes, names, project-wide checks, reloads."""

import os
import textwrap
from pathlib import Path

import pytest
from mcp import Client

from abilities_mcp.state.project import derive_name

SOUND = "description: {description}\nsteps:\n  - {{id: a, type: script, run: echo {word}}}\n"


def put(path: Path, text: str | None = None, *, description: str = "d", word: str = "hi") -> Path:
    """Write an ability file (a sound one unless text is given), creating its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text) if text is not None else SOUND.format(description=description, word=word))
    return path


def user_abilities(root: Path) -> Path:
    """$XDG_CONFIG_HOME/abilities-mcp/abilities for the test's isolated home (see conftest)."""
    return root.parent / "home" / ".config" / "abilities-mcp" / "abilities"


async def listed(client: Client) -> dict[str, dict]:
    result = await client.call_tool("ability_list", {})
    assert not result.is_error, result.content
    return {a["name"]: a for a in result.structured_content["abilities"]}


async def validated(client: Client) -> dict:
    result = await client.call_tool("ability_validate", {})
    assert not result.is_error, result.content
    return result.structured_content


async def errors_of(client: Client, path: Path) -> list[dict]:
    [entry] = [f for f in (await validated(client))["files"] if f["path"] == str(path)]
    return entry["errors"]


def assert_error(errors: list[dict], path: str, *fragments: str) -> None:
    at_path = [e["message"] for e in errors if e["path"] == path]
    assert at_path, f"no error at {path!r}; got {errors}"
    assert any(all(f in m for f in fragments) for m in at_path), f"{fragments} not in {at_path}"


# --- discovery -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "name"),
    [
        ("test.yaml", "test"),
        ("lint.yml", "lint"),
        ("deploy/production/ability.yaml", "deploy/production"),
        ("deploy/rollback.yaml", "deploy/rollback"),
        ("deploy/rollback.yml", "deploy/rollback"),
        ("ability.yaml", "ability"),
        ("a/b/c/leaf.yaml", "a/b/c/leaf"),
    ],
    ids=[
        "flat-yaml",
        "flat-yml",
        "nested-ability-file",
        "nested-file",
        "nested-yml",
        "top-level-ability-file",
        "three-folders-deep",
    ],
)
async def test_an_ability_file_is_listed_under_the_name_its_path_gives(client: Client, root, relative, name):
    put(root / "abilities" / relative)
    abilities = await listed(client)
    assert list(abilities) == [name]
    assert abilities[name]["path"] == str(root / "abilities" / relative)
    assert (abilities[name]["source"], abilities[name]["valid"]) == ("project", True)
    assert derive_name(Path(relative)) == name


@pytest.mark.parametrize(
    "relative",
    [
        "a/b/c/d/deep.yaml",
        ".hidden/x.yaml",
        "node_modules/pkg/x.yaml",
        ".git/x.yaml",
        "__pycache__/x.yaml",
        ".x.yaml",
        "notes.md",
        "x.json",
        "x.yaml.bak",
    ],
    ids=[
        "four-folders-deep",
        "hidden-folder",
        "node-modules",
        "git",
        "pycache",
        "hidden-file",
        "markdown",
        "json",
        "backup",
    ],
)
async def test_files_outside_the_searched_places_are_not_abilities(client: Client, root, relative) -> None:
    put(root / "abilities" / relative)
    assert await listed(client) == {}
    assert [f for f in (await validated(client))["files"] if f["kind"] == "ability"] == []


async def test_an_explicit_name_wins_over_the_path(client: Client, root) -> None:
    put(
        root / "abilities" / "misc" / "file.yaml",
        "name: release/cut\ndescription: d\nsteps: [{id: a, type: script, run: x}]\n",
    )
    assert list(await listed(client)) == ["release/cut"]


async def test_abilities_in_opencode_folder_are_project_abilities(client: Client, root) -> None:
    path = put(root / ".opencode" / "abilities" / "oc.yaml")
    abilities = await listed(client)
    assert (abilities["oc"]["source"], abilities["oc"]["path"]) == ("project", str(path))


@pytest.mark.parametrize(
    "folder",
    [Path(".config/abilities-mcp/abilities"), Path(".config/opencode/abilities")],
    ids=["xdg-config", "opencode-config"],
)
async def test_abilities_in_the_users_config_are_user_abilities(client: Client, root, folder) -> None:
    path = put(root.parent / "home" / folder / "mine.yaml")
    abilities = await listed(client)
    assert (abilities["mine"]["source"], abilities["mine"]["path"], abilities["mine"]["valid"]) == (
        "user",
        str(path),
        True,
    )


async def test_a_project_ability_beats_a_user_ability_of_the_same_name(client: Client, root) -> None:
    put(user_abilities(root) / "deploy.yaml", description="user version")
    project_file = put(root / "abilities" / "deploy.yaml", description="project version")
    abilities = await listed(client)
    assert (abilities["deploy"]["source"], abilities["deploy"]["path"]) == ("project", str(project_file))
    assert abilities["deploy"]["description"] == "project version"
    assert abilities["deploy"]["valid"] is True
    result = await client.call_tool("ability_run", {"name": "deploy"})
    assert result.structured_content["steps"][0]["output"] == "hi"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("abilities/x.yaml", "abilities/x.yml"),
        ("abilities/deploy/production.yaml", "abilities/deploy/production/ability.yaml"),
        ("abilities/x.yaml", ".opencode/abilities/x.yaml"),
    ],
    ids=["yaml-and-yml", "file-and-folder", "abilities-and-opencode"],
)
async def test_two_abilities_of_one_name_in_one_scope_are_each_an_error_naming_both(
    client: Client, root, first, second
) -> None:
    a, b = put(root / first), put(root / second)
    for path in (a, b):
        assert_error(
            await errors_of(client, path), "name", "is defined twice in one scope", str(a), str(b), "rename one"
        )
    [entry] = (await listed(client)).values()
    assert entry["valid"] is False


async def test_an_explicit_name_that_repeats_another_files_name_is_a_duplicate(client: Client, root) -> None:
    taken = put(root / "abilities" / "build.yaml")
    claimer = put(
        root / "abilities" / "other.yaml", "name: build\ndescription: d\nsteps: [{id: a, type: script, run: x}]\n"
    )
    assert_error(await errors_of(client, claimer), "name", "ability name 'build' is defined twice", str(taken))


async def test_the_same_name_in_the_project_and_the_user_scope_is_not_a_duplicate(client: Client, root) -> None:
    put(user_abilities(root) / "x.yaml")
    put(root / "abilities" / "x.yaml")
    report = await validated(client)
    assert report["valid"] is True
    assert len(report["files"]) == 2


# --- broken files and reloads --------------------------------------------------------------------------------


async def test_a_broken_file_never_hides_the_others(client: Client, root) -> None:
    put(root / "abilities" / "good.yaml", word="still-here")
    put(root / "abilities" / "bad-yaml.yaml", "description: d\nsteps:\n  - id: a\n   type: script\n")
    put(root / "abilities" / "bad-shape.yaml", "description: d\nsteps: [{id: a, type: scirpt, run: x}]\n")
    put(root / "abilities" / "bad-graph.yaml", "description: d\nsteps: [{id: a, type: script, run: x, needs: a}]\n")
    put(root / "abilities" / "empty.yaml", "")
    abilities = await listed(client)
    assert {n: a["valid"] for n, a in abilities.items()} == {
        "good": True,
        "bad-yaml": False,
        "bad-shape": False,
        "bad-graph": False,
        "empty": False,
    }
    report = await validated(client)
    assert report["valid"] is False
    assert {Path(f["path"]).name for f in report["files"] if not f["valid"]} == {
        "bad-yaml.yaml",
        "bad-shape.yaml",
        "bad-graph.yaml",
        "empty.yaml",
    }
    result = await client.call_tool("ability_run", {"name": "good"})
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "completed"
    assert result.structured_content["steps"][0]["output"] == "still-here"


async def test_a_broken_ability_cannot_be_run_and_the_refusal_names_file_field_and_fix(client: Client, root) -> None:
    path = put(root / "abilities" / "bad.yaml", "description: d\nsteps: [{id: a, type: script, run: x, need: b}]\n")
    result = await client.call_tool("ability_run", {"name": "bad"})
    assert result.is_error
    assert f"{path}: steps[0].need: unknown key 'need'; did you mean 'needs'?" in result.content[0].text


async def test_a_file_changed_on_disk_is_picked_up_by_the_next_list(client: Client, root) -> None:
    path = put(root / "abilities" / "live.yaml", description="first")
    assert (await listed(client))["live"]["description"] == "first"
    put(path, description="second, and longer")
    assert (await listed(client))["live"]["description"] == "second, and longer"
    put(path, "description: broken now\nsteps: [{id: a, type: nope, run: x}]\n")
    assert (await listed(client))["live"]["valid"] is False
    put(path, description="fixed")
    assert (await listed(client))["live"]["valid"] is True


async def test_a_file_replaced_with_the_same_size_and_mtime_is_still_picked_up(client: Client, root) -> None:
    # `cp -p`, `rsync -t` and tar keep the source's mtime; a same-size edit must not be hidden by the cache.
    path = put(root / "abilities" / "same.yaml", word="aaaa")
    stat = path.stat()
    assert (await listed(client))["same"]["valid"] is True
    put(path, word="bbbb")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = await client.call_tool("ability_run", {"name": "same"})
    assert result.structured_content["steps"][0]["output"] == "bbbb"


async def test_files_added_and_removed_on_disk_are_picked_up_by_the_next_list(client: Client, root) -> None:
    first = put(root / "abilities" / "one.yaml")
    assert list(await listed(client)) == ["one"]
    put(root / "abilities" / "two.yaml")
    assert list(await listed(client)) == ["one", "two"]
    first.unlink()
    assert list(await listed(client)) == ["two"]


async def test_workflows_json_that_is_not_json_is_reported_by_validate(client: Client, root) -> None:
    put(root / "abilities" / "good.yaml")
    wf = root / "workflows.json"
    wf.write_text('{"deploy": {"steps": [}')
    report = await validated(client)
    assert report["valid"] is False
    [entry] = [f for f in report["files"] if f["kind"] == "workflows"]
    assert (entry["path"], entry["valid"]) == (str(wf), False)
    assert_error(entry["errors"], "", "not valid JSON", "line 1", "fix the syntax there")


@pytest.mark.parametrize(
    ("text", "valid"),
    [("[1, 2]", False), ("{}", True)],
    ids=["list-is-not-an-object", "object"],
)
async def test_workflows_json_must_be_a_json_object(client: Client, root, text, valid) -> None:
    (root / "workflows.json").write_text(text)
    [entry] = [f for f in (await validated(client))["files"] if f["kind"] == "workflows"]
    assert entry["valid"] is valid
    if not valid:
        assert_error(entry["errors"], "", "must be a JSON object keyed by workflow name")


async def test_validate_with_a_name_reports_only_that_ability(client: Client, root) -> None:
    put(root / "abilities" / "good.yaml")
    bad = put(root / "abilities" / "bad.yaml", "description: d\nsteps: [{id: a, type: script, run: x, need: b}]\n")
    result = await client.call_tool("ability_validate", {"name": "bad"})
    report = result.structured_content
    assert report["valid"] is False
    assert [f["path"] for f in report["files"]] == [str(bad)]


async def test_validate_with_an_unknown_name_is_refused_with_a_did_you_mean(client: Client, root) -> None:
    put(root / "abilities" / "deploy.yaml")
    result = await client.call_tool("ability_validate", {"name": "deplyo"})
    assert result.is_error
    assert "Unknown ability or skill 'deplyo'. Did you mean 'deploy'?" in result.content[0].text


# --- project-wide checks: workflow targets, recursion, nesting, skills ----------------------------------------


def workflow_step(target: str) -> str:
    return f"description: d\nsteps:\n  - {{id: call, type: workflow, workflow: {target}}}\n"


async def test_a_workflow_step_naming_an_unknown_ability_is_an_error_with_a_did_you_mean(client: Client, root):
    put(root / "abilities" / "setup-environment.yaml")
    caller = put(root / "abilities" / "caller.yaml", workflow_step("setup-enviroment"))
    assert_error(
        await errors_of(client, caller),
        "steps[0].workflow",
        "unknown ability 'setup-enviroment'; did you mean 'setup-environment'?",
    )


async def test_a_workflow_step_naming_nothing_close_says_where_to_add_it(client: Client, root) -> None:
    caller = put(root / "abilities" / "caller.yaml", workflow_step("zzz"))
    assert_error(await errors_of(client, caller), "steps[0].workflow", "unknown ability 'zzz'; add it under abilities/")


async def test_a_workflow_step_may_name_a_user_ability_or_a_nested_one(client: Client, root) -> None:
    put(user_abilities(root) / "shared.yaml")
    put(root / "abilities" / "deploy" / "production" / "ability.yaml")
    put(
        root / "abilities" / "caller.yaml",
        """
        description: d
        steps:
          - {id: one, type: workflow, workflow: shared}
          - {id: two, type: workflow, workflow: deploy/production}
    """,
    )
    assert (await validated(client))["valid"] is True


async def test_abilities_that_run_each_other_are_each_an_error_showing_the_loop(client: Client, root) -> None:
    a = put(root / "abilities" / "a.yaml", workflow_step("b"))
    b = put(root / "abilities" / "b.yaml", workflow_step("a"))
    assert_error(await errors_of(client, a), "steps", "abilities run each other in a loop a → b → a; break the loop")
    assert_error(await errors_of(client, b), "steps", "loop b → a → b")


async def test_an_ability_that_runs_itself_is_an_error(client: Client, root) -> None:
    me = put(root / "abilities" / "me.yaml", workflow_step("me"))
    assert_error(await errors_of(client, me), "steps", "loop me → me")


async def test_an_ability_that_leads_into_a_loop_is_an_error_too(client: Client, root) -> None:
    entry = put(root / "abilities" / "entry.yaml", workflow_step("a"))
    put(root / "abilities" / "a.yaml", workflow_step("b"))
    put(root / "abilities" / "b.yaml", workflow_step("a"))
    assert_error(await errors_of(client, entry), "steps", "entry → a → b → a")


def chain(root: Path, length: int) -> list[Path]:
    """n1 runs n2 runs ... runs n<length>, which runs a script."""
    paths = [put(root / "abilities" / f"n{i}.yaml", workflow_step(f"n{i + 1}")) for i in range(1, length)]
    return paths + [put(root / "abilities" / f"n{length}.yaml")]


async def test_workflow_steps_nested_five_deep_are_allowed(client: Client, root) -> None:
    chain(root, 6)
    assert (await validated(client))["valid"] is True


async def test_workflow_steps_nested_deeper_than_five_are_an_error_at_the_top(client: Client, root) -> None:
    paths = chain(root, 7)
    assert_error(
        await errors_of(client, paths[0]),
        "steps",
        "workflow steps nest 6 deep",
        "n1 → n2 → n3 → n4 → n5 → n6 → n7",
        "the limit is 5",
    )
    assert await errors_of(client, paths[1]) == []


def skill_step(skill: str) -> str:
    return f"description: d\nsteps:\n  - {{id: docs, type: skill, skill: {skill}}}\n"


def make_skill(folder: Path, name: str) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: test skill\n---\nDo it.\n")


async def test_a_skill_step_naming_an_unknown_skill_is_an_error_with_a_did_you_mean(client: Client, root) -> None:
    make_skill(root / "skills", "generate-docs")
    path = put(root / "abilities" / "docs.yaml", skill_step("generate-doc"))
    assert_error(
        await errors_of(client, path), "steps[0].skill", "unknown skill 'generate-doc'; did you mean 'generate-docs'?"
    )


async def test_a_skill_step_naming_nothing_close_says_how_to_add_the_skill(client: Client, root) -> None:
    path = put(root / "abilities" / "docs.yaml", skill_step("generate-docs"))
    assert_error(
        await errors_of(client, path), "steps[0].skill", "unknown skill 'generate-docs'; add skills/<name>/SKILL.md"
    )


@pytest.mark.parametrize(
    "folder",
    ["skills", ".agents/skills", ".agent/skills", ".claude/skills", ".opencode/skills", "~/.claude/skills"],
    ids=["skills", "agents", "agent", "claude", "opencode", "user-claude"],
)
async def test_a_skill_in_any_skill_folder_satisfies_a_skill_step(client: Client, root, folder) -> None:
    base = root.parent / "home" / folder[2:] if folder.startswith("~/") else root / folder
    make_skill(base, "generate-docs")
    put(root / "abilities" / "docs.yaml", skill_step("generate-docs"))
    assert (await validated(client))["valid"] is True


async def test_a_folder_without_skill_md_is_not_a_skill(client: Client, root) -> None:
    (root / "skills" / "generate-docs").mkdir(parents=True)
    (root / "skills" / "generate-docs" / "README.md").write_text("not a skill")
    path = put(root / "abilities" / "docs.yaml", skill_step("generate-docs"))
    assert_error(await errors_of(client, path), "steps[0].skill", "unknown skill 'generate-docs'")


async def test_a_skill_or_ability_added_later_clears_the_error_without_a_restart(client: Client, root) -> None:
    docs = put(root / "abilities" / "docs.yaml", skill_step("generate-docs"))
    caller = put(root / "abilities" / "caller.yaml", workflow_step("setup"))
    assert await errors_of(client, docs) and await errors_of(client, caller)
    make_skill(root / "skills", "generate-docs")
    put(root / "abilities" / "setup.yaml")
    assert (await validated(client))["valid"] is True
