"""Telemetry: OpenTelemetry traces of queries and ingestion. The core records
spans through the OpenTelemetry API alone (:mod:`pathweave.telemetry.spans`), which costs
nothing until a process configures the SDK (:mod:`pathweave.telemetry.setup`, from the
standard ``OTEL_*`` variables)."""

from pathweave.telemetry.spans import (
    TRACER, attached, capture, current_trace_id, in_span, stage_span, traced,
)

__all__ = ["TRACER", "attached", "capture", "current_trace_id", "in_span", "stage_span", "traced"]
