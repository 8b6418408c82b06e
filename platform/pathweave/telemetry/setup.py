"""The OpenTelemetry SDK's set-up for a process (the API, a worker, ``pathweave mcp``): spans
are exported over OTLP/HTTP when the standard variables ask for it, and nothing is made
otherwise."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

_configured: bool | None = None
_lock = threading.Lock()


def tracing_requested() -> bool:
    """Whether the environment asks for traces: ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, and neither ``OTEL_SDK_DISABLED=true`` nor
    ``OTEL_TRACES_EXPORTER=none``."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure_tracing(service_name: str, sampler=None) -> bool:
    """Install the SDK's tracer provider (resource ``service.name``: ``OTEL_SERVICE_NAME``,
    else ``service_name``) with a batching OTLP/HTTP exporter, which reads the standard
    ``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers, timeout, compression), when
    :func:`tracing_requested`; once per process. ``sampler``: an SDK sampler (None: the
    SDK's, from ``OTEL_TRACES_SAMPLER``). Returns whether traces are exported."""
    global _configured
    with _lock:
        if _configured is not None:
            return _configured
        _configured = tracing_requested()
        if not _configured:
            return False
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME")
                                                            or service_name}), sampler=sampler)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        log.info("traces exported over OTLP (service %s)", service_name)
        return True
