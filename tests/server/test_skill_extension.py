"""SEP-2640 v1 over the SDK client: skills/list and skills/get carry verbatim frontmatter and a complete, correct
manifest; resources/directory/read lists a folder's children; anything else is -32602 with the reason."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from mcp import Client, MCPError

from abilities_mcp.server import create_server
from abilities_mcp.state.project import Project
from support import REPO, get_skill, list_skills, read_directory, write_skill

pytestmark = pytest.mark.anyio
INVALID_PARAMS = -32602


def skill(root: Path, name: str, frontmatter: str, files: dict[str, bytes] | None = None) -> Path:
    return write_skill(root, name, frontmatter, f"# {name}\n\nDo the thing.\n", files)


def digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pdf(root: Path) -> Path:
    return skill(
        root,
        "pdf-processing",
        """
        name: pdf-processing
        description: Extract, fill, and assemble PDF documents. Use when the user works with PDF files.
        license: Apache-2.0
        allowed-tools: Bash(python3 scripts/extract.py:*) Read
        metadata: {version: "2.1.0", io.modelcontextprotocol/future: kept}
        """,
        {
            "scripts/extract.py": b"print('extract')\n",
            "templates/invoice.md": b"# Invoice\n",
            "templates/regional/eu-invoice.md": b"# EU invoice\n",
            "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
        },
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_server_declares_the_extension_with_directory_read_and_resources(project: Project, mode) -> None:
    async with Client(create_server(project), mode=mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.extensions == {"io.modelcontextprotocol/skills": {"directoryRead": True}}
        assert capabilities.resources is not None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_listed_entry_has_the_frontmatter_verbatim_and_a_complete_correct_manifest(
    project: Project, pdf: Path, mode
) -> None:
    async with Client(create_server(project), mode=mode) as client:
        listing = await list_skills(client)

    assert (listing["resultType"], listing["ttlMs"] > 0, listing["cacheScope"]) == ("complete", True, "private")
    [entry] = listing["skills"]
    assert entry["uri"] == "skill://pdf-processing/SKILL.md"
    assert entry["frontmatter"] == {
        "name": "pdf-processing",
        "description": "Extract, fill, and assemble PDF documents. Use when the user works with PDF files.",
        "license": "Apache-2.0",
        "allowed-tools": "Bash(python3 scripts/extract.py:*) Read",
        "metadata": {"version": "2.1.0", "io.modelcontextprotocol/future": "kept"},
    }
    on_disk = sorted(p.relative_to(pdf).as_posix() for p in pdf.rglob("*") if p.is_file())
    assert [r["uri"] for r in entry["resources"]] == [
        f"skill://pdf-processing/{p}" for p in ["SKILL.md", *[p for p in on_disk if p != "SKILL.md"]]
    ]
    for resource in entry["resources"]:
        file = pdf / resource["uri"].removeprefix("skill://pdf-processing/")
        assert (resource["digest"], resource["size"]) == (digest(file), file.stat().st_size)


async def test_every_manifest_file_read_through_resources_read_has_the_listed_digest(project: Project, pdf) -> None:
    async with Client(create_server(project), mode="legacy") as client:
        [entry] = (await list_skills(client))["skills"]
        for resource in entry["resources"]:
            [content] = (await client.read_resource(resource["uri"])).contents
            raw = content.text.encode() if hasattr(content, "text") else __import__("base64").b64decode(content.blob)
            assert ("sha256:" + hashlib.sha256(raw).hexdigest(), len(raw)) == (resource["digest"], resource["size"])


async def test_skills_get_returns_the_same_entry_and_refuses_what_is_not_a_served_skill(project, pdf) -> None:
    async with Client(create_server(project), mode="legacy") as client:
        [listed] = (await list_skills(client))["skills"]
        got = await get_skill(client, "skill://pdf-processing/SKILL.md")
        assert (got["resultType"], got["skill"]) == ("complete", listed)
        for uri, words in [
            ("skill://nope/SKILL.md", "No skill is served at skill://nope/SKILL.md"),
            ("skill://pdf-processing/templates/invoice.md", "is not a skill's SKILL.md URI"),
            ("file:///etc/passwd", "is not a skill:// URI"),
        ]:
            with pytest.raises(MCPError) as refused:
                await get_skill(client, uri)
            assert refused.value.code == INVALID_PARAMS and words in refused.value.message, uri


async def test_a_skill_the_extension_cannot_describe_faithfully_is_left_out_and_get_says_why(project, root) -> None:
    skill(root, "template", "name: template-skill\ndescription: A skill whose folder has another name.")
    skill(root, "many", "name: many\ndescription: Too many files.", {f"f/{i}.txt": b"x" for i in range(512)})
    skill(root, "fine", "name: fine\ndescription: A fine skill.")
    async with Client(create_server(project), mode="legacy") as client:
        names = [s["frontmatter"]["name"] for s in (await list_skills(client))["skills"]]
        assert names == ["fine"]
        with pytest.raises(MCPError) as refused:
            await get_skill(client, "skill://many/SKILL.md")
        assert "has 513 files; the skills extension serves at most 512" in refused.value.message
        with pytest.raises(MCPError) as refused:
            await get_skill(client, "skill://template-skill/SKILL.md")
        assert "folder 'template' and its frontmatter name must both be 'template-skill'" in refused.value.message
        # The fallback tools still reach both.
        loaded = await client.call_tool("skill_load", {"name": "template-skill"})
        assert not loaded.is_error


async def test_directory_read_lists_direct_children_and_refuses_files_and_escapes(project, pdf, tmp_path) -> None:
    (tmp_path / "outside").mkdir()
    (pdf / "templates" / "leak").symlink_to(tmp_path / "outside")
    async with Client(create_server(project), mode="legacy") as client:
        top = await read_directory(client, "skill://pdf-processing")
        assert [(r["name"], r["mimeType"]) for r in top["resources"]] == [
            ("SKILL.md", "text/markdown"),
            ("assets", "inode/directory"),
            ("scripts", "inode/directory"),
            ("templates", "inode/directory"),
        ]
        templates = await read_directory(client, "skill://pdf-processing/templates")
        assert [(r["uri"], r["mimeType"]) for r in templates["resources"]] == [
            ("skill://pdf-processing/templates/invoice.md", "text/markdown"),
            ("skill://pdf-processing/templates/regional", "inode/directory"),
        ]
        for uri in [
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/templates/leak",
            "skill://pdf-processing/../..",
            "skill://pdf-processing/missing",
            "skill://nope",
        ]:
            with pytest.raises(MCPError) as refused:
                await read_directory(client, uri)
            assert refused.value.code == INVALID_PARAMS, uri


async def test_a_long_listing_comes_in_pages_and_a_forged_cursor_is_refused(project, root) -> None:
    for i in range(150):
        skill(root, f"s{i:03d}", f"name: s{i:03d}\ndescription: Skill number {i}.")
    async with Client(create_server(project), mode="legacy") as client:
        first = await list_skills(client)
        second = await list_skills(client, first["nextCursor"])
        with pytest.raises(MCPError) as refused:
            await list_skills(client, "not-ours")
    names = [s["frontmatter"]["name"] for s in first["skills"] + second["skills"]]
    assert names == [f"s{i:03d}" for i in range(150)] and "nextCursor" not in second
    assert refused.value.code == INVALID_PARAMS


async def test_the_repositorys_own_skills_are_all_served(tmp_path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "skills", root / "skills")
    project = Project(root, tmp_path / "state", home=tmp_path / "home", config_home=tmp_path / "home" / ".config")
    async with Client(create_server(project), mode="legacy") as client:
        names = {s["frontmatter"]["name"] for s in (await list_skills(client))["skills"]}
    assert names == {p.name for p in (REPO / "skills").iterdir() if (p / "SKILL.md").is_file()}
