"""Durations as authors write them: 500ms, 30s, 5m, 1h, 1h30m, or bare seconds."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
FORMAT_HINT = "write a duration like 500ms, 30s, 5m, 1h, 1h30m or a number of seconds"


def parse_duration(value: str | int | float) -> float:
    """Seconds in a duration; raises ValueError with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; {FORMAT_HINT}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{value!r} must be positive; {FORMAT_HINT}")
        return float(value)
    text = str(value).strip().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return parse_duration(float(text))
    parts = _PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{value!r} is not a duration; {FORMAT_HINT}")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{value!r} must be positive; {FORMAT_HINT}")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form of a number of seconds."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    out = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return out
