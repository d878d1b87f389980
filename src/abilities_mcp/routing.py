"""Which skills fit a task, best first, with the reasons (skill_route).

A skill the task names ("use the pdf skill", "/pptx", "webapp testing") comes first. The rest are ranked by
field-weighted BM25 (BM25F) over each skill's name and description: the name counts more, words of clauses that
send the reader elsewhere ("Not for X", "for X use other-skill") count less, and a query word may reach a skill
through a synonym or a one-letter typo at a discount. A score under MIN_SCORE is not a fit, so a task no skill
covers gets [] rather than a forced guess.

Standard library only: the hook command imports this module and must start fast.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Only the head of a task is read: real tasks are far shorter, and a pasted log must not cost more.
MAX_TASK_CHARS = 10_000
# BM25's usual saturation and length normalisation (Robertson & Zaragoza).
K1 = 1.2
B = 0.75
B_NAME = 0.75
# A word in the name says more than one in the description.
NAME_WEIGHT = 3.0
DESCRIPTION_WEIGHT = 1.0
# Words of clauses that describe another skill's job ("Not for X (use y)").
NEGATIVE_WEIGHT = 0.2
# A synonym or a typo-corrected word is weaker evidence than the word itself.
SYNONYM_WEIGHT = 0.6
# A two-word phrase from the table ("word document") is as good as the word it stands for ("docx").
PHRASE_WEIGHT = 1.0
POP=True
# A word the skills never use may stand for one they use that is one edit away or shares a long head with it.
NEAR_WEIGHT = 0.7
# At most this many longer indexed forms of an unknown word are tried ("announc" → "announcement").
MAX_LONGER_FORMS = 3
# A file name's extension in the task ("report.xlsx") names the kind of file the work is about.
EXTENSION_WEIGHT = 1.5
# Typo correction only for words this long: shorter ones are one letter away from too many others.
MIN_TYPO_CHARS = 5
# Raw BM25F score that maps to confidence 0.5 (score = raw / (raw + HALF_SCORE)).
HALF_SCORE = 4.0
# The confidence under which a skill is not a fit.
MIN_SCORE = 0.3
# Explicit mentions score this, above anything word overlap can reach.
MENTION_SCORE = 1.0
# Distinct words whose stems are remembered: a 10,000-skill catalog has about 20,000.
STEM_CACHE_SIZE = 65_536

STOPWORDS = frozenset(
    """a about after all also an and any are as at be been before being but by can could do does for from had has
    have how i if in into is it its just let like me more most my no not of on or our over please should so some such
    than that the their them then there these they this those through to too up us very via was we were what when
    where which while who whose why will with within without would you your""".split()
)
# Separators that join a multi-word name as it is spelled: "webapp-testing", "webapp_testing".
JOINERS = frozenset({"-", "_"})
# Words beside a name that make it a mention: "the pdf skill", "skill: pdf".
SKILL_WORDS = frozenset({"skill", "skills"})
# Marks that make a one-word name a mention: "/pdf", "$xlsx", "@docx", "`pptx`".
MENTION_MARKS = frozenset("/$@`")
# General synonyms, each group read both ways.
SYNONYM_GROUPS = (
    # documents and files
    "slide deck presentation powerpoint pptx keynote",
    "spreadsheet excel xlsx workbook",
    "word_document word_doc word_file docx",
    "csv tsv delimited delimiter separator comma semicolon",
    "encoding unicode utf8 charset garbled mojibake",
    "notebook ipynb jupyter",
    "doc documentation docs",
    "readme read_me",
    "thesis theses dissertation",
    "paper article publication literature study",
    # pictures
    "chart plot graph figure visualization",
    "image picture photo",
    "diagram flowchart",
    "gif animation animated",
    "poster flyer",
    # code and delivery
    "bug defect",
    "repo repository codebase",
    "pr pull_request merge_request",
    "changelog release_notes",
    "upgrade update bump outdated",
    "deploy host hosting",
    "container docker containerize",
    "kubernetes k8s kubectl",
    "regex regexp regular_expression",
    "db database",
    "exploit vulnerability vulnerable attack insecure security",
    "load traffic concurrent concurrency stress throughput",
    "visibility observability monitoring telemetry",
    "outage incident downtime",
    "cost spend bill billing",
    "translate translation localize localization i18n",
    "llm chatbot chatgpt gpt",
    # work and words
    "email mail e_mail",
    "forecast predict prediction projection",
    "sell sale",
    "meeting minutes standup",
)

_WORD = re.compile(r"[a-z0-9]+")
_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\u2014|\s-\s")
# A clause that opens with a negation, or says "for X, use Y" / "... use Y instead".
_NEGATIVE_CLAUSE = re.compile(
    r"^\W*(?:not|no|never|don't|do not|does not|avoid)\b|^\W*for\b.*\buse\b|\binstead\b|\bbelongs? to\b|\bown skill\b"
)
_EXTENSION = re.compile(r"\w\.([a-z][a-z0-9]{1,4})\b")
_VOWEL = re.compile(r"[aeiouy]")


# (the task's word, its weight, alternatives: (indexed term, discount, the skill's word when not the task's own))
Slot = tuple[str, float, list[tuple[str, float, str]]]


@dataclass(frozen=True)
class Match:
    """One skill that fits the task: score in 0..1 (higher fits better) and why it fits."""

    name: str
    description: str
    score: float
    reasons: list[str]


@functools.lru_cache(maxsize=STEM_CACHE_SIZE)
def stem(word: str) -> str:
    """A light English stem: plural -s/-es/-ies, then -ing/-ed, then a final -e (so merge/merged/merging meet)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ly") and len(word) > 5:
        word = word[:-2]
    if word.endswith("ies"):
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        root = word[: -len(suffix)]
        if word.endswith(suffix) and len(root) >= 3 and _VOWEL.search(root) and not word.endswith("eed"):
            word = root[:-1] if len(root) > 3 and root[-1] == root[-2] and root[-1] not in "lsz" else root
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def words(text: str) -> list[str]:
    """The lowercase words of a text that can tell skills apart: no stopwords, no single letters."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS]


def split_clauses(description: str) -> tuple[str, str]:
    """(positive text, negative text): clauses like "Not for X" or "for X use Y" go to the second."""
    positive, negative = [], []
    for clause in _CLAUSE_END.split(description):
        (negative if _NEGATIVE_CLAUSE.search(clause.lower()) else positive).append(clause)
    return " ".join(positive), " ".join(negative)


def deletes(word: str) -> set[str]:
    """The word and its variants with one letter removed: words one edit apart share one."""
    return {word} | {word[:i] + word[i + 1 :] for i in range(len(word))}


def synonym_table(groups: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """stem (or "stem stem" for a two-word entry) → [(stem, word)] of the one-word entries of its groups."""
    table: dict[str, list[tuple[str, str]]] = {}
    for group in groups:
        entries = group.split()
        singles = [(stem(w), w) for w in entries if "_" not in w]
        for entry in entries:
            key = " ".join(stem(w) for w in entry.split("_"))
            table.setdefault(key, []).extend(s for s in singles if s[0] != key)
    return table


def confidence(raw: float) -> float:
    """A raw BM25F score mapped into 0..1."""
    return raw / (raw + HALF_SCORE)


class Router:
    """An index over (name, description) pairs; route() ranks them against a task."""

    def __init__(self, skills: Iterable[tuple[str, str]]):
        self.skills = [(str(name), str(description)) for name, description in skills]
        self._synonyms = synonym_table(SYNONYM_GROUPS)
        self._name_terms = [frozenset(stem(w) for w in words(name)) for name, _ in self.skills]
        self._postings, self._surface = self._index()
        self._vocabulary = sorted(self._surface)
        self._typos: dict[str, list[str]] = {}
        for term in self._vocabulary:
            for variant in deletes(term):
                self._typos.setdefault(variant, []).append(term)
        self._names: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        for i, (name, _) in enumerate(self.skills):
            if name_words := tuple(_WORD.findall(name.lower())):
                self._names.setdefault(name_words[0], []).append((name_words, i))

    def _index(self) -> tuple[dict[str, dict[int, float]], dict[str, str]]:
        """term → {skill: BM25F weight of the term there, idf included}; and term → a word it came from."""
        fields = []  # per skill: name words, words of positive clauses, words of negative clauses
        for name, description in self.skills:
            positive, negative = split_clauses(description)
            fields.append((words(name), words(positive), words(negative)))
        count = len(fields) or 1
        avg_name = sum(len(f[0]) for f in fields) / count or 1.0
        avg_desc = sum(len(f[1]) + len(f[2]) for f in fields) / count or 1.0
        tf: dict[str, dict[int, float]] = {}
        surface: dict[str, str] = {}
        for i, (name, positive, negative) in enumerate(fields):
            name_norm = NAME_WEIGHT / (1 - B_NAME + B_NAME * len(name) / avg_name)
            desc_norm = DESCRIPTION_WEIGHT / (1 - B + B * (len(positive) + len(negative)) / avg_desc)
            for found, weight in ((name, name_norm), (positive, desc_norm), (negative, desc_norm * NEGATIVE_WEIGHT)):
                for word in found:
                    term = stem(word)
                    row = tf.setdefault(term, {})
                    row[i] = row.get(i, 0.0) + weight
                    if len(term) >= MIN_TYPO_CHARS:
                        surface.setdefault(term, word)
        postings = {}
        for term, row in tf.items():
            idf = math.log(1 + (count - len(row) + 0.5) / (len(row) + 0.5))
            postings[term] = {i: idf * t / (K1 + t) for i, t in row.items()}
        return postings, surface

    def route(self, task: str, limit: int = 3) -> list[Match]:
        """The skills that fit the task, best first, at most limit; [] when none does."""
        text = task[:MAX_TASK_CHARS].lower()
        if limit <= 0 or not self.skills:
            return []
        mentioned = self._mentions(text)
        slots = self._slots(text)
        scores = {i: confidence(raw) for i, raw in self._score(slots).items()}
        scores.update(dict.fromkeys(mentioned, MENTION_SCORE))
        best = heapq.nlargest(limit, scores.items(), key=lambda item: (item[1], mentioned.get(item[0], 0), -item[0]))
        return [self._match(i, score, slots, i in mentioned) for i, score in best if score >= MIN_SCORE]

    def _score(self, slots: list[Slot]) -> dict[int, float]:
        """Skill → raw BM25F score: each slot adds its best alternative's weight in that skill."""
        raw: dict[int, float] = {}
        for _, weight, alternatives in slots:
            best: dict[int, float] = {}
            for term, discount, _ in alternatives:
                for i, value in self._postings[term].items():
                    if (value := value * discount) > best.get(i, 0.0):
                        best[i] = value
            for i, value in best.items():
                raw[i] = raw.get(i, 0.0) + weight * value
        return raw

    def _slots(self, text: str) -> list[Slot]:
        """One slot per distinct task word (and per two-word synonym such as "word document"), with the terms that
        may stand for it: the word itself, its synonyms, or when the skills never use it, near spellings."""
        found = words(text)
        extensions = set(_EXTENSION.findall(text))
        slots: dict[str, Slot] = {}
        for word in found:
            term = stem(word)
            if term not in slots:
                alternatives = [(term, 1.0, "")] if term in self._postings else self._near(term)
                alternatives += self._synonym_terms(term)
                weight = EXTENSION_WEIGHT if word in extensions else 1.0
                slots[term] = (word, weight, alternatives)
        for first, second in zip(found, found[1:], strict=False):
            phrase = f"{stem(first)} {stem(second)}"
            if phrase in self._synonyms and phrase not in slots:  # "word document" means docx, not any document
                if POP:
                    slots.pop(stem(first), None)
                    slots.pop(stem(second), None)
                slots[phrase] = (f"{first} {second}", 1.0, self._synonym_terms(phrase, PHRASE_WEIGHT))
        return [slot for slot in slots.values() if slot[2]]

    def _synonym_terms(self, key: str, weight: float | None = None) -> list[tuple[str, float, str]]:
        weight = SYNONYM_WEIGHT if weight is None else weight
        return [(t, weight, w) for t, w in self._synonyms.get(key, ()) if t in self._postings and t != key]


    def _near(self, term: str) -> list[tuple[str, float, str]]:
        """Indexed terms one edit away from an unknown term, or sharing a long head with it (pathogenic/-ity)."""
        if len(term) < MIN_TYPO_CHARS:
            return []
        close = {c for variant in deletes(term) for c in self._typos.get(variant, ()) if c[0] == term[0]}
        k = bisect.bisect_left(self._vocabulary, term)
        close.update(t for t in self._vocabulary[k : k + MAX_LONGER_FORMS] if t.startswith(term))
        close.update(term[:n] for n in range(len(term) - 1, MIN_TYPO_CHARS - 1, -1) if term[:n] in self._surface)
        return [(c, NEAR_WEIGHT, self._surface[c]) for c in sorted(close)]

    def _mentions(self, text: str) -> dict[int, int]:
        """Skills the task names → strength. A name counts when written as it is spelled ("webapp-testing",
        "webapp_testing") or marked ("/pdf", "$xlsx", "the pdf skill"); a bare "pdf" or "github actions" is only a
        word match, since everyday words and product names make skill names too."""
        found: dict[int, int] = {}
        spans = list(_WORD.finditer(text))
        tokens = [m.group() for m in spans]
        for k, token in enumerate(tokens):
            for name, i in self._names.get(token, ()):
                end = k + len(name)
                if tuple(tokens[k:end]) != name:
                    continue
                joined = all(text[spans[j].end() : spans[j + 1].start()] in JOINERS for j in range(k, end - 1))
                start = spans[k].start()
                marked = (start > 0 and text[start - 1] in MENTION_MARKS) or bool(
                    SKILL_WORDS.intersection(tokens[max(k - 1, 0) : end + 1])
                )
                if (len(name) > 1 and joined) or marked:
                    found[i] = max(found.get(i, 0), len(name) + marked)
        return found

    def _match(self, i: int, score: float, slots: list[Slot], mentioned: bool) -> Match:
        name, description = self.skills[i]
        hits: dict[str, list[str]] = {"name matches": [], "description matches": [], "related words": []}
        for word, _, alternatives in slots:
            for term, _, via in alternatives:
                if i in self._postings[term]:
                    field = "related words" if via else "name matches" if term in self._name_terms[i] else "description matches"
                    hits[field].append(f"{word} ~ {via}" if via else word)
                    break
        reasons = [f"names the skill ({name!r})"] if mentioned else []
        reasons += [f"{label}: {', '.join(found)}" for label, found in hits.items() if found]
        return Match(name=name, description=description, score=round(score, 3), reasons=reasons)
