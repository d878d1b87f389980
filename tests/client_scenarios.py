"""What the real-client scenarios (Codex, Gemini CLI, OpenCode; all four clients in test_edited_rules.py) share: the
server's name and command, the abilities and workflows they run, and a stand-in upstream MCP server whose tools a
workflows.json gate guards."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER = "abilities"  # the name `init` gives this server in the client
ABILITIES_MCP = Path(sys.executable).with_name("abilities-mcp")
INIT_TIMEOUT_SECONDS = 60  # `abilities-mcp init` writing a scratch project's files
# A stand-in upstream server: its tools are what the workflows.json gate below guards. Each call that reaches it is
# appended to `<script>.calls` beside the script (db_calls() reads it): what a gate let through to the server.
DB_SERVER = '''
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("db")
CALLS = Path(__file__).with_suffix(".calls")


def reached(tool: str) -> None:
    with CALLS.open("a") as calls:
        calls.write(tool + "\\n")


@server.tool()
def list_databases() -> str:
    """List the databases."""
    reached("list_databases")
    return "main, analytics"


@server.tool()
def list_tables() -> str:
    """List the tables."""
    reached("list_tables")
    return "users, orders"


@server.tool()
def execute_query(sql: str) -> str:
    """Run a query."""
    reached("execute_query")
    return "3 rows"


server.run()
'''


def db_calls(script: Path) -> list[str]:
    """The tools of the DB_SERVER written to `script` that were called, in order (none: it was never called)."""
    calls = script.with_suffix(".calls")
    return calls.read_text().splitlines() if calls.exists() else []


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
