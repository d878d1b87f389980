"""`when:` conditions: a small expression language parsed to a tree and evaluated without `eval`.

Grammar (lowest precedence first):
    expr    := or
    or      := and (("or" | "||") and)*
    and     := not (("and" | "&&") not)*
    not     := ("not" | "!") not | compare
    compare := primary (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") primary)?
    primary := literal | list | reference | func "(" ")" | "(" expr ")"
References: inputs.<name>, steps.<id>.status | output | exit_code. Functions: always(), failure(), success().
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

STEP_FIELDS = ("status", "output", "exit_code")
FUNCTIONS = ("always", "failure", "success")
# Authors write conditions, not programs: a longer one is almost surely a mistake (and bounds parse time).
MAX_EXPRESSION_LENGTH = 2000

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<num>-?\d+(?:\.\d+)?)
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>!(),\[\]])
    | (?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*)
    )""",
    re.VERBOSE,
)
# Text longer than this is never read as a number (int() refuses over 4,300 digits, and no real value is that long).
MAX_NUMBER_TEXT = 40
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}


class ExpressionError(ValueError):
    """A condition that does not parse, or names something that does not exist."""


@dataclass
class Condition:
    """A parsed `when:` condition and what it refers to."""

    source: str
    tree: tuple
    inputs: set[str] = field(default_factory=set)
    steps: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)

    def evaluate(self, inputs: dict[str, Any], steps: dict[str, dict[str, Any]], any_need_failed: bool) -> bool:
        """The condition's truth for these inputs and step results."""
        return bool(_eval(self.tree, inputs, steps, any_need_failed))


def parse_condition(source: str) -> Condition:
    """Parse a condition; raises ExpressionError saying where and what is wrong."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(f"condition is longer than {MAX_EXPRESSION_LENGTH} characters; shorten it")
    parser = _Parser(source, _tokenize(source))
    try:
        tree = parser.parse_or()
    except RecursionError:
        raise ExpressionError(f"condition nests too deeply; simplify {source[:40]!r}...") from None
    if parser.peek() is not None:
        raise ExpressionError(f"unexpected {parser.peek()[1]!r} in {source!r}; join conditions with and / or")
    cond = Condition(source, tree)
    _collect(tree, cond)
    return cond


def _tokenize(source: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(source):
        if source[pos:].strip() == "":
            break
        m = _TOKEN.match(source, pos)
        if not m or m.end() == pos:
            rest = source[pos:].strip()
            hint = "; compare with ==, not =" if rest.startswith("=") else ""
            raise ExpressionError(f"cannot read {rest[:20]!r} in {source!r}{hint}")
        kind = m.lastgroup
        text = m.group(kind)
        if kind == "name" and text in _KEYWORDS:
            kind = "kw"
        tokens.append((kind, text))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, source: str, tokens: list[tuple[str, str]]):
        self.source, self.tokens, self.i = source, tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ExpressionError(f"{self.source!r} ends too early; a value is missing")
        self.i += 1
        return tok

    def accept(self, *texts: str) -> bool:
        tok = self.peek()
        if tok and tok[1] in texts and tok[0] in ("op", "kw"):
            self.i += 1
            return True
        return False

    def parse_or(self) -> tuple:
        node = self.parse_and()
        while self.accept("or", "||"):
            node = ("or", node, self.parse_and())
        return node

    def parse_and(self) -> tuple:
        node = self.parse_not()
        while self.accept("and", "&&"):
            node = ("and", node, self.parse_not())
        return node

    def parse_not(self) -> tuple:
        if self.accept("not", "!"):
            return ("not", self.parse_not())
        return self.parse_compare()

    def parse_compare(self) -> tuple:
        left = self.parse_primary()
        tok = self.peek()
        if tok and tok[0] == "kw" and tok[1] == "not" and self._next_is_in():
            self.i += 2
            return ("not in", left, self.parse_primary())
        if tok and tok[1] in ("==", "!=", "<", "<=", ">", ">=", "in") and tok[0] in ("op", "kw"):
            self.i += 1
            return (tok[1], left, self.parse_primary())
        return left

    def _next_is_in(self) -> bool:
        nxt = self.tokens[self.i + 1] if self.i + 1 < len(self.tokens) else None
        return nxt == ("kw", "in")

    def parse_primary(self) -> tuple:
        kind, text = self.take()
        if kind == "str":
            return ("lit", _unquote(text))
        if kind == "num":
            return ("lit", float(text) if "." in text else int(text))
        if kind == "kw" and text in ("true", "false", "null"):
            return ("lit", {"true": True, "false": False, "null": None}[text])
        if text == "(":
            node = self.parse_or()
            self._expect(")")
            return node
        if text == "[":
            return self._list()
        if kind == "name":
            return self._name(text)
        raise ExpressionError(f"unexpected {text!r} in {self.source!r}; expected a value")

    def _list(self) -> tuple:
        items = []
        while not self.accept("]"):
            items.append(self.parse_primary())
            if not self.accept(","):
                self._expect("]")
                break
        return ("list", items)

    def _name(self, text: str) -> tuple:
        if self.accept("("):
            self._expect(")")
            if text not in FUNCTIONS:
                raise ExpressionError(
                    f"unknown function {text}(); use one of " + ", ".join(f"{f}()" for f in FUNCTIONS)
                )
            return ("func", text)
        parts = text.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return ("input", parts[1])
        if parts[0] == "steps" and len(parts) == 3 and parts[2] in STEP_FIELDS:
            return ("step", parts[1], parts[2])
        raise ExpressionError(
            f"{text!r} is not a reference; use inputs.<name> or steps.<id>.status|output|exit_code, "
            "and quote plain strings"
        )

    def _expect(self, text: str) -> None:
        tok = self.take()
        if tok[1] != text:
            raise ExpressionError(f"expected {text!r} but found {tok[1]!r} in {self.source!r}")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _collect(node: tuple, cond: Condition) -> None:
    kind = node[0]
    if kind == "input":
        cond.inputs.add(node[1])
    elif kind == "step":
        cond.steps.add(node[1])
    elif kind == "func":
        cond.functions.add(node[1])
    elif kind == "list":
        for item in node[1]:
            _collect(item, cond)
    elif kind != "lit":
        for child in node[1:]:
            _collect(child, cond)


def _eval(node: tuple, inputs: dict[str, Any], steps: dict[str, dict[str, Any]], failed: bool) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "list":
        return [_eval(n, inputs, steps, failed) for n in node[1]]
    if kind == "input":
        return inputs.get(node[1])
    if kind == "step":
        return steps.get(node[1], {}).get(node[2])
    if kind == "func":
        return {"always": True, "failure": failed, "success": not failed}[node[1]]
    if kind == "not":
        return not _eval(node[1], inputs, steps, failed)
    if kind == "and":
        return _eval(node[1], inputs, steps, failed) and _eval(node[2], inputs, steps, failed)
    if kind == "or":
        return _eval(node[1], inputs, steps, failed) or _eval(node[2], inputs, steps, failed)
    return _compare(kind, _eval(node[1], inputs, steps, failed), _eval(node[2], inputs, steps, failed))


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("in", "not in"):
        found = _contains(right, left)
        return found if op == "in" else not found
    left, right = _align(left), _align(right)
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    try:
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    except TypeError:
        return False  # comparing unlike things (a number and a word) is false, as in GitHub Actions


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return str(item) in container
    if isinstance(container, list | tuple | dict):
        return _align(item) in [_align(x) for x in container]
    return False


def _align(value: Any) -> Any:
    """Numbers written as text compare as numbers (clients send inputs as text)."""
    if isinstance(value, str) and len(value) <= MAX_NUMBER_TEXT and _NUMBER.fullmatch(value.strip()):
        text = value.strip()
        return float(text) if "." in text else int(text)
    return value
