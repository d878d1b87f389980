"""The MCP server: the only package that knows MCP. Tools are thin: check, call a capability, return a model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_server

__all__ = ["create_server"]


def __getattr__(name: str) -> Any:
    """`create_server` imported when asked for: the CLI reads views.py and results.py of this package, and must not
    pay for the MCP SDK's import (most of a second) to print a list."""
    if name == "create_server":
        from .app import create_server

        return create_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
