"""Authors' regular expressions matched against text someone else chose (a run's input, an agent's hand-back, a
request), with a time bound: a pattern that backtracks catastrophically fails its one check, never the server.

Python's `re` cannot be interrupted, so matching uses the `regex` library (the same syntax, plus a timeout),
imported on first use: the hook, which matches authors' trigger patterns against each prompt, starts without it.
"""

from __future__ import annotations

import functools
from typing import Any

# Long enough for any sane pattern over the text it sees; short enough that no call waits on a bad one.
MATCH_SECONDS = 0.25


class PatternTooSlow(Exception):
    """A pattern did not finish within MATCH_SECONDS on the text given."""

    def __init__(self, pattern: str):
        super().__init__(
            f"the pattern {pattern!r} did not finish within {MATCH_SECONDS} s on this text (it backtracks "
            "catastrophically, e.g. (a|aa)+); rewrite it without nested repetition"
        )


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str, ignore_case: bool = False) -> Any:
    """The compiled pattern; raises ValueError saying why it does not compile."""
    import regex

    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except regex.error as exc:
        raise ValueError(str(exc)) from None


def search(pattern: str, text: str, *, ignore_case: bool = False, end: int | None = None) -> bool:
    """Whether the pattern occurs in the text (or its first `end` characters); PatternTooSlow past the bound."""
    compiled = compile_pattern(pattern, ignore_case)
    try:
        return compiled.search(text, 0, end if end is not None else len(text), timeout=MATCH_SECONDS) is not None
    except TimeoutError:
        raise PatternTooSlow(pattern) from None
