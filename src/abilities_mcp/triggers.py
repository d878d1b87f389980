"""Which abilities fit a free-text request, ranked by their triggers (DESIGN §5, ability_match).

Every ability whose keywords or patterns fit is returned, best first: the caller sees the whole field, not the
first file that happened to match.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from .catalog import Catalog
from .loader import Definition
from .models import Ability, Triggers

log = logging.getLogger(__name__)

# Only the head of a request is searched: real requests are far shorter, and a pasted log must not cost more.
MAX_TEXT_CHARS = 10_000
# Patterns see a shorter head. Python's regexes backtrack and cannot be interrupted, and an author's pattern can
# be slow on unlucky text: DESIGN's own `deploy.*to.*prod` is cubic on "deploy to deploy to ..." (about 10 s over
# 10,000 characters, 0.1 s over 2,000). Keywords are plain phrases, linear in the text, so they get the longer head.
MAX_PATTERN_TEXT_CHARS = 2_000
# A pattern is written for one shape of request, so it says more than any single word does.
PATTERN_WEIGHT = 3


@dataclass(frozen=True)
class Trigger:
    """One keyword or pattern, compiled, with what it adds to the score and how it is reported."""

    label: str  # "keyword:ship it" | "pattern:deploy.*to.*prod"
    regex: re.Pattern[str]
    weight: int
    reach: int  # how many characters of the request it searches

    def fits(self, text: str) -> bool:
        return self.regex.search(text, 0, self.reach) is not None


def compile_triggers(triggers: Triggers) -> list[Trigger]:
    """Each keyword as a whole-word phrase, each pattern as written; a pattern that does not compile is skipped.

    Patterns that do not compile are load-time diagnostics that make the ability invalid (checks.py), so one
    reaches here only if that check is bypassed; it must not break matching for every other ability.
    """
    compiled: list[Trigger] = []
    seen: set[str] = set()
    for keyword in triggers.keywords:
        words = keyword.split()
        if words and (key := " ".join(words).casefold()) not in seen:
            seen.add(key)
            compiled.append(Trigger(f"keyword:{keyword}", _phrase(words), len(words), MAX_TEXT_CHARS))
    for pattern in dict.fromkeys(triggers.patterns):
        try:
            regex = re.compile(pattern, re.IGNORECASE)
            compiled.append(Trigger(f"pattern:{pattern}", regex, PATTERN_WEIGHT, MAX_PATTERN_TEXT_CHARS))
        except re.error as exc:
            log.debug("skipping trigger pattern %r: %s", pattern, exc)
    return compiled


def _phrase(words: list[str]) -> re.Pattern[str]:
    """Words taken literally, any whitespace between them, not part of a longer word at either end.

    Lookarounds rather than \\b, so keywords that begin or end in punctuation ("c++", ".net") still match.
    """
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


class Matcher:
    """Ranks a catalog's valid abilities against a request; compiles each file's triggers once per version."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        # path → (the Ability the triggers were compiled from, the compiled triggers). The catalog hands out a new
        # Ability object when a file changes, so an identity check is the version check; holding the old
        # object keeps its id from being reused.
        self._compiled: dict[Path, tuple[Ability, list[Trigger]]] = {}

    def match(self, text: str) -> MatchList:
        """Every valid ability whose triggers fit the text, by score (highest first), then name.

        Score: a keyword adds its number of words (a phrase is more specific than a word); a pattern adds
        PATTERN_WEIGHT. Each keyword and pattern counts once, however often it occurs in the text.
        """
        if not text[:MAX_TEXT_CHARS].strip():
            return MatchList(matches=[])
        self.catalog.refresh()
        self._forget_removed()
        found = [m for d in self.catalog.winners.values() if (m := self._match_one(d, text)) is not None]
        return MatchList(matches=sorted(found, key=lambda m: (-m.score, m.name)))

    def _match_one(self, definition: Definition, text: str) -> Match | None:
        if not self.catalog.is_valid(definition):
            return None
        hits = [t for t in self.triggers(definition) if t.fits(text)]
        if not hits:
            return None
        return Match(name=definition.name, score=sum(t.weight for t in hits), matched=[t.label for t in hits])

    def triggers(self, definition: Definition) -> list[Trigger]:
        """The definition's compiled triggers, compiled on first use of this version of the file."""
        ability = definition.ability
        assert ability is not None
        cached = self._compiled.get(definition.path)
        if cached is None or cached[0] is not ability:
            cached = (ability, compile_triggers(ability.triggers))
            self._compiled[definition.path] = cached
        return cached[1]

    def _forget_removed(self) -> None:
        live = {d.path for d in self.catalog.winners.values()}
        if not live.issuperset(self._compiled):
            self._compiled = {p: v for p, v in self._compiled.items() if p in live}


# What ability_match returns.


class Match(BaseModel):
    name: str = Field(description="Ability name, for ability_run")
    score: int = Field(description=f"Higher fits better: keywords add their word count, patterns {PATTERN_WEIGHT}")
    matched: list[str] = Field(description='What fitted, e.g. ["keyword:deploy", "pattern:deploy.*to.*prod"]')


class MatchList(BaseModel):
    matches: list[Match] = Field(description="Best first; empty when nothing fits")
