"""JSON with comments and trailing commas, as VS Code, Gemini CLI and OpenCode let people write their configs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# A string (kept), a comment (dropped); then a comma before a closing bracket (dropped).
_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)
_COMMA = re.compile(r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])')


def strip(text: str) -> str:
    """`text` without its comments and trailing commas: plain JSON when that is all that kept it from parsing."""
    return _COMMA.sub(_keep_strings, _COMMENT.sub(_keep_strings, text))


def read_object(path: Path) -> dict[str, Any] | None:
    """The file's top-level object, comments allowed; None when it is missing, unreadable or not an object (the
    doctor's reading: `init` and `validate` name what is wrong with a file, this only asks what it says)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for candidate in (text, strip(text)):
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):
            continue
        return data if isinstance(data, dict) else None
    return None


def _keep_strings(match: re.Match[str]) -> str:
    return match.group() if match.group().startswith('"') else ""
