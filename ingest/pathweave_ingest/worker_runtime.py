"""What an ingesting process keeps: the query side (:class:`pathweave.runtime.QueryRuntime`:
store connections, query embedder, extractor, LLM client, retrievers) plus the ingestion
embedder and one pipeline per thread.

Used by the Celery worker process and by the API (in-process queue, queries).
"""

from __future__ import annotations

import threading
from typing import Any

from pathweave.runtime import QueryRuntime
from pathweave.settings import Settings, WorkerSettings


class Runtime(QueryRuntime):
    """Process-wide ingestion and query components. Thread-safe; everything lazy.

    ``embedder`` (ingestion: :func:`pathweave.embedding.embedders.get_embedder`) may be injected
    (tests); the rest as :class:`~pathweave.runtime.QueryRuntime` (queries embed with the
    query embedder, as ``pathweave query`` does, so both answer alike). The extractor batches
    ``worker_settings.extract_batch(device)`` passages per call.
    """

    def __init__(self, settings: Settings, worker_settings: WorkerSettings,
                 embedder: Any = None, extractor: Any = None, llm: Any = None, query_embedder: Any = None) -> None:
        super().__init__(settings, query_embedder, extractor, llm)
        self.worker_settings = worker_settings
        self._extract_batch = worker_settings.extract_batch(self.device)
        self._embedder = embedder
        self._pipelines: dict[int, tuple[str, Any]] = {}  # thread id -> (tenant, Pipeline)

    @property
    def embedder(self):
        """The ingestion embedder (loaded on first use)."""
        with self._lock:
            if self._embedder is None:
                from pathweave.embedding.embedders import get_embedder

                self._embedder = get_embedder(self.settings)
            return self._embedder

    def pipeline(self, tenant: str):
        """The ingestion pipeline of ``tenant`` for the calling thread, kept between batches
        (its extractor and settings). One per thread, never shared; a thread keeps only its
        latest tenant's."""
        from pathweave_ingest.pipeline import Pipeline

        thread = threading.get_ident()
        with self._lock:
            kept = self._pipelines.get(thread)
            if kept is None or kept[0] != tenant:
                kept = (tenant, Pipeline(self.store(tenant), self.embedder, self.extractor, self.settings,
                                         group_size=self.worker_settings.group_size(self.device),
                                         line_embedder=self.query_embedder))
                self._pipelines[thread] = kept
            return kept[1]

    def models_loaded(self, extractor: bool = True) -> bool:
        """Are the query embedder and, with ``extractor`` (ingestion in this process), the
        extractor and the ingestion embedder loaded?"""
        return super().models_loaded(extractor) and (self._embedder is not None or not extractor)

    def _dimensions(self) -> int:
        """The vectors' dimension: an embedder already loaded, else the ingestion embedder's."""
        loaded = self._query_embedder if self._query_embedder is not None else self._embedder
        return int(getattr(loaded if loaded is not None else self.embedder, "dim", 384))

    def warm(self, extractor: bool = True, queries: bool = True) -> None:
        """Load the models and connect now (worker start), not on the first task.
        ``extractor=False``: only what queries need (an API whose ingestion runs on workers);
        ``queries=False``: only what ingestion needs (a worker). With ``queries``, then the
        topologies of ``query.preload_tenants``."""
        if queries:
            _ = self.query_embedder
        if extractor:
            _ = self.extractor
            _ = self.embedder
        self.store(self.settings.tenant)
        if queries:
            self.preload_topologies()

    def _forget(self) -> None:
        super()._forget()
        self._pipelines.clear()
