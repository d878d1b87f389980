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
   quotes, each operator on its own (`true;>/dev/null git push`). A backslash-newline joins lines, outside single
   quotes and comments. A comment (an unquoted `#` starting a word, outside `${…}` and arithmetic) runs to the end
   of its line; when one holds a quote, a `$` or a trailing backslash the line is also read as if it had none.
   Where a quote is left open, the complete lines before it are still read (bash runs them). Each simple command
   is matched on its own: `echo ok && git push --force`.
2. Words are as the shell splits them: quotes and backslashes removed (`g""it push '--force'`, `\\git`, `$'\\x67it'`),
   any whitespace between, unquoted braces expanded (`{git,push,--force}`, `--forc{e,e}`, `gi{t..t}`; past
   BRACE_WORDS words such a word matches any word it could make, and the line is also read loosely). A
   redirection's target stays a word; an exact rule also tries the command without the redirections and their
   descriptors (`2>&1`, `{fd}>x`). A word with an unquoted glob (`gi[t]`, `g?t`, `--forc*`) matches a rule word it
   could expand to, and as the command word it may be a runner or a shell too; an extended glob (`extglob`) has the
   line read loosely.
3. Leading variable assignments and keywords (`FOO=1`, `if`, `then`, `do`, `!`, `{`) are skipped, and so are
   `function NAME` and `coproc NAME` before a compound command.
4. The command word is compared by its basename: `/usr/bin/git push --force`; git's own `git-push` (and
   `/usr/lib/git-core/git-push`) is read as `git push`.
5. Runners are looked through: after `sudo`, `doas`, `env`, `command`, `builtin`, `exec`, `nohup`, `time`, `nice`,
   `ionice`, `timeout`, `stdbuf`, `setsid`, `xargs`, `watch`, `chronic`, `unbuffer` (and `find`, `flock`, `ssh`,
   `docker` and others in RUNNERS) any later word may start the command (`sudo -u deploy git push --force`), and
   each later word is also read as a command line (`watch 'git push --force'`, `env -S '…'`). `echo` is no runner.
6. Nested command lines are read too, up to MAX_DEPTH levels:
   - every `$(…)`, `<(…)`, `>(…)` and backtick substitution outside single quotes (in double quotes too), and one in
     an array subscript even single-quoted (`test -v 'a[$(…)]'`, `unset`, `let` run it);
   - a here-document's body, as `bash <<EOF` would run it, to its delimiter line as bash 5.2 finds it (one with no
     end is also read loosely);
   - `eval`'s words joined; the words of `trap`, `alias`, `mapfile` and `bind`; an alias defined on an earlier
     line, in place of its name (`alias g=git` then `g push`);
   - when a line names a shell (`bash -lc '…'`, `… | sh`, `su -c '…'`, `docker exec box sh -c '…'`), sources a file
     (`. /dev/stdin <<< '…'`, `source <(…)`) or evals: every word of the line, the words its other commands print
     (`echo git push --force | sh`), and the words of what its substitutions print (`eval "$(printf '…')"`);
   - a git alias defined on the command (`git -c alias.p='push --force' p`, `-c 'alias.p=!git push --force'`,
     `GIT_CONFIG_KEY_0=alias.p`): a `!` value as a command line, and the command loosely with the values in it.
7. Where the line cannot be parsed (an open quote, a line over MAX_COMMAND_CHARS, nesting past MAX_DEPTH, the
   parse budget spent) it is read loosely, which can only match more: split on whitespace and operators, quotes
   removed, braces expanded, any word may start the command, and an exact rule is tested as a prefix rule.

Over-matching is preferred to under-matching: a commented `# don't …` line, a here-document's text or an `echo`
into a shell may match. A command built at run time is judged by its text and so is not matched: `$CMD`,
`g$(echo it) push`, `${x:-push}`, an alias or a git alias defined in one call and used in another (`git config
alias.p push` then `git p --force`), a script that itself pushes, arguments fed to `xargs` on standard input, a
prompt or `PS4` expanded later. For shell rules this text parse is the barrier: a sandbox does not stop a push the
agent may otherwise make (it has the network and the repository), so a rule gates a command only as far as its
text shows it.

Stdlib only (`re`, `shlex`, and `fnmatch` for a glob), never raises on a command, linear in its length: the hook
runs it on every tool call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .rules import RULE_TOOL, ShellRule, is_rule  # (here too: the names commands.py has always given)

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
_REDIRECTS = frozenset({"<", ">", ">>", "<<", "<<-", "<<<", "<>", ">|", ">&", "<&", "&>", "&>>"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")

# One piece of a command line; adjacent pieces that are neither space nor operator make one word. Each quoted form
# is an unrolled loop, linear even when its quote is left open; `open` is an open quote or a trailing backslash.
# Operators are taken one at a time, longest first, so that `;>` is a separator and then a redirection.
_PIECE = re.compile(
    r"""(?P<space>[ \t\r\f\v]+)
    |(?P<op>&&|\|\||;;|\|&|&>>?|<<<|<<-?|<>|<&|>>|>&|>\||[;&|()<>\n])
    |\$'(?P<ansi>[^'\\]*(?:\\.[^'\\]*)*)'
    |\$?"(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"
    |'(?P<single>[^']*)'
    |\\(?P<escaped>.)
    |(?P<plain>[^ \t\r\f\v\n;&|()<>'"\\$]+|\$)
    |(?P<open>.)""",
    re.S | re.X,
)
# Escapes and the scanner's marks, left for re to compile on first use: the hook imports this on every call.
# A backslash-newline joins lines; an escaped backslash before a newline does not.
_CONTINUATION = r"(\\[^\n])|\\\n"
_DOUBLE_ESCAPE = r"\\([$`\"\\])"
_TICK_ESCAPE = r"\\([$`\\])"
_ANSI_ESCAPE = r"(?s)\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)"
_ANSI_CHARS = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b", "E": "\x1b"}
# The characters that may start a mark: what opens or closes a quote, a substitution, an arithmetic or parameter
# expansion, a comment or a here-document (outside single quotes; inside `$'…'` and backticks only an escape and the
# closing quote count; braces count only inside `${…}`, brackets inside `$[…]`). One character class compiles in a
# fraction of the time of the marks spelled out; `_Scan.token` reads the mark.
_MARKS = r"[\\$<>(`)'\"#\n]"
_FRAME_MARKS = {
    "$'": r"[\\']",
    "`": r"[\\`]",
    "${": r"[\\$<>(`)'\"#\n{}]",
    "${ ": r"[\\$<>(`)'\"#\n{}]",
    "$[": r"[\\$<>(`)'\"#\n\[\]]",
}
# A line without these characters (and without `<<`) has no mark the scanner acts on.
_SCANNED = "\\$`'\"#("
# A here-document's delimiter word, after `<<` and blanks.
_DELIMITER = r"[ \t]*((?:[^\s;&|()<>'\"\\]|\\.|'[^']*'|\"(?:[^\"\\]|\\.)*\")+)"
# A redirection's variable descriptor, as in `{fd}>file`.
_FD_VARIABLE = r"\{[A-Za-z_][A-Za-z0-9_]*\}"
# Where a comment may start: after a blank, a newline or an operator character (not after an escaped one).
_BREAKS = frozenset(" \t\n;&|<>()")
# The scanner's compiled marks, made on first use.
_SCAN: dict[str, re.Pattern[str]] = {}
# The loose reading: quotes and backslashes dropped, then words split at whitespace and operator characters.
_LOOSE_DROP = str.maketrans("", "", "'\"\\")
_LOOSE_WORD = re.compile(r"[^\s;&|()<>`$]+")
# Brace expansion: unquoted braces and commas are marked with private characters, then expanded in bash's order.
_OPEN, _COMMA, _CLOSE = "\ue000", "\ue001", "\ue002"
_BRACE_MARK = str.maketrans({"{": _OPEN, ",": _COMMA, "}": _CLOSE})
_BRACE_UNMARK = str.maketrans({_OPEN: "{", _COMMA: ",", _CLOSE: "}"})
_BRACE_SEQUENCE = r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?"
# The words one word may expand to, the words all expansions of one line may make, and the longest word expanded;
# past them the word becomes a glob that any of its words matches, and the line is also read loosely.
BRACE_WORDS = 128
_BRACE_STEPS = 512
_BRACE_CHARS = 2048
_NO_GLOBS: frozenset[str] = frozenset()
# Builtins whose arguments are shell text they run later (`trap 'cmd' EXIT`, `alias p='cmd'`, `mapfile -C cmd`,
# `bind -x '…:cmd'`), and those that run a file or their words as this shell (`. /dev/stdin <<< 'cmd'`, `eval`).
_TEXT_BUILTINS = ("trap", "alias", "mapfile", "readarray", "bind")
_SHELL_BUILTINS = (".", "source", "eval")
# The command words whose later words `_nested_lines` reads (besides runners').
_NESTING = frozenset({"eval", "git", *_TEXT_BUILTINS})


# Plain classes, not dataclasses nor more NamedTuples (each costs a tenth of a millisecond to create): the hook
# imports this module on every tool call.
class _Simple:
    """One simple command: its words, each as a command name (`_name`), where the command word is, whether any
    later word may start the command too (after a runner), and which words hold an unquoted glob."""

    __slots__ = ("words", "names", "start", "anywhere", "globs")

    def __init__(
        self, words: tuple[str, ...], names: tuple[str, ...], start: int, anywhere: bool, globs: frozenset[str]
    ) -> None:
        self.words, self.names, self.start, self.anywhere, self.globs = words, names, start, anywhere, globs


class _Reading:
    """A command line as read for matching: its simple commands, nested ones included, and the loose readings."""

    def __init__(self) -> None:
        self.commands: list[_Simple] = []
        self.loose: list[tuple[str, ...]] = []
        self.budget = PARSE_BUDGET


def rule_of(text: str) -> ShellRule | None:
    """The shell rule a trigger writes, or None for a plain tool name; ValueError naming the fix if malformed. (A
    rule in plain words reads the same through rules.plain_rule, without this parser: workflows.py.)"""
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
    read = _tokens(body, braces=False)
    if read is None:
        raise ValueError(f"{text!r} leaves a quote open (or ends in a backslash): close it")
    tokens = read[0]
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
            import shlex  # here: only a command given as a list is joined

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
            _read_loosely(command, reading)
        else:
            _read(command, 0, reading)
    except Exception:  # a bug in the parser must not open the gate: read the whole line loosely
        _read_loosely(command, reading)
    return reading


def _read(text: str, depth: int, reading: _Reading, comments: bool = True, shell: bool = False) -> None:
    """Add one command line's simple commands, and those of the lines nested in it, to the reading. `comments`
    False reads a `#` as any other character (the second reading of a line whose comments hold quotes); `shell`
    says that what the line prints is run as shell text, so its words are command lines too."""
    cost = len(text) + _READING_COST
    if depth > MAX_DEPTH or cost > reading.budget:
        _read_loosely(text, reading)
        return
    reading.budget -= cost
    scan = _Scan(text, comments)
    read = _tokens(scan.line) if scan.run() else None
    if read is None:
        if 0 < scan.complete < len(text):  # bash runs the complete lines before a quote it finds open
            _read(text[: scan.complete], depth, reading, comments, shell)
        _read_loosely(text, reading)
        return
    tokens, cut = read
    # Brace expansion stopped at its bound, an extended glob (`@(git|x)`, `shopt -s extglob`) or a here-document
    # with no end: the line is read loosely too.
    for loose in ([scan.line] if cut or "extglob" in text else []) + scan.unterminated:
        reading.loose.append(_loose_words(loose))
    commands = _commands(tokens)
    reading.commands += commands
    lines, runs_shell = _nested_lines(commands, reading, shell)
    lines += scan.heredocs + _subscript_lines(tokens, reading)
    # A substitution on a line that runs a shell (`eval "$(printf …)"`, `bash -c "$(echo …)"`) prints shell text.
    for nested in dict.fromkeys(scan.bodies):
        _read(nested, depth + 1, reading, shell=runs_shell)
    for nested in dict.fromkeys(lines):
        if nested:
            _read(nested, depth + 1, reading)
    if scan.doubtful:  # a comment held a quote: were it no comment, the quote would pair differently
        _read(text, depth, reading, comments=False, shell=shell)


def _read_loosely(text: str, reading: _Reading) -> None:
    """Add the loose reading of a line, and, when it has line continuations, its reading with them kept (a
    continuation in a comment or quotes does not join)."""
    reading.loose.append(_loose_words(text))
    if "\\\n" in text:
        reading.loose.append(tuple(_LOOSE_WORD.findall(text.translate(_LOOSE_DROP))))


def _joined_lines(text: str) -> str:
    """The text with its line continuations (backslash-newline) removed, quotes and comments regardless."""
    return re.sub(_CONTINUATION, r"\1", text) if "\\\n" in text else text


def _pattern(source: str) -> re.Pattern[str]:
    """A scanner pattern, compiled on first use."""
    pattern = _SCAN.get(source)
    if pattern is None:
        pattern = _SCAN[source] = re.compile(source, re.S)
    return pattern


# Where comments, here-documents, `((` and process substitutions are read: outside any quote or expansion, or in a
# substitution's command line. The kinds whose inside is a command line read again.
_COMMAND_KINDS = (None, "$(", "${ ")
_READ_AGAIN = ("$(", "`", "${ ")
_ARITHMETIC = ("$((", "((")
_OPENERS = {"'": "'", "$'": "$'", "`": "`", "$(": "$(", "$((": "$((", "$[": "$[", "<(": "$(", ">(": "$("}


class _Scan:
    """One scan of a command line. Its results: `line`, the line with its comments and line continuations removed
    and its here-documents' bodies taken out; `bodies`, the insides of its outermost `$(…)`, `<(…)`, `>(…)`,
    `${ …; }` and backtick substitutions; `heredocs`, its here-documents' bodies; `doubtful`, whether a removed
    comment held a quote, a `$` or a trailing backslash; `unterminated`, bodies with no delimiter line; `complete`,
    where its last complete line ends (what bash runs before a quote left open).

    Frames are the open quotes and expansions, innermost last: [kind, where its inside starts in `out`, open
    brackets inside it, whether it is inside a substitution read again]. Kinds: `'`, `$'`, `"`, a backtick, `$(`
    (also `<(` and `>(`), `${ ` (a command in braces), `${`, `$((` and `((` (arithmetic), `$[`."""

    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.comments = comments
        self.line = ""
        self.bodies: list[str] = []
        self.out: list[str] = []
        self.size = 0  # characters in out
        self.last = ""  # the last of them
        self.glued = -1  # where in out a quote, an escape or an expansion that is part of a word last ended
        self.frames: list[list[Any]] = []
        self.spans: list[tuple[int, int, bool]] = []  # outermost substitutions' insides in out; a backtick's?
        self.heredocs: list[str] = []
        self.pending: list[tuple[str, bool]] = []  # here-documents started on this line: delimiter word, `<<-`
        self.doubtful = False
        self.unterminated: list[str] = []  # here-documents' bodies that run to the end, read loosely too
        self.complete = 0  # where the last complete line (outside any quote or expansion) ends in the text

    def run(self) -> bool:
        """Scan the whole line into the results; False when a quote or an expansion is left open."""
        if "<<" not in self.text and not any(char in self.text for char in _SCANNED):
            self.line = self.text  # no mark to act on (`git status && make`): the pattern is not even compiled
            return True
        if not self.scan():
            return False
        self.line = "".join(self.out)
        self.bodies = [
            re.sub(_TICK_ESCAPE, r"\1", self.line[a:b]) if tick else self.line[a:b] for a, b, tick in self.spans
        ]
        return True

    def scan(self) -> bool:
        text, marks, pos = self.text, _pattern(_MARKS), 0
        while True:
            kind = self.frames[-1][0] if self.frames else None
            if kind == "'":
                end = text.find("'", pos)
                if end < 0:
                    return False
                self.emit(text[pos : end + 1])
                self.close_frame()
                pos = end + 1
                continue
            mark = (_pattern(_FRAME_MARKS[kind]) if kind in _FRAME_MARKS else marks).search(text, pos)
            if mark is None:
                self.emit(text[pos:])
                return not self.frames
            at = mark.start()
            token = self.token(at)
            if token is None:  # `$x`, `> out`, a trailing backslash: text
                self.emit(text[pos : at + 1])
                pos = at + 1
                continue
            self.emit(text[pos:at])
            pos = self.mark(kind, token, at, at + len(token))
            if pos < 0:
                return False

    def token(self, at: int) -> str | None:
        """The mark that starts at a mark character, or None when it starts none."""
        text = self.text
        char, after = text[at], text[at + 1 : at + 3]
        if char == "\\":
            return text[at : at + 2] if after else None
        if char == "$":
            return "$((" if after == "((" else f"${after[0]}" if after[:1] in ("(", "{", "[", "'") else None
        if char in "<>":
            if after[:1] == "(":
                return f"{char}("
            return ("<<<" if after == "<<" else "<<-" if after == "<-" else "<<") if char + after[:1] == "<<" else None
        return "((" if char == "(" and after[:1] == "(" else char

    def emit(self, piece: str) -> None:
        if piece:
            self.out.append(piece)
            self.size += len(piece)
            self.last = piece[-1]

    def open(self, kind: str, token: str) -> None:
        frames = self.frames
        inside = bool(frames) and (frames[-1][3] or frames[-1][0] in _READ_AGAIN)
        self.emit(token)
        frames.append([kind, self.size, 0, inside])

    def close(self, token: str) -> None:
        """Close the innermost frame with its closing token."""
        kind, start, _, inside = self.frames[-1]
        if kind in _READ_AGAIN and not inside:
            self.spans.append((start, self.size, kind == "`"))
        self.emit(token)
        self.close_frame()

    def close_frame(self) -> None:
        kind = self.frames.pop()[0]
        if kind != "((":  # an arithmetic command ends a word; the rest end inside one
            self.glued = self.size

    def word_start(self) -> bool:
        """Whether the next character starts a word (an unescaped blank or operator character is before it)."""
        if self.size == self.glued:
            return False
        return self.size == 0 or (bool(self.frames) and self.size == self.frames[-1][1]) or self.last in _BREAKS

    def mark(self, kind: str | None, token: str, start: int, pos: int) -> int:
        """Act on one mark, from `start` to `pos` in the text; the position to go on from, or -1 when the line
        cannot be scanned."""
        if token[0] == "\\":
            if token != "\\\n" or kind == "$'":  # a backslash-newline joins lines, but not in `$'…'`
                self.emit(token)
                self.glued = self.size
        elif kind in ("$'", "`"):  # the closing quote
            self.close(token)
        elif token == '"' and kind == '"':
            self.close(token)
        elif token == '"' or (kind == '"' and token in ("$(", "$((", "$[", "`")):
            self.open(_OPENERS.get(token, token), token)
        elif kind == '"':
            self.emit(token)
        elif token in _OPENERS and (token[0] not in "<>" or kind in _COMMAND_KINDS):
            self.open(_OPENERS[token], token)
        elif token == "${":
            self.open("${ " if self.text[pos : pos + 1] in (" ", "\t", "\n", "|") else "${", token)
        elif token == "((" and kind in _COMMAND_KINDS and self.word_start():
            self.open("((", token)
        elif token in ("<(", ">(", "((", "(", ")") and kind in ("$(", *_ARITHMETIC):
            return self.paren(kind, token, pos)
        elif token in ("[", "]", "{", "}") and (kind == "$[" if token in "[]" else kind in ("${", "${ ")):
            frame = self.frames[-1]
            if token in "[{":
                frame[2] += 1
            elif frame[2]:
                frame[2] -= 1
            else:
                self.close(token)
                return pos
            self.emit(token)
        elif token == "#" and self.comments and kind in _COMMAND_KINDS and self.word_start():
            return self.comment(start)
        elif token in ("<<", "<<-") and kind in _COMMAND_KINDS:
            self.emit(token)
            word = _pattern(_DELIMITER).match(self.text, pos)
            if word is not None:
                self.pending.append((word.group(1), token == "<<-"))
        elif token == "\n" and kind in _COMMAND_KINDS:
            self.emit(token)
            pos = self.here_documents(pos, nested=kind is not None) if self.pending else pos
            if kind is None:
                self.complete = pos
        else:
            self.emit(token)
        return pos

    def paren(self, kind: str, token: str, pos: int) -> int:
        """A parenthesis inside `$(…)` or arithmetic: counted, or closing it (arithmetic closes with `))`)."""
        frame = self.frames[-1]
        if token != ")":
            frame[2] += token.count("(")
            self.emit(token)
        elif frame[2]:
            frame[2] -= 1
            self.emit(token)
        elif kind == "$(":
            self.close(token)
        elif self.text[pos : pos + 1] == ")":
            self.close("))")
            return pos + 1
        else:
            return -1  # `((` that is no arithmetic: bash reads it again as subshells; this reads the line loosely
        return pos

    def comment(self, start: int) -> int:
        """Drop a comment, to the end of its line."""
        end = self.text.find("\n", start)
        end = len(self.text) if end < 0 else end
        comment = self.text[start:end]
        if comment.endswith("\\") or any(char in comment for char in "'\"`$"):
            self.doubtful = True
        return end

    def here_documents(self, pos: int, nested: bool) -> int:
        """Take out the bodies of the here-documents started on the line just ended, up to each delimiter line
        (joined at backslash-newlines when the delimiter is unquoted, as bash reads it). In a substitution bash 5.2
        also ends one at a line that starts with its delimiter and holds a `)` (`E)` closes `$(cat <<E`), and reads
        on after the delimiter."""
        text = self.text
        for word, strip in self.pending:
            quoted = any(char in word for char in "'\"\\")
            # Quotes removed, `$'E'` and `$"E"` read as `E`, a line continuation joined.
            delimiter = re.sub(r"\$(?=['\"])|\\\n", "", word)
            delimiter = re.sub(r"\\(.)|['\"]", r"\1", delimiter)
            start = logical_start = pos
            parts: list[str] = []
            while pos < len(text):
                newline = text.find("\n", pos)
                end = len(text) if newline < 0 else newline
                line, line_start, pos = text[pos:end], pos, end + 1 if newline >= 0 else end
                bare = line.lstrip("\t") if strip else line
                if nested and delimiter and not parts and bare.startswith(delimiter) and ")" in bare[len(delimiter) :]:
                    self.heredocs.append(text[start:line_start])
                    pos = end - len(bare) + len(delimiter)
                    break
                if not quoted and newline >= 0 and (len(line) - len(line.rstrip("\\"))) % 2:
                    parts.append(line[:-1])
                    continue
                parts.append(line)
                logical, parts = "".join(parts), []
                if (logical.lstrip("\t") if strip else logical) == delimiter:
                    self.heredocs.append(text[start:logical_start])
                    break
                logical_start = pos
            else:  # no delimiter line: should bash see one this does not, what follows runs
                self.heredocs.append(text[start:])
                self.unterminated.append(text[start:])
        self.pending.clear()
        return pos


def _tokens(text: str, braces: bool = True) -> tuple[list[tuple[str, str]], bool] | None:
    """The words and operators of a command line, quotes removed, unquoted braces expanded, and whether brace
    expansion stopped at its bound; None when a quote is left open. A word holding an unquoted glob is of kind
    "glob", any other "word"."""
    tokens: list[tuple[str, str]] = []
    word: list[str] | None = None
    marked: list[str] | None = None  # the word with its unquoted braces and commas marked, once it has one
    glob = cut = False
    steps = [_BRACE_STEPS]
    for piece in _PIECE.finditer(text):
        kind = piece.lastgroup or "open"
        if kind == "open":
            return None
        if kind in ("space", "op"):
            if marked is not None:
                cut = _add_word(tokens, word or [], marked, glob, steps) or cut
            elif word is not None:
                tokens.append(("glob" if glob else "word", "".join(word)))
            word, marked, glob = None, None, False
            if kind == "op":
                tokens.append(("op", piece.group(kind)))
            continue
        value = _unquoted(kind, piece.group(kind))
        word = [] if word is None else word
        if kind == "plain":
            glob = glob or _globs(value)
            if marked is not None:
                marked.append(value.translate(_BRACE_MARK))
            elif braces and "{" in value:
                marked = [*word, value.translate(_BRACE_MARK)]
        elif marked is not None:
            marked.append(value)
        word.append(value)
    if word is not None:
        cut = _add_word(tokens, word, marked, glob, steps) or cut
    return tokens, cut


def _add_word(
    tokens: list[tuple[str, str]], word: list[str], marked: list[str] | None, glob: bool, steps: list[int]
) -> bool:
    """Add a word, or the words its braces expand to; True when expansion stopped at its bound (the word is then
    added as a glob that any of its words matches)."""
    kind = "glob" if glob else "word"
    if marked is None:
        tokens.append((kind, "".join(word)))
        return False
    braced = "".join(marked)
    words = _brace_expansion(braced, steps)
    if words is not None:
        tokens += [(kind, expanded) for expanded in words]
        return False
    # Too many words: the braces, from the first to the last, become a glob that matches any of them.
    first, last = braced.find(_OPEN), braced.rfind(_CLOSE)
    tokens.append(("glob", f"{braced[:first]}*{braced[last + 1 :]}".translate(_BRACE_UNMARK) if first < last else "*"))
    return True


def _globs(value: str) -> bool:
    """Whether unquoted text holds a glob: `*`, `?` or a bracket expression."""
    if "*" in value or "?" in value:
        return True
    bracket = value.find("[")
    return bracket >= 0 and value.find("]", bracket + 2) > 0


def _brace_expansion(word: str, steps: list[int]) -> list[str] | None:
    """The words a word with marked braces expands to, in bash's order; None past BRACE_WORDS words or the line's
    steps."""
    if _CLOSE not in word or (_COMMA not in word and ".." not in word):
        return [word.translate(_BRACE_UNMARK)]  # no group to expand: `{x}`, `${x}`
    if len(word) > _BRACE_CHARS or steps[0] <= 0:
        return None
    done: list[str] = []
    todo = [word]
    while todo:
        current = todo.pop()
        group = _brace_group(current, min(steps[0], BRACE_WORDS) + 1)
        if group is None:
            done.append(current.translate(_BRACE_UNMARK))
            continue
        before, alternatives, after = group
        steps[0] -= len(alternatives)
        if steps[0] < 0 or len(done) + len(todo) + len(alternatives) > BRACE_WORDS:
            return None
        todo += [before + alternative + after for alternative in reversed(alternatives)]
    return done


def _brace_group(word: str, limit: int) -> tuple[str, list[str], str] | None:
    """The first brace group that expands (`{a,b}` or a sequence `{a..c}`, nested ones counted): the text before
    it, its alternatives (a sequence's first `limit` words) and the text after it; None when there is none."""
    stack: list[tuple[int, list[int]]] = []
    found: tuple[int, int, list[str]] | None = None
    for mark in _pattern("[\ue000-\ue002]").finditer(word):
        char, at = mark.group(), mark.start()
        if char == _OPEN:
            stack.append((at, []))
        elif not stack:
            continue
        elif char == _COMMA:
            stack[-1][1].append(at)
        else:
            start, commas = stack.pop()
            if found is not None and found[0] < start:
                continue  # a later group: the first is expanded first
            if commas:
                bounds = [start, *commas, at]
                found = (start, at, [word[a + 1 : b] for a, b in zip(bounds, bounds[1:], strict=False)])
            elif ".." in word[start:at] and (sequence := _brace_sequence(word[start + 1 : at], limit)) is not None:
                found = (start, at, sequence)
    return None if found is None else (word[: found[0]], found[2], word[found[1] + 1 :])


def _brace_sequence(body: str, limit: int) -> list[str] | None:
    """The first `limit` words of a sequence expression (`1..3`, `a..e..2`, `01..10`); None when the text is
    none."""
    match = _pattern(_BRACE_SEQUENCE).fullmatch(body)
    if match is None or match[1].isalpha() != match[2].isalpha():
        return None
    step = abs(int(match[3] or 1)) or 1
    letters = match[1].isalpha()
    first, last = (ord(match[1]), ord(match[2])) if letters else (int(match[1]), int(match[2]))
    step = step if last >= first else -step
    values = range(first, last + (1 if step > 0 else -1), step)[:limit]
    if letters:
        return [chr(value) for value in values]
    padded = any(len(end.lstrip("-")) > 1 and end.lstrip("-")[0] == "0" for end in (match[1], match[2]))
    width = max(len(match[1]), len(match[2])) if padded else 0
    return [f"{value:0{width}d}" for value in values]


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
    globs: set[str] = set()
    redirected = target = False
    for kind, value in [*tokens, ("op", ";")]:
        if kind != "op":
            words.append(value)
            if kind == "glob":
                globs.add(value)
            if not target:
                bare.append(value)
            target = False
        elif value in _REDIRECTS:
            redirected = target = True
            if bare and (bare[-1].isdigit() or _pattern(_FD_VARIABLE).fullmatch(bare[-1])):  # 2>&1, {fd}>x
                bare.pop()
        elif words:
            frozen = frozenset(globs) if globs else _NO_GLOBS
            for form in (words, bare) if redirected and bare != words else (words,):
                commands += _simple(form, frozen)
            words, bare, globs, redirected, target = [], [], set(), False, False
    return commands


def _simple(words: list[str], globs: frozenset[str]) -> list[_Simple]:
    """A simple command, past its assignments, keywords, a function's name and a coprocess's; and, when it runs
    git's `git-SUB`, once more with that read as `git SUB`. Empty when nothing is left to run."""
    start = 0
    while start < len(words):
        word = words[start]
        if word == "function" or (word == "coproc" and start + 2 < len(words) and words[start + 2] in _KEYWORDS):
            start += 2
        elif word in _KEYWORDS or _ASSIGNMENT.match(word):
            start += 1
        else:
            break
    if start >= len(words):
        return []
    names = _names(words)
    # A glob as the command word could name a runner or a shell too.
    forms = [_Simple(tuple(words), names, start, names[start] in RUNNERS or words[start] in globs, globs)]
    if any(name.startswith("git-") for name in names[start:]):
        split = words[:start]
        for word, name in zip(words[start:], names[start:], strict=True):
            split += ("git", name[4:]) if name.startswith("git-") and len(name) > 4 else (word,)
        split_names = _names(split)
        forms.append(_Simple(tuple(split), split_names, start, split_names[start] in RUNNERS, globs))
    return forms


def _name(word: str) -> str:
    """A word as command names are compared: its basename, lowercase (macOS and Windows find `GIT` as git)."""
    return word[word.rfind("/") + 1 :].lower()


def _names(words: Iterable[str]) -> tuple[str, ...]:
    """Each word as a command name."""
    return tuple(map(_name, words))


def _fnmatch(name: str, pattern: str) -> bool:
    """Whether an unquoted glob could expand to a name: `*` any text, `?` any character, and, to match more rather
    than less (bash's classes, `[^…]`, ranges), the text from the first `[` to the last `]` any text too."""
    from fnmatch import fnmatchcase  # here: only a command with a glob needs it (its `*` never backtracks)

    first, last = pattern.find("["), pattern.rfind("]")
    if 0 <= first < last:
        pattern = f"{pattern[:first]}*{pattern[last + 1 :]}"
    return fnmatchcase(name, pattern)


def _globs_of(name: str, globs: frozenset[str], command_name: bool = False) -> frozenset[str]:
    """The globs that could expand to a name (as a command name: by their basenames, in any case)."""
    return frozenset(glob for glob in globs if _fnmatch(name, _name(glob) if command_name else glob))


def _first_at(name: str, command: _Simple) -> int:
    """The first place the command may start (its command word, or after a runner any later word) that is the
    command `name`, or a glob that could expand to it; -1 when there is none."""
    names, start = command.names, command.start
    if command.globs:
        stop = len(names) if command.anywhere else start + 1
        words, globs = command.words, _globs_of(name, command.globs, command_name=True)
        return next((at for at in range(start, stop) if names[at] == name or words[at] in globs), -1)
    if names[start] == name:
        return start
    try:
        return names.index(name, start) if command.anywhere else -1
    except ValueError:
        return -1


def _nested_lines(commands: list[_Simple], reading: _Reading, shell: bool) -> tuple[list[str], bool]:
    """The command lines nested in these commands' words, and whether the line runs a shell: `eval`'s words joined,
    a runner's later words, the words of the builtins that keep shell text, an alias defined on an earlier line
    (`alias g=git` then `g push`) with the words after it, a git alias's value (also added to the reading loosely);
    and, when a word names a shell (`bash -c STRING`, `… | sh`, `docker exec box sh -c STRING`), the command sources
    a file (`. /dev/stdin <<< STRING`) or evals, or `shell` says the line's output is run, every word of the line
    and the words the line's other commands print (`echo git push | sh`)."""
    lines: list[str] = []
    aliases: dict[str, str] = {}
    for command in commands:
        words, start = command.words, command.start
        if words[start] in aliases:  # an alias defined on this line is used from the next on: over-matching here
            import shlex  # here: only an alias's use is spelled out again

            lines.append(f"{aliases[words[start]]} {shlex.join(words[start + 1 :])}")
        if not (command.anywhere or command.globs) and command.names[start] not in _NESTING:
            continue  # the common case: no word here runs text
        if (at := _first_at("eval", command)) >= 0:
            lines.append(" ".join(words[at + 1 :]))  # a later eval is among these words, read in turn
        lines += words[start + 1 :] if command.anywhere else ()
        # `trap 'cmd' EXIT`, `alias p='cmd'`: the words after the first such builtin, and each value after `=`.
        builtins = [at for builtin in _TEXT_BUILTINS if (at := _first_at(builtin, command)) >= 0]
        if builtins:
            lines += [text for word in words[min(builtins) + 1 :] for text in (word, word.partition("=")[2])]
        if (at := _first_at("alias", command)) >= 0:
            aliases.update(word.split("=", 1) for word in words[at + 1 :] if "=" in word[1:])
        if _first_at("git", command) >= 0 and any("alias." in word.lower() for word in words):
            # `git -c alias.p='push --force' p`: each value after `=`; one starting with `!` is a command line.
            values = [word.partition("=")[2] or word for word in words]
            lines += [value[1:] for value in values if value.startswith("!")]
            reading.loose.append(("git", *_loose_words(" ".join(value.removeprefix("!") for value in values))))
    shells = [_runs_shell(command) for command in commands]
    runs_shell = shell or any(shells)
    if runs_shell:
        lines += [word for command in commands for word in command.words]
        # What `echo WORDS | sh` or `printf '%s ' WORDS | sh` hands the shell: the words after the first one to three.
        lines += [
            " ".join(command.words[command.start + skip :])
            for command, shell in zip(commands, shells, strict=True)
            if not shell
            for skip in (1, 2, 3)
        ]
    return list(dict.fromkeys(lines)), runs_shell


def _runs_shell(command: _Simple) -> bool:
    """Whether a command names a shell (anywhere: `… | sudo bash`), sources a file or evals (which run what a
    substitution prints), or its command word is a glob."""
    if not SHELLS.isdisjoint(command.names):
        return True
    if command.words[command.start] in command.globs:
        return True
    return any(_first_at(name, command) >= 0 for name in _SHELL_BUILTINS)


def _subscript_lines(tokens: list[tuple[str, str]], reading: _Reading) -> list[str]:
    """The substitutions in array subscripts, even single-quoted: `test -v 'a[$(cmd)]'`, `unset`, `declare`,
    `let` and `(( ))` evaluate them."""
    lines: list[str] = []
    for kind, value in tokens:
        if kind != "op" and "[" in value and ("$(" in value or "`" in value):
            scan = _Scan(value, comments=True)
            if scan.run():
                lines += scan.bodies
            else:
                reading.loose.append(_loose_words(value))
    return lines


def _loose_words(text: str) -> tuple[str, ...]:
    """The fail-closed reading: quotes and backslashes dropped, words split at whitespace and operator characters,
    braces expanded (or, past the bound, braces and commas splitting words too), `git-SUB` read as `git SUB`."""
    words: list[str] = []
    steps = [_BRACE_STEPS]
    for word in _LOOSE_WORD.findall(_joined_lines(text).translate(_LOOSE_DROP)):
        if "{" in word:
            expanded = _brace_expansion(word.translate(_BRACE_MARK), steps)
            words += expanded if expanded is not None else filter(None, re.split("[{},]+", word))
        elif (name := _name(word)).startswith("git-") and len(name) > 4:
            words += ("git", name[4:])
        else:
            words.append(word)
    return tuple(words)


def _matches(rule: ShellRule, reading: _Reading) -> bool:
    """Whether a rule matches a simple command of the reading, or, where it was read loosely, a loose reading."""
    try:
        if any(_matches_command(rule, command) for command in reading.commands):
            return True
        loose_rule = _loose_words(" ".join(rule.words)) if reading.loose else ()
        loose = (_Simple(words, _names(words), 0, True, _loose_globs(words)) for words in reading.loose if words)
        return bool(loose_rule) and any(_prefix_matches(loose_rule, command) for command in loose)
    except Exception:  # a bug in matching must not open the gate either
        return True


def _loose_globs(words: tuple[str, ...]) -> frozenset[str]:
    """The words of a loose reading that may be globs (its quotes are gone: any that holds one)."""
    return frozenset(word for word in words if _globs(word)) or _NO_GLOBS


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
    if not command.globs:
        return all(word in rest for word in rule_words[1:])  # `in` consumes rest: an in-order subsequence
    return all(
        any(word == rule_word or word in globs for word in rest)
        for rule_word in rule_words[1:]
        for globs in (_globs_of(rule_word, command.globs),)
    )


def _exact_matches(rule_words: tuple[str, ...], command: _Simple) -> bool:
    """Whether, from a place the command may start, the command is exactly the rule's words."""
    at = len(command.words) - len(rule_words)
    if at < command.start or (at > command.start and not command.anywhere):
        return False
    name, globs = _name(rule_words[0]), command.globs
    if command.names[at] != name and not (globs and command.words[at] in _globs_of(name, globs, command_name=True)):
        return False
    if not globs:
        return command.words[at + 1 :] == rule_words[1:]
    later = zip(command.words[at + 1 :], rule_words[1:], strict=True)
    return all(word == rule_word or word in _globs_of(rule_word, globs) for word, rule_word in later)
