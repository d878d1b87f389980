"""Editing workflows.json from the CLI (`abilities-mcp workflows add|enable|disable|remove`).

Safe edits: the file is read strictly (a file that does not parse, or names a workflow twice, is left alone with
the reason), changed in memory with every other entry and the key order kept, and replaced atomically (a reader
sees the old file or the new one, never half of one).
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import AbilitiesError, did_you_mean
from .templates import TEMPLATES, fit
from .workflows import META_KEYS, TOOL_CACHE, parse_json, read_json, tool_categories


class WorkflowFileError(AbilitiesError):
    """An edit that cannot be made: the person at the terminal acts."""


def add_template(path: Path, template: str, name: str | None = None) -> str:
    """Add a built-in template under its own name or `name`; returns the name used."""
    return add_fitted_template(path, template, name)[0]


def add_fitted_template(path: Path, template: str, name: str | None = None) -> tuple[str, list[str]]:
    """Add a built-in template, fitted to the tools the project's tool cache (beside `path`) lists for its category
    (templates.fit); returns the name used and what the fit changed. A template none of whose required steps those
    tools offer is refused: its workflow could never be met."""
    if template not in TEMPLATES:
        close = did_you_mean(template, TEMPLATES)
        hint = f"did you mean {close!r}? " if close else ""
        raise WorkflowFileError(f"Unknown template {template!r}; {hint}templates: {', '.join(TEMPLATES)}")
    fitted = fit(TEMPLATES[template], _cached_categories(path.parent / TOOL_CACHE))
    if fitted.category_tools and not any(p.get("required", True) for p in fitted.entry["prerequisites"]):
        wanted = ", ".join(p["tool"] for p in TEMPLATES[template]["prerequisites"])
        raise WorkflowFileError(
            f"Template {template!r} needs {wanted} first, and this project's tools of its category "
            f"({', '.join(fitted.category_tools)}, from {TOOL_CACHE}) offer none of them: its workflow could never be "
            "met. Write a workflow in workflows.json whose prerequisites are tools they offer. Nothing was changed."
        )
    data, indent = _read(path)
    entry = {k: v for k, v in fitted.entry.items() if k != "name"}
    chosen = TEMPLATES[template]["name"] if name is None else name
    if not chosen.strip() or chosen in META_KEYS:
        raise WorkflowFileError(f"{chosen!r} cannot name a workflow; pass --name with another name")
    if chosen in data:
        raise WorkflowFileError(
            f"A workflow named {chosen!r} already exists in {path}; pass --name to add the template under another name"
        )
    data[chosen] = {"enabled": True, **entry, "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
    _write(path, data, indent)
    return chosen, fitted.notes


def _cached_categories(cache: Path) -> dict[str, frozenset[str]]:
    """The tool cache's tool ids and their categories; {} without a usable cache."""
    data, _ = read_json(cache)
    return tool_categories(data) if isinstance(data, dict) else {}


def set_enabled(path: Path, name: str, enabled: bool) -> bool:
    """Turn a workflow on or off without deleting it; returns whether anything changed."""
    data, indent = _read(path)
    entry = _existing(data, name, path)
    if not isinstance(entry, dict):
        raise WorkflowFileError(f"Workflow {name!r} in {path} is not an object; fix it by hand first")
    if entry.get("enabled", True) == enabled:
        return False
    entry["enabled"] = enabled
    _write(path, data, indent)
    return True


def remove(path: Path, name: str) -> None:
    """Delete a workflow; the others stay as they were."""
    data, indent = _read(path)
    _existing(data, name, path)
    del data[name]
    _write(path, data, indent)


def _existing(data: dict[str, Any], name: str, path: Path) -> Any:
    if name not in data or name in META_KEYS:
        known = [n for n in data if n not in META_KEYS]
        close = did_you_mean(name, known)
        hint = f" Did you mean {close!r}?" if close else f" Workflows: {', '.join(known) or 'none'}."
        raise WorkflowFileError(f"Workflow {name!r} not found in {path}.{hint}")
    return data[name]


def _read(path: Path) -> tuple[dict[str, Any], int | str]:
    """The file's object and its indentation; a missing file is an empty object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, 2
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkflowFileError(f"Cannot read {path}: {exc}") from None
    if not text.strip():
        return {}, 2
    data, problems = parse_json(text, path)
    if problems:
        raise WorkflowFileError(f"{problems[0]}; fix it before editing, nothing was changed")
    if not isinstance(data, dict):
        raise WorkflowFileError(f"{path} must be a JSON object keyed by workflow name; nothing was changed")
    return data, indentation(text)


def indentation(text: str) -> int | str:
    """The indentation the file uses (its first indented line), so an edit does not reformat it."""
    for line in text.splitlines()[1:]:
        if line.startswith("\t"):
            return "\t"
        stripped = line.lstrip(" ")
        if stripped and len(stripped) < len(line):
            return len(line) - len(stripped)
    return 2


def _write(path: Path, data: dict[str, Any], indent: int | str) -> None:
    write_atomically(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Replace a file atomically (temp file, fsync, rename: a reader sees the old file or the new one), its mode
    kept (a new file gets the umask's); through a symlink, the file it points to is replaced, so a linked dotfile
    stays linked. Also used by `init` for the clients' config files."""
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask (read by setting it: there is no other way; set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
