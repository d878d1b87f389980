"""Errors, split by who must act.

* AbilitiesError
  x Diagnostic        one problem in one file: file + field path + message with the fix (the author acts)
  x DefinitionError   a file that cannot be used; carries its Diagnostics (the author acts)
  x InputError        inputs given to a run break the ability's declared inputs (the caller acts)
  x Refused           an out-of-step call: rule, state and the legal next calls (the model acts)
  x UnknownName       an ability or run that does not exist, with a did-you-mean (the caller acts)

Bugs are not caught: they propagate and are logged.
"""

from __future__ import annotations

from .records import Record

# No dataclasses, difflib or typing at import: the hook imports this module on every tool call and must start fast
# (typing.NamedTuple compiles each field's annotation; the records below are records.Record with annotations to read).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


class AbilitiesError(Exception):
    """Base of every error this package raises on purpose."""


class Diagnostic(Record, fields="file path message"):
    """One problem in one file: where it is and how to fix it."""

    __slots__ = ()

    file: str
    path: str  # field path inside the file, e.g. "steps[2].needs[0]"; "" for the whole file
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{where}: {self.message}"


class DefinitionError(AbilitiesError):
    """A definition file that cannot be used, with every problem found in it."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


class InputError(AbilitiesError):
    """Run inputs that do not fit the ability's declared inputs."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("Invalid inputs: " + "; ".join(problems))


class NextCall(Record, fields="tool arguments"):
    """A tool call the caller may legally make next."""

    __slots__ = ()

    tool: str
    arguments: dict[str, Any]

    def render(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.tool}({args})"


class Refused(AbilitiesError):
    """An out-of-step call: names the rule, the state and the legal next calls."""

    def __init__(self, rule: str, state: str, next_calls: Iterable[NextCall] = ()):
        self.rule = rule
        self.state = state
        self.next_calls = list(next_calls)
        super().__init__(self.render())

    def render(self) -> str:
        text = f"Refused: {self.rule} (state: {self.state})."
        if self.next_calls:
            text += " Legal next call(s): " + "; ".join(c.render() for c in self.next_calls) + "."
        return text


# Where to look up the names of each kind of thing.
LISTING = {"ability": "ability_list", "run": "ability_history", "skill": "skill_list"}


class UnknownName(AbilitiesError):
    """A name that matches nothing, with the closest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str], close: str | None = None):
        """`close`: the name meant, when the caller knows better than spelling (a file a `name:` renamed)."""
        self.kind, self.name = kind, name
        self.close = close or did_you_mean(name, known)
        hint = (
            f" Did you mean {self.close!r}?"
            if self.close
            else f" Call {LISTING.get(kind, 'ability_list')}() to see what exists."
        )
        super().__init__(f"Unknown {kind} {name!r}.{hint}")


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to a mistyped word, or None when nothing is close."""
    import difflib

    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None
