"""What one process keeps for ingestion and queries: one store driver shared by
per-tenant :class:`GraphStore` objects, the embedder and the extractor (loaded
once, on the device from settings), and one :class:`Retriever` per tenant.

Used by the Celery worker process and by the API (in-process queue, queries).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pathweave.settings import Settings
from pathweave.store import GraphStore, open_store
from pathweave.settings import WorkerSettings

log = logging.getLogger(__name__)


def _prefer_gpu_for_spacy() -> bool:
    """Let spaCy run on the GPU when cupy is installed (spaCy needs it for cuda)."""
    import importlib.util

    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import spacy

        return bool(spacy.prefer_gpu())
    except Exception:  # noqa: BLE001 - CPU is always a valid fallback
        return False


class Runtime:
    """Process-wide ingestion/query components. Thread-safe; everything lazy.

    ``embedder``/``extractor``/``llm`` may be injected (tests); otherwise the packaged
    embedder (:func:`pathweave.embeddings.get_embedder`), the extractor
    ``settings.ingest.extractor`` names (:func:`pathweave_ingest.extractors.make_extractor`) and
    the LLM client of ``settings.llm`` (:func:`pathweave.llm.client.connect`).
    """

    def __init__(self, settings: Settings, worker_settings: WorkerSettings,
                 embedder: Any = None, extractor: Any = None, llm: Any = None) -> None:
        self.settings = settings
        self.worker_settings = worker_settings
        self._embedder = embedder
        self._extractor = extractor
        self._llm = llm  # the LLM client answers use (connected on first use when None)
        self._base: GraphStore | None = None
        self._stores: dict[str, GraphStore] = {}
        self._retrievers: dict[str, Any] = {}
        self._pipelines: dict[int, tuple[str, Any]] = {}  # thread id -> (tenant, Pipeline)
        self._cache = None
        self._lock = threading.RLock()
        self._llm_lock = threading.Lock()  # a model server may take minutes to start: not under _lock

    @property
    def device(self) -> str:
        from pathweave.embeddings import resolve_device

        return resolve_device(self.settings.models.device)

    @property
    def embedder(self):
        with self._lock:
            if self._embedder is None:
                from pathweave.embeddings import get_embedder

                self._embedder = get_embedder(self.settings)
            return self._embedder

    @property
    def extractor(self):
        with self._lock:
            if self._extractor is None:
                from pathweave_ingest.extractors import make_extractor

                device = self.device
                on_gpu = device.startswith("cuda") and self.settings.ingest.extractor == "spacy" and _prefer_gpu_for_spacy()
                self._extractor = make_extractor(self.settings, batch_size=self.worker_settings.extract_batch(device))
                log.info("extractor %s on %s", self.settings.ingest.extractor, "cuda" if on_gpu else "cpu")
            return self._extractor

    def llm_client(self):
        """The process's LLM client (``settings.llm``, ``PATHWEAVE_LLM_*``; the managed local model server by
        default, started on first use). Raises LLMError / LLMServerError when none can be had."""
        with self._llm_lock:
            if self._llm is None:
                from pathweave.llm.client import connect

                self._llm = connect(self.settings.data_dir, self.settings.llm)
            return self._llm

    def store(self, tenant: str) -> GraphStore:
        """The store bound to ``tenant`` (connects, and starts the managed server, on first use)."""
        with self._lock:
            if self._base is None:
                dimensions = int(getattr(self.embedder, "dim", 384))
                self._base = open_store(self.settings, dimensions=dimensions)
            store = self._stores.get(tenant)
            if store is None:
                base = self._base
                store = GraphStore(base.driver, base.database, base.backend, tenant, base.batch_size,
                                   base.dimensions)
                self._stores[tenant] = store
            return store

    def retriever(self, tenant: str):
        """One :class:`~pathweave.retrieval.retriever.Retriever` per tenant (one bounded
        topology cache for all of them)."""
        from pathweave.retrieval.retriever import Retriever
        from pathweave.topology import TopologyCache

        with self._lock:
            store = self.store(tenant)
            retriever = self._retrievers.get(tenant)
            if retriever is None or retriever.store is not store:
                if self._cache is None:
                    self._cache = TopologyCache(self.settings.query.topology_max_tenants, self.settings.query.topology_idle_s,
                                                self.settings.query.node_cache_entries)
                retriever = Retriever(store, self.embedder, self.settings, cache=self._cache, llm=self.llm_client)
                retriever.question_parser = self._parse_question  # mode apr (spec §3), extractor loaded on first use
                self._retrievers[tenant] = retriever
            return retriever

    def _parse_question(self, question: str):
        """APR's question parser over the process's extractor (loaded on first use)."""
        from pathweave_ingest.extractors import question_parser

        return question_parser(self.extractor)(question)

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
                                         group_size=self.worker_settings.group_size(self.device)))
                self._pipelines[thread] = kept
            return kept[1]

    def models_loaded(self, extractor: bool = True) -> bool:
        """Are the embedder (and, with ``extractor``, the extractor) loaded?"""
        return self._embedder is not None and (self._extractor is not None or not extractor)

    @property
    def connected(self) -> GraphStore | None:
        """The base store when connected (never connects or starts anything)."""
        return self._base

    def warm(self, extractor: bool = True) -> None:
        """Load the models and connect now (worker start), not on the first task.
        ``extractor=False``: only what queries need (an API whose ingestion runs on workers)."""
        _ = self.embedder
        if extractor:
            _ = self.extractor
        self.store(self.settings.tenant)

    def reset(self) -> None:
        """Drop the connection (after a store error: the managed server may have restarted
        on other ports); the next :meth:`store` reconnects."""
        with self._lock:
            base, self._base = self._base, None
            self._stores.clear()
            self._retrievers.clear()
            self._pipelines.clear()
        if base is not None:
            try:
                base.close()
            except Exception:  # noqa: BLE001
                pass

    def close(self) -> None:
        """Write the queries' pending reasoning records, then disconnect."""
        with self._lock:
            retrievers = list(self._retrievers.values())
        for retriever in retrievers:
            retriever.flush()
        self.reset()
