"""`when:` conditions: the small expression language of DESIGN §3, parsed to a tree and evaluated without eval."""

import pytest

from abilities_mcp.abilities.expressions import MAX_EXPRESSION_LENGTH, ExpressionError, parse_condition

INPUTS = {"env": "production", "count": "10", "n": 3, "flag": True, "tags": ["a", "b"], "empty": None}
STEPS = {
    "build": {"status": "completed", "output": "build ok: 12 tests passed", "exit_code": 0},
    "lint": {"status": "failed", "output": "", "exit_code": 2},
}


def holds(source: str, *, need_failed: bool = False) -> bool:
    return parse_condition(source).evaluate(INPUTS, STEPS, need_failed)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('"production" == "production"', True),
        ("'production' == \"production\"", True),
        ("'it\\'s' == \"it's\"", True),
        ("1.5 > 1", True),
        ("-1 < 0", True),
        ("true", True),
        ("false", False),
        ("null == null", True),
        ("true == false", False),
    ],
    ids=[
        "double-quoted",
        "either-quote",
        "escaped-quote",
        "decimal",
        "negative",
        "true",
        "false",
        "null",
        "booleans-compare",
    ],
)
def test_literals_evaluate_to_their_values(source, expected) -> None:
    assert holds(source) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('inputs.env == "production"', True),
        ('inputs.env != "production"', False),
        ("inputs.flag == true", True),
        ("inputs.empty == null", True),
        ("inputs.missing == null", True),
        ('steps.build.status == "completed"', True),
        ('steps.lint.status == "completed"', False),
        ("steps.lint.exit_code == 2", True),
        ('"12 tests" in steps.build.output', True),
        ("steps.unknown.status == null", True),
    ],
    ids=[
        "input-equal",
        "input-not-equal",
        "boolean-input",
        "null-input",
        "absent-input-is-null",
        "step-status",
        "failed-step-status",
        "step-exit-code",
        "step-output",
        "step-without-result-is-null",
    ],
)
def test_references_read_inputs_and_step_results(source, expected) -> None:
    assert holds(source) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("inputs.n < 4", True),
        ("inputs.n <= 3", True),
        ("inputs.n > 3", False),
        ("inputs.n >= 3", True),
        ('"a" in inputs.tags', True),
        ('"c" in inputs.tags', False),
        ('"c" not in inputs.tags', True),
        ('inputs.env in ["staging", "production"]', True),
        ('inputs.env not in ["staging", "production"]', False),
        ('"duct" in inputs.env', True),
        ('"xyz" not in inputs.env', True),
        ("1 in 5", False),
    ],
    ids=[
        "lt",
        "le",
        "gt",
        "ge",
        "in-list",
        "not-in-list",
        "not-in-keyword",
        "in-literal-list",
        "not-in-literal-list",
        "substring",
        "not-substring",
        "in-a-number-is-false",
    ],
)
def test_comparison_operators(source, expected) -> None:
    assert holds(source) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("true and false", False),
        ("true && true", True),
        ("false or true", True),
        ("false || false", False),
        ("not true", False),
        ("!false", True),
        ("!(true && false)", True),
        ("true or true and false", True),
        ("(true or true) and false", False),
        ("true || true && false", True),
        ("not true or true", True),
        ('not inputs.env == "staging"', True),
        ('inputs.env == "production" and steps.build.status == "completed"', True),
    ],
    ids=[
        "and",
        "ampersands",
        "or",
        "pipes",
        "not",
        "bang",
        "bang-parentheses",
        "and-binds-tighter-than-or",
        "parentheses-override",
        "symbolic-precedence",
        "not-binds-tighter-than-or",
        "not-applies-to-the-comparison",
        "conjunction-of-comparisons",
    ],
)
def test_boolean_operators_and_parentheses(source, expected) -> None:
    assert holds(source) is expected


@pytest.mark.parametrize(
    ("source", "need_failed", "expected"),
    [
        ("always()", False, True),
        ("always()", True, True),
        ("failure()", True, True),
        ("failure()", False, False),
        ("success()", False, True),
        ("success()", True, False),
    ],
    ids=[
        "always-on-success",
        "always-on-failure",
        "failure-after-failure",
        "failure-after-success",
        "success-after-success",
        "success-after-failure",
    ],
)
def test_status_functions_follow_whether_a_needed_step_failed(source, need_failed, expected) -> None:
    assert holds(source, need_failed=need_failed) is expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("inputs.count > 5", True),
        ("inputs.count == 10", True),
        ('inputs.count == "10.0"', True),
        ('"10" > "9"', True),
        ("inputs.n == '3'", True),
        ('10 in ["10", "20"]', True),
    ],
    ids=["greater", "equal", "decimal-text", "both-text", "number-equals-text", "number-in-text-list"],
)
def test_numbers_written_as_text_compare_as_numbers(source, expected) -> None:
    assert holds(source) is expected


@pytest.mark.parametrize(
    "source",
    ["inputs.env > 5", '"abc" < 1', "inputs.missing >= 0", "inputs.tags < 3", "inputs.env == 5"],
    ids=["word-above-number", "word-below-number", "null-against-number", "list-against-number", "word-equals-number"],
)
def test_comparing_unlike_types_is_false_not_an_error(source) -> None:
    assert holds(source) is False


def test_a_condition_reports_the_inputs_steps_and_functions_it_names() -> None:
    cond = parse_condition('inputs.env == "x" and steps.build.status == "completed" or failure() or inputs.n in [1]')
    assert (cond.inputs, cond.steps, cond.functions) == ({"env", "n"}, {"build"}, {"failure"})


@pytest.mark.parametrize(
    ("source", "hint"),
    [
        ("inputs.env ==", "ends too early; a value is missing"),
        ("(true", "ends too early"),
        ("[1, 2", "ends too early"),
        ("", "ends too early"),
        ("inputs.env = 'x'", "cannot read"),
        ('inputs.env == "prod', "cannot read"),
        ("inputs.env @ 1", "cannot read '@ 1'"),
        ("true true", "unexpected 'true'"),
        ("production", "quote plain strings"),
        ("inputs.env.name", "use inputs.<name> or steps.<id>.status|output|exit_code"),
        ("steps.build.stdout", "use inputs.<name> or steps.<id>.status|output|exit_code"),
        ("cancelled()", "unknown function cancelled(); use one of always(), failure(), success()"),
        ("always(1)", "expected ')'"),
        ("== 1", "expected a value"),
    ],
    ids=[
        "missing-right-side",
        "unclosed-parenthesis",
        "unclosed-list",
        "empty",
        "single-equals",
        "unterminated-string",
        "unknown-operator",
        "two-values",
        "bare-word",
        "input-with-a-field",
        "unknown-step-field",
        "unknown-function",
        "function-with-arguments",
        "operator-first",
    ],
)
def test_a_condition_that_does_not_parse_raises_an_error_saying_what_is_wrong(source, hint) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_condition(source)
    assert hint in str(caught.value)


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os')",
        "__import__('os').system('touch pwned')",
        "exec('x')",
        "open('/etc/passwd')",
        "inputs.env.__class__",
        "lambda: 1",
        "[x for x in inputs]",
        "inputs['env']",
    ],
    ids=["import", "import-system", "exec", "open", "dunder-attribute", "lambda", "comprehension", "subscript"],
)
def test_python_code_is_refused_not_evaluated(source, tmp_path, monkeypatch) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    with pytest.raises(ExpressionError):
        parse_condition(source).evaluate(INPUTS, STEPS, False)
    assert list(workdir.iterdir()) == []


def test_an_input_named_like_a_python_attribute_is_just_an_input() -> None:
    cond = parse_condition("inputs.__class__ == null")
    assert cond.inputs == {"__class__"}
    assert cond.evaluate({}, {}, False) is True


def test_a_condition_longer_than_the_limit_is_refused_with_the_limit() -> None:
    source = " or ".join(["true"] * (MAX_EXPRESSION_LENGTH // 4))
    with pytest.raises(ExpressionError, match=f"longer than {MAX_EXPRESSION_LENGTH} characters"):
        parse_condition(source)


@pytest.mark.parametrize(
    ("source", "value"),
    [("(" * 400 + "true" + ")" * 400, True), ("!" * 1501 + "true", False), ("not " * 450 + "true", True)],
    ids=["nested-parentheses", "repeated-bang", "repeated-not"],
)
def test_a_deeply_nested_condition_under_the_length_limit_parses_or_is_refused_but_never_crashes(source, value):
    # A RecursionError here escapes the loader's ExpressionError handling and breaks ability_list for every file.
    assert len(source) <= MAX_EXPRESSION_LENGTH
    try:
        cond = parse_condition(source)
    except ExpressionError:
        return
    assert cond.evaluate({}, {}, False) is value
