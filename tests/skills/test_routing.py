"""skill_route's ranking: explicit mentions first, then field-weighted BM25, [] when nothing fits; and the eval set."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from abilities_mcp.skills import router as routing
from abilities_mcp.skills.router import Match, Router, stem
from support import REPO

EVAL = REPO / "benchmarks" / "routing"
# Floors just under the figures measured on all 311 queries of benchmarks/routing (routing_bench.py prints them).
TOP1_FLOOR = 0.86  # measured 0.868 (dev 0.891, test 0.844)
NO_MATCH_PRECISION_FLOOR = 0.95  # measured 0.957 (dev 0.953, test 0.961)
NO_MATCH_RECALL_FLOOR = 0.69  # measured 0.698 (dev 0.641, test 0.754)

SKILLS = [
    ("pdf", "Work with PDF files: extract text and tables, merge or split documents, rotate pages, fill forms."),
    ("docx", "Create and edit Word documents (.docx): headings, tracked changes, comments. Not for PDF files."),
    ("xlsx", "Spreadsheets: formulas, pivot tables, charts and formatting in Excel workbooks."),
    ("pptx", "Build and edit PowerPoint presentations: slides, layouts, speaker notes."),
    ("webapp-testing", "Drive a local web application in a browser to check its behaviour and capture screenshots."),
    ("commit", "Write a conventional commit message for the staged changes."),
    ("code-review", "Review a pull request for bugs, security problems and style before it is merged."),
]
# Every reason is one of these sentences.
REASON = re.compile(r"names the skill \('[\w-]+'\)|(name matches|description matches|related words): \S.*")
# A task that four of the skills fit: code-review, commit, docx and pdf.
FOUR_FIT = "review the pull request, then write a commit message for the merged pdf and docx"


@pytest.fixture(scope="module")
def router() -> Router:
    return Router(SKILLS)


def names(matches: list[Match]) -> list[str]:
    return [m.name for m in matches]


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("merge these two PDFs and rotate page 3", "pdf"),
        ("add a pivot table to my spreadsheet", "xlsx"),
        ("make a slide deck for the board meeting", "pptx"),
        ("write the commit message for my staged changes", "commit"),
        ("turn on tracked changes in the Word document", "docx"),
        ("fill in the form in report.pdf", "pdf"),
    ],
    ids=[
        "plural-of-name",
        "description-words",
        "synonyms-slide-deck",
        "name-and-description",
        "word-document",
        "extension",
    ],
)
def test_a_task_routes_to_the_skill_whose_words_it_uses(router: Router, task: str, first: str) -> None:
    assert names(router.route(task))[0] == first


@pytest.mark.parametrize(
    "mention",
    ["use the pdf skill on", "/pdf:", "$pdf for", "the `pdf` skill:"],
    ids=["the-x-skill", "slash", "dollar", "backticks"],
)
def test_an_explicit_mention_wins_over_stronger_word_overlap(router: Router, mention: str) -> None:
    overlap = "these spreadsheets, formulas, pivot tables and charts"
    assert names(router.route(f"the pdf on {overlap}"))[:2] == ["xlsx", "pdf"]  # bare "pdf" is only a word
    matches = router.route(f"{mention} {overlap}")
    assert names(matches)[:2] == ["pdf", "xlsx"]
    assert matches[0].score == 1.0
    assert matches[0].reasons[0] == "names the skill ('pdf')"


@pytest.mark.parametrize(
    "task", ["please do webapp-testing on the login form", "run $webapp_testing", "/webapp-testing"]
)
def test_a_multi_word_name_written_as_spelled_is_a_mention(router: Router, task: str) -> None:
    assert router.route(task)[0].reasons[0] == "names the skill ('webapp-testing')"


def test_a_multi_word_name_written_with_spaces_is_word_overlap_not_a_mention(router: Router) -> None:
    # "github actions" or "code review" are everyday phrases too, so spaces do not make a mention.
    first = router.route("webapp testing of the login form")[0]
    assert first.name == "webapp-testing"
    assert first.reasons == ["name matches: webapp, testing"]


def test_a_bare_one_word_name_is_evidence_but_not_a_mention(router: Router) -> None:
    first = router.route("merge the pdf files")[0]
    assert first.name == "pdf"
    assert first.score < 1.0
    assert first.reasons == ["name matches: pdf", "description matches: merge, files"]


def test_a_word_in_a_not_for_clause_counts_less_than_the_same_word_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "MIN_SCORE", 0.0)  # every score shows

    def docx_score(sentence: str) -> float:
        skills = [s for s in SKILLS if s[0] != "docx"] + [("docx", f"Create and edit Word documents. {sentence}")]
        return {m.name: m.score for m in Router(skills).route("pdf files", 7)}["docx"]

    assert 0 < docx_score("Not for PDF files.") < docx_score("Also PDF files.")
    assert 0 < docx_score("For PDF files use pdf.") < docx_score("Also PDF files.")


def test_a_two_word_synonym_counts_as_a_synonym_not_as_the_word_it_stands_for() -> None:
    router = Router([("docx", "Edit office files."), ("pdf", "Work with PDF files.")])
    by_phrase, by_word = router.route("word document"), router.route("docx")  # a synonym's discount, not the word's
    assert names(by_phrase) == names(by_word) == ["docx"]
    assert by_phrase[0].reasons == ["related words: word document ~ docx"]
    assert by_phrase[0].score < by_word[0].score


def test_how_many_and_how_much_ask_the_same() -> None:
    router = Router(SKILLS + [("load-testing", "Find out how much traffic a web service can take.")])
    first = router.route("how many visitors can the web service take")[0]  # "many" and "take" alone would not do
    assert first.name == "load-testing"
    assert first.reasons == ["description matches: web, service, take", "related words: many ~ much"]


def test_a_framework_implies_its_language_one_way_only() -> None:
    router = Router(
        [
            ("python-testing", "Write pytest tests for Python code."),
            ("js-testing", "Write Jest or Vitest tests for JavaScript and TypeScript code."),
            ("api-docs", "Generate API reference docs for a FastAPI service."),
        ]
    )
    first = router.route("test that the django view returns 404")[0]
    assert first.name == "python-testing"
    assert first.reasons == ["name matches: test", "related words: django ~ python"]
    assert names(router.route("tests for my express middleware"))[0] == "js-testing"
    # Python does not imply FastAPI: a Python task finds nothing in api-docs through it.
    assert "api-docs" not in names(router.route("python tests", limit=3))


@pytest.mark.parametrize(
    "task", ["we're stuck, help", "you've got to help", "they'll want it", "don't know", "i'm lost, dont know"]
)
def test_contractions_leave_no_fragment_that_matches_a_skill(task: str) -> None:
    router = Router([("regex-helper", "Write and debug regular expressions (re, ve, ll, don, dont)."), *SKILLS])
    assert router.route(task) == []


def test_a_possessive_is_the_word_itself() -> None:
    assert names(Router(SKILLS).route("fix the spreadsheet’s formulas"))[0] == "xlsx"
    assert routing.words("the user's report, don't") == ["user", "report"]


@pytest.mark.parametrize(
    "task",
    ["book me a flight to Lisbon next Tuesday", "what is the capital of Australia", "bake sourdough bread at home"],
)
def test_a_task_no_skill_fits_gets_no_match(router: Router, task: str) -> None:
    assert router.route(task) == []


# --- saying "no skill" -------------------------------------------------------------------------------------------

# The two examples, on 144 real published skills: each was routed on one incidental word.
CATALOG = REPO.parent / "shared" / "routing-catalog"
INCIDENTAL = {
    "set up a cron job that rotates the logs every night": "commit",  # on "every"
    "bump nginx worker_connections to 4096": "scientific-brainstorming",  # on "connections"
}


@pytest.fixture(scope="module")
def real_router() -> Router:
    if not CATALOG.is_dir():
        pytest.skip(f"the shared catalog of real skills is not at {CATALOG}")
    skills = []
    for path in sorted(CATALOG.glob("*/SKILL.md")):
        front = yaml.safe_load(path.read_text().split("---")[1])
        skills.append((front["name"], " ".join(str(front["description"]).split())))
    return Router(skills)


@pytest.mark.parametrize("task", list(INCIDENTAL), ids=["cron-every", "nginx-connections"])
def test_one_incidental_word_is_no_fit_among_real_skills(real_router: Router, task: str) -> None:
    assert INCIDENTAL[task] in {s[0] for s in real_router.skills}
    assert real_router.route(task) == []


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("use the commit skill for this: set up a cron job that rotates the logs every night", "commit"),
        ("/scientific-brainstorming bump nginx worker_connections to 4096", "scientific-brainstorming"),
        ("write a commit message for the logrotate cron job i just staged", "commit"),
        ("brainstorm research hypotheses about why our cells lose connections", "scientific-brainstorming"),
    ],
    ids=["mention", "slash-mention", "real-task-same-domain", "real-task-same-word"],
)
def test_the_same_words_still_route_when_the_task_is_about_the_skill(
    real_router: Router, task: str, first: str
) -> None:
    assert names(real_router.route(task))[:1] == [first]


def test_generic_words_alone_are_no_fit() -> None:
    router = Router(SKILLS + [("standup", "Run the team standup every day: what each person did, what is next.")])
    assert router.route("water the plants every day, one thing at a time") == []  # every, day, one, thing, time
    assert names(router.route("run our team standup every day"))[:1] == ["standup"]


def test_common_verbs_alone_are_no_fit() -> None:
    """set, write, keep, find, explain, remove, rename, based: what a task does, not what it is about."""
    router = Router(
        SKILLS + [("notes", "Write and keep meeting notes; find and explain the decisions, based on the log.")]
    )
    assert router.route("write down where to find my keys and explain it to the kids") == []
    assert names(router.route("write meeting notes for today's call"))[:1] == ["notes"]


def test_a_lone_name_word_in_a_task_about_something_else_is_no_fit() -> None:
    router = Router(SKILLS + [("cloud-cost", "Analyze cloud spend and billing exports; rightsize idle resources.")])
    assert router.route("how much does it cost to replace a car battery") == []
    assert router.route("latte cost in lisbon") == []
    # ... but the name word alone, or with the skill's own words, is a task about it.
    assert names(router.route("cost"))[:1] == ["cloud-cost"]
    assert names(router.route("why did our cloud cost double, find the idle resources"))[:1] == ["cloud-cost"]


def test_a_task_mostly_about_words_no_skill_has_is_no_fit(router: Router, monkeypatch: pytest.MonkeyPatch) -> None:
    task = "airport security: queue etiquette, boarding passes, liquids, carry-on luggage"
    assert router.route(task) == []
    assert names(router.route("airport security"))[:1] == ["code-review"]  # the same evidence, less else
    monkeypatch.setattr(routing, "COVERAGE_EXPONENT", 0.0)  # coverage is what declines it
    assert names(router.route(task))[:1] == ["code-review"]


def test_without_the_fit_test_the_best_overlap_is_returned_as_before() -> None:
    tools = [("echo", "Echoes back the input string"), ("get-sum", "Returns the sum of two numbers")]
    assert Router(tools).route("echo hello") == []  # a lone name word, the rest unknown
    assert Router(tools).route("add two numbers") == []  # generic words only
    assert names(Router(tools, fit_test=False).route("echo hello")) == ["echo"]
    assert names(Router(tools, fit_test=False).route("add two numbers")) == ["get-sum"]


def test_an_explicit_mention_needs_no_other_evidence(router: Router) -> None:
    assert names(router.route("use the pptx skill to plan my grandmother's birthday picnic")) == ["pptx"]


@pytest.mark.parametrize(
    ("task", "mentioned"),
    [
        ("use the pdf skill", ["pdf"]),
        ("fill it in with pdf-forms", ["pdf-forms"]),
        ("check the pdf-forms-ocr output", ["pdf-forms-ocr", "pdf-forms"]),  # a one-word name needs a mark
    ],
    ids=["shortest", "middle", "longest-first"],
)
def test_names_that_open_with_the_same_words_are_mentioned_as_far_as_written(task: str, mentioned: list[str]) -> None:
    alike = [("pdf", "PDF files"), ("pdf-forms", "PDF forms"), ("pdf-forms-ocr", "Scanned PDF forms")]
    matches = Router(alike).route(task, 3)
    assert [m.name for m in matches if m.score == routing.MENTION_SCORE] == mentioned


def test_the_same_task_routed_again_gets_the_same_answer(router: Router) -> None:
    # The rows a query reads are kept for the next: a query that changed them would change its successors' scores.
    task = "review the slide deck and the pull request, then merge the PDFs in report.pdf"
    first = router.route(task, 5)
    assert len(first) >= 2
    assert router.route(task, 5) == first


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("could someone exploit this file upload endpoint?", "security-audit"),
        ("how many concurrent users can our api survive before it falls over?", "load-testing"),
        (
            "we have no visibility into which requests fail in prod, add something so we can see it",
            "logging-observability",
        ),
        ("what formula do i put in column D to flag duplicates in column A", "spreadsheet-formulas"),
        ("tell my landlord politely that the rent will be 5 days late", "email-drafting"),
    ],
    ids=["synonym", "many-much", "paraphrase", "lone-name-word-in-domain", "lone-description-word"],
)
def test_a_real_paraphrase_of_the_eval_set_still_routes(task: str, first: str) -> None:
    assert names(Router(load_eval()[0]).route(task))[:1] == [first]


@pytest.mark.parametrize(
    "task", ["", "   ", "\n\t", "the and of to"], ids=["empty", "spaces", "whitespace", "stopwords"]
)
def test_an_empty_task_gets_no_match(router: Router, task: str) -> None:
    assert router.route(task) == []


def test_an_empty_skill_set_matches_nothing() -> None:
    assert Router([]).route("merge these pdfs") == []


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 10])
def test_limit_caps_the_matches_and_keeps_the_best(router: Router, limit: int) -> None:
    every = router.route(FOUR_FIT, limit=10)
    assert sorted(names(every)) == ["code-review", "commit", "docx", "pdf"]
    assert router.route(FOUR_FIT, limit) == every[:limit]


def test_scores_lie_in_0_to_1_best_first_rounded_to_3_decimals(router: Router) -> None:
    scores = [m.score for m in router.route(FOUR_FIT, limit=10)]
    assert all(0 < s <= 1 and s == round(s, 3) for s in scores)
    assert scores == sorted(scores, reverse=True)


def test_every_match_explains_itself_in_words(router: Router, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "MIN_SCORE", 0.0)  # the weak matches too
    matches = router.route("use the docx skill, then fix the slides and the spreadhseet and merge the PDFs", 7)
    assert len(matches) >= 4
    for match in matches:
        assert match.reasons
        assert all(REASON.fullmatch(reason) for reason in match.reasons), match.reasons
    by_name = {m.name: m.reasons for m in matches}
    assert by_name["docx"][0] == "names the skill ('docx')"
    assert by_name["pdf"] == ["name matches: pdfs", "description matches: merge"]
    assert by_name["pptx"] == ["description matches: slides"]
    assert by_name["xlsx"] == ["related words: spreadhseet ~ spreadsheets"]


def test_matches_carry_the_skill_description(router: Router) -> None:
    assert router.route("rotate pages of a pdf")[0].description == dict(SKILLS)["pdf"]


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("help me with spreadhseet formulas", "xlsx"),
        ("webap-testing the signup page", "webapp-testing"),
        ("a presentaton with speaker notes", "pptx"),
    ],
    ids=["transposed-letters", "missing-letter-in-name", "missing-letter"],
)
def test_a_typo_still_routes(router: Router, task: str, first: str) -> None:
    assert names(router.route(task))[0] == first


def test_a_huge_task_returns_from_its_head(router: Router) -> None:
    task = "merge these PDFs and rotate the pages. " + "lorem ipsum dolor sit amet " * 4_000
    assert len(task) > 100_000
    assert names(router.route(task))[0] == "pdf"


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("merge (these) [pdfs]+ .* \\1 $^ | ? {2,}", "pdf"),
        ("pdf\x00\x1b[31m merge", "pdf"),
        ("ünïcödé pdf 📄 merge", "pdf"),
        ("((((((((a+)+)+)+)+)+)+)+$", None),
        ("/", None),
    ],
    ids=["regex-metacharacters", "control-characters", "unicode", "catastrophic-pattern", "lone-slash"],
)
def test_special_characters_in_the_task_are_harmless(router: Router, task: str, first: str | None) -> None:
    assert names(router.route(task))[:1] == ([first] if first else [])


def test_skills_in_any_script_are_matched_by_their_words() -> None:
    router = Router([("übersetzung", "Texte ins Französische übersetzen"), ("pdf", "Work with PDF files.")])
    assert names(router.route("die texte übersetzen bitte")) == ["übersetzung"]


@pytest.mark.parametrize(
    ("word", "root"),
    [("merges", "merg"), ("merging", "merg"), ("merged", "merg"), ("slides", "slid"), ("spreadsheets", "spreadsheet")],
)
def test_stemming_lets_word_forms_meet(word: str, root: str) -> None:
    assert stem(word) == root


def test_the_module_imports_neither_the_sdk_nor_pydantic_nor_yaml() -> None:
    # The hook command imports it on every tool call; a fresh interpreter shows what it pulls in.
    code = "import json, sys, abilities_mcp.skills.router; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "re" in json.loads(loaded)
    assert not {"mcp", "pydantic", "anyio", "yaml"} & set(json.loads(loaded))


# --- the labeled eval set -------------------------------------------------------------------------------------


def load_eval() -> tuple[list[tuple[str, str]], list[dict]]:
    skills = yaml.safe_load((EVAL / "skills.yaml").read_text())
    queries = yaml.safe_load((EVAL / "queries.yaml").read_text())
    return [(s["name"], s["description"]) for s in skills], queries


def test_the_eval_set_routes_its_expected_skill_first_and_declines_what_no_skill_fits() -> None:
    skills, queries = load_eval()
    router = Router(skills)
    got = [(q.get("expect"), names(router.route(q["query"]))) for q in queries]
    fits = [(expect, found) for expect, found in got if expect is not None]
    declined = [expect for expect, found in got if not found]
    top1 = sum(bool(found) and found[0] == expect for expect, found in fits) / len(fits)
    precision = sum(expect is None for expect in declined) / len(declined)
    recall = sum(not found for expect, found in got if expect is None) / sum(expect is None for expect, _ in got)
    assert top1 >= TOP1_FLOOR
    assert precision >= NO_MATCH_PRECISION_FLOOR
    assert recall >= NO_MATCH_RECALL_FLOOR
