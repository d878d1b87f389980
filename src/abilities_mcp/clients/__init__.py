"""The gates carried into the clients' own tools: the hook command, what a live run allows, and `init CLIENT`.

The hook runs on every tool call a client makes: nothing here imports `mcp` or `pydantic`, except `moves.py` when
`init --gateway` moves servers into gateway.json.
"""
