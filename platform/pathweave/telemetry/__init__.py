"""Telemetry: OpenTelemetry traces of queries and ingestion. The core records
spans through the OpenTelemetry API alone (:mod:`pathweave.telemetry.spans`), which costs
nothing until a process configures the SDK (:mod:`pathweave.telemetry.setup`, from the
standard ``OTEL_*`` variables)."""

from pathweave.telemetry.spans import TRACER, current_trace_id, stage_span, traced

__all__ = ["TRACER", "current_trace_id", "stage_span", "traced"]
