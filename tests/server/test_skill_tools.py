"""The skill tools and skill:// resources through the real server and an in-memory client (DESIGN §5).

skill_list / skill_route show names and descriptions, skill_load hands out one body with its file list,
skill_read and the resources give one file at a time and never anything outside the skill's folder.
Routing quality lives in test_routing.py; here only skill_route's contract.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import EmbeddedResource, TextContent

from abilities_mcp.server.app import create_server
from abilities_mcp.skills.skillset import MAX_READ_CHARS
from abilities_mcp.state.project import SKILL_FOLDERS, Project
from skill_shapes import BUNDLED, LONG_DESCRIPTION, make_skills

# What the symlinks in pdf-tools lead to; no answer may ever contain it.
SECRET = "not for skills"
# The byte limit clients put on server instructions (DESIGN: "Clients cut server instructions around 2 KB").
MAX_INSTRUCTIONS_BYTES = 2048
LOADABLE = {
    "pdf-tools": "pdf-tools",
    "template-skill": "template",
    "api-reference": "api-reference",
    "colon-value": "colon-value",
    "deploy-notes": "deploy-notes",
    "Bad--Name-": "Bad--Name",
}
PDF_BODY = (
    "# PDF tools\n\n1. Run `scripts/extract.py FILE` to get the text.\n"
    "2. For forms read [the forms guide](references/forms.md)."
)
PDF_FILES = ["assets/logo.png", "references/deep/nested/spec.md", "references/forms.md", "scripts/extract.py"]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


# --- helpers ----------------------------------------------------------------------------------------------------


@pytest.fixture
def skills_dir(root: Path, tmp_path: Path) -> Path:
    """Every real-world shape from skill_shapes under ROOT/skills; pdf-tools' symlinks lead to tmp/outside."""
    make_skills(root / "skills", tmp_path / "outside")
    return root / "skills"


@pytest.fixture(params=["auto", "legacy"], ids=["2026", "legacy"])
async def any_client(request: pytest.FixtureRequest, project: Project) -> AsyncIterator[Client]:
    """The same server through the default (2026) client and a legacy initialize-handshake client."""
    async with Client(create_server(project), mode=request.param) as c:
        yield c


def write_skill(folder: Path, name: str, description: str, body: str = "", extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body or f'Body of {name}.'}\n"
    (folder / "SKILL.md").write_text(text)
    return folder


async def call(client: Client, tool: str, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    """The structured result of a tool call that must succeed."""
    result = await client.call_tool(tool, arguments, meta=meta)
    assert not result.is_error, result.content
    return result.structured_content


async def refusal(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool call that must fail as a tool error (isError)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


async def listed(client: Client) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in (await call(client, "skill_list"))["skills"]}


# --- skill_list -------------------------------------------------------------------------------------------------


async def test_skill_list_lists_every_loadable_shape_with_its_location_and_skill_md_path(
    skills_dir: Path, project: Project, any_client: Client
) -> None:
    write_skill(project.home / ".agents" / "skills" / "user-notes", "user-notes", "Keep personal notes.")

    skills = await listed(any_client)

    assert set(skills) == {*LOADABLE, "user-notes"}
    for name, folder in LOADABLE.items():
        assert skills[name]["location"] == "project"
        assert skills[name]["path"] == str(skills_dir / folder / "SKILL.md")
    assert skills["user-notes"]["location"] == "user"
    assert skills["user-notes"]["path"] == str(project.home / ".agents" / "skills" / "user-notes" / "SKILL.md")
    assert skills["pdf-tools"]["description"].startswith("Extract text and tables from PDF files")
    assert skills["pdf-tools"]["warnings"] == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("template-skill", "Directory name 'template' must match skill name 'template-skill'"),
        ("api-reference", f"Description exceeds 1024 character limit ({len(LONG_DESCRIPTION)} chars)"),
        ("colon-value", "description: a value containing ': ' must be quoted in YAML; read it as quoted text"),
        ("deploy-notes", "Unexpected fields in frontmatter: argument-hint, disable-model-invocation."),
    ],
    ids=["name-folder-mismatch", "description-over-1024", "colon-quoted-fallback", "unexpected-fields"],
)
async def test_skill_list_warns_about_what_loading_forgave(
    skills_dir: Path, client: Client, name: str, expected: str
) -> None:
    warnings = (await listed(client))[name]["warnings"]

    assert any(expected in w for w in warnings), warnings


async def test_a_skill_md_that_does_not_parse_or_has_no_description_is_not_listed_or_loadable(
    skills_dir: Path, client: Client
) -> None:
    skills = await listed(client)

    assert "broken-yaml" not in skills and "no-description" not in skills
    for name in ("broken-yaml", "no-description"):
        assert f"skill {name!r} did not load" in await refusal(client, "skill_load", name=name)


async def test_a_project_skill_hides_a_user_skill_of_the_same_name_and_says_so(
    skills_dir: Path, project: Project, client: Client
) -> None:
    user_copy = write_skill(project.home / ".claude" / "skills" / "pdf-tools", "pdf-tools", "The user's copy.")

    found = await call(client, "skill_list")
    pdf = next(s for s in found["skills"] if s["name"] == "pdf-tools")

    assert pdf["location"] == "project" and pdf["path"] == str(skills_dir / "pdf-tools" / "SKILL.md")
    assert [s["name"] for s in found["skills"]].count("pdf-tools") == 1
    collision = [w for w in pdf["warnings"] if "hides the user one" in w]
    assert collision and str(user_copy) in collision[0]
    assert collision[0] in found["notes"]


@pytest.mark.parametrize("scope", ["project", "user"])
@pytest.mark.parametrize("folder", SKILL_FOLDERS)
async def test_skills_are_found_in_every_design_folder_of_the_project_and_the_home(
    project: Project, client: Client, folder: str, scope: str
) -> None:
    base = project.root if scope == "project" else project.home
    write_skill(base / folder / "found-here", "found-here", "A skill in one of the standard folders.")

    skills = await listed(client)

    assert skills["found-here"]["location"] == scope
    assert skills["found-here"]["path"] == str(base / folder / "found-here" / "SKILL.md")


async def test_a_skill_nested_one_folder_deeper_is_found(root: Path, client: Client) -> None:
    write_skill(root / "skills" / "group" / "pdf", "pdf", "Work with PDF files.")

    skills = await listed(client)

    assert skills["pdf"]["path"] == str(root / "skills" / "group" / "pdf" / "SKILL.md")
    assert (await call(client, "skill_load", name="pdf"))["directory"] == str(root / "skills" / "group" / "pdf")


@pytest.mark.parametrize("skipped", [".git", "node_modules"])
async def test_skills_inside_git_and_node_modules_folders_are_not_found(
    root: Path, client: Client, skipped: str
) -> None:
    write_skill(root / "skills" / skipped / "vendored", "vendored", "Shipped inside a dependency.")
    write_skill(root / "skills" / "real", "real", "A skill of the project.")

    assert set(await listed(client)) == {"real"}


async def test_a_symlinked_skill_folder_leading_into_home_is_followed(
    root: Path, project: Project, client: Client
) -> None:
    target = write_skill(project.home / "src" / "my-skills" / "linked-in", "linked-in", "Lives in my home.")
    (target / "notes.md").write_text("kept with the skill\n")
    (root / "skills").mkdir()
    (root / "skills" / "linked-in").symlink_to(target, target_is_directory=True)

    skills = await listed(client)
    loaded = await call(client, "skill_load", name="linked-in")
    read = await call(client, "skill_read", name="linked-in", path="notes.md")

    assert skills["linked-in"]["location"] == "project"
    assert skills["linked-in"]["path"] == str(root / "skills" / "linked-in" / "SKILL.md")
    assert loaded["content"] == "Body of linked-in." and loaded["resources"] == ["notes.md"]
    assert read["text"] == "kept with the skill\n"


async def test_a_symlinked_skill_folder_leading_outside_root_and_home_is_skipped_with_a_note(
    root: Path, tmp_path: Path, client: Client
) -> None:
    target = write_skill(tmp_path / "elsewhere" / "linked-out", "linked-out", "Lives somewhere else.")
    (root / "skills").mkdir()
    (root / "skills" / "linked-out").symlink_to(target, target_is_directory=True)

    found = await call(client, "skill_list")

    assert found["skills"] == []
    assert any(str(root / "skills" / "linked-out") in n and "outside" in n for n in found["notes"]), found["notes"]
    assert "Unknown skill 'linked-out'" in await refusal(client, "skill_load", name="linked-out")


async def test_skill_md_files_changed_on_disk_are_picked_up_without_a_restart(root: Path, client: Client) -> None:
    folder = write_skill(root / "skills" / "notes", "notes", "First version.", body="Old steps.")
    before = await listed(client)
    await call(client, "skill_load", name="notes")

    write_skill(folder, "notes", "Second, longer version of the description.", body="New steps.")
    write_skill(root / "skills" / "added", "added", "Appeared while the server ran.")
    after = await listed(client)
    loaded = await call(client, "skill_load", name="notes")
    shutil.rmtree(root / "skills" / "added")
    removed = await listed(client)

    assert before["notes"]["description"] == "First version." and "added" not in before
    assert after["notes"]["description"] == "Second, longer version of the description." and "added" in after
    assert loaded["content"] == "New steps."
    assert set(removed) == {"notes"}


# --- skill_route (the contract; ranking quality is test_routing.py's) ------------------------------------------


@pytest.fixture
def distinct_skills(root: Path) -> Path:
    base = root / "skills"
    write_skill(base / "pdf-tools", "pdf-tools", "Extract text and tables from PDF files and fill PDF forms.")
    write_skill(base / "slack-gif", "slack-gif", "Create animated GIFs sized for Slack messages and emoji.")
    write_skill(base / "release-notes", "release-notes", "Write release notes from the git history of a version.")
    write_skill(
        base / "deploy-notes",
        "deploy-notes",
        "Write deployment notes for the ops channel after a production deploy.",
        extra="disable-model-invocation: true\n",
    )
    return base


async def test_skill_route_returns_the_fitting_skill_with_its_description_a_score_and_reasons(
    distinct_skills: Path, client: Client
) -> None:
    matches = (await call(client, "skill_route", task="extract the tables from this PDF"))["matches"]

    assert matches, "a task in pdf-tools' own words must route to it, however few skills the project has"
    assert matches[0]["name"] == "pdf-tools"
    assert set(matches[0]) == {"name", "description", "score", "reasons"}
    assert matches[0]["description"] == "Extract text and tables from PDF files and fill PDF forms."
    assert 0 < matches[0]["score"] <= 1
    assert matches[0]["reasons"] and all(isinstance(r, str) and r for r in matches[0]["reasons"])


async def test_skill_route_finds_the_only_skill_of_a_one_skill_project(root: Path, client: Client) -> None:
    write_skill(
        root / "skills" / "pdf-tools", "pdf-tools", "Extract text and tables from PDF files and fill PDF forms."
    )

    fitting = (await call(client, "skill_route", task="extract the tables from this PDF"))["matches"]
    unrelated = (await call(client, "skill_route", task="what will the weather be in Lisbon tomorrow"))["matches"]

    assert [m["name"] for m in fitting] == ["pdf-tools"]
    assert unrelated == []


@pytest.mark.parametrize(("limit", "expected"), [(None, 3), (1, 1), (2, 2), (20, 3)], ids=["default", "1", "2", "20"])
async def test_skill_route_returns_at_most_limit_matches_best_first(
    distinct_skills: Path, client: Client, limit: int | None, expected: int
) -> None:
    task = "use pdf-tools, slack-gif and release-notes, then write release notes for the PDF forms"
    arguments = {"task": task} | ({} if limit is None else {"limit": limit})

    matches = (await call(client, "skill_route", **arguments))["matches"]

    assert len(matches) == expected
    assert [m["score"] for m in matches] == sorted((m["score"] for m in matches), reverse=True)


@pytest.mark.parametrize("limit", [0, -1, 21], ids=["zero", "negative", "over-20"])
async def test_skill_route_refuses_a_limit_outside_1_to_20(distinct_skills: Path, client: Client, limit: int) -> None:
    assert "limit" in await refusal(client, "skill_route", task="use pdf-tools", limit=limit)


async def test_skill_route_returns_nothing_for_a_task_no_skill_fits(distinct_skills: Path, client: Client) -> None:
    assert await call(client, "skill_route", task="what will the weather be in Lisbon tomorrow") == {"matches": []}


async def test_skill_route_puts_a_skill_named_in_the_task_first(distinct_skills: Path, client: Client) -> None:
    pdf_words = "extract text and tables from PDF files and fill PDF forms"

    unnamed = (await call(client, "skill_route", task=pdf_words))["matches"]
    named = (await call(client, "skill_route", task=f"use release-notes: {pdf_words}"))["matches"]

    assert unnamed[0]["name"] == "pdf-tools"
    assert [m["name"] for m in named][:2] == ["release-notes", "pdf-tools"]


async def test_skill_route_never_offers_a_skill_with_disable_model_invocation(
    distinct_skills: Path, client: Client
) -> None:
    task = "use deploy-notes to write deployment notes for the ops channel after the production deploy"

    routed = [m["name"] for m in (await call(client, "skill_route", task=task))["matches"]]

    assert "deploy-notes" not in routed
    assert "deploy-notes" in await listed(client)  # still listed and loadable: the person invokes it
    assert (await call(client, "skill_load", name="deploy-notes"))["name"] == "deploy-notes"


# --- skill_load -------------------------------------------------------------------------------------------------


async def test_skill_load_returns_the_body_without_frontmatter_the_folder_and_the_bundled_files(
    skills_dir: Path, client: Client
) -> None:
    loaded = await call(client, "skill_load", name="pdf-tools")

    assert loaded["name"] == "pdf-tools"
    assert loaded["content"] == PDF_BODY
    assert loaded["directory"] == str(skills_dir / "pdf-tools")
    # Sorted, relative, without SKILL.md and without the symlinks that lead out (escape/, secret-link.txt).
    assert loaded["resources"] == PDF_FILES
    assert loaded["already_loaded"] is False


async def test_skill_load_text_is_the_skill_content_wrapper_and_the_results_text(
    skills_dir: Path, client: Client
) -> None:
    expected = "\n".join(
        [
            '<skill_content name="pdf-tools">',
            PDF_BODY,
            "",
            f"Skill directory: {skills_dir / 'pdf-tools'}",
            "Relative paths in this skill are relative to the skill directory.",
            "",
            "<skill_resources>",
            *(f"  <file>{f}</file>" for f in PDF_FILES),
            "</skill_resources>",
            "</skill_content>",
        ]
    )

    result = await client.call_tool("skill_load", {"name": "pdf-tools"})

    assert result.structured_content["text"] == expected
    assert [c.text for c in result.content if isinstance(c, TextContent)] == [expected]


async def test_loading_a_skill_again_in_the_same_session_says_already_loaded_and_returns_the_body(
    skills_dir: Path, client: Client
) -> None:
    first = await call(client, "skill_load", name="pdf-tools")
    again = await client.call_tool("skill_load", {"name": "pdf-tools"})

    assert first["already_loaded"] is False
    assert again.structured_content["already_loaded"] is True
    assert again.structured_content["content"] == PDF_BODY
    assert "already loaded" in again.structured_content["text"]
    assert first["text"] in again.structured_content["text"]
    assert again.content[0].text == again.structured_content["text"]


async def test_loads_are_remembered_per_session(skills_dir: Path, client: Client) -> None:
    a_first = await call(client, "skill_load", meta={"sessionID": "A"}, name="pdf-tools")
    b_first = await call(client, "skill_load", meta={"sessionID": "B"}, name="pdf-tools")
    a_again = await call(client, "skill_load", meta={"sessionID": "A"}, name="pdf-tools")
    a_other = await call(client, "skill_load", meta={"sessionID": "A"}, name="colon-value")

    assert [a_first["already_loaded"], b_first["already_loaded"], a_again["already_loaded"]] == [False, False, True]
    assert a_other["already_loaded"] is False


async def test_a_second_connection_is_a_new_session_for_loads(skills_dir: Path, project: Project) -> None:
    server = create_server(project)
    async with Client(server) as first, Client(server) as second:
        await call(first, "skill_load", name="pdf-tools")
        other = await call(second, "skill_load", name="pdf-tools")
        again = await call(first, "skill_load", name="pdf-tools")

    assert other["already_loaded"] is False and again["already_loaded"] is True


async def test_loading_an_unknown_skill_is_a_tool_error_with_a_did_you_mean(skills_dir: Path, client: Client) -> None:
    message = await refusal(client, "skill_load", name="pdf-tool")

    assert "Unknown skill 'pdf-tool'" in message and "Did you mean 'pdf-tools'?" in message


# --- skill_read -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "mime"),
    [
        ("references/forms.md", "text/markdown"),
        ("references/deep/nested/spec.md", "text/markdown"),
        ("scripts/extract.py", "text/x-python"),
    ],
    ids=["text", "nested", "script"],
)
async def test_skill_read_returns_a_text_file_of_the_skill(
    skills_dir: Path, any_client: Client, path: str, mime: str
) -> None:
    result = await any_client.call_tool("skill_read", {"name": "pdf-tools", "path": path})

    on_disk = BUNDLED[f"pdf-tools/{path}"]
    assert not result.is_error, result.content
    assert result.structured_content == {
        "name": "pdf-tools",
        "path": path,
        "uri": f"skill://pdf-tools/{path}",
        "mime_type": mime,
        "size": len(on_disk.encode()),
        "text": on_disk,
        "truncated": False,
    }
    assert [c.text for c in result.content if isinstance(c, TextContent)] == [on_disk]


async def test_skill_read_returns_a_binary_file_as_an_embedded_blob(skills_dir: Path, any_client: Client) -> None:
    result = await any_client.call_tool("skill_read", {"name": "pdf-tools", "path": "assets/logo.png"})

    assert not result.is_error, result.content
    assert result.structured_content["text"] is None
    assert result.structured_content["mime_type"] == "image/png"
    assert result.structured_content["size"] == len(PNG)
    [block] = result.content
    assert isinstance(block, EmbeddedResource)
    assert block.resource.mime_type == "image/png"
    assert str(block.resource.uri) == "skill://pdf-tools/assets/logo.png"
    assert base64.b64decode(block.resource.blob) == PNG


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../template/SKILL.md", "climbs out with '..'"),
        ("references/../../template/SKILL.md", "climbs out with '..'"),
        ("/etc/passwd", "is absolute"),
        ("escape/secret.txt", "links outside the folder"),
        ("secret-link.txt", "links outside the folder"),
        ("~/.ssh/id_rsa", "is absolute"),
        ("C:\\Windows\\win.ini", "is absolute"),
        ("scripts/%2e%2e/%2e%2e/x", "has no file"),
        ("", "give a path inside skill 'pdf-tools'"),
        ("SKILL.md\0../../etc/passwd", "give a path inside skill 'pdf-tools'"),
    ],
    ids=[
        "dotdot",
        "dotdot-inside",
        "absolute",
        "symlinked-dir",
        "symlinked-file",
        "tilde",
        "windows",
        "encoded",
        "empty",
        "nul",
    ],
)
async def test_skill_read_refuses_any_path_that_leaves_the_skill(
    skills_dir: Path, client: Client, path: str, why: str
) -> None:
    result = await client.call_tool("skill_read", {"name": "pdf-tools", "path": path})

    assert result.is_error
    text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
    assert why in text
    assert SECRET not in text and "root:" not in text
    assert result.structured_content is None or SECRET not in str(result.structured_content)


async def test_skill_read_caps_a_huge_text_file_and_says_it_was_truncated(skills_dir: Path, client: Client) -> None:
    huge = "0123456789\n" * (MAX_READ_CHARS // 11 + 1000)
    (skills_dir / "pdf-tools" / "references" / "huge.txt").write_text(huge)

    result = await client.call_tool("skill_read", {"name": "pdf-tools", "path": "references/huge.txt"})

    read = result.structured_content
    assert read["truncated"] is True
    assert read["size"] == len(huge)
    assert read["text"] == huge[:MAX_READ_CHARS]
    assert result.content[0].text.startswith(huge[:MAX_READ_CHARS])
    assert result.content[0].text.endswith(f"[truncated: the file has {len(huge)} bytes]")


async def test_skill_read_of_a_missing_file_lists_the_skills_files(skills_dir: Path, client: Client) -> None:
    message = await refusal(client, "skill_read", name="pdf-tools", path="references/missing.md")

    assert "skill 'pdf-tools' has no file 'references/missing.md'" in message
    assert all(f in message for f in ["SKILL.md", *PDF_FILES])


async def test_skill_read_of_an_unknown_skill_is_a_tool_error_with_a_did_you_mean(
    skills_dir: Path, client: Client
) -> None:
    message = await refusal(client, "skill_read", name="pdf-tool", path="SKILL.md")

    assert "Unknown skill 'pdf-tool'" in message and "Did you mean 'pdf-tools'?" in message


# --- skill:// resources -----------------------------------------------------------------------------------------


async def test_every_skill_and_its_bundled_files_are_listed_as_resources(skills_dir: Path, any_client: Client) -> None:
    resources = {str(r.uri): r for r in (await any_client.list_resources()).resources}

    skill_md = resources["skill://pdf-tools/SKILL.md"]
    assert skill_md.description.startswith("Extract text and tables from PDF files")
    assert skill_md.mime_type == "text/markdown"
    assert {u for u in resources if u.startswith("skill://pdf-tools/")} == {
        "skill://pdf-tools/SKILL.md",
        *(f"skill://pdf-tools/{f}" for f in PDF_FILES),
    }
    assert {f"skill://{name}/SKILL.md" for name in LOADABLE} <= set(resources)
    assert not any("escape" in u or "secret" in u for u in resources)


async def test_the_skill_file_resource_template_is_listed(skills_dir: Path, client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates

    assert "skill://{name}/{+path}" in [t.uri_template for t in templates]


async def test_reading_a_skill_md_resource_returns_its_markdown(skills_dir: Path, any_client: Client) -> None:
    [content] = (await any_client.read_resource("skill://pdf-tools/SKILL.md")).contents

    assert content.text == (skills_dir / "pdf-tools" / "SKILL.md").read_text()
    assert content.mime_type == "text/markdown"


async def test_reading_a_binary_skill_resource_returns_a_blob(skills_dir: Path, client: Client) -> None:
    [content] = (await client.read_resource("skill://pdf-tools/assets/logo.png")).contents

    assert content.mime_type == "image/png"
    assert base64.b64decode(content.blob) == PNG


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("skill://pdf-tools/../template/SKILL.md", "climbs out with '..'"),
        ("skill://pdf-tools/%2e%2e/template/SKILL.md", "climbs out with '..'"),
        ("skill://pdf-tools/escape/secret.txt", "links outside the folder"),
        ("skill://pdf-tools/secret-link.txt", "links outside the folder"),
        ("skill://pdf-tools/references/missing.md", "has no file"),
        ("skill://no-such-skill/SKILL.md", "Unknown skill 'no-such-skill'"),
    ],
    ids=["dotdot", "encoded-dotdot", "symlinked-dir", "symlinked-file", "missing-file", "unknown-skill"],
)
async def test_reading_a_skill_resource_outside_the_skill_fails_without_leaking(
    skills_dir: Path, client: Client, uri: str, why: str
) -> None:
    with pytest.raises(MCPError) as failed:
        await client.read_resource(uri)

    assert why in str(failed.value)
    assert SECRET not in str(failed.value)


async def test_every_listed_resource_uri_reads_back_the_file_it_was_listed_for(root: Path, client: Client) -> None:
    folder = write_skill(root / "skills" / "odd-names", "odd-names", "Files whose names need escaping in a URI.")
    names = ["a b.md", "a%20b.md", "100%.md", "h#1.md", "q?x.md", "ü.md"]
    for name in names:
        (folder / name).write_text(f"this is {name}\n")

    resources = [r for r in (await client.list_resources()).resources if str(r.uri).startswith("skill://odd-names/")]
    read = {r.name: (await client.read_resource(str(r.uri))).contents[0].text for r in resources}
    tool_uris = {n: (await call(client, "skill_read", name="odd-names", path=n))["uri"] for n in names}

    assert read == {"odd-names/SKILL.md": (folder / "SKILL.md").read_text()} | {
        f"odd-names/{n}": f"this is {n}\n" for n in names
    }
    assert set(tool_uris.values()) == {str(r.uri) for r in resources} - {"skill://odd-names/SKILL.md"}


# --- ability_validate and the instructions ---------------------------------------------------------------------


async def test_ability_validate_checks_every_skill_md_including_the_ones_not_loaded(
    skills_dir: Path, client: Client
) -> None:
    report = await call(client, "ability_validate")

    skills = {f["name"]: f for f in report["files"] if f["kind"] == "skill"}
    assert set(skills) == {*LOADABLE, "broken-yaml", "no-description"}
    assert all(
        Path(f["path"]).name == "SKILL.md" and Path(f["path"]).parent.parent == skills_dir for f in skills.values()
    )
    assert skills["pdf-tools"]["valid"] is True and skills["pdf-tools"]["errors"] == []
    for name in set(skills) - {"pdf-tools"}:
        assert skills[name]["valid"] is False and skills[name]["errors"], name
    assert any("must match skill name" in e["message"] for e in skills["template-skill"]["errors"])
    assert report["valid"] is False


async def test_ability_validate_with_a_skill_name_checks_that_skill_only(skills_dir: Path, client: Client) -> None:
    report = await call(client, "ability_validate", name="pdf-tools")

    assert report["valid"] is True
    assert [(f["name"], f["kind"], f["path"], f["valid"]) for f in report["files"]] == [
        ("pdf-tools", "skill", str(skills_dir / "pdf-tools" / "SKILL.md"), True)
    ]


async def test_the_server_instructions_point_to_skill_route_and_skill_load_within_2kb(any_client: Client) -> None:
    instructions = any_client.instructions

    assert instructions is not None
    assert "skill_route" in instructions and "skill_load" in instructions
    assert len(instructions.encode()) <= MAX_INSTRUCTIONS_BYTES
