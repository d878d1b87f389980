"""Which abilities fit a free-text request, ranked by their triggers (DESIGN §5, ability_match).

Every ability whose keywords or patterns fit is returned, best first: the caller sees the whole field, not the
first file that happened to match.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ..phrases import MAX_TEXT_CHARS, PATTERN_WEIGHT, Trigger, compile_triggers, score
from .catalog import Catalog
from .loader import Definition
from .models import Ability


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
        points, labels = score(self.triggers(definition), text)
        if not labels:
            return None
        return Match(name=definition.name, score=points, matched=labels)

    def triggers(self, definition: Definition) -> list[Trigger]:
        """The definition's compiled triggers, compiled on first use of this version of the file."""
        ability = definition.ability
        assert ability is not None
        cached = self._compiled.get(definition.path)
        if cached is None or cached[0] is not ability:
            cached = (ability, compile_triggers(ability.triggers.keywords, ability.triggers.patterns))
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
