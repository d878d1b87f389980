"""One config file's planned edit: its text now and the text it should have, merged as JSON (the members it leaves
alone keep their text; refused where a rewrite would lose comments) or read back as TOML, then shown as a diff or
written atomically. Every file of a command is planned before any is written, so one that must not be touched stops
the command with nothing changed."""

from __future__ import annotations

import copy
import difflib
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import AbilitiesError
from ..prerequisites.edits import indentation, write_atomically
from ..prerequisites.workflows import parse_json
from . import json_text, jsonc


class ConfigError(AbilitiesError):
    """A config file init must not touch, or an option it cannot use; the message names the file and the fix."""


@dataclass
class Planned:
    """One file: its text now ("": missing), the text it should have, and what to tell the person."""

    path: Path
    old: str
    new: str
    notes: list[str] = field(default_factory=list)


def plan_json(path: Path, merge: Callable[[dict], list[str]], new_file: dict | None = None) -> Planned:
    """The file after `merge`; unchanged when merge changed nothing, refused when a rewrite would lose comments."""
    old = read_text(path)
    return merged(Planned(path, old, old), merge, new_file)


def merged(
    plan: Planned, merge: Callable[[dict], list[str]], new_file: dict | None = None, notes: list[str] | None = None
) -> Planned:
    """`plan` with `merge` applied to the text it would write (a second merge into a file already planned)."""
    path, old = plan.path, plan.old
    data, strict = load_json(path, plan.new) if plan.new.strip() else (copy.deepcopy(new_file or {}), True)
    before = copy.deepcopy(data)
    notes = [*plan.notes, *merge(data), *(notes or [])]
    if data == before:
        return Planned(path, old, plan.new, notes)
    if not strict:
        raise ConfigError(
            f"{path} has comments or trailing commas, which a rewrite would lose, so init changed nothing; "
            f"merge this into it by hand:\n{json.dumps(added(before, data), indent=2)}"
        )
    indent = indentation(old) if old else 2
    if plan.new.strip():  # what the file says already keeps its text: only what changed is written anew
        return Planned(path, old, json_text.rewrite(plan.new, data, indent), notes)
    return Planned(path, old, json.dumps(data, indent=indent, ensure_ascii=False) + "\n", notes)


def load_json(path: Path, text: str) -> tuple[dict, bool]:
    """The file's object, and whether it is plain JSON (False: JSONC, readable once comments are dropped)."""
    data, problems = parse_json(text, path)
    strict = not problems
    if problems:
        data, others = parse_json(jsonc.strip(text), path)
        if others:
            raise ConfigError(f"{problems[0]}; nothing was changed")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object; fix it by hand, nothing was changed")
    return data, strict


def added(before: Any, after: dict) -> dict:
    """The part of `after` that `before` lacks or has otherwise: what to merge by hand."""
    old = before if isinstance(before, dict) else {}
    return {
        k: added(old[k], v) if isinstance(v, dict) and isinstance(old.get(k), dict) else v
        for k, v in after.items()
        if old.get(k) != v
    }


def read_toml(path: Path, text: str) -> dict[str, Any]:
    """TOML text's tables, or a refusal naming the file (Codex's config.toml is edited as text, then read back)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}; fix the syntax there, nothing was changed") from None


def append_table(text: str, table: str) -> str:
    """`text` byte for byte, then the table after a blank line."""
    text = text if not text or text.endswith("\n") else text + "\n"
    return text + ("\n" if text.strip() and not text.endswith("\n\n") else "") + table


# Reading, showing and writing.


def read_text(path: Path) -> str:
    """The file's text with its line endings as they are; "" when it does not exist."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {path}: {exc}; nothing was changed") from None


def apply(plan: Planned, dry_run: bool) -> None:
    """Write the file (or with dry_run, print its diff), then what the person should know about it."""
    if plan.new == plan.old:
        print(f"unchanged {plan.path}")
    elif dry_run:
        old, new = plan.old.splitlines(), plan.new.splitlines()
        print("\n".join(difflib.unified_diff(old, new, str(plan.path), str(plan.path), lineterm="")))
    else:
        write_atomically(plan.path, plan.new)
        print(f"wrote {plan.path}")
    for note in plan.notes:
        print(note)
