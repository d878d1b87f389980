"""OpenTelemetry traces (tracing.py): a run's spans nest under the tools/call that started it, a proxied call's span
carries its upstream and tool and hands its trace to the upstream, a client's trace is continued; the hook exports
one span per decision over OTLP when an endpoint is set; with none set, nothing of the OpenTelemetry SDK is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from abilities_mcp import tracing
from abilities_mcp.server.app import create_server
from support import GATED, TEST_RETRY_BASE, run_hook, until

# A trace the client started: what it sends in `_meta` (W3C traceparent: version, trace id, parent span id, flags).
CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_TRACEPARENT = f"00-{CLIENT_TRACE_ID}-00f067aa0ba902b7-01"

# An upstream whose one tool answers with the `_meta` its tools/call carried.
UPSTREAM = '''\
import json
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("upstream")


@server.tool()
async def meta(ctx: Context) -> str:
    """The _meta this call carried."""
    return json.dumps(dict(ctx.request_context.meta or {}), default=str)


server.run("stdio")
'''


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span the server and the SDK record in this test, through the SDK's in-memory exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.uninstall()
        provider.shutdown()
        _forget_global_provider()


def _forget_global_provider() -> None:
    """OpenTelemetry's global provider is set once per process: put it back unset for the next test (as the
    project's own test utilities do), and make the MCP SDK's tracer look it up again."""
    from mcp.shared import _otel

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    _otel._tracer._real_tracer = None


def client_trace() -> Any:
    """The client's side inside the trace CLIENT_TRACEPARENT names, as an agent that traces its own work is."""
    from opentelemetry.propagate import extract

    return trace.get_tracer("client").start_as_current_span(
        "agent turn", context=extract({"traceparent": CLIENT_TRACEPARENT})
    )


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


class Person:
    """An elicitation callback that approves."""

    async def __call__(self, ctx: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        return ElicitResult(action="accept", content={"approve": True})


def gateway(root: Path) -> None:
    (root / "upstream.py").write_text(UPSTREAM)
    entry = {"command": sys.executable, "args": [str(root / "upstream.py")]}
    (root / "gateway.json").write_text(json.dumps({"mcpServers": {"up": entry}}))


async def test_a_run_nests_under_its_call_and_a_proxied_call_hands_the_clients_trace_to_the_upstream(
    project, write, root, spans
) -> None:
    write("gated", GATED)
    gateway(root)
    server = create_server(project, retry_base=TEST_RETRY_BASE)
    async with Client(server, mode="legacy", elicitation_callback=Person()) as client:
        ran = await client.call_tool("ability_run", {"name": "gated"}, meta={"sessionID": "s1"})
        with client_trace():  # the SDK's client sends it in the call's _meta, from its own span inside it
            proxied = await client.call_tool("tool_call", {"tool": "up__meta"}, meta={"sessionID": "s1"})
        assert ran.structured_content["status"] == "completed", ran.structured_content
        assert not proxied.is_error, proxied.content
        finished = await until(lambda: [s for s in spans.get_finished_spans() if s.name == "run gated"])

    recorded = spans.get_finished_spans()
    call, run = one(recorded, "tools/call ability_run"), finished[0]
    assert parent_of(run) == call.context.span_id and run.context.trace_id == call.context.trace_id
    assert run.attributes["abilities.ability"] == "gated"
    assert run.attributes["abilities.run_id"] == ran.structured_content["run_id"]
    assert run.attributes["abilities.status"] == "completed"
    steps = {s.attributes["abilities.step"]: s for s in recorded if s.name.startswith("step ")}
    assert sorted(steps) == ["approve", "build", "deploy"]
    assert all(parent_of(s) == run.context.span_id for s in steps.values())
    assert steps["build"].attributes["abilities.step_type"] == "script"
    assert steps["build"].attributes["process.exit.code"] == 0
    assert steps["approve"].attributes["abilities.step_type"] == "approval"
    assert steps["approve"].attributes["abilities.verdict"] == "approved"
    assert steps["approve"].attributes["abilities.answered_by"] == "elicitation"

    served, sent = one(recorded, "tools/call tool_call"), one(recorded, "tools/call meta")
    assert format(served.context.trace_id, "032x") == CLIENT_TRACE_ID  # the client's trace, continued
    assert parent_of(served) == one(recorded, "MCP send tools/call tool_call").context.span_id
    assert parent_of(sent) == served.context.span_id and sent.kind == trace.SpanKind.CLIENT
    assert sent.attributes["abilities.upstream"] == "up" and sent.attributes["gen_ai.tool.name"] == "meta"
    received = json.loads(proxied.content[0].text)
    _, trace_id, parent_id, _ = received["traceparent"].split("-")
    assert (trace_id, int(parent_id, 16)) == (CLIENT_TRACE_ID, sent.context.span_id)


async def test_a_failed_script_step_marks_its_span_and_the_runs_as_errors(project, write, spans) -> None:
    write("broken", "description: broken\nsteps:\n  - {id: fail, type: script, run: exit 3}\n")
    async with Client(create_server(project, retry_base=TEST_RETRY_BASE)) as client:
        ran = await client.call_tool("ability_run", {"name": "broken"}, meta={"sessionID": "s1"})
        assert ran.structured_content["status"] == "failed"
        await until(lambda: [s for s in spans.get_finished_spans() if s.name == "run broken"])

    recorded = spans.get_finished_spans()
    step, run = one(recorded, "step fail"), one(recorded, "run broken")
    assert step.attributes["process.exit.code"] == 3 and step.attributes["abilities.status"] == "failed"
    assert step.status.status_code == run.status.status_code == trace.StatusCode.ERROR


def test_with_no_endpoint_set_no_span_is_made_and_nothing_is_imported() -> None:
    code = (
        "import sys; from abilities_mcp import tracing\n"
        "with tracing.span('x', {'a': 1}) as s: s.set({'b': 2})\n"
        "print(tracing.enabled(), tracing.begin('y') is tracing.QUIET, [m for m in sys.modules if 'opentelemetry' in m])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_without_otel(), timeout=60)
    assert done.stdout.strip() == "False True []", done.stderr


def test_a_server_start_and_a_run_without_an_endpoint_import_no_opentelemetry_sdk(project, write, root) -> None:
    write("quick", "description: quick\nsteps:\n  - {id: one, type: script, run: echo one}\n")
    code = (
        "import sys, anyio; from mcp import Client; from abilities_mcp.server.app import create_server\n"
        "from abilities_mcp.state.project import Project\n"
        "async def main():\n"
        "    async with Client(create_server(Project.resolve(sys.argv[1]))) as c:\n"
        "        r = await c.call_tool('ability_run', {'name': 'quick'})\n"
        "        assert r.structured_content['status'] == 'completed', r\n"
        "anyio.run(main)\n"
        "print([m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, env=_without_otel(), timeout=60
    )
    assert done.stdout.strip() == "[]", done.stderr


class Collector:
    """An OTLP/HTTP collector stub: the spans of every export request posted to /v1/traces."""

    def __init__(self) -> None:
        self.posts: list[list[Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                found = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
                collector.posts.append(found if self.path == "/v1/traces" else [])
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    stub = Collector()
    yield stub
    stub.close()


def test_the_hook_exports_one_span_per_decision_continuing_the_clients_trace(root, collector) -> None:
    (root / "workflows.json").write_text(json.dumps({}))
    payload = {"session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "TRACEPARENT": CLIENT_TRACEPARENT}

    for _ in range(2):
        done = run_hook(root, "claude", "PreToolUse", payload, env=_without_otel() | env)
        assert done.returncode == 0, done.stderr

    assert [len(p) for p in collector.posts] == [1, 1]
    span = collector.posts[0][0]
    assert span.name == "hook claude PreToolUse" and span.trace_id.hex() == CLIENT_TRACE_ID
    attributes = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
    assert attributes["abilities.verdict"] == "allow" and attributes["gen_ai.tool.name"] == "Bash"
    assert attributes["abilities.session"] == "s1"


def test_the_hook_with_no_endpoint_imports_no_opentelemetry_and_sends_nothing(root, collector) -> None:
    code = (
        "import sys, io; from abilities_mcp.__main__ import main; "
        "sys.stdin = io.StringIO(sys.argv[1]); main(['hook', 'claude', 'PreToolUse']); "
        "sys.stderr.write(' '.join(m for m in sys.modules if 'opentelemetry' in m))"
    )
    payload = json.dumps({"session_id": "s1", "tool_name": "Bash", "cwd": str(root)})
    env = _without_otel() | {"OTEL_TRACES_EXPORTER": "otlp", "TRACEPARENT": CLIENT_TRACEPARENT}

    done = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, text=True, env=env, timeout=60)

    assert done.stderr == "" and collector.posts == []


def _without_otel() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEPARENT", "CLAUDE", "ABILITIES_"))}
