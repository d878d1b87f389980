"""Shell-command rules in Claude Code's spelling (`Bash(git push --force:*)`), matched on the parsed command line.

A rule in `triggers.tools` gates a call of the client's shell tool (Claude Code and Codex `Bash`, Gemini CLI
`run_shell_command`, OpenCode `bash`, Cursor `Shell`, Codex `exec_command`) by the command it runs:

- `Bash(WORDS:*)`, a prefix rule, matches a command whose command word is the rule's first word and whose later words
  include the rule's other words in that order: `Bash(git push --force:*)` matches `git -C repo push origin --force`.
  Words are compared whole and case-sensitively (the command word ignores case, as macOS finds `GIT`), so it does
  not match `git push --force-with-lease`, nor `git push -fu` for `Bash(git push -f:*)`, nor `git push origin +main`:
  write a rule for each spelling you gate (`--force` and `-f`). Only a trailing `:*` is a wildcard.
- `Bash(WORDS)`, an exact rule, matches a command that is exactly those words: `Bash(git status)` matches
  `git status` (and `git status > out`), not `git status -s`.

How a command line is read, so that spelling it differently does not escape a rule:

1. It is split into simple commands at `;`, `&&`, `||`, `|`, `|&`, `&`, newlines and `( )` subshells, outside
   quotes; a backslash-newline joins lines. Each simple command is matched on its own: `echo ok && git push --force`.
2. Words are as the shell splits them: quotes and backslashes removed (`g""it push '--force'`, `\\git`, `$'\\x67it'`),
   any whitespace between. A redirection's target stays a word; an exact rule also tries the command without it.
3. Leading variable assignments and keywords (`FOO=1`, `if`, `then`, `do`, `!`, `{`) are skipped.
4. The command word is compared by its basename: `/usr/bin/git push --force`.
5. Runners are looked through: after `sudo`, `doas`, `env`, `command`, `builtin`, `exec`, `nohup`, `time`, `nice`,
   `ionice`, `timeout`, `stdbuf`, `setsid`, `xargs`, `watch`, `chronic`, `unbuffer` (and `find`, `flock`, `ssh`,
   `docker` and others in RUNNERS) any later word may start the command (`sudo -u deploy git push --force`), and
   each later word is also read as a command line (`watch 'git push --force'`, `env -S '…'`). `echo` is no runner.
6. Nested command lines are read too, up to MAX_DEPTH levels: every word of a line that names a shell
   (`bash -lc '…'`, `… | sh`, `su -c '…'`, `docker exec box sh -c '…'`), `eval`'s words joined, and every
   `$(…)` and backtick substitution outside single quotes (in double quotes too). A here-document's lines are
   read as commands, as `bash <<EOF` would run them.
7. Where the line cannot be parsed (an open quote, a line over MAX_COMMAND_CHARS, nesting past MAX_DEPTH, the
   parse budget spent) it is read loosely, which can only match more: split on whitespace and operators, quotes
   removed, any word may start the command, and an exact rule is tested as a prefix rule.

Over-matching is preferred to under-matching. A command built at run time is judged by its text and so is not
matched: `$CMD`, `g$(echo it) push`, an alias, a script that itself pushes, `git config alias.p push` then
`git p --force`, arguments fed to `xargs` on standard input. The client's sandbox or another OS user closes that
gap, as for the other text guards (clients/guards.py).

Stdlib only (`re`, `shlex`), never raises on a command, linear in its length: the hook runs it on every tool call.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

RULE_TOOL = "Bash"
# The clients' shell tools, lowercase: Claude Code, Codex hooks and OpenCode (bash), Cursor (shell), Gemini CLI
# (run_shell_command), Codex (exec, exec_command, local_shell).
SHELL_TOOLS = frozenset({"bash", "shell", "run_shell_command", "exec", "exec_command", "local_shell"})
# Argument keys that hold the command: Codex's exec_command sends `cmd`.
COMMAND_KEYS = ("command", "cmd")

# Longer command lines are read loosely (fail closed): no real command is this long, and parsing costs time.
MAX_COMMAND_CHARS = 100_000
# Nested shells and substitutions deeper than this are read loosely: real commands nest two or three levels.
MAX_DEPTH = 8
# Characters parsed over all nested readings of one line: a line that runs a shell has each word read again, so a
# hostile one could cost MAX_DEPTH times its length. What is left past it is read loosely.
PARSE_BUDGET = 2 * MAX_COMMAND_CHARS
# Charged per nested reading on top of its length, so that many one-letter words stay bounded too.
_READING_COST = 32

# Commands whose arguments hold the command they run.
RUNNERS = frozenset(
    {
        "sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice", "ionice", "timeout", "stdbuf",
        "setsid", "xargs", "watch", "chronic", "unbuffer",
        "find", "flock", "taskset", "chrt", "strace", "ltrace", "fakeroot", "chroot", "nsenter", "unshare",
        "caffeinate", "busybox", "script", "ssh", "docker", "podman", "kubectl",
    }
)  # fmt: skip
# Shells, and commands that hand a string or their standard input to one.
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "su", "runuser"})
# Reserved words that may stand before a command: `if git push --force; then …`.
_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "case",
                       "esac", "for", "select", "in", "function", "coproc"})  # fmt: skip
_REDIRECTS = frozenset({"<", ">", ">>", "<<", "<<<", "<>", ">|", ">&", "<&", "&>", "&>>"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")

# One piece of a command line; adjacent pieces that are neither space nor operator make one word. Each quoted form
# is an unrolled loop, linear even when its quote is left open; `open` is an open quote or a trailing backslash.
_PIECE = re.compile(
    r"""(?P<space>[ \t\r\f\v]+)
    |(?P<op>[;&|()<>\n]+)
    |\$'(?P<ansi>[^'\\]*(?:\\.[^'\\]*)*)'
    |\$?"(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"
    |'(?P<single>[^']*)'
    |\\(?P<escaped>.)
    |(?P<plain>[^ \t\r\f\v\n;&|()<>'"\\$]+|\$)
    |(?P<open>.)""",
    re.S | re.X,
)
# Escapes, left for re to compile on first use: most commands hold none, and the hook imports this on every call.
# A backslash-newline joins lines; an escaped backslash before a newline does not.
_CONTINUATION = r"(\\[^\n])|\\\n"
_DOUBLE_ESCAPE = r"\\([$`\"\\])"
_TICK_ESCAPE = r"\\([$`\\])"
_ANSI_ESCAPE = r"(?s)\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)"
_ANSI_CHARS = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b", "E": "\x1b"}
# What opens or closes a quote or a substitution, outside single quotes.
_SCAN = re.compile(r"\\.|\$\(|[`()'\"]", re.S)
# The loose reading: quotes and backslashes dropped, then words split at whitespace and operator characters.
_LOOSE_DROP = str.maketrans("", "", "'\"\\")
_LOOSE_WORD = re.compile(r"[^\s;&|()<>{}`$]+")


class ShellRule(NamedTuple):
    """A shell-command rule: its words as the shell splits them, whether it is a prefix rule, and the trigger."""

    words: tuple[str, ...]
    prefix: bool
    raw: str


# NamedTuples and a plain class, not dataclasses: the hook imports this module on every tool call.
class _Simple(NamedTuple):
    """One simple command: its words, each as a command name (`_name`), where the command word is, and whether any
    later word may start the command too (after a runner)."""

    words: tuple[str, ...]
    names: tuple[str, ...]
    start: int
    anywhere: bool


class _Reading:
    """A command line as read for matching: its simple commands, nested ones included, and the loose readings."""

    def __init__(self) -> None:
        self.commands: list[_Simple] = []
        self.loose: list[tuple[str, ...]] = []
        self.budget = PARSE_BUDGET


def is_rule(text: str) -> bool:
    """Whether a trigger is written as a shell rule, `Bash(…)`."""
    return isinstance(text, str) and text.startswith(RULE_TOOL + "(") and text.endswith(")")


def rule_of(text: str) -> ShellRule | None:
    """The shell rule a trigger writes, or None for a plain tool name; ValueError naming the fix if malformed."""
    if not is_rule(text):
        return None
    body = text[len(RULE_TOOL) + 1 : -1].strip()
    prefix = body.endswith(":*")
    body = body[:-2] if prefix else body
    if body.strip() == "*":
        raise ValueError(f"{text!r} is not a rule: write plain {RULE_TOOL!r} to gate every shell call")
    if "*" in body:
        raise ValueError(f"{text!r}: only a trailing `:*` is supported, as in Claude Code: `Bash(git push --force:*)`")
    return ShellRule(_rule_words(text, body), prefix, text)


def _rule_words(text: str, body: str) -> tuple[str, ...]:
    """A rule's words, refused when there are none, a quote is open, an operator joins commands or it starts with
    an assignment (which matching skips, so the rule could never match)."""
    tokens = _tokens(body)
    if tokens is None:
        raise ValueError(f"{text!r} leaves a quote open (or ends in a backslash): close it")
    operator = next((value for kind, value in tokens if kind == "op"), None)
    if operator is not None:
        raise ValueError(
            f"{text!r} holds the shell operator {operator.strip()!r}: a rule names one command; "
            "write one rule per command"
        )
    words = tuple(value for _, value in tokens)
    if not words:
        raise ValueError(
            f"{text!r} names no command: write one, as in `Bash(git push --force:*)`, "
            f"or plain {RULE_TOOL!r} to gate every shell call"
        )
    if _ASSIGNMENT.match(words[0]):
        raise ValueError(
            f"{text!r} starts with the assignment {words[0]!r}, which matching skips: start with the command"
        )
    return words


def shell_command(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """The command line a call of a client's shell tool runs, or None for another tool or no command."""
    if not isinstance(tool, str) or tool.lower() not in SHELL_TOOLS or not isinstance(arguments, Mapping):
        return None
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        # Codex's shell tools send argv: ["bash", "-lc", "git push --force"].
        if isinstance(value, list | tuple) and value and all(isinstance(word, str) for word in value):
            return shlex.join(value)
    return None


def rule_matches(rule: ShellRule, command: str) -> bool:
    """Whether a shell rule matches any command a command line runs."""
    return bool(matching_rules([rule], command))


def matching_rules(rules: Iterable[ShellRule], command: str) -> list[ShellRule]:
    """The rules, in order, that match a command line, which is read once."""
    rules = list(rules)
    if not rules or not isinstance(command, str):
        return []
    reading = _reading(command)
    return [rule for rule in rules if _matches(rule, reading)]


def _reading(command: str) -> _Reading:
    """Every simple command a command line runs, nested ones included, or its loose reading where parsing fails."""
    reading = _Reading()
    try:
        if len(command) > MAX_COMMAND_CHARS:
            reading.loose.append(_loose_words(command))
        else:
            _read(command, 0, reading)
    except Exception:  # a bug in the parser must not open the gate: read the whole line loosely
        reading.loose.append(_loose_words(command))
    return reading


def _read(text: str, depth: int, reading: _Reading) -> None:
    """Add one command line's simple commands, and those of the lines nested in it, to the reading."""
    cost = len(text) + _READING_COST
    if depth > MAX_DEPTH or cost > reading.budget:
        reading.loose.append(_loose_words(text))
        return
    reading.budget -= cost
    joined = _joined_lines(text)
    tokens, bodies = _tokens(joined), _substitutions(joined)
    if tokens is None or bodies is None:
        reading.loose.append(_loose_words(text))
        return
    commands = _commands(tokens)
    reading.commands += commands
    for line in bodies + _nested_lines(commands):
        _read(line, depth + 1, reading)


def _joined_lines(text: str) -> str:
    """The text with its line continuations (backslash-newline) removed."""
    return re.sub(_CONTINUATION, r"\1", text) if "\\\n" in text else text


def _tokens(text: str) -> list[tuple[str, str]] | None:
    """The words and operators of a command line, quotes removed, or None when a quote is left open."""
    tokens: list[tuple[str, str]] = []
    word: list[str] | None = None
    for piece in _PIECE.finditer(text):
        kind = piece.lastgroup or "open"
        if kind == "open":
            return None
        if kind in ("space", "op"):
            if word is not None:
                tokens.append(("word", "".join(word)))
                word = None
            if kind == "op":
                tokens.append(("op", piece.group(kind)))
            continue
        word = [] if word is None else word
        word.append(_unquoted(kind, piece.group(kind)))
    if word is not None:
        tokens.append(("word", "".join(word)))
    return tokens


def _unquoted(kind: str, value: str) -> str:
    """A piece of a word as the shell reads it: double quotes keep only their escapes of `$`, `` ` ``, `"` and `\\`;
    `$'…'` decodes its C escapes."""
    if kind == "double":
        return re.sub(_DOUBLE_ESCAPE, r"\1", value) if "\\" in value else value
    if kind == "ansi":
        return re.sub(_ANSI_ESCAPE, _ansi_char, value) if "\\" in value else value
    return value


def _ansi_char(escape: re.Match[str]) -> str:
    """The character one `$'…'` escape stands for."""
    code = escape.group(1)
    if code[0] in "xuU" and len(code) > 1:
        number = int(code[1:], 16)
        return chr(number) if number <= 0x10FFFF else escape.group(0)
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _ANSI_CHARS.get(code, code)


def _commands(tokens: list[tuple[str, str]]) -> list[_Simple]:
    """The simple commands between the separators; each with its redirections' targets as words, and, when it has
    redirections, once more without them (`> out git push`, `git status 2>&1`)."""
    commands: list[_Simple] = []
    words: list[str] = []
    bare: list[str] = []
    redirected = target = False
    for kind, value in [*tokens, ("op", ";")]:
        if kind == "word":
            words.append(value)
            if not target:
                bare.append(value)
            target = False
        elif value in _REDIRECTS:
            redirected = target = True
            if bare and bare[-1].isdigit():  # a file descriptor, as in 2>&1
                bare.pop()
        elif words:
            forms = (_simple(words), _simple(bare)) if redirected and bare != words else (_simple(words),)
            commands += [command for command in forms if command is not None]
            words, bare, redirected, target = [], [], False, False
    return commands


def _simple(words: list[str]) -> _Simple | None:
    """A simple command, past its assignments and keywords; None when nothing is left to run."""
    start = 0
    while start < len(words) and (words[start] in _KEYWORDS or _ASSIGNMENT.match(words[start])):
        start += 1
    if start == len(words):
        return None
    names = _names(words)
    return _Simple(tuple(words), names, start, names[start] in RUNNERS)


def _name(word: str) -> str:
    """A word as command names are compared: its basename, lowercase (macOS and Windows find `GIT` as git)."""
    return word[word.rfind("/") + 1 :].lower()


def _names(words: Iterable[str]) -> tuple[str, ...]:
    """Each word as a command name."""
    return tuple(map(_name, words))


def _first_at(name: str, command: _Simple) -> int:
    """The first place the command may start (its command word, or after a runner any later word) that is the
    command `name`, or -1."""
    if command.names[command.start] == name:
        return command.start
    try:
        return command.names.index(name, command.start) if command.anywhere else -1
    except ValueError:
        return -1


def _nested_lines(commands: list[_Simple]) -> list[str]:
    """The command lines nested in these commands' words: `eval`'s words joined, a runner's later words, and,
    when a word names a shell (`bash -c STRING`, `… | sh`, `docker exec box sh -c STRING`), every word of the line."""
    lines: list[str] = []
    for command in commands:
        if (at := _first_at("eval", command)) >= 0:
            lines.append(" ".join(command.words[at + 1 :]))  # a later eval is among these words, read in turn
        lines += command.words[command.start + 1 :] if command.anywhere else ()
    if any(not SHELLS.isdisjoint(command.names) for command in commands):
        lines += [word for command in commands for word in command.words]
    return list(dict.fromkeys(lines))


def _substitutions(text: str) -> list[str] | None:
    """The insides of the outermost `$(…)` and backtick substitutions, or None when one is left open. Quotes are
    followed so that a backtick inside single quotes does not pair with a real one; single-quoted text runs nothing
    until a shell reads it, and then it is read as that shell's command line."""
    bodies: list[str] = []
    # Open quotes and substitutions, innermost last: [kind ("'", '"', "`" or "$("), where its inside starts, open
    # parentheses, whether it is inside a substitution] (kept per frame, so closing one never walks the stack).
    frames: list[list[Any]] = []
    pos = 0
    while pos >= 0:
        pos = _scan_step(text, pos, frames, bodies)
    return None if frames else bodies


def _scan_step(text: str, pos: int, frames: list[list[Any]], bodies: list[str]) -> int:
    """Move past the next quote or substitution mark; -1 at the end of the text."""
    kind = frames[-1][0] if frames else None
    if kind == "'":
        end = text.find("'", pos)
        if end >= 0:
            frames.pop()
        return end + 1 if end >= 0 else -1
    mark = _SCAN.search(text, pos)
    if mark is None:
        return -1
    token = mark.group()
    if token[0] != "\\":
        _scan_mark(token, kind, mark, frames, bodies)
    return mark.end()


def _scan_mark(token: str, kind: str | None, mark: re.Match[str], frames: list[list[Any]], bodies: list[str]) -> None:
    """Open or close a quote, a substitution or a parenthesis inside one, as the innermost open one allows."""
    if token == kind and kind in ('"', "`"):
        _close(frames, bodies, mark)
    elif kind == "`":
        return  # inside backticks only an unescaped backtick counts
    elif token in ("$(", "`") or (token in ("'", '"') and kind != '"'):
        inside = bool(frames) and (frames[-1][3] or frames[-1][0] in ("$(", "`"))
        frames.append([token, mark.end(), 0, inside])
    elif kind == "$(" and token == "(":
        frames[-1][2] += 1
    elif kind == "$(" and token == ")":
        if frames[-1][2]:
            frames[-1][2] -= 1
        else:
            _close(frames, bodies, mark)


def _close(frames: list[list[Any]], bodies: list[str], mark: re.Match[str]) -> None:
    """Close the innermost frame; an outermost substitution's inside is kept (nested ones are read from it)."""
    kind, start, _, inside = frames.pop()
    if kind == '"' or inside:
        return
    body = mark.string[start : mark.start()]
    bodies.append(re.sub(_TICK_ESCAPE, r"\1", body) if kind == "`" else body)


def _loose_words(text: str) -> tuple[str, ...]:
    """The fail-closed reading: quotes and backslashes dropped, words split at whitespace and operator characters."""
    return tuple(_LOOSE_WORD.findall(_joined_lines(text).translate(_LOOSE_DROP)))


def _matches(rule: ShellRule, reading: _Reading) -> bool:
    """Whether a rule matches a simple command of the reading, or, where it was read loosely, a loose reading."""
    try:
        if any(_matches_command(rule, command) for command in reading.commands):
            return True
        loose_rule = _loose_words(" ".join(rule.words)) if reading.loose else ()
        loose = (_Simple(words, _names(words), 0, True) for words in reading.loose if words)
        return bool(loose_rule) and any(_prefix_matches(loose_rule, command) for command in loose)
    except Exception:  # a bug in matching must not open the gate either
        return True


def _matches_command(rule: ShellRule, command: _Simple) -> bool:
    """Whether a rule matches one simple command."""
    return _prefix_matches(rule.words, command) if rule.prefix else _exact_matches(rule.words, command)


def _prefix_matches(rule_words: tuple[str, ...], command: _Simple) -> bool:
    """Whether, from a place the command may start, its command word is the rule's and the rule's other words
    follow in order. The first such place is enough: the words after it include those after any later one."""
    at = _first_at(_name(rule_words[0]), command)
    if at < 0:
        return False
    rest = iter(command.words[at + 1 :])
    return all(word in rest for word in rule_words[1:])  # `in` consumes rest: an in-order subsequence


def _exact_matches(rule_words: tuple[str, ...], command: _Simple) -> bool:
    """Whether, from a place the command may start, the command is exactly the rule's words."""
    at = len(command.words) - len(rule_words)
    if at < command.start or (at > command.start and not command.anywhere):
        return False
    return command.names[at] == _name(rule_words[0]) and command.words[at + 1 :] == rule_words[1:]
