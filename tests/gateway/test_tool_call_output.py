"""tool_call's structured content, made without the model on the hot path (server/gateway_tools.py `_result`), is
exactly ToolCallOutput's dump: the output schema tools/list declares."""

from __future__ import annotations

from mcp_types import CallToolResult, ImageContent, TextContent

from abilities_mcp.gateway.directory import Entry
from abilities_mcp.gateway.proxy import Gate, Outcome, Ran
from abilities_mcp.server.gateway_tools import ToolCallOutput, _result


def test_tool_calls_structured_content_is_the_output_models_dump() -> None:
    upstream = CallToolResult(
        content=[
            TextContent(type="text", text="2 rows"),
            ImageContent(type="image", data="AA==", mimeType="image/png"),
        ],
        structured_content={"rows": [{"id": 1}]},
    )
    ran = [Ran("schema-first", 1, "db__list_tables", {"schema": "main"}, 2)]
    gate = Gate("deny", ran, ["Warning: workflow 'w' (warn) expects x (step 1) to run first in this session."])
    outcomes = [
        Outcome(Entry("db", "read_query", "Read", {"type": "object"}, True), upstream, gate),
        Outcome(Entry("db", "fail", "", {}, False), CallToolResult(content=[], is_error=True), Gate("allow", [], [])),
    ]

    for outcome in outcomes:
        made = _result(outcome).structured_content

        assert made == ToolCallOutput.model_validate(made).model_dump()
        assert made["gate"]["ran_prerequisites"] == [r._asdict() for r in outcome.gate.ran]
    assert _result(outcomes[0]).content[-1].text.startswith("[gateway] ran first: db__list_tables")
