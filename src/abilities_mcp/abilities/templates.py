"""`{{...}}` interpolation: plain text for prompts, environment variables for shell commands.

In a script's `run`, a value is never spliced into the command text. Each placeholder becomes a reference to an
environment variable, written so that the shell expands it as exactly one word whatever quoting the author put
around the placeholder (bare, "double", 'single', or inside a larger word).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .expressions import STEP_FIELDS

PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
ENV_PREFIX = "ABILITIES_VALUE_"
# Every input is also exported to scripts as ABILITIES_INPUT_<NAME> (upper case, other characters as _).
INPUT_ENV_PREFIX = "ABILITIES_INPUT_"

Reference = tuple[str, ...]  # ("input", name) or ("step", id, field)
Resolver = Callable[[Reference], Any]


class TemplateError(ValueError):
    """A placeholder that is not a reference this format knows."""


def parse_reference(text: str) -> Reference:
    """`inputs.x` -> ("input", "x"); `steps.build.output` -> ("step", "build", "output")."""
    parts = text.split(".")
    if len(parts) == 2 and parts[0] == "inputs" and parts[1]:
        return ("input", parts[1])
    if len(parts) == 3 and parts[0] == "steps" and parts[2] in STEP_FIELDS:
        return ("step", parts[1], parts[2])
    raise TemplateError(
        f"{{{{{text}}}}} is not a reference; use {{{{inputs.<name>}}}} or "
        "{{steps.<id>.output}} / {{steps.<id>.exit_code}} / {{steps.<id>.status}}"
    )


def references(template: str) -> list[Reference]:
    """Every reference in a template; raises TemplateError on the first bad one."""
    return [parse_reference(m.group(1)) for m in PLACEHOLDER.finditer(template)]


def input_env(inputs: dict[str, Any]) -> dict[str, str]:
    """Inputs under stable environment names, for commands that must read them themselves (sh -c, ssh)."""
    return {INPUT_ENV_PREFIX + re.sub(r"\W", "_", k).upper(): as_text(v).replace("\0", "") for k, v in inputs.items()}


def as_text(value: Any) -> str:
    """How a value reads once interpolated."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def render_text(template: str, resolve: Resolver) -> str:
    """Interpolate for prompts and messages: values become plain text."""
    return PLACEHOLDER.sub(lambda m: as_text(resolve(parse_reference(m.group(1)))), template)


def render_value(value: Any, resolve: Resolver) -> Any:
    """A step's input value: strings are interpolated as text, other values pass as they are."""
    return render_text(value, resolve) if isinstance(value, str) else value


def render_shell(command: str, resolve: Resolver) -> tuple[str, dict[str, str]]:
    """Rewrite placeholders as quoted environment variable expansions; return the command and those variables."""
    renderer = _ShellRenderer(command, resolve)
    renderer.render()
    return "".join(renderer.out), renderer.env


_WORD_START = " \t\n;&|()"
# A heredoc operator and its delimiter word: quoted parts, backslash escapes and plain characters, as one word.
_QUOTING = re.compile(r"'([^']*)'|\"([^\"]*)\"|\\(.)")
_HEREDOC = re.compile(r"<<(-?)[ \t]*((?:'[^'\n]*'|\"[^\"\n]*\"|\\.|[^\s;&|<>()'\"\\])+)")
# Commands that parse an argument as shell code again: a placeholder there is code, whatever its quoting.
_REPARSERS = re.compile(
    r"^\s*(?:\w+=\S*\s+)*(?:sudo\s+(?:-\S+\s+)*)?(?:eval|ssh|su)\s"  # at the start of a command
    r"|(?:^|[\s/(`])(?:ba|da|z|k|fi)?sh\s+(?:-\w+\s+)*-\w*c\b"  # sh -c anywhere (docker exec x sh -c, xargs sh -c)
)


# Commands that run an argument (or what is piped to them) as code, which `validate` warns about: a placeholder
# reaches them as one word of data, and they execute that word. (label, pattern searched before the placeholder
# on its line, or after it for a pipe). A denylist is never complete; the guarantee is what the value arrives as.
_EXECUTES_ARGUMENT = [
    ("sh -c", re.compile(r"(?<![\w-])(?:ba|da|z|k|fi)?sh\s+(?:-[-\w]+\s+)*-\w*c\b")),
    ("eval", re.compile(r"(?<![\w-])eval\s")),
    ("flock -c", re.compile(r"(?<![\w-])flock\s.*\s(?:-c|--command)\b")),
    ("script -c", re.compile(r"(?<![\w-])script\s+(?:-\w+\s+)*-\w*c")),
    ("trap", re.compile(r"(?<![\w-])trap\s")),
    ("python -c", re.compile(r"(?<![\w-])python[\d.]*\s+(?:-\w+\s+)*-\w*c\b")),
    ("perl -e", re.compile(r"(?<![\w-])perl\s+(?:-\w+\s+)*-\w*[eE]\b")),
    ("ruby -e", re.compile(r"(?<![\w-])ruby\s+(?:-\w+\s+)*-\w*e\b")),
    ("node -e", re.compile(r"(?<![\w-])(?:node|deno|bun)\s+(?:-\S+\s+)*(?:-e|--eval|-p|--print)\b")),
    ("ssh", re.compile(r"(?<![\w-])ssh\s")),
    ("su -c", re.compile(r"(?<![\w-])su\s.*-\w*c\b")),
    ("watch", re.compile(r"(?<![\w-])watch\s")),
]
# awk runs its program's system(), `| getline` and `print | "cmd"` as shell commands, whatever side of the program
# the value arrives on (`awk -v v={{x}} 'BEGIN{system(v)}'`).
_AWK = re.compile(r"(?<![\w-])[gmn]?awk\s")
_AWK_RUNS = re.compile(r"\bsystem\s*\(|\|\s*getline|print[^;]*\|\s*\"")
_PIPED_TO_SHELL = re.compile(r"\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:ba|da|z|k)?sh\b(?!\s+(?:-[-\w]+\s+)*-\w*c\b)")


def executing_commands(command: str) -> list[tuple[str, str, str]]:
    """(placeholder, the command that runs it as code, the line) for each placeholder passed to a command that
    executes its argument (`bash --norc -c`, `python3 -c`, `... | sh`, `trap`, ...): what `validate` warns about."""
    found = []
    for m in PLACEHOLDER.finditer(command):
        start = command.rfind("\n", 0, m.start()) + 1
        end = command.find("\n", m.end())
        line = command[start : len(command) if end < 0 else end]
        before, after = command[start : m.start()], command[m.end() : len(command) if end < 0 else end]
        label = next((name for name, pattern in _EXECUTES_ARGUMENT if pattern.search(before)), None)
        if label is None and _AWK.search(before) and _AWK_RUNS.search(line):
            label = "awk system()"
        if label is None and _PIPED_TO_SHELL.search(after):
            label = "a shell reading a pipe (| sh)"
        if label is not None:
            found.append((m.group(1), label, line.strip()))
    return found


class _ShellRenderer:
    """Walks a command once, tracking the shell's quoting context so each placeholder is quoted to fit it.

    Contexts: plain, single, double, paren (inside `$(` or `(`), backtick. Comments are copied through;
    heredoc bodies are copied line by line, their placeholders expanded unquoted (or refused in a quoted heredoc,
    where nothing expands).
    """

    def __init__(self, command: str, resolve: Resolver):
        self.command, self.resolve = command, resolve
        self.out: list[str] = []
        self.env: dict[str, str] = {}
        self.stack = ["plain"]
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, quoted, strip tabs)
        self.i = 0

    def render(self) -> None:
        while self.i < len(self.command):
            m = PLACEHOLDER.match(self.command, self.i)
            if m:
                self._refuse_reparsing(m.group(1))
                self.out.append(_expansion(self._variable(m.group(1)), self.stack[-1]))
                self.i = m.end()
            else:
                self._step()

    def _refuse_reparsing(self, text: str) -> None:
        """Quoting protects a value from this shell only; refuse places where it is parsed again as code."""
        if "arith" in self.stack:
            raise TemplateError(
                f"{{{{{text}}}}} sits inside $(( )), where the shell evaluates the value as arithmetic and a value "
                "can run commands; do the arithmetic in a script step and use its output as a plain word"
            )
        line = re.split(r"[;&|\n(`]", "".join(self.out))[-1]
        if _REPARSERS.search(line):
            raise TemplateError(
                f"{{{{{text}}}}} is passed to a command that runs its argument as shell code (eval, sh -c, ssh, su); "
                f"quoting cannot protect it there. Read the value from the environment instead: "
                f"sh -c 'echo \"$ABILITIES_INPUT_<NAME>\"' (every input is exported under that name)"
            )

    def _variable(self, text: str) -> str:
        name = f"{ENV_PREFIX}{len(self.env) + 1}"
        self.env[name] = as_text(self.resolve(parse_reference(text))).replace("\0", "")
        return name

    def _step(self) -> None:
        c, ch, top = self.command, self.command[self.i], self.stack[-1]
        unquoted = top in ("plain", "paren", "backtick")
        if unquoted and ch == "#" and (self.i == 0 or c[self.i - 1] in _WORD_START):
            end = c.find("\n", self.i)
            end = len(c) if end < 0 else end
            self.out.append(c[self.i : end])
            self.i = end
        elif unquoted and c.startswith("<<", self.i) and not c.startswith("<<<", self.i):
            self._heredoc_operator()
        elif unquoted and ch == "\n" and self.heredocs:
            self._copy(1)
            self._heredoc_bodies()
        else:
            self.i = _scan(c, self.i, self.stack, self.out)

    def _copy(self, n: int) -> None:
        self.out.append(self.command[self.i : self.i + n])
        self.i += n

    def _heredoc_operator(self) -> None:
        m = _HEREDOC.match(self.command, self.i)
        if not m:
            self._copy(2)
            return
        word = m.group(2)
        # Any quoting in the word (<<'EOF', <<E"O"F, <<E\\OF) makes the body literal; the delimiter is the word
        # after quote removal, so the body ends at EOF in each case.
        quoted = any(c in word for c in "'\"\\")
        delimiter = _QUOTING.sub(lambda q: q.group(1) or q.group(2) or q.group(3) or "", word)
        self.heredocs.append((delimiter, quoted, m.group(1) == "-"))
        self._copy(m.end() - self.i)

    def _heredoc_bodies(self) -> None:
        for delimiter, quoted, strip_tabs in self.heredocs:
            while self.i < len(self.command):
                end = self.command.find("\n", self.i)
                end = len(self.command) if end < 0 else end + 1
                line = self.command[self.i : end]
                self.i = end
                if (line.lstrip("\t") if strip_tabs else line).rstrip("\n") == delimiter:
                    self.out.append(line)
                    break
                self.out.append(self._body_line(line, quoted, delimiter))
        self.heredocs = []

    def _body_line(self, line: str, quoted: bool, delimiter: str) -> str:
        def expand(m: re.Match) -> str:
            if quoted:
                raise TemplateError(
                    f"{{{{{m.group(1)}}}}} sits in a quoted heredoc (<<'{delimiter}'), where nothing expands; "
                    "unquote the delimiter or pass the value on the command line"
                )
            return "${" + self._variable(m.group(1)) + "}"

        return PLACEHOLDER.sub(expand, line)


def _expansion(var: str, context: str) -> str:
    if context == "double":
        return "${" + var + "}"
    if context == "single":
        return "'\"${" + var + "}\"'"  # close the single quotes, expand in double quotes, reopen
    return '"${' + var + '}"'


def _scan(command: str, i: int, stack: list[str], out: list[str]) -> int:
    """Copy one lexical unit of the command, tracking the quoting context; return the next index."""
    ch, top = command[i], stack[-1]
    if top == "single":
        if ch == "'":
            stack.pop()
        out.append(ch)
        return i + 1
    if ch == "\\" and i + 1 < len(command):
        out.append(command[i : i + 2])
        return i + 2
    if top == "arith":
        if command.startswith("))", i):
            stack.pop()
            out.append("))")
            return i + 2
        out.append(ch)
        return i + 1
    if command.startswith("$((", i) or (top != "double" and command.startswith("((", i)):
        opener = "$((" if ch == "$" else "(("
        stack.append("arith")
        out.append(opener)
        return i + len(opener)
    if command.startswith("$(", i):
        stack.append("paren")
        out.append("$(")
        return i + 2
    if ch == "`":
        if top == "backtick":
            stack.pop()
        else:
            stack.append("backtick")
    elif top == "double":
        if ch == '"':
            stack.pop()
    elif ch == "'":
        stack.append("single")
    elif ch == '"':
        stack.append("double")
    elif ch == "(":
        stack.append("paren")
    elif ch == ")" and top == "paren":
        stack.pop()
    out.append(ch)
    return i + 1
