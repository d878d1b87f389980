"""The tool gateway: upstream MCP servers behind the gates (issue 17)."""
