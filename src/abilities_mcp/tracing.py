"""OpenTelemetry traces when someone watches: a span per run, step, tool call, gateway call and hook decision,
exported over OTLP when the standard variables are set, and nothing imported, nothing done, when they are not.

The OpenTelemetry SDK is an optional extra (`pip install 'abilities-mcp[otel]'`). It is imported, and its
TracerProvider configured with the OTLP/HTTP exporter and a batch processor flushed at exit, only the first time a
span is asked for while `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (every other
`OTEL_*` variable is the SDK's to read). Otherwise `span()` hands back a shared null span: the server's start, the
hook's every call and every step pay one dictionary lookup. A test turns tracing on with `install(provider)`.

Only the standard library is imported here, so every layer may use it, the hook included (its start is measured:
benchmarks/hook_latency.py). The SDK's own per-message SERVER span (mcp's OpenTelemetryMiddleware) goes to the same
global provider, so a run's span is the child of the `tools/call ability_run` span that started it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call (and
# contextlib: the blocks below are plain classes, contextlib would cost the hook as much as a millisecond).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from typing import Any

# Either turns tracing on; the exporter reads them (and OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, ...) itself.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# The SDK's own off switch, honoured before anything is imported.
DISABLED_VARIABLE = "OTEL_SDK_DISABLED"
# The variables a short-lived process may inherit its caller's trace from (the W3C names, as some clients set them).
TRACEPARENT_VARIABLE, TRACESTATE_VARIABLE = "TRACEPARENT", "TRACESTATE"
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
SERVICE_NAME = "abilities-mcp"
INSTRUMENTATION = "abilities_mcp"
# A short-lived process (the hook) waits at most this long at exit for a collector that does not answer, unless
# the user set the exporter's timeout: the SDK's default, 10 s, would hold every tool call of the client.
SHORT_LIVED_EXPORT_SECONDS = 1.0

_on: bool | None = None  # None: not decided yet (the first span decides, from the environment)
_tracer: Any = None


class Span:
    """A span as the rest of the code sees it: attributes, an error, an end; and, for one begun without a `with`,
    a block in which it is the current span (so what is sent from there carries its context)."""

    __slots__ = ("_span",)

    def __init__(self, span: Any = None):
        self._span = span

    def set(self, attributes: Mapping[str, Any]) -> None:
        if self._span is not None:
            self._span.set_attributes(_cleaned(attributes))

    def fail(self, description: str) -> None:
        """Mark the span an error (a tool error, a refused call, a failed step), saying why."""
        if self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, description[:500]))

    def current(self) -> AbstractContextManager[Any]:
        if self._span is None:
            return _NOTHING
        from opentelemetry.trace import use_span

        return use_span(self._span, end_on_exit=False)

    def end(self) -> None:
        if self._span is not None:
            self._span.end()


# The types an attribute keeps as they are (a StrEnum, a str subclass, becomes its text).
_PLAIN = (str, bool, int, float)
QUIET = Span()  # what every call gets while tracing is off


class _Given:
    """A block that does nothing and hands out `value` (contextlib's nullcontext)."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None):
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *_exc: object) -> None:
        return None


_NOTHING: AbstractContextManager[Any] = _Given()
_QUIET_BLOCK: AbstractContextManager[Span] = _Given(QUIET)


def enabled() -> bool:
    """Whether spans are recorded: a test installed a provider, or an OTLP endpoint is set (configured on first
    ask)."""
    global _on
    if _on is None:
        _on = _configure(short_lived=False) if _wanted() else False
    return _on


def enable_for_short_process() -> bool:
    """`enabled()`, for a process that lives for one decision (the hook): the exporter's wait at exit is bounded."""
    global _on
    if _on is None:
        _on = _configure(short_lived=True) if _wanted() else False
    return _on


def exporting() -> bool:
    """Whether spans were recorded for an exporter that sends them at exit (a process must then exit normally)."""
    return bool(_on)


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal", carrier: Any = None
) -> AbstractContextManager[Span]:
    """A span around a block, the current one inside it; `carrier`: a `_meta` (or any mapping holding
    `traceparent`) whose trace it continues, else the current span is its parent."""
    if not (_on if _on is not None else enabled()):
        return _QUIET_BLOCK
    return _block(name, attributes, kind, carrier)


def begin(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal", carrier: Any = None
) -> Span:
    """A span started now and ended by `end()`, for work that is not one block (a call answered from a callback)."""
    if not (_on if _on is not None else enabled()):
        return QUIET
    return Span(_tracer.start_span(name, context=_context(carrier), kind=_kind(kind), attributes=_cleaned(attributes)))


def annotate(attributes: Mapping[str, Any]) -> None:
    """Set attributes on the current span (a verdict known deep inside the work the span is around)."""
    if _on:
        from opentelemetry.trace import get_current_span

        get_current_span().set_attributes(_cleaned(attributes))


def inject(meta: MutableMapping[str, Any]) -> None:
    """Put the current span's context in a request's `_meta` (`traceparent`, `tracestate`), for the server it goes
    to (the W3C format, as the MCP SDK's client sends it)."""
    if _on:
        from opentelemetry.propagate import inject as propagate

        propagate(meta)


def from_environment() -> dict[str, str] | None:
    """The trace a parent process handed down in TRACEPARENT (and TRACESTATE), as a carrier; None when none was."""
    parent = os.environ.get(TRACEPARENT_VARIABLE)
    if not parent:
        return None
    state = os.environ.get(TRACESTATE_VARIABLE)
    return {"traceparent": parent, **({"tracestate": state} if state else {})}


def install(provider: Any) -> None:
    """Record spans with this TracerProvider (a test's, with an in-memory exporter), made the global one so the MCP
    SDK's spans join the same trees."""
    global _on, _tracer
    from opentelemetry import trace

    trace.set_tracer_provider(provider)
    _tracer, _on = provider.get_tracer(INSTRUMENTATION), True


def uninstall() -> None:
    """Back to deciding from the environment (after a test)."""
    global _on, _tracer
    _on, _tracer = None, None


def _wanted() -> bool:
    if os.environ.get(DISABLED_VARIABLE, "").strip().lower() == "true":
        return False
    return any(os.environ.get(variable) for variable in ENDPOINT_VARIABLES)


def _configure(short_lived: bool) -> bool:
    """The SDK's TracerProvider with the OTLP/HTTP exporter behind a batch processor, flushed at exit (the SDK
    registers that); an SDK provider something else installed already (opentelemetry-instrument) is used as it is."""
    global _tracer
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        import logging  # here, not at the top: the hook does without it (6 ms a call)

        logging.getLogger(__name__).warning(
            "an OTLP endpoint is set but traces need the otel extra (%s): pip install 'abilities-mcp[otel]'", exc
        )
        return False
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        provider = TracerProvider(resource=Resource.create(named))
        bounded = short_lived and not any(os.environ.get(variable) for variable in TIMEOUT_VARIABLES)
        exporter = OTLPSpanExporter(timeout=SHORT_LIVED_EXPORT_SECONDS) if bounded else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer(INSTRUMENTATION)
    return True


def _block(name: str, attributes: Mapping[str, Any] | None, kind: str, carrier: Any) -> AbstractContextManager[Span]:
    return _Block(
        _tracer.start_as_current_span(
            name, context=_context(carrier), kind=_kind(kind), attributes=_cleaned(attributes)
        )
    )


class _Block:
    """A recorded span around a block: the SDK's own block, its span handed out as a Span."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any):
        self._inner = inner

    def __enter__(self) -> Span:
        return Span(self._inner.__enter__())

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)


def _context(carrier: Any) -> Any:
    """The context a carrier's `traceparent` names; None (the current span is the parent) when it names none."""
    if not isinstance(carrier, Mapping) or "traceparent" not in carrier:
        return None
    from opentelemetry.propagate import extract
    from opentelemetry.trace import get_current_span

    try:
        context = extract(carrier)
    except (ValueError, TypeError):
        return None
    return context if get_current_span(context).get_span_context().is_valid else None


def _kind(kind: str) -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind[kind.upper()]


def _cleaned(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """Attributes as OpenTelemetry takes them: None dropped, anything but a str, bool, int or float as its text."""
    if not attributes:
        return {}
    return {
        key: value if type(value) in _PLAIN else str(value) for key, value in attributes.items() if value is not None
    }
