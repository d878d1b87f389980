"""Where the project's files are, and the SQLite state file the server, the CLI and the hook share."""
