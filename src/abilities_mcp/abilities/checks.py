"""Load-time checks that need a whole ability file: the needs graph, conditions, references, defaults, regexes."""

from __future__ import annotations

import heapq
import posixpath
from collections import Counter
from collections.abc import Container, Iterator

from ..errors import did_you_mean
from ..patterns import compile_pattern
from .expressions import Condition, ExpressionError, parse_condition
from .inputs import check_value
from .models import Ability, ScriptStep
from .templates import TemplateError, executing_commands, input_env, parse_reference, references, render_shell

Problem = tuple[str, str]  # (field path, message with the fix)
# Characters of a command line quoted in a warning.
SHOWN_COMMAND_CHARS = 100
# Cycles broken, one need each, to judge references despite them; a file with more is judged on its graph alone.
MAX_CYCLES_BROKEN = 50


def check_ability(ability: Ability) -> list[Problem]:
    """Every problem in one ability that the models alone cannot see, all in one pass: a broken needs graph does
    not hide the references and conditions (they are judged on the graph with its broken needs left out)."""
    needs = _known_needs(ability)
    problems = [*_check_ids(ability), *_check_needs(ability), *_check_cycles(ability, needs)]
    problems += [*_check_inputs(ability), *_check_patterns(ability), *_check_cwds(ability)]
    sound = _sound(ability, needs)
    if sound is not None:
        problems += _check_references(*sound)
    return problems


def warn_ability(ability: Ability) -> list[Problem]:
    """What loads but deserves a second look: placeholders passed to commands that run their argument as code.
    A value always arrives as one word of data; a command that executes that word executes it."""
    commands = [
        (f"steps[{i}].run", f"step {s.id!r}", s.run) for i, s in enumerate(ability.steps) if isinstance(s, ScriptStep)
    ]
    for key in ("before", "after"):
        commands += [(f"hooks.{key}[{j}]", f"hooks.{key}[{j}]", c) for j, c in enumerate(getattr(ability.hooks, key))]
    return [problem for path, where, command in commands for problem in _executing(path, where, command)]


def _executing(path: str, where: str, command: str) -> Iterator[Problem]:
    try:
        render_shell(command, lambda ref: "")
        found = executing_commands(command)
    except TemplateError:  # refused outright: the error says so
        return
    for placeholder, label, line in found:
        shown = line if len(line) <= SHOWN_COMMAND_CHARS else line[: SHOWN_COMMAND_CHARS - 3] + "..."
        yield (
            path,
            (
                f"{where} passes {{{{{placeholder}}}}} to {label} ({shown!r}), which runs it as code: the value "
                f"arrives as one word of data, and {label} then executes that word. {_instead(placeholder)}"
            ),
        )


def _instead(placeholder: str) -> str:
    try:
        ref = parse_reference(placeholder)
    except TemplateError:
        return ""
    if ref[0] == "input":
        [variable] = input_env({ref[1]: ""})
        return f"Read it from the environment inside the inner script instead: ${variable} (every input is exported)"
    return (
        f"Have step {ref[1]!r} write it to a file and read the file inside the inner script instead, or pass it to a "
        "command that takes it as data"
    )


def execution_order(ability: Ability) -> list[str]:
    """Step ids in topological order over needs, YAML order breaking ties (assumes no cycles).

    Kahn's algorithm with the ready steps in a heap by YAML position: the first ready step in the file goes next,
    in O((steps + needs) log steps), so a 10,000-step chain orders as fast as ten steps do.
    """
    position = {s.id: i for i, s in reversed(list(enumerate(ability.steps)))}
    waiting = {s.id: len(set(s.needs)) for s in ability.steps}
    needed_by: dict[str, list[str]] = {}
    for s in ability.steps:
        for need in set(s.needs):
            needed_by.setdefault(need, []).append(s.id)
    ready = [position[sid] for sid, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        sid = ability.steps[heapq.heappop(ready)].id
        order.append(sid)
        for later in needed_by.get(sid, ()):
            waiting[later] -= 1
            if waiting[later] == 0:
                heapq.heappush(ready, position[later])
    return order


def ancestors(ability: Ability, step_id: str) -> set[str]:
    """Every step a step needs, directly or through others."""
    needs = ability.steps_by_id
    seen: set[str] = set()
    stack = list(needs[step_id].needs)
    while stack:
        sid = stack.pop()
        if sid not in seen:
            seen.add(sid)
            stack.extend(needs[sid].needs)
    return seen


def _check_ids(ability: Ability) -> Iterator[Problem]:
    first: dict[str, int] = {}
    for i, step in enumerate(ability.steps):
        if step.id in first:
            yield (
                f"steps[{i}].id",
                f"duplicate step id {step.id!r} (also steps[{first[step.id]}]); give each step its own id",
            )
        first.setdefault(step.id, i)


def _check_needs(ability: Ability) -> Iterator[Problem]:
    ids = [s.id for s in ability.steps]
    known = set(ids)
    for i, step in enumerate(ability.steps):
        for j, need in enumerate(step.needs):
            if need == step.id:
                yield f"steps[{i}].needs[{j}]", f"step {step.id!r} needs itself; remove it from needs"
            elif need not in known:
                close = did_you_mean(need, ids)
                hint = f"did you mean {close!r}?" if close else f"known steps: {', '.join(dict.fromkeys(ids))}"
                yield f"steps[{i}].needs[{j}]", f"unknown step {need!r}; {hint}"


def _known_needs(ability: Ability) -> dict[str, list[str]]:
    """Each step's needs that name another step that exists (the rest are reported by _check_needs)."""
    known = {s.id for s in ability.steps}
    needs: dict[str, list[str]] = {}
    for s in ability.steps:  # a duplicated id (reported by _check_ids) needs what each of its steps needs
        needs.setdefault(s.id, []).extend(n for n in dict.fromkeys(s.needs) if n in known and n != s.id)
    return needs


def _sound(ability: Ability, needs: dict[str, list[str]]) -> tuple[Ability, set[str]] | None:
    """The ability with its broken needs left out and its cycles broken, and the steps whose order that guessed
    (theirs or an ancestor's needs changed): references are judged on it, and not judged for order in those steps.
    None when too many cycles remain to break."""
    graph = {sid: list(ns) for sid, ns in needs.items()}
    ids = [s.id for s in ability.steps]
    twice = {sid for sid, count in Counter(ids).items() if count > 1}
    changed = {s.id for s in ability.steps if s.id in twice or len(set(s.needs)) != len(graph[s.id])}
    for _ in range(MAX_CYCLES_BROKEN):
        cycle = _first_cycle(graph, ids)
        if cycle is None:
            break
        graph[cycle[-2]].remove(cycle[-1])  # the need that closes the cycle
        changed.add(cycle[-2])
    else:
        return None
    if not changed:
        return ability, set()
    steps = [s.model_copy(update={"needs": graph[s.id]}) for s in ability.steps]
    sound = ability.model_copy(update={"steps": steps})
    sound.__dict__.pop("steps_by_id", None)  # model_copy copies the cached lookup, built from the old steps
    unsure = set()
    for sid in execution_order(sound):
        if sid in changed or any(n in unsure for n in graph[sid]):
            unsure.add(sid)
    return sound, unsure


def _check_cycles(ability: Ability, needs: dict[str, list[str]]) -> Iterator[Problem]:
    cycle = _first_cycle(needs, [s.id for s in ability.steps])
    if cycle:
        chain = " → ".join(reversed(cycle))
        at = [s.id for s in ability.steps].index(cycle[0])
        yield f"steps[{at}].needs", f"needs form a cycle {chain}; remove one of these needs"


def _first_cycle(needs: dict[str, list[str]], ids: list[str]) -> list[str] | None:
    """The first cycle a depth-first walk in YAML order meets, as [a, ..., a]; iterative, so no chain is too long."""
    state: dict[str, str] = {}
    for start in ids:
        if start in state:
            continue
        path, stack = [start], [iter(needs[start])]
        state[start] = "open"
        while stack:
            need = next(stack[-1], None)
            if need is None:
                state[path.pop()] = "done"
                stack.pop()
            elif state.get(need) == "open":
                return path[path.index(need) :] + [need]
            elif need not in state:
                state[need] = "open"
                path.append(need)
                stack.append(iter(needs[need]))
    return None


def _check_inputs(ability: Ability) -> Iterator[Problem]:
    for name, spec in ability.inputs.items():
        if spec.pattern is not None and (err := _regex_error(spec.pattern)):
            yield f"inputs.{name}.pattern", err
            continue
        if spec.min is not None and spec.max is not None and spec.min > spec.max:
            yield f"inputs.{name}.min", f"min {spec.min:g} is above max {spec.max:g}; swap them"
        if spec.enum is not None and not spec.enum:
            yield f"inputs.{name}.enum", "enum is empty; list the allowed values or remove enum"
        if spec.default is not None:
            try:
                check_value(spec, spec.default)
            except ValueError as exc:
                yield f"inputs.{name}.default", f"default breaks its own rules: {exc}; change the default"


def _check_patterns(ability: Ability) -> Iterator[Problem]:
    for i, pattern in enumerate(ability.triggers.patterns):
        if err := _regex_error(pattern):
            yield f"triggers.patterns[{i}]", err
    for i, step in enumerate(ability.steps):
        validation = getattr(step, "validation", None)
        regex = getattr(validation, "output_matches", None)
        if regex is not None and (err := _regex_error(regex)):
            yield f"steps[{i}].validation.output_matches", err


def _regex_error(pattern: str) -> str | None:
    try:
        compile_pattern(pattern)
    except ValueError as exc:
        return f"regular expression {pattern!r} does not compile: {exc}; fix or escape it"
    return None


def _check_references(ability: Ability, unsure: set[str]) -> Iterator[Problem]:
    position = {sid: i for i, sid in enumerate(execution_order(ability))}
    for i, step in enumerate(ability.steps):
        before: Container[str] = _Everything() if step.id in unsure else _RunsBefore(ability, step.id, position)
        for field, text in _templated_fields(step):
            yield from _check_template(ability, f"steps[{i}].{field}", text, step.id, before)
        if step.when is not None:
            yield from _check_condition(ability, f"steps[{i}].when", step.when, step.id, before)
    for key in ("before", "after"):
        for j, command in enumerate(getattr(ability.hooks, key)):
            yield from _check_template(ability, f"hooks.{key}[{j}]", command, None, set())


class _Everything:
    """Every step runs before this one, as far as a check can tell: its needs are broken, so its order is a guess."""

    def __contains__(self, sid: object) -> bool:
        return True


class _RunsBefore:
    """Whether a step has run by the time another starts: an ancestor, or (one at a time) any earlier step.

    Answered per reference, from positions in the execution order, so checking stays linear in the steps; the
    ancestors are only walked for parallel abilities, and only for steps that refer to others.
    """

    def __init__(self, ability: Ability, own: str, position: dict[str, int]):
        self.ability, self.own, self.position = ability, own, position
        self._ancestors: set[str] | None = None

    def __contains__(self, sid: object) -> bool:
        if not self.ability.settings.parallel:
            return self.position.get(str(sid), len(self.position)) < self.position[self.own]
        if self._ancestors is None:
            self._ancestors = ancestors(self.ability, self.own)
        return sid in self._ancestors


def _templated_fields(step) -> Iterator[tuple[str, str]]:
    if isinstance(step, ScriptStep):
        yield "run", step.run
        yield from ((f"env.{key}", value) for key, value in step.env.items())
        if step.cwd:
            yield "cwd", step.cwd
    if getattr(step, "prompt", None):
        yield "prompt", step.prompt
    for j, item in enumerate(getattr(step, "context", [])):
        yield f"context[{j}]", item
    for key, value in getattr(step, "inputs", {}).items():
        if isinstance(value, str):
            yield f"inputs.{key}", value


def _check_template(
    ability: Ability, path: str, text: str, own: str | None, before: Container[str]
) -> Iterator[Problem]:
    try:
        refs = references(text)
        if path.endswith(".run") or path.startswith("hooks."):
            render_shell(text, lambda ref: "")  # the quoting walk refuses placeholders it cannot pass safely
    except TemplateError as exc:
        yield path, str(exc)
        return
    for ref in refs:
        if ref[0] == "input":
            yield from _check_input_ref(ability, path, ref[1])
        else:
            yield from _check_step_ref(ability, path, ref[1], own, before)


def _check_condition(ability: Ability, path: str, text: str, own: str, before: Container[str]) -> Iterator[Problem]:
    try:
        cond: Condition = parse_condition(text)
    except ExpressionError as exc:
        yield path, f"condition does not parse: {exc}"
        return
    for name in sorted(cond.inputs):
        yield from _check_input_ref(ability, path, name)
    for sid in sorted(cond.steps):
        yield from _check_step_ref(ability, path, sid, own, before)


def _check_input_ref(ability: Ability, path: str, name: str) -> Iterator[Problem]:
    if name not in ability.inputs:
        close = did_you_mean(name, ability.inputs)
        hint = f"did you mean inputs.{close}?" if close else "declare it under inputs:"
        yield path, f"unknown input {name!r}; {hint}"


def _check_step_ref(
    ability: Ability, path: str, sid: str, own: str | None, before: Container[str]
) -> Iterator[Problem]:
    if sid not in ability.steps_by_id:
        ids = [s.id for s in ability.steps]
        close = did_you_mean(sid, ids)
        hint = f"did you mean steps.{close}?" if close else f"known steps: {', '.join(ids)}"
        yield path, f"unknown step {sid!r}; {hint}"
    elif own is None:
        yield path, f"hooks cannot refer to step {sid!r}; hooks run outside the steps"
    elif sid not in before:
        yield path, f"step {sid!r} does not run before {own!r}; add {sid!r} to the needs of {own!r}"


def _check_cwds(ability: Ability) -> Iterator[Problem]:
    for i, step in enumerate(ability.steps):
        if isinstance(step, ScriptStep) and step.cwd and "{{" not in step.cwd:
            normal = posixpath.normpath(step.cwd)
            if step.cwd.startswith("/") or normal == ".." or normal.startswith("../"):
                yield f"steps[{i}].cwd", f"cwd {step.cwd!r} leaves the project root; use a path relative to it"
