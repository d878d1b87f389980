"""OpenSkills' text formats, byte for byte: the `<available_skills>` catalog, the `read` output, the AGENTS.md block.

Agents that speak no MCP learn skills from these: OpenSkills writes the catalog into AGENTS.md and prints a skill
with `openskills read`. Our output is OpenSkills 1.5.0's (a test renders both and compares), with two deliberate
differences: the description is the frontmatter's value as YAML reads it (OpenSkills copies the raw line, so a
folded `description: >-` shows as `>-`), and the AGENTS.md usage names the command that reads this project's
skills (OpenSkills searches only `.agent/skills` and `.claude/skills`, where most of ours are not).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .spec import Skill

SYSTEM_BLOCK = re.compile(r"<skills_system[^>]*>[\s\S]*?</skills_system>")
TABLE = re.compile(r"<!-- SKILLS_TABLE_START -->[\s\S]*?<!-- SKILLS_TABLE_END -->")
USAGE = """\
<usage>
When users ask you to perform tasks, check if any of the available skills below can help complete the task more \
effectively. Skills provide specialized capabilities and domain knowledge.

How to use skills:
- Invoke: `{command} <skill-name>` (run in your shell)
  - For multiple: `{command} skill-one,skill-two`
- The skill content will load with detailed instructions on how to complete the task
- Base directory provided in output for resolving bundled resources (references/, scripts/, assets/)

Usage notes:
- Only use skills listed in <available_skills> below
- Do not invoke a skill that is already loaded in your context
- Each skill invocation is stateless
</usage>"""


def location(skill: Skill) -> str:
    """OpenSkills' label: `project` for the project's folders, `global` for the user's."""
    return "project" if skill.scope == "project" else "global"


def available_skills(skills: Iterable[Skill]) -> str:
    """The catalog as OpenSkills renders it (values as written, not escaped); "" when there is no skill, since an
    empty catalog only teaches the model to look for skills that are not there."""
    entries = "".join(
        f"<skill>\n<name>{s.name}</name>\n<description>{s.description}</description>\n"
        f"<location>{location(s)}</location>\n</skill>\n\n"
        for s in skills
    )
    return f"<available_skills>\n\n{entries}</available_skills>" if entries else ""


def read_output(skill: Skill, content: str) -> str:
    """What `openskills read NAME` prints for one skill: its header, SKILL.md as it is, its footer."""
    return f"Reading: {skill.name}\nBase directory: {skill.directory}\n\n{content}\n\nSkill read: {skill.name}\n"


def system_block(skills: Iterable[Skill], command: str) -> str:
    """The `<skills_system>` block OpenSkills' `sync` writes into AGENTS.md, reading skills with `command`."""
    catalog = available_skills(skills)
    table = f"<!-- SKILLS_TABLE_START -->\n{USAGE.format(command=command)}\n\n{catalog}\n<!-- SKILLS_TABLE_END -->"
    return f'<skills_system priority="1">\n\n## Available Skills\n\n{table}\n\n</skills_system>'


def removed(text: str) -> str:
    """AGENTS.md without the block, as OpenSkills leaves it when no skill is chosen."""
    return TABLE.sub("<!-- Skills section removed -->", SYSTEM_BLOCK.sub("<!-- Skills section removed -->", text))


def synced(text: str | None, block: str, title: str) -> str:
    """AGENTS.md with the block in place: replacing OpenSkills' block or its table markers, else appended; a new
    file starts with `# <title>` as OpenSkills creates it."""
    if text is None:
        text = f"# {title}\n\n"
    if "<skills_system" in text and SYSTEM_BLOCK.search(text):
        return SYSTEM_BLOCK.sub(lambda _: block, text, count=1)
    if "<!-- SKILLS_TABLE_START -->" in text and TABLE.search(text):
        inner = TABLE.search(block)
        return TABLE.sub(lambda _: inner.group(0) if inner else "", text, count=1)
    return f"{text.rstrip()}\n\n{block}\n"
