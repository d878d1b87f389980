"""The stdio lane (server/lane.py), which takes a proxied call off the transport without the SDK's middleware, traces
it all the same: a `tools/call tool_call` span continuing the client's `_meta` trace, its upstream call a child of
it, and the upstream handed that context; exported over OTLP by the real server process when it ends."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from test_tracing import CLIENT_TRACE_ID, CLIENT_TRACEPARENT, Collector, _without_otel, gateway

from support import RawServer, stdio_params, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def collector():
    stub = Collector()
    yield stub
    stub.close()


async def test_a_proxied_call_on_the_stdio_lane_is_traced_in_the_clients_trace(root, collector) -> None:
    gateway(root)
    params = stdio_params(root, env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
    env = {**_without_otel(), **params.env}
    process = await anyio.open_process([params.command, *params.args], env=env, stderr=sys.stderr)
    server = RawServer(process)
    try:
        info = {"name": "raw-test", "version": "0"}
        await server.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info})
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        answers = []
        for _ in range(2):  # the first starts the upstream; the second finds it up and listed
            call = {
                "name": "tool_call",
                "arguments": {"tool": "up__meta"},
                "_meta": {"traceparent": CLIENT_TRACEPARENT},
            }
            answers.append(await server.request("tools/call", call))
        assert process.stdin is not None
        await process.stdin.aclose()  # end of input: the server stops and flushes its spans
        with anyio.fail_after(30):
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()

    spans = await until(lambda: [s for post in collector.posts for s in post] or None)
    served = [s for s in spans if s.name == "tools/call tool_call"]
    sent = [s for s in spans if s.name == "tools/call meta"]
    assert len(served) == 2 and len(sent) == 2, [s.name for s in spans]
    assert all(s.trace_id.hex() == CLIENT_TRACE_ID for s in served + sent)
    assert {s.parent_span_id for s in sent} == {s.span_id for s in served}
    received = json.loads(answers[-1]["content"][0]["text"])["traceparent"].split("-")
    assert received[1] == CLIENT_TRACE_ID and received[2] in {s.span_id.hex() for s in sent}
