"""`{{...}}` interpolation: plain text in prompts; in a script's `run`, exactly one word that is never shell code."""

import os
import subprocess
from pathlib import Path

import pytest

from abilities_mcp.abilities.templates import TemplateError, parse_reference, references, render_shell, render_text

HOSTILE_VALUES = [
    "$(touch pwned)",
    "`touch pwned`",
    '"; touch pwned; echo "',
    "'; touch pwned; echo '",
    "*",
    "a  b   c",
    "line one\nline two",
    "$HOME ${HOME} \\n %s",
    "-n",
    "",
]
HOSTILE_IDS = [
    "command-substitution",
    "backticks",
    "double-quote-breakout",
    "single-quote-breakout",
    "glob",
    "spaces",
    "newline",
    "dollars-backslash-percent",
    "option-like",
    "empty",
]


def resolver(values: dict[str, object]):
    def resolve(ref: tuple[str, ...]) -> object:
        return values[ref[1]] if ref[0] == "input" else values[f"{ref[1]}.{ref[2]}"]

    return resolve


def run_shell(template: str, values: dict[str, object], cwd: Path) -> str:
    """Render a `run` command as the engine does and execute it with `sh -c`; return stdout."""
    command, env = render_shell(template, resolver(values))
    done = subprocess.run(
        ["sh", "-c", command], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder holding a few files, so an unquoted `*` would visibly expand."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "file-a").touch()
    (path / "file-b").touch()
    return path


@pytest.mark.parametrize(
    ("template", "before", "after"),
    [
        ("printf '[%s]\\n' {{inputs.v}}", "", ""),
        ("printf '[%s]\\n' \"{{inputs.v}}\"", "", ""),
        ("printf '[%s]\\n' '{{inputs.v}}'", "", ""),
        ("printf '[%s]\\n' pre{{inputs.v}}post", "pre", "post"),
        ("printf '[%s]\\n' \"before {{inputs.v}} after\"", "before ", " after"),
        ("printf '[%s]\\n' 'before {{inputs.v}} after'", "before ", " after"),
        ("printf '[%s]\\n' \"$(printf %s {{inputs.v}})\"", "", ""),
        ("printf '[%s]\\n' \"$(printf %s '{{inputs.v}}')\"", "", ""),
        ("printf '[%s]\\n' \"it's {{inputs.v}}\"", "it's ", ""),
        ("printf '[%s]\\n' \\'{{ inputs.v }}", "'", ""),
    ],
    ids=[
        "bare",
        "double-quoted",
        "single-quoted",
        "inside-a-word",
        "inside-double-quoted-text",
        "inside-single-quoted-text",
        "inside-command-substitution",
        "single-quoted-inside-command-substitution",
        "apostrophe-inside-double-quotes",
        "after-an-escaped-quote",
    ],
)
@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=HOSTILE_IDS)
def test_a_value_in_a_script_arrives_as_exactly_one_word_and_never_runs(template, before, after, value, workdir):
    out = run_shell(template, {"v": value}, workdir)
    assert out == f"[{before}{value}{after}]\n"
    assert not (workdir / "pwned").exists()


@pytest.mark.parametrize(
    "template",
    [
        "# say \"hi\nprintf '[%s]\\n' {{inputs.v}}",
        "# don't\nprintf '[%s]\\n' {{inputs.v}}",
        "cat <<EOF\n[{{inputs.v}}]\nEOF",
        "cat <<E\"O\"F\nliteral\nEOF\nprintf '[%s]\\n' {{inputs.v}}",
        "cat <<'E'OF\nliteral\nEOF\nprintf '[%s]\\n' {{inputs.v}}",
        "cat <<E\\OF\nliteral\nEOF\nprintf '[%s]\\n' {{inputs.v}}",
    ],
    ids=[
        "after-a-comment-with-a-double-quote",
        "after-a-comment-with-an-apostrophe",
        "in-a-heredoc",
        "after-a-heredoc-whose-delimiter-is-partly-double-quoted",
        "after-a-heredoc-whose-delimiter-is-partly-single-quoted",
        "after-a-heredoc-whose-delimiter-has-a-backslash",
    ],
)
def test_a_value_after_a_comment_or_in_a_heredoc_still_arrives_as_exactly_the_value(template, workdir) -> None:
    # Quotes inside comments are not quotes to the shell; the renderer must not count them. A heredoc ends at its
    # delimiter after quote removal (<<E"O"F ends at EOF), and what follows is a command again.
    assert run_shell(template, {"v": "a  b *"}, workdir).endswith("[a  b *]\n")


def test_a_backtick_command_substitution_gets_the_value_as_one_word(workdir) -> None:
    out = run_shell("printf '[%s]\\n' `printf '%s' {{inputs.v}}`", {"v": "x"}, workdir)
    assert out == "[x]\n"


def test_each_placeholder_gets_its_own_variable_and_the_command_holds_no_value() -> None:
    command, env = render_shell(
        "echo {{inputs.a}} {{steps.build.output}} {{inputs.a}}", resolver({"a": "$(rm -rf ~)", "build.output": "done"})
    )
    assert "rm -rf" not in command
    assert sorted(env.values()) == ["$(rm -rf ~)", "$(rm -rf ~)", "done"]
    assert len(env) == 3


def test_a_nul_in_a_value_is_dropped_before_it_reaches_the_environment() -> None:
    _, env = render_shell("echo {{inputs.a}}", resolver({"a": "a\0b"}))
    assert list(env.values()) == ["ab"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (5, "5"),
        (2.5, "2.5"),
        (["a", 1], '["a", 1]'),
        ({"k": "é"}, '{"k": "é"}'),
    ],
    ids=["null-is-empty", "true", "false", "integer", "number", "array-as-json", "object-as-json"],
)
def test_values_read_as_plain_text_in_a_shell_word(value, text, workdir) -> None:
    assert run_shell("printf '%s' {{inputs.v}}", {"v": value}, workdir) == text


def test_render_text_interpolates_prompts_as_plain_text() -> None:
    text = render_text(
        "Deploy {{inputs.version}} to {{ inputs.env }} after {{steps.build.output}} (exit {{steps.build.exit_code}})",
        resolver({"version": "$(whoami)", "env": ["eu", "us"], "build.output": "ok", "build.exit_code": 0}),
    )
    assert text == 'Deploy $(whoami) to ["eu", "us"] after ok (exit 0)'


def test_render_text_leaves_text_without_placeholders_alone() -> None:
    assert render_text("no {placeholders} here {{", resolver({})) == "no {placeholders} here {{"


def test_references_lists_every_placeholder_in_order() -> None:
    found = references("{{inputs.x}} {{ steps.build.status }} {x} {{steps.b-2.exit_code}} {{inputs.x}}")
    assert found == [("input", "x"), ("step", "build", "status"), ("step", "b-2", "exit_code"), ("input", "x")]


@pytest.mark.parametrize(
    ("text", "reference"),
    [
        ("inputs.version", ("input", "version")),
        ("steps.build.output", ("step", "build", "output")),
        ("steps.build.exit_code", ("step", "build", "exit_code")),
        ("steps.build.status", ("step", "build", "status")),
    ],
    ids=["input", "step-output", "step-exit-code", "step-status"],
)
def test_parse_reference_reads_inputs_and_step_fields(text, reference) -> None:
    assert parse_reference(text) == reference


@pytest.mark.parametrize(
    "text",
    ["inputs", "inputs.", "input.version", "inputs.a.b", "steps.build", "steps.build.stdout", "env.HOME", "", "x"],
    ids=[
        "bare-inputs",
        "empty-input-name",
        "singular-input",
        "input-with-a-field",
        "step-without-field",
        "unknown-step-field",
        "environment",
        "empty",
        "bare-word",
    ],
)
def test_parse_reference_refuses_anything_else_and_shows_the_accepted_forms(text) -> None:
    with pytest.raises(TemplateError) as caught:
        parse_reference(text)
    message = str(caught.value)
    assert f"{{{{{text}}}}} is not a reference" in message
    assert "{{inputs.<name>}}" in message and "{{steps.<id>.output}}" in message


def test_references_raises_on_a_bad_placeholder() -> None:
    with pytest.raises(TemplateError, match=r"\{\{env.HOME\}\} is not a reference"):
        references("echo {{inputs.x}} {{env.HOME}}")


def test_rendering_a_bad_placeholder_raises_instead_of_leaving_it_in_the_command() -> None:
    with pytest.raises(TemplateError):
        render_shell("echo {{ env.HOME }}", resolver({}))
