"""SKILL.md: lenient loading, the skills-ref validator's messages word for word, and discovery's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from abilities_mcp.skills.skillset import MAX_SCANNED_DIRS, SkillSet
from abilities_mcp.skills.spec import SkillFileError, load_skill, parse_lenient, split_frontmatter, strict_diagnostics
from abilities_mcp.state.project import Project
from skill_shapes import LONG_DESCRIPTION, make_skills

ALLOWED = "['allowed-tools', 'compatibility', 'description', 'license', 'metadata', 'name']"


def messages(frontmatter: str, folder: str = "my-skill") -> list[str]:
    return [d.message for d in strict_diagnostics(f"---\n{frontmatter}\n---\nbody\n", Path("/skills") / folder)]


@pytest.mark.parametrize(
    ("frontmatter", "folder", "expected"),
    [
        ("name: my-skill\ndescription: Does things.", "my-skill", []),
        ("description: d", "my-skill", ["Missing required field in frontmatter: name"]),
        ("name: my-skill", "my-skill", ["Missing required field in frontmatter: description"]),
        ("name: ''\ndescription: d", "my-skill", ["Field 'name' must be a non-empty string"]),
        ("name: my-skill\ndescription: ''", "my-skill", ["Field 'description' must be a non-empty string"]),
        (
            f"name: {'a' * 65}\ndescription: d",
            "a" * 65,
            [f"Skill name '{'a' * 65}' exceeds 64 character limit (65 chars)"],
        ),
        (
            "name: PDF-Processing\ndescription: d",
            "PDF-Processing",
            ["Skill name 'PDF-Processing' must be lowercase"],
        ),
        ("name: -pdf\ndescription: d", "-pdf", ["Skill name cannot start or end with a hyphen"]),
        ("name: pdf--processing\ndescription: d", "pdf--processing", ["Skill name cannot contain consecutive hyphens"]),
        (
            "name: pdf_tools\ndescription: d",
            "pdf_tools",
            ["Skill name 'pdf_tools' contains invalid characters. Only letters, digits, and hyphens are allowed."],
        ),
        ("name: other\ndescription: d", "my-skill", ["Directory name 'my-skill' must match skill name 'other'"]),
        (
            f"name: my-skill\ndescription: {'x' * 1025}",
            "my-skill",
            ["Description exceeds 1024 character limit (1025 chars)"],
        ),
        (
            f"name: my-skill\ndescription: d\ncompatibility: {'c' * 501}",
            "my-skill",
            ["Compatibility exceeds 500 character limit (501 chars)"],
        ),
        (
            "name: my-skill\ndescription: d\nversion: 1.0\ntools: a",
            "my-skill",
            [f"Unexpected fields in frontmatter: tools, version. Only {ALLOWED} are allowed."],
        ),
        ("name: my-skill\ndescription: d\nmetadata:\n  - a", "my-skill", []),  # skills-ref checks no metadata shape
        ("name: my-skill\ndescription: d\nmetadata:\n  nested:\n    a: b", "my-skill", []),  # nor value types
        ("name: 技能\ndescription: d", "技能", []),  # the validator accepts Unicode letters, as skills-ref does
        ("name: my-skill\ndescription: d\nmetadata:\n  version: 1.0", "my-skill", []),  # scalars are text
        (f"name: my-skill\ndescription: d\nlicense: {'MIT ' * 40}", "my-skill", []),  # a long license is advice
        (
            "description: d\nname: Bad\n",
            "my-skill",
            [  # skills-ref's order: name's problems before description's
                "Skill name 'Bad' must be lowercase",
                "Directory name 'my-skill' must match skill name 'Bad'",
            ],
        ),
        (
            "name: ''\ndescription: ''",
            "my-skill",
            ["Field 'name' must be a non-empty string", "Field 'description' must be a non-empty string"],
        ),
    ],
    ids=[
        "valid",
        "no-name",
        "no-description",
        "empty-name",
        "empty-description",
        "name-over-64",
        "uppercase",
        "leading-hyphen",
        "double-hyphen",
        "underscore",
        "directory-mismatch",
        "description-over-1024",
        "compatibility-over-500",
        "unexpected-fields",
        "metadata-not-a-map",
        "metadata-value-not-text",
        "unicode-name",
        "numeric-looking-metadata",
        "long-license",
        "order",
        "both-empty",
    ],
)
def test_the_validator_words_each_spec_violation_as_skills_ref_does(frontmatter, folder, expected) -> None:
    assert messages(frontmatter, folder) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("no frontmatter\n", "SKILL.md must start with YAML frontmatter (---)"),
        ("---\nname: x\ndescription: d\n", "SKILL.md frontmatter not properly closed with ---"),
        ("---\n- a\n- b\n---\nbody", "SKILL.md frontmatter must be a YAML mapping"),
        ("---\nname: [x\n---\nbody", "Invalid YAML in frontmatter: "),
    ],
    ids=["missing", "unclosed", "not-a-mapping", "bad-yaml"],
)
def test_a_skill_md_that_cannot_be_read_gets_the_parsers_message(content, expected) -> None:
    found = [d.message for d in strict_diagnostics(content, Path("/skills/x"))]
    assert len(found) == 1 and found[0].startswith(expected)


def test_every_violation_of_one_file_is_reported_not_only_the_first() -> None:
    found = messages("name: Bad--Name-\ndescription: d\nextra: 1", "Bad--Name")
    assert found == [
        f"Unexpected fields in frontmatter: extra. Only {ALLOWED} are allowed.",
        "Skill name 'Bad--Name-' must be lowercase",
        "Skill name cannot start or end with a hyphen",
        "Skill name cannot contain consecutive hyphens",
        "Directory name 'Bad--Name' must match skill name 'Bad--Name-'",
    ]


def test_the_colon_in_value_fallback_quotes_the_value_and_says_so() -> None:
    parsed = parse_lenient("---\nname: c\ndescription: Use this skill when: the user asks\n---\nBody\n")
    assert parsed.data["description"] == "Use this skill when: the user asks"
    assert parsed.body == "Body"
    assert parsed.notes and "must be quoted" in parsed.notes[0]


def test_the_fallback_leaves_quoted_and_block_values_alone_and_keeps_the_real_error() -> None:
    parsed = parse_lenient("---\nname: c\ndescription: >-\n  Use when: folded\nlicense: 'MIT: see file'\n---\n")
    assert parsed.data == {"name": "c", "description": "Use when: folded", "license": "MIT: see file"}
    assert parsed.notes == []
    with pytest.raises(SkillFileError, match="Invalid YAML in frontmatter"):
        parse_lenient("---\nname: c\ndescription: [a: b\n---\n")


def test_the_body_is_the_text_after_the_frontmatter_and_dashes_inside_it_survive() -> None:
    _, body = split_frontmatter("---\nname: a\ndescription: d\n---\n\n# Title\n\n---\nA rule above.\n")
    assert body == "# Title\n\n---\nA rule above."


@pytest.fixture
def skills_dir(project: Project, tmp_path: Path) -> Path:
    folder = project.root / "skills"
    make_skills(folder, tmp_path / "outside")
    return folder


def loaded(project: Project) -> SkillSet:
    return SkillSet(project).refresh()


def test_lenient_loading_keeps_what_the_client_guide_keeps_and_skips_what_it_skips(project, skills_dir) -> None:
    skills = loaded(project)
    assert set(skills.skills) == {
        "pdf-tools",
        "template-skill",
        "api-reference",
        "colon-value",
        "deploy-notes",
        "Bad--Name-",
    }
    assert skills.skills["api-reference"].description == LONG_DESCRIPTION
    problems = {path.parent.name: [d.message for d in ds] for path, ds in skills.problems.items()}
    assert any("skill not loaded" in m for m in problems["no-description"])
    assert any(m.startswith("Invalid YAML in frontmatter") for m in problems["broken-yaml"])
    assert any("skill not loaded" in m for m in problems["broken-yaml"])


@pytest.mark.parametrize(
    ("name", "warning"),
    [
        ("template-skill", "Directory name 'template' must match skill name 'template-skill'"),
        ("api-reference", "Description exceeds 1024 character limit"),
        ("colon-value", "must be quoted in YAML"),
        ("deploy-notes", "Unexpected fields in frontmatter: argument-hint, disable-model-invocation."),
    ],
    ids=["name-mismatch", "long-description", "colon", "claude-code-fields"],
)
def test_what_loading_forgave_is_a_warning_on_the_skill(project, skills_dir, name, warning) -> None:
    assert any(warning in w for w in loaded(project).skills[name].warnings)


def test_a_valid_skill_loads_without_warnings_and_with_its_body(project, skills_dir) -> None:
    skill = loaded(project).skills["pdf-tools"]
    assert skill.warnings == ()
    assert skill.body.startswith("# PDF tools") and "---" not in skill.body.splitlines()[0]
    assert skill.frontmatter["metadata"] == {"author": "example-org", "version": "1.0"}


def test_a_skill_without_a_name_uses_its_folder_name_with_a_warning(project) -> None:
    folder = project.root / "skills" / "nameless"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: Has no name.\n---\nBody\n")
    skill = loaded(project).skills["nameless"]
    assert any("folder name 'nameless'" in w for w in skill.warnings)


def test_a_huge_or_undecodable_skill_md_is_skipped_with_the_validators_words(project) -> None:
    for name, data in {"huge": b"---\n" + b"x" * (1024 * 1024 + 10), "latin": b"---\nname: caf\xe9\n---\n"}.items():
        (project.root / "skills" / name).mkdir(parents=True)
        (project.root / "skills" / name / "SKILL.md").write_bytes(data)
    skills = loaded(project)
    problems = {p.parent.name: d[0].message for p, d in skills.problems.items()}
    assert problems == {
        "huge": "SKILL.md in huge exceeds 1MB size limit",
        "latin": "SKILL.md in latin is not valid UTF-8",
    }
    assert not skills.skills


def write_skill(folder: Path, name: str, description: str = "A test skill.") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")
    return folder


def test_project_skills_hide_user_skills_of_the_same_name_and_say_so(project) -> None:
    write_skill(project.root / ".claude" / "skills" / "pdf", "pdf", "project copy")
    write_skill(project.home / ".claude" / "skills" / "pdf", "pdf", "user copy")
    skills = loaded(project)
    assert skills.skills["pdf"].description == "project copy" and skills.skills["pdf"].scope == "project"
    assert any("hides the user one" in w for w in skills.warnings(skills.skills["pdf"]))


def test_within_one_scope_the_first_folder_wins_and_the_duplicate_is_warned(project) -> None:
    write_skill(project.root / "skills" / "pdf", "pdf", "from skills/")
    write_skill(project.root / ".agents" / "skills" / "pdf", "pdf", "from .agents/skills/")
    skills = loaded(project)
    assert skills.skills["pdf"].description == "from skills/"
    assert any("defined twice in project folders" in w for w in skills.warnings(skills.skills["pdf"]))


def test_nested_skill_folders_are_found_but_not_inside_a_skill_or_skipped_folders(project) -> None:
    base = project.root / "skills"
    write_skill(base / "document-skills" / "docx", "docx")
    write_skill(base / "pdf", "pdf")
    write_skill(base / "pdf" / "examples" / "inner", "inner")  # part of pdf, not a skill of its own
    write_skill(base / "node_modules" / "npm-skill", "npm-skill")
    write_skill(base / ".git" / "git-skill", "git-skill")
    write_skill(base / "a" / "b" / "c" / "d" / "too-deep", "too-deep")
    assert set(loaded(project).skills) == {"docx", "pdf"}


def test_the_scan_stops_after_its_folder_budget_and_notes_it(project) -> None:
    base = project.root / "skills" / "empty"
    for i in range(MAX_SCANNED_DIRS + 5):
        (base / f"d{i:05}").mkdir(parents=True)
    write_skill(project.root / ".claude" / "skills" / "still-found", "still-found")
    skills = loaded(project)
    assert "still-found" in skills.skills  # one crowded root does not hide the others
    assert any("stopped scanning" in n for n in skills.notes)


def test_symlinked_skill_folders_are_followed_inside_home_but_not_outside(project, tmp_path) -> None:
    inside = write_skill(project.home / "src" / "my-skills" / "linked-in", "linked-in")
    outside = write_skill(tmp_path / "elsewhere" / "linked-out", "linked-out")
    base = project.root / "skills"
    base.mkdir(parents=True)
    (base / "linked-in").symlink_to(inside, target_is_directory=True)
    (base / "linked-out").symlink_to(outside, target_is_directory=True)
    skills = loaded(project)
    assert "linked-in" in skills.skills and "linked-out" not in skills.skills
    assert any("linked-out" in n and "outside the project and home" in n for n in skills.notes)


def test_a_symlink_loop_does_not_hang_discovery(project) -> None:
    base = project.root / "skills" / "loop"
    base.mkdir(parents=True)
    (base / "again").symlink_to(base, target_is_directory=True)
    write_skill(project.root / "skills" / "real", "real")
    assert set(loaded(project).skills) == {"real"}


def test_changed_skill_files_are_read_again_and_unchanged_ones_are_not(project, monkeypatch) -> None:
    write_skill(project.root / "skills" / "a", "a", "first")
    write_skill(project.root / "skills" / "b", "b", "stays")
    skills = loaded(project)
    calls: list[Path] = []
    import abilities_mcp.skills.skillset as skillset_module

    real = skillset_module.load_skill
    monkeypatch.setattr(skillset_module, "load_skill", lambda d, r, s: calls.append(d) or real(d, r, s))
    write_skill(project.root / "skills" / "a", "a", "second version")
    assert skills.refresh().skills["a"].description == "second version"
    assert calls == [project.root / "skills" / "a"]


def test_load_skill_reports_strict_problems_even_for_a_skill_it_loads(tmp_path) -> None:
    folder = write_skill(tmp_path / "wrong-folder", "right-name")
    skill, diagnostics = load_skill(folder, folder, "project")
    assert skill is not None and skill.name == "right-name"
    assert [(d.path, d.message) for d in diagnostics] == [
        ("name", "Directory name 'wrong-folder' must match skill name 'right-name'")
    ]
    assert diagnostics[0].file == str(folder / "SKILL.md")
