"""Skill folders in the shapes real ones take (anthropics/skills, OpenSkills installs, nano-step's broken ones).

`make_skills(folder, outside)` writes them all under `folder`; `outside` is a folder beyond any skill root that a
symlink points into. Each SHAPE says what it is and what loading must do with it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# Over 1024 characters like anthropics' claude-api, as a block scalar.
LONG_DESCRIPTION = (
    "Reference for the Messages API and the SDKs: model ids, pricing, parameters, streaming, tool use, "
    "prompt caching and token counting. TRIGGER when code imports the SDK or the user asks about the API. " * 6
).strip()

SHAPES: dict[str, str] = {
    # A valid skill with nested resources, scripts and a binary asset (like pdf / mcp-builder).
    "pdf-tools": """\
        ---
        name: pdf-tools
        description: Extract text and tables from PDF files, fill PDF forms and merge documents. Use when the user mentions PDFs, forms or document extraction.
        license: Apache-2.0
        compatibility: Requires Python 3.11+ and pypdf
        metadata:
          author: example-org
          version: 1.0
        allowed-tools: Bash(python:*) Read
        ---
        # PDF tools

        1. Run `scripts/extract.py FILE` to get the text.
        2. For forms read [the forms guide](references/forms.md).
        """,
    # Folder `template`, name `template-skill`: loads with a warning (anthropics' template).
    "template": """\
        ---
        name: template-skill
        description: Replace with a description of the skill and when Claude should use it.
        ---
        # Insert instructions below
        """,
    # Description over 1024 characters as a block scalar: loads with a warning.
    "api-reference": "---\nname: api-reference\ndescription: |-\n  " + LONG_DESCRIPTION + "\n---\nUse the API.\n",
    # No description: skipped with a diagnostic (nano-step's workflow skills lack fields like this).
    "no-description": """\
        ---
        name: no-description
        version: 2.0.0
        ---
        Body only.
        """,
    # Frontmatter that is not YAML at all: skipped.
    "broken-yaml": """\
        ---
        name: broken-yaml
        description: [unclosed
        tools: {a: b
        ---
        Body.
        """,
    # The client guide's colon case: loads through the quoting fallback.
    "colon-value": """\
        ---
        name: colon-value
        description: Use this skill when: the user asks about colons in YAML values
        ---
        Quote your values.
        """,
    # Claude Code's own fields: loads; the strict validator calls them unexpected.
    "deploy-notes": """\
        ---
        name: deploy-notes
        description: Write deployment notes for the ops channel. Use after a production deploy.
        disable-model-invocation: true
        argument-hint: "[version]"
        ---
        Write the notes.
        """,
    # Uppercase and double hyphen: every name rule at once.
    "Bad--Name": """\
        ---
        name: Bad--Name-
        description: A skill whose name breaks the rules.
        ---
        Body.
        """,
}

BUNDLED = {
    "pdf-tools/scripts/extract.py": "import sys\nprint(open(sys.argv[1], 'rb').read()[:10])\n",
    "pdf-tools/references/forms.md": "# Forms\n\nFill fields with pypdf.\n",
    "pdf-tools/references/deep/nested/spec.md": "# Nested spec\n",
}


def make_skills(folder: Path, outside: Path) -> None:
    """Write every shape under `folder`, plus a binary asset and a symlink that leads out of pdf-tools."""
    for name, text in SHAPES.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "SKILL.md").write_text(textwrap.dedent(text))
    for rel, text in BUNDLED.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    (folder / "pdf-tools" / "assets").mkdir(exist_ok=True)
    (folder / "pdf-tools" / "assets" / "logo.png").write_bytes(
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    )
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text("not for skills\n")
    (folder / "pdf-tools" / "escape").symlink_to(outside, target_is_directory=True)
    (folder / "pdf-tools" / "secret-link.txt").symlink_to(outside / "secret.txt")
