"""How a process opens the graph store (:func:`open_store`, starting the managed server on
demand), and what one process keeps for queries: one store driver shared by per-tenant
:class:`GraphStore` objects, the query embedder, the extractor that parses APR's
questions, the LLM client, and one :class:`Retriever` per tenant with one bounded
topology cache for all of them. Everything is loaded lazily, once.

The API and the CLI query through it; ingestion's
:class:`pathweave_ingest.worker_runtime.Runtime` extends it with the ingestion embedder
and the pipelines, so a question never passes through ``ingest/``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from neo4j import GraphDatabase

from pathweave.servers import store_server
from pathweave.settings import Settings
from pathweave.store.backends.arcadedb import ArcadeBackend
from pathweave.store.graph_store import GraphStore

log = logging.getLogger(__name__)

RECONNECT_INTERVAL_S = 2.0
"""Seconds between two reconnections after transient store errors (:meth:`QueryRuntime.lost`):
under load every request may fail at once, one of them reconnects."""



def open_store(settings: Settings, tenant: str | None = None, dimensions: int = 384) -> GraphStore:
    """Connect to the configured store (starting the managed server on demand).

    ``settings.store.uri`` set: that Neo4j server. Empty: the managed local server of
    ``settings.store.backend`` (ArcadeDB, or Neo4j + GDS, :mod:`pathweave.servers.neo4j_server`); a
    managed server started on demand stops once every process that opened it has exited,
    one started by ``pathweave db start`` runs on. Creates the schema idempotently. Raises
    :class:`pathweave.servers.processes.ServerError` when the managed server cannot start,
    ``neo4j.exceptions.ServiceUnavailable`` when an external store is unreachable.
    """
    if settings.store.uri:
        return _open_neo4j(settings.store.uri, settings.store.user, settings.store.password,
                           settings.store.database, settings, tenant, dimensions)
    # started here or by another process, the managed server runs while any process using it does
    # (registered first: the process that started it may exit before this one connects)
    store_server.register_user(settings)
    info = store_server.start(settings, owner=os.getpid())
    if settings.store.backend == "neo4j":
        return _open_neo4j(info.bolt_uri, info.user, info.password, info.database, settings, tenant, dimensions)
    driver = GraphDatabase.driver(info.bolt_uri, auth=(info.user, info.password))
    backend = ArcadeBackend(info.http_url, info.user, info.password, settings.store.database)
    store = GraphStore(driver, settings.store.database, backend, tenant or settings.tenant,
                       settings.store.write_batch_size, dimensions)
    store.ensure_schema(dimensions)
    return store


def _open_neo4j(uri: str, user: str, password: str, database: str, settings: Settings, tenant: str | None,
                dimensions: int) -> GraphStore:
    """A store on Neo4j (bolt://, neo4j://, +s/+ssc variants): the same statements,
    :class:`~pathweave.store.backends.neo4j.Neo4jBackend` for vector indexes and GDS."""
    from neo4j.exceptions import ClientError

    from pathweave.store.backends.neo4j import Neo4jBackend

    # server notifications (unknown labels in an empty tenant, the id() deprecation) stay off
    # the console: tools/cypher-lint reports them for every statement at test time
    # managed transactions are retried on transient errors for up to this long: a cluster's
    # leader switch takes seconds (the driver's 30 s); the managed local server does not come
    # back by waiting (a request answers 503 and the next one starts it again), so 5 s
    retry_s = 30.0 if settings.store.uri else 5.0
    driver = GraphDatabase.driver(uri, auth=(user, password), notifications_min_severity="OFF",
                                  max_transaction_retry_time=retry_s)
    gds_uri = settings.store.gds_uri.strip()
    backend = Neo4jBackend(driver, database, project_after_changes=settings.retrieval.stage1_ppr == "gds",
                           gds_endpoint=(gds_uri, (user, password)) if gds_uri else None,
                           max_heap_percent=settings.store.gds_max_heap_percent)
    store = GraphStore(driver, database, backend, tenant or settings.tenant, settings.store.write_batch_size,
                       dimensions)
    try:
        store.ensure_schema(dimensions)
    except Exception as error:
        driver.close()
        if isinstance(error, ClientError) and error.code == "Neo.ClientError.Database.DatabaseNotFound":
            raise ValueError(
                f"database {database!r} does not exist on {uri} "
                "(Neo4j Community has only 'neo4j': set PATHWEAVE_STORE_DATABASE=neo4j)"
            ) from error
        raise
    return store


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


class QueryRuntime:
    """Process-wide query components. Thread-safe; everything lazy.

    ``query_embedder``/``extractor``/``llm`` may be injected (tests); otherwise
    :func:`pathweave.embedding.embedders.get_query_embedder` (ONNX float32 on CPU, no torch), the
    extractor ``settings.ingest.extractor`` names (:func:`pathweave.extractors.make_extractor`,
    ``extract_batch`` passages per call; APR parses questions with it, spec §3) and the LLM
    client of ``settings.llm`` (:func:`pathweave.llm.client.connect`).
    """

    def __init__(self, settings: Settings, query_embedder: Any = None, extractor: Any = None, llm: Any = None,
                 extract_batch: int | None = None) -> None:
        self.settings = settings
        self._query_embedder = query_embedder
        self._extractor = extractor
        self._extract_batch = extract_batch
        self._llm = llm  # the LLM client answers use (connected on first use when None)
        self._base: GraphStore | None = None
        self._stores: dict[str, GraphStore] = {}
        self._retrievers: dict[str, Any] = {}
        self._cache = None
        self._lock = threading.RLock()
        self._last_lost = float("-inf")
        self._llm_lock = threading.Lock()  # a model server may take minutes to start: not under _lock

    @property
    def device(self) -> str:
        """The models' device (``settings.models.device`` resolved: ``cpu`` or ``cuda``)."""
        from pathweave.embedding.embedders import resolve_device

        return resolve_device(self.settings.models.device)

    @property
    def query_embedder(self):
        """The embedder of questions and beam re-scoring (loaded on first use)."""
        with self._lock:
            if self._query_embedder is None:
                from pathweave.embedding.embedders import get_query_embedder

                self._query_embedder = get_query_embedder(self.settings)
            return self._query_embedder

    @property
    def extractor(self):
        """The configured extractor (loaded on first use; on the GPU where spaCy can use it)."""
        with self._lock:
            if self._extractor is None:
                from pathweave.extractors import make_extractor

                on_gpu = (self.device.startswith("cuda") and self.settings.ingest.extractor == "spacy"
                          and _prefer_gpu_for_spacy())
                self._extractor = make_extractor(self.settings, batch_size=self._extract_batch)
                log.info("extractor %s on %s", self.settings.ingest.extractor, "cuda" if on_gpu else "cpu")
            return self._extractor

    def llm_client(self):
        """The process's LLM client (``settings.llm``, ``PATHWEAVE_LLM_*``; the managed local model server by
        default, started on first use). Raises :class:`~pathweave.errors.LLMUnavailable` when none can be had."""
        with self._llm_lock:
            if self._llm is None:
                from pathweave.llm.client import connect

                self._llm = connect(self.settings.data_dir, self.settings.llm)
            return self._llm

    def store(self, tenant: str) -> GraphStore:
        """The store bound to ``tenant`` (connects, and starts the managed server, on first use)."""
        with self._lock:
            if self._base is None:
                self._base = open_store(self.settings, dimensions=self._dimensions())
            store = self._stores.get(tenant)
            if store is None:
                base = self._base
                store = GraphStore(base.driver, base.database, base.backend, tenant, base.batch_size,
                                   base.dimensions)
                self._stores[tenant] = store
            return store

    def _dimensions(self) -> int:
        """The vectors' dimension for the store's indexes (the query embedder's)."""
        return int(getattr(self.query_embedder, "dim", 384))

    def cache_stats(self) -> dict[str, int]:
        """What the process's query caches hold (:meth:`pathweave.graph.topology.TopologyCache.stats`;
        zeros before the first query)."""
        with self._lock:
            cache = self._cache
        if cache is None:
            from pathweave.graph.topology import TopologyCache

            return TopologyCache().stats()  # an empty cache's: every figure 0
        return cache.stats()

    def retriever(self, tenant: str):
        """One :class:`~pathweave.query.retriever.Retriever` per tenant (one bounded
        topology cache for all of them)."""
        from pathweave.query.retriever import Retriever
        from pathweave.graph.topology import TopologyCache

        with self._lock:
            store = self.store(tenant)
            retriever = self._retrievers.get(tenant)
            if retriever is None or retriever.store is not store:
                if self._cache is None:
                    self._cache = TopologyCache.of(self.settings.query)
                retriever = Retriever(store, self.query_embedder, self.settings, cache=self._cache,
                                      llm=self.llm_client, question_parser=self._parse_question)
                self._retrievers[tenant] = retriever
            return retriever

    def _parse_question(self, question: str):
        """APR's question parser over the process's extractor (loaded on first use)."""
        from pathweave.extractors import question_parser

        return question_parser(self.extractor)(question)

    def models_loaded(self, extractor: bool = True) -> bool:
        """Are the query embedder (and, with ``extractor``, the extractor) loaded?"""
        return self._query_embedder is not None and (self._extractor is not None or not extractor)

    @property
    def connected(self) -> GraphStore | None:
        """The base store when connected (never connects or starts anything)."""
        return self._base

    def warm(self, extractor: bool = True) -> None:
        """Load the models and connect now, not on the first request, then the topologies of
        ``query.preload_tenants`` (:meth:`preload_topologies`). ``extractor=False``: only what
        queries in modes other than apr need."""
        _ = self.query_embedder
        if extractor:
            _ = self.extractor
        self.store(self.settings.tenant)
        self.preload_topologies()

    def preload_topologies(self) -> None:
        """Load the topologies of ``query.preload_tenants`` from the store now (the API's
        warm-up, before ``/readyz`` says ready), so their first queries find them in memory."""
        tenants = self.settings.query.preload
        if len(tenants) > self.settings.query.topology_max_tenants:
            log.warning("query.preload_tenants names %d tenants, query.topology_max_tenants keeps %d: the first "
                        "ones are evicted again", len(tenants), self.settings.query.topology_max_tenants)
        for tenant in tenants:
            try:
                self.retriever(tenant).resources.topology()
            except Exception as exc:
                raise RuntimeError(f"preloading the topology of tenant {tenant!r}: {type(exc).__name__}: {exc}") \
                    from exc

    def _forget(self) -> None:
        """Drop what depends on the connection (under the lock)."""
        self._stores.clear()
        self._retrievers.clear()

    def lost(self) -> bool:
        """The store failed with a transient error: drop the connection (at most once per
        :data:`RECONNECT_INTERVAL_S`), so the next :meth:`store` connects to wherever the
        managed server runs now (a worker or another process may have restarted it on other
        ports; it is started again when it is down). Returns whether it reset. A configured
        server (``store.uri``, e.g. a cluster's ``neo4j://`` routing address) keeps its
        driver, which finds the members again by itself: closing it would fail the requests
        in flight on the others."""
        if self.settings.store.uri:
            return False
        with self._lock:
            now = time.monotonic()
            if now - self._last_lost < RECONNECT_INTERVAL_S:
                return False
            self._last_lost = now
        self.reset()
        log.warning("store connection dropped after a transient error; the next request reconnects")
        return True

    def reset(self) -> None:
        """Drop the connection (after a store error: the managed server may have restarted
        on other ports); the next :meth:`store` reconnects."""
        with self._lock:
            base, self._base = self._base, None
            self._forget()
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
