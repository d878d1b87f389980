"""A shell rule in plain words is read without the command-line parser (rules.plain_rule) to exactly the rule the
parser reads (commands.rule_of); every other rule is left to the parser, which reads it or refuses it with its fix."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from abilities_mcp.prerequisites.commands import rule_of
from abilities_mcp.prerequisites.rules import ShellRule, plain_rule
from abilities_mcp.prerequisites.workflows import parse_workflow, read_workflows

REPO = Path(__file__).resolve().parents[2]
# The characters rules are made of below: plain ones, and each the shell gives a meaning (quotes, escapes,
# operators, expansions, globs, blanks other than the space, an assignment's `=`), some outside ASCII.
ALPHABET = "gitpush-f./:_@%+,^~!?[]{}#09AZ" + "  " + "'\"\\$;&|()<>*=\t\n\r\f\v\xa0é\u3000`"


def parser_reads(text: str) -> ShellRule | str:
    """What commands.rule_of makes of a trigger: its rule, or the fix it refuses it with."""
    try:
        return rule_of(text)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize(
    "text",
    [
        "Bash(git push --force:*)",
        "Bash(git status)",
        "Bash( npm run  test :*)",
        "Bash(rm -rf:*)",
        "Bash(kubectl delete:*)",
        "Bash(/usr/bin/git push -f:*)",
        "Bash(git push origin +main:*)",
        "Bash(make deploy-{prod,staging}:*)",
        "Bash(git push --force:* )",
        "Bash(git commit --author=me:*)",
    ],
)
def test_a_rule_in_plain_words_reads_as_the_parser_reads_it(text: str) -> None:
    assert plain_rule(text) is not None
    assert plain_rule(text) == parser_reads(text)


@pytest.mark.parametrize(
    "text",
    [
        "Bash(git commit -m 'a b':*)",  # quotes
        'Bash(g""it push:*)',
        "Bash(\\git push:*)",  # an escape
        "Bash(git push $REMOTE:*)",  # an expansion
        "Bash(git push && rm:*)",  # operators: refused by the parser
        "Bash(git status > out)",
        "Bash(FOO=1 git push:*)",  # an assignment: refused by the parser
        "Bash(git push *)",  # a star: refused by the parser
        "Bash(*)",
        "Bash()",
        "Bash(:*)",
        "Bash(git\tpush:*)",  # a blank other than the space
        "Bash(git push\xa0--force:*)",  # outside ASCII
        "Bash",  # no rule at all
        "mcp__db__execute_query",
        "Bash(git push",
    ],
)
def test_any_other_trigger_is_left_to_the_parser(text: str) -> None:
    assert plain_rule(text) is None


def test_on_thousands_of_generated_rules_plain_rule_never_disagrees_with_the_parser() -> None:
    chooser = random.Random(35)
    read = 0
    for _ in range(20_000):
        body = "".join(chooser.choice(ALPHABET) for _ in range(chooser.randint(0, 14)))
        text = f"Bash({body}{chooser.choice(['', ':*', ' :*', ':* '])})"
        plain = plain_rule(text)
        if plain is not None:
            read += 1
            assert plain == parser_reads(text), text
    assert read > 1000  # the comparison covered many rules the fast path reads, not only ones it leaves


def test_a_workflow_reads_the_same_rules_and_refuses_the_same_ones_either_way() -> None:
    tools = ["Bash(git push --force:*)", "Bash(git commit -m 'wip':*)", "execute_query", "Bash(git status)"]
    entry = {
        "description": "d",
        "triggers": {"tools": tools},
        "prerequisites": [{"step": 1, "tool": "t", "description": "d"}],
    }
    workflow, problems = parse_workflow("w", entry, "workflows.json")
    assert problems == [] and workflow is not None
    assert workflow.commands == tuple(rule_of(t) for t in tools if t.startswith("Bash("))

    entry["triggers"]["tools"] = ["Bash(git push --force:*)", "Bash(FOO=1 git push:*)"]
    workflow, problems = parse_workflow("w", entry, "workflows.json")
    assert workflow is None
    assert [(p.path, p.message) for p in problems] == [("w.triggers.tools[1]", parser_reads("Bash(FOO=1 git push:*)"))]


def test_reading_workflows_whose_rules_are_plain_does_not_load_the_parser(tmp_path: Path) -> None:
    # The hook reads workflows.json on every tool call: the repo's file, whose rules are all plain, costs no parser.
    (tmp_path / "workflows.json").write_bytes((REPO / "workflows.json").read_bytes())
    code = (
        "import sys; from pathlib import Path; from abilities_mcp.prerequisites.workflows import read_workflows; "
        "found = read_workflows(Path(sys.argv[1])); "
        "print(__import__('json').dumps([len(found.problems), sum(len(w.commands) for w in found.workflows.values()), "
        "'abilities_mcp.prerequisites.commands' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "workflows.json")], capture_output=True, text=True, timeout=60
    )
    problems, rules, parser_loaded = json.loads(done.stdout)
    assert problems == 0 and rules > 0
    assert parser_loaded is False
    assert read_workflows(tmp_path / "workflows.json").workflows["dangerous-commands"].commands[0].words == (
        "git",
        "push",
        "--force",
    )
