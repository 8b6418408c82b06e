"""Prometheus metrics of the API process (``GET /metrics``).

Labels never carry tenants, keys or ids: ``route`` is the route template
(``/v1/jobs/{job_id}``), ``unmatched`` for unknown paths.
"""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from pathweave.records.reasoning import FAILED_RECORDS

HTTP_REQUESTS = Counter("pathweave_http_requests_total", "HTTP requests by route and status.",
                        ["method", "route", "status"])
HTTP_SECONDS = Histogram("pathweave_http_request_duration_seconds", "HTTP request latency by route.",
                         ["method", "route"],
                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
QUERIES = Counter("pathweave_queries_total", "Queries answered, by retrieval mode.", ["mode"])
QUERY_SECONDS = Histogram("pathweave_query_duration_seconds", "Retrieval time (store + ranking) by mode.",
                          ["mode"], buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
QUERY_STAGE_SECONDS = Histogram("pathweave_query_stage_duration_seconds",
                                "Time of each retrieval stage (the keys of a response's timings_ms) by mode.",
                                ["mode", "stage"],
                                buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                         30))
DOCUMENTS_SUBMITTED = Counter("pathweave_documents_submitted_total", "Documents accepted for ingestion.")
BATCHES_ENQUEUED = Counter("pathweave_batches_enqueued_total", "Ingestion batches enqueued, by queue mode.",
                           ["mode"])
REQUEUED = Counter("pathweave_documents_requeued_total", "Accepted versions the API's sweep published again (a "
                   "worker died with their lease, or their message was never sent or was lost), by queue mode.",
                   ["mode"])
AUTH_FAILURES = Counter("pathweave_auth_failures_total", "Requests refused for a missing or invalid API key.")
RATE_LIMITED = Counter("pathweave_rate_limited_total", "Requests refused by the per-key rate limit.")
QUEUE_DEPTH = Gauge("pathweave_ingest_queue_depth", "Ingestion batches waiting (in-process queue or broker).")
NODE_CACHE_ROWS = Gauge("pathweave_node_cache_rows", "Node rows (texts, vectors) the query caches hold.")
NODE_CACHE_BYTES = Gauge("pathweave_node_cache_bytes", "Approximate bytes of those rows.")
TOPOLOGY_PASSAGES = Gauge("pathweave_topology_passages", "Passage ids the tenants' topologies hold.")
TOPOLOGY_ENTITIES = Gauge("pathweave_topology_entities", "Entity ids the tenants' topologies hold.")
TOPOLOGY_BYTES = Gauge("pathweave_topology_bytes", "Approximate bytes of the tenants' topologies (their bound: "
                       "PATHWEAVE_QUERY_TOPOLOGY_MAX_MB).")
TOPOLOGY_TENANTS = Gauge("pathweave_topology_tenants", "Tenant topologies held.")
TOPOLOGY_EVICTED = Gauge("pathweave_topology_evicted", "Topologies dropped over the tenant or byte bound so far.")
RECORDS_FAILED = Gauge("pathweave_reasoning_records_failed", "Reasoning records this process could not write after "
                       "the store's retries (their queries' GET /v1/queries/{id} answers 404).")
READY = Gauge("pathweave_ready", "1 when the store answers and the models are loaded.")


class MetricsMiddleware:
    """Counts requests and their latency per route template (ASGI)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            HTTP_REQUESTS.labels(scope["method"], template, str(status[0])).inc()
            HTTP_SECONDS.labels(scope["method"], template).observe(time.perf_counter() - started)


def render(cache_stats: dict[str, int] | None = None) -> tuple[bytes, str]:
    """The Prometheus text, with the query caches' gauges set from ``cache_stats``
    (:meth:`pathweave.runtime.QueryRuntime.cache_stats`)."""
    if cache_stats is not None:
        NODE_CACHE_ROWS.set(cache_stats["node_cache_rows"])
        NODE_CACHE_BYTES.set(cache_stats["node_cache_bytes"])
        TOPOLOGY_PASSAGES.set(cache_stats["passages"])
        TOPOLOGY_ENTITIES.set(cache_stats["entities"])
        TOPOLOGY_BYTES.set(cache_stats["topology_bytes"])
        TOPOLOGY_TENANTS.set(cache_stats["tenants"])
        TOPOLOGY_EVICTED.set(cache_stats["evicted"])
    RECORDS_FAILED.set(FAILED_RECORDS.value)
    return generate_latest(), CONTENT_TYPE_LATEST
