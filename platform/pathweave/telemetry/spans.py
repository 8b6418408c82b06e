"""The core's spans, through the OpenTelemetry API (a no-op until a process configures the
SDK, :func:`pathweave.telemetry.setup.configure_tracing`). Attributes name the tenant, the
mode, stages and statements; never a question or a document's text."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import context as otel_context, trace

TRACER = trace.get_tracer("pathweave")
"""The core's tracer."""


def recording() -> bool:
    """Whether the current span records (a traced query or batch is running here)."""
    return trace.get_current_span().is_recording()


def traced(name: str, **attributes: Any) -> AbstractContextManager:
    """A child span ``name`` of the current span, made current, when that one records (a
    store round trip, an LLM call); a no-op context otherwise, so untraced work makes no
    span at all."""
    if not recording():
        return nullcontext(None)
    return TRACER.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None})


def stage_span(stage: str, started_ns: int, ended_ns: int) -> None:
    """Record the finished stage ``stage`` (wall-clock ns since the epoch) as a span under
    the current one, when that one records (nothing is made otherwise)."""
    if recording():
        TRACER.start_span(stage, start_time=started_ns, attributes={"pathweave.stage": stage}).end(end_time=ended_ns)


def current_trace_id() -> str | None:
    """The current trace's id (32 hex) when a recording span is current, else None."""
    span = trace.get_current_span()
    return format(span.get_span_context().trace_id, "032x") if span.is_recording() else None


def capture() -> Any:
    """The current context when a recording span is current (to carry into another thread,
    :func:`attached`), else None."""
    return otel_context.get_current() if recording() else None


@contextmanager
def attached(captured: Any) -> Iterator[None]:
    """Make ``captured`` (from :func:`capture`) the current context in this thread for the
    block; nothing when it is None."""
    if captured is None:
        yield
        return
    token = otel_context.attach(captured)
    try:
        yield
    finally:
        otel_context.detach(token)


def in_span(span: Any, end: bool = False) -> AbstractContextManager:
    """Make ``span`` (started with ``TRACER.start_span``) current for the block, ending it
    after the block when ``end`` (an exception is recorded on it); nothing when None."""
    return nullcontext() if span is None else trace.use_span(span, end_on_exit=end)
