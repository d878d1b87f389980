"""Workflow prerequisites: workflows.json read and checked, its edits, the gate and each session's records.

The reader, the gate and the sessions are on the hook's path: they import neither `mcp` nor `pydantic`.
"""
