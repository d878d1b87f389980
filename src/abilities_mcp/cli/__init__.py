"""The `abilities-mcp` command line: serve, validate, run at a terminal, and the file edits."""
