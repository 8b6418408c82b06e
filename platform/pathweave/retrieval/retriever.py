"""The query entry point: embeds the question, seeds retrieval from the store's vector
indexes, runs a retrieval mode on the tenant's topology and the Cypher-fetched G_sub,
builds the :class:`~pathweave.model.QueryResult` and (by default) writes the reasoning
record back to the graph.

Per query the store answers: the graph version (and, after a change, the change records:
:mod:`pathweave.topology`), two vector searches (run concurrently), the texts and
embeddings of G_sub's propositions and passages not in the tenant's node cache, the
names and embeddings of the few entities the paths and seeds need, and the texts of the
returned passages.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pathweave.backends import vector_search, versioned_vector_search
from pathweave.citations import format_citation
from pathweave.embeddings import Embedder
from pathweave.errors import LLMUnavailable
from pathweave.model import Mode, PassageHit, QueryResult
from pathweave.reasoning_records import RecordWriter, read_reasoning_record
from pathweave.retrieval.modes import strategy as mode_strategy
from pathweave.retrieval.request import QueryRequest
from pathweave.retrieval.strategy import Retrieval
from pathweave.selection import TokenCounter
from pathweave.settings import PruneRAGParams, Settings
from pathweave.store import GraphStore
from pathweave.subgraph import NodeReader
from pathweave.topology import Topology, TopologyCache


_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pathweave-search")
"""Runs a query's vector searches concurrently (shared by every retriever of the process)."""


def _unversioned(store, label: str, vector: np.ndarray, k: int) -> tuple[list[tuple[str, float]], None]:
    """:func:`~pathweave.backends.vector_search` shaped as ``(hits, version)`` with no version."""
    return vector_search(store, label, vector, k), None


class Retriever:
    """Answers queries for one store/tenant. Thread-safe; topologies are shared through
    ``cache`` (one per process serves every tenant)."""

    def __init__(self, store: GraphStore, embedder: Embedder, settings: Settings,
                 cache: TopologyCache | None = None, llm=None) -> None:
        self.store = store
        self._llm = llm  # an LLMClient, a function returning one, or None: connected on first use
        self.embedder = embedder
        self.settings = settings
        self.cache = cache or TopologyCache(settings.query.topology_max_tenants, settings.query.topology_idle_s,
                                           settings.query.node_cache_entries)
        self.records = RecordWriter(store)
        # question -> (triples, entity names): the configured extractor, set by the layer that
        # owns it (CLI, API, benchmarks); None = APR's fallback (one "asks" triple per question)
        self.question_parser = None

    def llm_client(self):
        """The LLM client of the LLM modes: the one given (or the given function's), else one
        for ``PATHWEAVE_LLM_*`` (the managed local server, started on demand)."""
        from pathweave.llm.client import LLMError
        from pathweave.llm.server import LLMServerError

        try:
            if self._llm is None:
                from pathweave.llm.client import connect

                self._llm = connect(self.settings.data_dir, self.settings.llm)
            return self._llm if hasattr(self._llm, "chat") else self._llm()
        except (LLMError, LLMServerError) as exc:
            raise LLMUnavailable(f"no LLM to answer with: {exc}") from exc

    @property
    def prunerag_params(self) -> PruneRAGParams:
        """PruneRAG parameters (section ``prunerag``, ``PATHWEAVE_PRUNERAG_*``, spec §4)."""
        return self.settings.prunerag

    def flush(self) -> None:
        """Wait until the reasoning records of earlier queries are in the store."""
        self.records.flush()

    def read_record(self, query_id: str) -> dict:
        """A reasoning record of this tenant, after the pending writes (see
        :func:`~pathweave.reasoning_records.read_reasoning_record`; KeyError when unknown)."""
        self.flush()
        return read_reasoning_record(self.store, query_id)

    def token_counter(self) -> TokenCounter:
        """Token counter for budgets: ``settings.selection.context_tokenizer`` or the embedder's tokenizer."""
        return TokenCounter(self.settings.selection.context_tokenizer or None)

    def topology(self, version: int | None = None) -> Topology:
        """The tenant's topology at the store's current graph version (``version``: as this
        query's vector searches read it, :meth:`nearest`; None: read it)."""
        return self.cache.get(self.store, version)

    def reader(self, topology: Topology) -> NodeReader:
        """Reads this tenant's node rows through the topology's bounded node cache."""
        return NodeReader(self.store, topology.nodes, self.store.dimensions)

    def warm_up(self, queries: int = 50) -> float:
        """Run ``queries`` un-recorded queries built from the tenant's passage titles ("What is
        known about <title>?"), PropRAG and dense alike, and return the seconds taken.

        The first forward passes of each new input shape are slow on CPU, and the store's
        vector indexes answer their first searches slowly (up to ~1 s): services call this
        once before they take traffic, benchmarks before they time.
        """
        started = time.perf_counter()
        titles = [row["title"] for row in self.store.run("passage_titles", limit=queries)]
        for i, title in enumerate(titles):
            self.query(f"What is known about {title}?", mode="dense" if i % 5 == 4 else "proprag", write_record=False)
        return time.perf_counter() - started

    def query(self, question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, **options) -> QueryResult:
        """The :class:`~pathweave.model.QueryResult` of :meth:`search`."""
        return self.search(question, mode, k, **options).result

    def search(self, question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, **options) -> Retrieval:
        """Run one query: a :class:`~pathweave.retrieval.request.QueryRequest`, or a question
        with the request's options as keywords (``token_budget``, ``selection_method``,
        ``context_style``, ``session_id``, ``answer``, ``write_record``).

        The mode's strategy (:func:`pathweave.retrieval.modes.strategy`) retrieves; with
        ``answer`` the mode's answer step follows (one LLM call; PruneRAG answers through its
        tree anyway); then the reasoning record is written unless ``write_record`` is False
        (default: setting ``query.write_reasoning``). Returns the result with the subgraph
        and ``(d,)`` query vector it used. Raises :class:`~pathweave.errors.BadRequest` /
        :class:`~pathweave.errors.NotApplicable` on a bad request (nothing read or written)
        and :class:`~pathweave.errors.LLMUnavailable` when a mode or the answer needs an LLM
        and none can be had.
        """
        request = question.check() if isinstance(question, QueryRequest) else \
            QueryRequest.of(question, mode=mode, k=k, **options)
        strategy = mode_strategy(request.mode)
        record = request.record(self.settings.query.write_reasoning)
        if request.answer or strategy.needs_llm:
            self.llm_client()  # LLMUnavailable before anything is retrieved
        if strategy.answers_itself or not request.answer:
            return strategy.search(self, request, record)
        retrieval = strategy.search(self, request, False)
        strategy.answer(self, retrieval, self.llm_client())
        timings = retrieval.result.timings_ms
        timings["answer"] = retrieval.result.answer.latency_ms
        timings["total"] = round(timings.get("total", 0.0) + timings["answer"], 2)
        if record:
            strategy.write_record(self, retrieval)
        return retrieval

    # ---- the public pieces the modes use ----------------------------------------------
    def nearest(self, searches: dict[str, tuple[str, int]], vector: np.ndarray
                ) -> tuple[dict[str, list[tuple[str, float]]], int | None]:
        """Run ``searches`` (``{name: (label, k)}``) for ``vector`` concurrently on the shared
        pool: ``{name: [(id, cosine)] best first}`` and the tenant's graph version the first
        search's statement read (:func:`~pathweave.backends.versioned_vector_search`; None when
        it read none), so the query's topology needs no round trip of its own for it."""
        futures = {name: _SEARCHES.submit(versioned_vector_search if n == 0 else _unversioned, self.store, label,
                                          vector, k)
                   for n, (name, (label, k)) in enumerate(searches.items())}
        found = {name: future.result() for name, future in futures.items()}
        versions = [version for _, version in found.values() if version is not None]
        return {name: hits for name, (hits, _) in found.items()}, (max(versions) if versions else None)

    def passage_hits(self, reader: NodeReader, ids: list[str], scores: list[float]) -> list[PassageHit]:
        """The ranked passages ``ids`` (best first, with their ``scores``) with their texts
        and citations (page / section / reference / document source): the result's one read
        (statement ``subgraph_passage_texts``; titles come with G_sub or the node cache)."""
        meta = reader.passages(ids)
        texts = reader.passage_texts(ids)
        hits = []
        for rank, (pid, score) in enumerate(zip(ids, scores), 1):
            title, doc_id, _ = meta.get(pid) or ("", "", None)
            text, page, section, cited_title, source = texts.get(pid) or ("", None, None, None, None)
            hits.append(PassageHit(passage_id=pid, doc_id=doc_id or "", title=title or "", text=text or "",
                                   score=round(float(score), 8), rank=rank, page=page, section=section,
                                   reference=format_citation(cited_title or title, page, section), source=source))
        return hits
