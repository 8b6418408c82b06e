"""The core's spans, through the OpenTelemetry API (a no-op until a process configures the
SDK, :func:`pathweave.telemetry.setup.configure_tracing`). Attributes name the tenant, the
mode, stages and statements; never a question or a document's text."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry import trace

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
