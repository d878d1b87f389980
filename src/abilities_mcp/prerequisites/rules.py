"""Shell rules as workflows.json spells them (`Bash(git push --force:*)`), read without the command-line parser
where their words are plain, as nearly every rule's are.

workflows.json is read and checked on every tool call the hook decides, a file with a shell rule too, whether or
not the call is a shell command. commands.py reads any rule, with the shell's quoting, at the cost of importing
and compiling its parser; `plain_rule` reads a rule written in plain words (letters, digits and the punctuation the
shell gives no meaning there, separated by spaces) to the same ShellRule, and leaves every other rule to it (a test
holds the two to the same answers). Stdlib only, no regular expression.
"""

from __future__ import annotations

from ..records import Record

RULE_TOOL = "Bash"
_OPEN = RULE_TOOL + "("
# What the words of a rule `plain_rule` reads may hold: characters the command-line parser takes as they are (no
# quote, escape, `$`, operator, `*` or blank other than the space). Anything else is commands.rule_of's to read,
# or to refuse with its fix.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+,=^~!?[]{}# ")


class ShellRule(Record, fields="words prefix raw"):
    """A shell-command rule: its words as the shell splits them, whether it is a prefix rule, and the trigger."""

    __slots__ = ()

    words: tuple[str, ...]
    prefix: bool
    raw: str


def is_rule(text: str) -> bool:
    """Whether a trigger is written as a shell rule, `Bash(…)`."""
    return isinstance(text, str) and text.startswith(_OPEN) and text.endswith(")")


def plain_rule(text: str) -> ShellRule | None:
    """The rule a trigger writes in plain words, as commands.rule_of reads it; None for any other trigger (a plain
    tool name, a rule with quotes, escapes, operators or a star, one whose first word holds `=` (an assignment,
    which rule_of refuses), and any malformed rule: rule_of's to read)."""
    if not is_rule(text):
        return None
    body = text[len(_OPEN) : -1].strip()
    prefix = body.endswith(":*")
    body = body[:-2] if prefix else body
    if not _PLAIN.issuperset(body):
        return None
    words = tuple(word for word in body.split(" ") if word)
    return ShellRule(words, prefix, text) if words and "=" not in words[0] else None
