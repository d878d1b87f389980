"""Durations as authors write them (DESIGN §3: 500ms | 30s | 5m | 1h | 1h30m | bare seconds)."""

import pytest

from abilities_mcp.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("1m30s500ms", 90.5),
        ("2.5h", 9000.0),
        ("1d", 86400.0),
        ("90", 90.0),
        ("1.5", 1.5),
        (45, 45.0),
        (0.25, 0.25),
        (" 30s ", 30.0),
        ("1h 30m", 5400.0),
    ],
    ids=[
        "milliseconds",
        "seconds",
        "minutes",
        "hours",
        "hours-and-minutes",
        "three-units",
        "fractional-hours",
        "days",
        "bare-seconds-text",
        "bare-fractional-seconds-text",
        "yaml-integer",
        "yaml-float",
        "surrounding-spaces",
        "space-between-parts",
    ],
)
def test_a_duration_in_an_accepted_form_parses_to_seconds(text, seconds) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["5 minutes", "", "abc", "m", "5x", "30S", "1h30", "h1", "5mm", "-5", "1e3", True],
    ids=[
        "english-words",
        "empty",
        "word",
        "unit-without-number",
        "unknown-unit",
        "uppercase-unit",
        "trailing-number-without-unit",
        "unit-before-number",
        "doubled-unit",
        "negative-text",
        "exponent",
        "boolean",
    ],
)
def test_a_duration_in_another_form_is_refused_with_the_accepted_forms(text) -> None:
    with pytest.raises(ValueError, match="is not a duration; write a duration like 500ms, 30s, 5m, 1h, 1h30m"):
        parse_duration(text)


@pytest.mark.parametrize("value", ["0", "0s", "0ms", 0, -1, -0.5], ids=["zero-text", "0s", "0ms", "zero", "-1", "-0.5"])
def test_a_duration_that_is_not_positive_is_refused(value) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        parse_duration(value)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), "inf", "nan"], ids=["nan", "inf", "inf-text", "nan-text"]
)
def test_a_duration_that_is_not_a_finite_number_is_refused(value) -> None:
    # YAML reads `timeout: .nan` / `.inf` as floats; a step can neither wait NaN seconds nor forever.
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.5, "500ms"),
        (30, "30s"),
        (59.5, "59.5s"),
        (60, "1m"),
        (90, "1m30s"),
        (3600, "1h"),
        (5400, "1h30m"),
        (3661, "1h1m1s"),
    ],
    ids=[
        "under-a-second",
        "seconds",
        "fractional-seconds",
        "one-minute",
        "minute-and-seconds",
        "one-hour",
        "hour-and-minutes",
        "all-three",
    ],
)
def test_format_duration_writes_seconds_in_the_short_form_authors_use(seconds, text) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("text", ["500ms", "30s", "5m", "1h", "1h30m", "1h1m1s"])
def test_a_formatted_duration_parses_back_to_the_same_seconds(text) -> None:
    assert parse_duration(format_duration(parse_duration(text))) == parse_duration(text)
