"""abilities-mcp: an MCP stdio server that makes agent workflows enforceable."""

__version__ = "0.1.0"
