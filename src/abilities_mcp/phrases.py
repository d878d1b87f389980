"""Trigger words matched in free text: keywords as whole-word phrases and authors' patterns, with their limits.

Shared by ability_match (triggers.py), the workflow gates (gates.py) and the hook's prompt briefing, so a phrase
means the same everywhere. Stdlib only: the hook imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .records import Record

# Only the head of a request is searched: real requests are far shorter, and a pasted log must not cost more.
MAX_TEXT_CHARS = 10_000
# Patterns see a shorter head, and each match is time-bounded (patterns.py): an author's pattern can be slow on
# unlucky text (DESIGN's own `deploy.*to.*prod` is cubic on "deploy to deploy to ...", (a|aa)+ exponential).
# Keywords are plain phrases, linear in the text, so they get the longer head.
MAX_PATTERN_TEXT_CHARS = 2_000
# A pattern is written for one shape of request, so it says more than any single word does.
PATTERN_WEIGHT = 3


class Trigger(Record, fields="label regex weight reach"):
    """One keyword or pattern, compiled, with what it adds to the score and how it is reported."""

    __slots__ = ()

    label: str  # "keyword:ship it" | "pattern:deploy.*to.*prod"
    regex: re.Pattern[str] | None  # a keyword's phrase; None for an author's pattern (matched with a time bound)
    weight: int
    reach: int  # how many characters of the request it searches

    def fits(self, text: str) -> bool:
        if self.regex is not None:
            return self.regex.search(text, 0, self.reach) is not None
        from .patterns import PatternTooSlow, search

        try:
            return search(self.label.removeprefix("pattern:"), text, ignore_case=True, end=self.reach)
        except PatternTooSlow:
            return False  # a pattern too slow for this request does not fit it


def compile_triggers(keywords: Iterable[str], patterns: Iterable[str]) -> list[Trigger]:
    """Each keyword as a whole-word phrase, each pattern as written; a pattern that does not compile is skipped.

    Patterns that do not compile are load-time diagnostics that make the ability invalid (checks.py), so one
    reaches here only if that check is bypassed; it must not break matching for every other ability.
    """
    compiled: list[Trigger] = []
    seen: set[str] = set()
    for keyword in keywords:
        words = keyword.split()
        if words and (key := " ".join(words).casefold()) not in seen:
            seen.add(key)
            compiled.append(Trigger(f"keyword:{keyword}", phrase(words), len(words), MAX_TEXT_CHARS))
    for pattern in dict.fromkeys(patterns):
        try:
            re.compile(pattern)  # the syntax check only (re's is the same): matching is patterns.py's, time-bounded
        except re.error:
            continue
        compiled.append(Trigger(f"pattern:{pattern}", None, PATTERN_WEIGHT, MAX_PATTERN_TEXT_CHARS))
    return compiled


def phrase(words: list[str]) -> re.Pattern[str]:
    """Words taken literally, any whitespace between them, not part of a longer word at either end.

    Lookarounds rather than \\b, so keywords that begin or end in punctuation ("c++", ".net") still match.
    """
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def score(triggers: list[Trigger], text: str) -> tuple[int, list[str]]:
    """What the text scores against these triggers, and the labels of those that fit (each counts once)."""
    hits = [t for t in triggers if t.fits(text)]
    return sum(t.weight for t in hits), [t.label for t in hits]
