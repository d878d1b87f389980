"""Shell-command rules (`Bash(git push --force:*)`) matched on the parsed command line, never on a substring."""

from __future__ import annotations

import shlex

import pytest

from abilities_mcp.prerequisites.commands import (
    MAX_COMMAND_CHARS,
    MAX_DEPTH,
    RULE_TOOL,
    SHELL_TOOLS,
    ShellRule,
    is_rule,
    matching_rules,
    rule_matches,
    rule_of,
    shell_command,
)

FORCE = "Bash(git push --force:*)"


def matches(rule: str, command: str) -> bool:
    parsed = rule_of(rule)
    assert parsed is not None
    return rule_matches(parsed, command)


def nested(inner: str, levels: int, around: str = "bash -c {}", quote=shlex.quote) -> str:
    for _ in range(levels):
        inner = around.format(quote(inner))
    return inner


# Each row: (rule, command, whether it matches); the ids say which reading of the line the row pins down.
CASES = [
    # The two named cases.
    (FORCE, "FOO=1 git  push --force", True),
    (FORCE, "git push --force-with-lease", False),
    # A prefix rule: the command word, then the rule's other words in order among the later words, whole.
    (FORCE, "git push --force", True),
    (FORCE, "git -C repo push origin main --force", True),
    (FORCE, "git --force push", False),
    (FORCE, "git pushx --force", False),
    (FORCE, "git push", False),
    ("Bash(git push -f:*)", "git push -f origin", True),
    ("Bash(git push -f:*)", "git push -fu origin", False),
    (FORCE, "GIT push --force", True),
    (FORCE, "git PUSH --force", False),
    # An exact rule: exactly the rule's words.
    ("Bash(git status)", "git status", True),
    ("Bash(git status)", "git status -s", False),
    ("Bash(git status)", "git  'status'", True),
    ("Bash(git status)", "FOO=1 git status", True),
    ("Bash(git status)", "git status > out.txt 2>&1", True),
    ("Bash(git status)", "git", False),
    ("Bash(git status)", "echo git status", False),
    ("Bash(git status)", "sudo git status", True),
    ("Bash(cat .env)", "cat < .env", True),
    # Compound commands: each simple command on its own, at every control operator.
    (FORCE, "echo ok && git push --force", True),
    (FORCE, "false || git push --force", True),
    (FORCE, "echo ok; git push --force", True),
    (FORCE, "echo ok | git push --force", True),
    (FORCE, "echo ok |& git push --force", True),
    (FORCE, "sleep 1 & git push --force", True),
    (FORCE, "(cd repo && git push --force)", True),
    (FORCE, "{ git push --force; }", True),
    (FORCE, "diff <(git push --force) x", True),
    (FORCE, "git push origin && echo --force", False),
    (FORCE, "git push; --force", False),
    # Quotes and escapes are removed as the shell removes them; a quoted operator is a word, not a separator.
    (FORCE, "g\"\"it push '--force'", True),
    (FORCE, '"git" "push" "--force"', True),
    (FORCE, "\\git push --\\force", True),
    (FORCE, "$'git' push $'\\x2d-force'", True),
    (FORCE, "git push ';' --force", True),
    (FORCE, 'git push "&&" --force', True),
    (FORCE, "echo 'git push --force'", False),
    (FORCE, 'echo "git push --force"', False),
    (FORCE, "git\tpush \t --force", True),
    # Leading assignments and keywords are skipped.
    (FORCE, "GIT_DIR=x A[1]=2 B+=3 git push --force", True),
    (FORCE, "FOO=git push --force", False),
    (FORCE, "if true; then git push --force; fi", True),
    (FORCE, "while true; do git push --force; done", True),
    (FORCE, "! git push --force", True),
    ("Bash(if true:*)", "if sudo true", False),
    # The command word by its basename.
    (FORCE, "/usr/bin/git push --force", True),
    (FORCE, "./bin/git push --force", True),
    (FORCE, "/usr/bin/gitx push --force", False),
    ("Bash(/usr/bin/git push:*)", "git push", True),
    # Runners are looked through; echo is no runner.
    (FORCE, "sudo -u deploy git push --force", True),
    (FORCE, "doas git push --force", True),
    (FORCE, "env -i FOO=1 git push --force", True),
    (FORCE, "command git push --force", True),
    (FORCE, "exec git push --force", True),
    (FORCE, "nohup nice -n 5 git push --force", True),
    (FORCE, "time git push --force", True),
    (FORCE, "timeout 30 git push --force", True),
    (FORCE, "stdbuf -oL ionice -c3 git push --force", True),
    (FORCE, "setsid chronic unbuffer git push --force", True),
    (FORCE, "echo origin | xargs git push --force", True),
    (FORCE, "watch -n 5 'git push --force'", True),
    (FORCE, "env -S 'git push --force'", True),
    (FORCE, "find . -maxdepth 0 -exec git push --force ';'", True),
    (FORCE, "ssh host 'git push --force'", True),
    (FORCE, "echo git push --force", False),
    (FORCE, "printf '%s' git push --force", False),
    (FORCE, "sudo echo git push", False),
    # Nested shells, eval and substitutions.
    (FORCE, "sh -c 'git push --force'", True),
    (FORCE, "bash -lc 'git push --force'", True),
    (FORCE, "bash -x -c 'cd repo && git push --force'", True),
    (FORCE, 'zsh -ec "git push --force"', True),
    (FORCE, "sudo -u deploy bash -c 'git push --force'", True),
    (FORCE, "docker exec box sh -c 'git push --force'", True),
    (FORCE, "echo 'git push --force' | sh", True),
    (FORCE, "bash -c \"bash -c 'git push --force'\"", True),
    (FORCE, "bash -c 'echo git push --force'", False),
    (FORCE, "eval git push --force", True),
    (FORCE, "eval 'git push' --force", True),
    (FORCE, "eval echo git push --force", False),
    (FORCE, "echo $(git push --force)", True),
    (FORCE, 'echo "result: $(git push --force)"', True),
    (FORCE, "echo `git push --force`", True),
    (FORCE, 'echo "`git push --force`"', True),
    (FORCE, "echo $(echo $(git push --force))", True),
    (FORCE, "echo `echo \\`git push --force\\``", True),
    (FORCE, "x=$(git push --force)", True),
    (FORCE, "echo '$(git push --force)'", False),
    (FORCE, "echo 'it`s' && echo `git push --force` 'x`y'", True),
    (FORCE, "echo $(echo git push --force)", False),
    (FORCE, 'echo "$(echo ")"; git push --force)"', True),
    # Multi-line commands and line continuations.
    (FORCE, "echo ok\ngit push --force", True),
    (FORCE, "git push \\\n  --force", True),
    (FORCE, "gi\\\nt push --force", True),
    (FORCE, "git push\n--force", False),
    (FORCE, "echo 'a\ngit push --force'", False),
    (FORCE, "echo \\\\\ngit push --force", True),
    (FORCE, "bash <<EOF\ngit push --force\nEOF", True),
    # Fail closed: what cannot be parsed is read loosely, which can only match more.
    (FORCE, 'git push --force "oops', True),
    (FORCE, "git push --force \\", True),
    (FORCE, "echo 'x && git push --force", True),
    (FORCE, "echo $(git push --force", True),
    (FORCE, "echo 'x && git push --force-with-lease", False),
    ("Bash(git status)", "git status -s 'oops", True),
    ("Bash(git status)", "git log 'oops", False),
    (FORCE, nested("git push --force", MAX_DEPTH + 3), True),
    (FORCE, nested("git push --force-with-lease", MAX_DEPTH + 3), False),
    (FORCE, nested("git push --force", MAX_DEPTH + 3, 'echo "$({})"', str), True),
    # Evasions a security review ran in bash 5.2 against a real remote, and their neighbours: each positive force-pushes
    # there (a glob given a file it matches, `git-push` with git-core on PATH).
    # 1. A redirection glued to an operator: each operator is its own token.
    (FORCE, "true;>/dev/null git push --force origin main", True),
    (FORCE, "true&&>/dev/null git push --force origin main", True),
    (FORCE, "true|>x git push --force origin main", True),
    (FORCE, "(>x git push --force origin main)", True),
    (FORCE, "true\n>x git push --force origin main", True),
    (FORCE, "{fd}>/dev/null git push --force origin main", True),
    ("Bash(git status)", "true;>/dev/null git status", True),
    (FORCE, "true;>/dev/null echo git push --force", False),
    # 2. Comments: dropped to the end of the line; no continuation, and a quote in one pairs with nothing.
    (FORCE, "# note \\\ngit push --force origin main", True),
    (FORCE, "echo hi # don't\ngit push --force origin main # '", True),
    (FORCE, "echo hi;#'\ngit push --force origin main;#'", True),
    (FORCE, "(true)#'\ngit push --force origin main #'", True),
    (FORCE, "((1))#'\ngit push --force origin main\n#'", True),
    (FORCE, "echo $(echo a # )\ngit push --force origin main\n)", True),
    (FORCE, "echo ${x:- #}; git push --force origin main", True),
    (FORCE, "(( 1 # $(git push --force origin main) ))", True),
    (FORCE, "echo a#b; git push --force origin main", True),
    (FORCE, "# git push --force origin main", False),
    (FORCE, "echo ok # ; git push --force origin main", False),
    (FORCE, "echo a#b 'git push --force'", False),
    (FORCE, "echo $# 'git push --force'", False),
    (FORCE, "# note\necho 'git push --force'", False),
    # 3. Brace expansion.
    (FORCE, "{git,push,--force,origin,main}", True),
    (FORCE, "git push --forc{e,e} origin main", True),
    (FORCE, "gi{t..t} push --force origin main", True),
    (FORCE, "git push {" + "-q," * 140 + "--force} origin main", True),
    ("Bash(git status)", "{git,status}", True),
    (FORCE, "echo {git,push,--force}", False),
    (FORCE, "echo '{git,push,--force}'", False),
    (FORCE, "{git,push,--force-with-lease}", False),
    # 4. A glob as the command word, or as a later word.
    (FORCE, "/usr/bin/gi[t] push --force origin main", True),
    (FORCE, "g?t push --force", True),
    (FORCE, "gi* push --force", True),
    (FORCE, "gi[^x] push --force", True),
    (FORCE, "gi[[:alpha:]] push --force", True),
    (FORCE, "git push --forc? origin main", True),
    ("Bash(git status)", "g?t status", True),
    (FORCE, "'gi*' push --force", False),
    (FORCE, "g?t push --force-with-lease", False),
    (FORCE, "echo gi* push --force", False),
    # 5. Keyword forms.
    (FORCE, "function f { git push --force origin main; }; f", True),
    (FORCE, "function f() { git push --force origin main; }; f", True),
    (FORCE, "f() { git push --force origin main; }; f", True),
    (FORCE, "coproc P { git push --force origin main; }", True),
    (FORCE, "coproc git push --force", True),
    (FORCE, "coproc echo git push --force", False),
    # 6. Builtins that read shell text, and process substitutions.
    (FORCE, "trap 'git push --force origin main' EXIT", True),
    (FORCE, ". /dev/stdin <<< 'git push --force origin main'", True),
    (FORCE, "source /dev/stdin <<< 'git push --force origin main'", True),
    (FORCE, "source <(echo 'git push --force origin main')", True),
    (FORCE, "source <(echo git push --force origin main)", True),
    (FORCE, "mapfile -C 'git push --force origin main #' -c 1 <<< x", True),
    (FORCE, "trap 'echo git push --force' EXIT", False),
    (FORCE, "source /dev/stdin <<< 'echo git push --force'", False),
    # 7. Git's own spellings, and an alias defined on the command.
    (FORCE, "/usr/lib/git-core/git-push --force origin main", True),
    (FORCE, "git-push --force origin main", True),
    (FORCE, "git -c alias.p='push --force' p origin main", True),
    (FORCE, "git -c 'alias.p=!git push --force origin main' p", True),
    (FORCE, "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0='push --force' git p origin main", True),
    (FORCE, "git-push --force-with-lease", False),
    (FORCE, "git -c alias.p='push --force-with-lease' p", False),
    # 8. A substitution in an array subscript, which bash evaluates even single-quoted.
    (FORCE, "test -v 'a[$(git push --force origin main)]'", True),
    (FORCE, "declare -a a; unset 'a[`git push --force origin main`]'", True),
    (FORCE, "test -v 'a[$(echo git push --force)]'", False),
    # Found alongside: here-documents' quotes, what a line hands a shell, aliases, extended globs.
    (FORCE, "cat <<E\n'\nE\ngit push --force origin main\ncat <<F\n'\nF", True),
    (FORCE, "cat <<$'E'\n'\nE\ngit push --force origin main\ncat <<F\n'\nF", True),
    (FORCE, "cat <<-E\n\t'\n\tE\ngit push --force origin main\ncat <<F\n'\nF", True),
    (FORCE, "echo git push --force origin main | sh", True),
    (FORCE, "printf '%s ' git push --force | bash", True),
    (FORCE, "eval \"$(printf 'git push --force origin main')\"", True),
    (FORCE, 'bash -c "$(echo git push --force origin main)"', True),
    (FORCE, "shopt -s expand_aliases\nalias g=git\ng push --force origin main", True),
    (FORCE, "shopt -s extglob\n@(git) push --force origin main", True),
    (FORCE, "echo 'echo git push --force' | sh", False),
    (FORCE, "cat <<'E'\necho git push --force\nE", False),
]

CASE_IDS = [
    "issue-assignment-and-spaces",
    "issue-force-with-lease",
    "prefix-plain",
    "prefix-words-between",
    "prefix-out-of-order",
    "prefix-whole-words",
    "prefix-missing-word",
    "prefix-short-flag",
    "prefix-combined-short-flags",
    "command-word-any-case",
    "other-words-case-sensitive",
    "exact-plain",
    "exact-extra-word",
    "exact-quoted",
    "exact-after-assignment",
    "exact-with-redirections",
    "exact-too-short",
    "exact-not-a-runner",
    "exact-after-runner",
    "exact-redirected-input",
    "and",
    "or",
    "semicolon",
    "pipe",
    "pipe-stderr",
    "background",
    "subshell",
    "group",
    "process-substitution",
    "split-by-and",
    "split-by-semicolon",
    "empty-quotes",
    "double-quoted-words",
    "backslashes",
    "ansi-c-quotes",
    "quoted-semicolon-is-a-word",
    "quoted-and-is-a-word",
    "single-quoted-argument",
    "double-quoted-argument",
    "tabs",
    "assignments",
    "assignment-value-is-not-a-command",
    "if-then",
    "while-do",
    "bang",
    "rule-naming-a-skipped-keyword",
    "absolute-path",
    "relative-path",
    "basename-whole",
    "rule-with-path",
    "sudo",
    "doas",
    "env",
    "command",
    "exec",
    "nohup-nice",
    "time",
    "timeout",
    "stdbuf-ionice",
    "setsid-chronic-unbuffer",
    "xargs",
    "watch-string",
    "env-split-string",
    "find-exec",
    "ssh-remote-command",
    "echo-is-no-runner",
    "printf-is-no-runner",
    "runner-then-echo",
    "sh-c",
    "bash-lc",
    "bash-x-c",
    "zsh-ec",
    "sudo-bash-c",
    "docker-exec-sh-c",
    "piped-into-sh",
    "shell-in-shell",
    "shell-echoing",
    "eval",
    "eval-quoted-words",
    "eval-echo",
    "dollar-paren",
    "dollar-paren-in-double-quotes",
    "backticks",
    "backticks-in-double-quotes",
    "dollar-paren-two-deep",
    "backticks-two-deep",
    "assignment-substitution",
    "single-quoted-substitution-runs-nothing",
    "backtick-in-single-quotes-does-not-pair",
    "substitution-echoing",
    "quoted-paren-in-substitution",
    "newline",
    "continuation",
    "continuation-inside-a-word",
    "newline-splits",
    "quoted-newline",
    "escaped-backslash-before-newline",
    "here-document",
    "unbalanced-double-quote",
    "trailing-backslash",
    "unbalanced-single-quote-before",
    "unclosed-substitution",
    "loose-still-whole-words",
    "loose-exact-as-prefix",
    "loose-exact-needs-command",
    "too-deep",
    "too-deep-still-whole-words",
    "substitutions-past-the-bound",
    "review-semicolon-redirection",
    "review-and-redirection",
    "review-pipe-redirection",
    "review-subshell-redirection",
    "review-newline-redirection",
    "variable-descriptor-redirection",
    "exact-after-glued-redirection",
    "glued-redirection-then-echo",
    "review-comment-continuation",
    "review-quote-in-comment",
    "comment-after-semicolon",
    "comment-after-subshell",
    "comment-after-arithmetic-command",
    "comment-in-substitution-hides-paren",
    "hash-in-parameter-expansion-is-no-comment",
    "hash-in-arithmetic-is-no-comment",
    "hash-inside-a-word-is-no-comment",
    "commented-out-command",
    "commented-out-operator",
    "hash-inside-a-word-then-quote",
    "dollar-hash-then-quote",
    "comment-then-single-quoted-argument",
    "review-brace-command",
    "review-brace-word",
    "brace-sequence",
    "braces-past-the-bound-glob",
    "exact-brace-command",
    "brace-echo",
    "brace-quoted",
    "brace-force-with-lease",
    "review-bracket-glob",
    "review-question-glob",
    "review-star-glob",
    "caret-bracket-glob",
    "class-bracket-glob",
    "glob-later-word",
    "exact-glob-command",
    "quoted-glob-is-literal",
    "glob-force-with-lease",
    "glob-echoed",
    "review-function-keyword",
    "review-function-keyword-parens",
    "function-parens",
    "review-named-coprocess",
    "review-coprocess",
    "coprocess-echo",
    "review-trap",
    "review-dot-here-string",
    "review-source-here-string",
    "review-source-process-substitution",
    "source-echoed-words",
    "mapfile-callback",
    "trap-echo",
    "source-echo",
    "review-git-core-path",
    "review-git-dash-push",
    "review-git-alias",
    "review-git-alias-shell",
    "git-config-environment-alias",
    "git-dash-push-force-with-lease",
    "git-alias-force-with-lease",
    "review-subscript-substitution",
    "subscript-backticks",
    "subscript-echo",
    "here-document-quote",
    "here-document-ansi-delimiter",
    "here-document-tabs",
    "echoed-words-into-sh",
    "printed-words-into-bash",
    "eval-substitution-output",
    "shell-string-substitution-output",
    "alias-defined-then-used",
    "extended-glob",
    "echoed-echo-into-sh",
    "quoted-here-document-echo",
]


@pytest.mark.parametrize(("rule", "command", "expected"), CASES, ids=CASE_IDS)
def test_a_rule_matches_the_parsed_command_line(rule: str, command: str, expected: bool) -> None:
    assert matches(rule, command) is expected


def test_the_case_ids_name_every_case() -> None:
    assert len(CASE_IDS) == len(CASES) == len(set(CASE_IDS))


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (FORCE, ShellRule(("git", "push", "--force"), True, FORCE)),
        ("Bash(git status)", ShellRule(("git", "status"), False, "Bash(git status)")),
        ("Bash( npm run  test :*)", ShellRule(("npm", "run", "test"), True, "Bash( npm run  test :*)")),
        ("Bash(git commit -m 'a b':*)", ShellRule(("git", "commit", "-m", "a b"), True, "Bash(git commit -m 'a b':*)")),
    ],
    ids=["prefix", "exact", "spaces", "quoted-word"],
)
def test_a_rule_is_read_into_its_words(text: str, rule: ShellRule) -> None:
    assert is_rule(text)
    assert rule_of(text) == rule


@pytest.mark.parametrize(
    "text", ["Bash", "bash(git push)", "mcp__db__execute_query", "Bash(git push", "Edit"], ids=str.lower
)
def test_a_plain_tool_name_is_no_rule(text: str) -> None:
    assert not is_rule(text)
    assert rule_of(text) is None


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("Bash()", "write one, as in `Bash(git push --force:*)`"),
        ("Bash(:*)", "names no command"),
        ("Bash(  )", "names no command"),
        ("Bash(*)", "write plain 'Bash' to gate every shell call"),
        ("Bash(git push *)", "only a trailing `:*` is supported, as in Claude Code: `Bash(git push --force:*)`"),
        ("Bash(git * --force:*)", "only a trailing `:*` is supported"),
        ("Bash(git:* push)", "only a trailing `:*` is supported"),
        ("Bash(git push 'oops:*)", "close it"),
        ("Bash(git push && rm -rf /:*)", "a rule names one command; write one rule per command"),
        ("Bash(git push; rm:*)", "write one rule per command"),
        ("Bash(cat x | sh)", "write one rule per command"),
        ("Bash(git status > out)", "write one rule per command"),
        ("Bash(FOO=1 git push:*)", "start with the command"),
    ],
    ids=[
        "empty",
        "empty-prefix",
        "blank",
        "star",
        "star-not-trailing",
        "star-in-the-middle",
        "colon-star-in-the-middle",
        "open-quote",
        "and",
        "semicolon",
        "pipe",
        "redirection",
        "assignment",
    ],
)
def test_a_malformed_rule_is_refused_with_its_fix(text: str, fix: str) -> None:
    with pytest.raises(ValueError, match="Bash") as refused:
        rule_of(text)
    assert fix in str(refused.value)
    assert repr(text) in str(refused.value)


@pytest.mark.parametrize(
    ("tool", "arguments", "command"),
    [
        ("Bash", {"command": "git push --force", "description": "push"}, "git push --force"),
        ("run_shell_command", {"command": "git status"}, "git status"),
        ("bash", {"command": "ls"}, "ls"),
        ("Shell", {"command": "ls"}, "ls"),
        ("exec_command", {"cmd": "git push --force"}, "git push --force"),
        ("shell", {"command": ["bash", "-lc", "git push --force"]}, "bash -lc 'git push --force'"),
        ("local_shell", {"command": ["git", "status"]}, "git status"),
        ("EXEC", {"command": "ls"}, "ls"),
    ],
    ids=[
        "claude-code",
        "gemini-cli",
        "opencode",
        "cursor",
        "codex-exec-command",
        "argv-list",
        "local-shell",
        "any-case",
    ],
)
def test_shell_command_reads_each_clients_shell_tool(tool: str, arguments: dict, command: str) -> None:
    assert tool.lower() in SHELL_TOOLS
    assert shell_command(tool, arguments) == command


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("Edit", {"command": "git push --force"}),
        ("mcp__db__execute_query", {"command": "git push --force"}),
        ("Bash", {"command": 42}),
        ("Bash", {"command": ["git", 1]}),
        ("Bash", {"command": []}),
        ("Bash", {"description": "no command"}),
        ("Bash", None),
    ],
    ids=["not-a-shell-tool", "mcp-tool", "number", "list-with-a-number", "empty-list", "no-command", "no-arguments"],
)
def test_shell_command_is_none_without_a_shell_command(tool: str, arguments: dict) -> None:
    assert shell_command(tool, arguments) is None


def test_an_argv_list_is_matched_as_the_command_it_runs() -> None:
    command = shell_command("shell", {"command": ["bash", "-lc", "cd repo && git push --force"]})
    assert command is not None
    assert matches(FORCE, command)


def test_matching_rules_returns_each_matching_rule_in_order() -> None:
    rules = [rule_of(t) for t in (FORCE, "Bash(git push -f:*)", "Bash(terraform apply:*)", "Bash(git status)")]
    found = matching_rules(rules, "git status; terraform -chdir=infra apply && git push -f")
    assert [rule.raw for rule in found] == ["Bash(git push -f:*)", "Bash(terraform apply:*)", "Bash(git status)"]


def test_matching_rules_of_no_rules_or_a_non_string_is_empty() -> None:
    assert matching_rules([], "git push --force") == []
    assert matching_rules([rule_of(FORCE)], None) == []  # type: ignore[arg-type]


def test_a_command_over_the_size_limit_is_read_loosely_and_still_matches() -> None:
    command = ("echo 'x' " * 12_000 + "&& git push --force ").ljust(200_000, "y")
    assert len(command) == 200_000 > MAX_COMMAND_CHARS
    assert rule_matches(rule_of(FORCE), command)
    assert not rule_matches(rule_of("Bash(git push --force-with-lease:*)"), command)


@pytest.mark.parametrize(
    "command",
    [
        "$(" * 51_200,
        "$(" * 40_000,
        "`" * 99_999,
        "'" * 99_999,
        '"$("' * 20_000,
        "bash -c " * 12_000,
        "eval " * 19_000,
        "sudo " * 19_000,
        "a" * 1_000_000,
        "\0" * 50_000 + "git\0push",
        "(" * 50_000,
        "\\" * 99_999,
        "$'\\U99999999'" * 5_000,
        "{a,b}" * 20_000,
        "x{1..100} " * 9_000,
        "{" * 20_000 + "a,b" + "}" * 20_000,
        "# '\n" * 25_000,
        "cat <<E " * 12_000 + "\n",
        "${" * 49_000,
        "((" * 49_000,
        "a[$(x)] " * 12_000,
    ],
    ids=[
        "100kb-of-dollar-paren",
        "deep-open-substitutions",
        "backticks",
        "single-quotes",
        "quoted-substitutions",
        "nested-shells",
        "evals",
        "runners",
        "one-megabyte",
        "nuls",
        "parentheses",
        "backslashes",
        "bad-ansi-escapes",
        "braces",
        "sequences",
        "nested-braces",
        "quoted-comments",
        "here-documents",
        "parameter-expansions",
        "arithmetic",
        "subscripts",
    ],
)
def test_hostile_input_returns_false_for_a_command_it_does_not_hold(command: str) -> None:
    assert rule_matches(rule_of(FORCE), command) is False
    assert rule_matches(rule_of("Bash(git status)"), command) is False


@pytest.mark.parametrize("prefix", ["sudo ", "eval ", "bash -c ", "timeout 5 "], ids=str.strip)
def test_hostile_repetition_still_matches_the_command_at_its_end(prefix: str) -> None:
    command = prefix * 15_000 + "git push --force"
    assert rule_matches(rule_of(FORCE), command)


def test_the_rule_tool_is_claude_codes_bash() -> None:
    assert RULE_TOOL == "Bash"
    assert rule_of(f"{RULE_TOOL}(git status)") is not None
