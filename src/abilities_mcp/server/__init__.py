"""The MCP server: the only package that knows MCP. Tools are thin: check, call a capability, return a model."""

from .app import create_server

__all__ = ["create_server"]
