"""What the CLI prints to a person is made inert: control characters and bidirectional overrides from an input,
a step or an agent are shown as escapes, so no text can move the cursor, erase a line, recolour the screen or
reorder what a person reads ("Deploy to staging (docs only)?" drawn over a production deploy).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

# C0 controls but newline and tab, DEL, C1 controls, and the Unicode marks that reorder or hide text.
_UNSAFE = [c for c in range(0x20) if c not in (0x09, 0x0A)] + list(range(0x7F, 0xA0))
_UNSAFE += [0x061C, 0x200B, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xFEFF]
_UNSAFE += [0x2028, 0x2029]  # line and paragraph separators: a terminal may break the line there
_TABLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}


def inert(text: str) -> str:
    """The text with every unsafe character written as its escape (ESC becomes the four characters \\x1b)."""
    return text.translate(_TABLE)


class InertStream:
    """A text stream that writes everything inert; the rest (isatty, fileno, encoding) is the stream's own."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(inert(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def raw(stream: TextIO) -> TextIO:
    """The stream beneath an inert one, for the CLI's own terminal codes (a redraw's carriage return and erase) and
    nothing else: text from an input, a step or an agent always goes through the inert stream."""
    return stream._stream if isinstance(stream, InertStream) else stream


def make_output_inert() -> None:
    """From here on, what this process prints to stdout and stderr is inert."""
    if not isinstance(sys.stdout, InertStream):
        sys.stdout = InertStream(sys.stdout)  # type: ignore[assignment]
        sys.stderr = InertStream(sys.stderr)  # type: ignore[assignment]
