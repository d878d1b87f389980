"""What the real-client scenarios (Codex, Gemini CLI, OpenCode) share: the server's name and command, the abilities and
workflows they run, and a stand-in upstream MCP server whose tools a workflows.json gate guards."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER = "abilities"  # the name `init` gives this server in the client
ABILITIES_MCP = Path(sys.executable).with_name("abilities-mcp")
INIT_TIMEOUT_SECONDS = 60  # `abilities-mcp init` writing a scratch project's files
# A stand-in upstream server: its tools are what the workflows.json gate below guards.
DB_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("db")


@server.tool()
def list_databases() -> str:
    """List the databases."""
    return "main, analytics"


@server.tool()
def list_tables() -> str:
    """List the tables."""
    return "users, orders"


@server.tool()
def execute_query(sql: str) -> str:
    """Run a query."""
    return "3 rows"


server.run()
'''


HELLO = """
description: Say hello from a script
steps:
  - id: greet
    type: script
    run: echo hello > hello.txt && cat hello.txt
"""


LOOK_FIRST = {
    "db-look-first": {
        "description": "Look at the database before querying it",
        "triggers": {"tools": ["execute_query"]},
        "prerequisites": [
            {"step": 1, "tool": "list_databases", "description": "which databases there are"},
            {"step": 2, "tool": "list_tables", "description": "which tables there are"},
        ],
        "mode": "enforce",
    }
}
