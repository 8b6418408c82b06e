"""What every retrieval mode works with (:class:`QueryResources`): the store, the query
embedder, the settings, the tenant's topology (through the process's bounded
:class:`~pathweave.graph.topology.TopologyCache`) and node reader, the vector searches, the
ranked passages' one read, the reasoning-record writer and the LLM client. A mode
(:mod:`pathweave.retrieval.strategy`) gets these and nothing of the dispatcher
(:class:`~pathweave.query.retriever.Retriever`, which holds these and dispatches).
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from pathweave.embedding import embedder_record
from pathweave.store.backends import fulltext_search, vector_search, versioned_vector_search
from pathweave.access import UNRESTRICTED, Access
from pathweave.records.citations import format_citation, passage_citations
from pathweave.embedding.embedders import Embedder
from pathweave.errors import NotApplicable
from pathweave.model import PassageHit, QueryResult
from pathweave.records.reasoning import RecordWriter
from pathweave.retrieval.lexical import complete_ties, lucene_query
from pathweave.selection import TokenCounter
from pathweave.settings import PruneRAGSettings, Settings
from pathweave.store.graph_store import GraphStore
from pathweave.telemetry import current_trace_id
from pathweave.graph.subgraph import NodeReader
from pathweave.graph.frontier import Frontier
from pathweave.graph.topology import FrontierTopology, Topology, TopologyCache, TopologyView


_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pathweave-search")
"""Runs a query's vector searches concurrently (shared by every retriever of the process)."""


def _versioned(store, label: str, vector: np.ndarray, k: int, accept=None) -> tuple[list[tuple[str, float]], int | None]:
    return versioned_vector_search(store, label, vector, k, accept=accept)


def _unversioned(store, label: str, vector: np.ndarray, k: int, accept=None) -> tuple[list[tuple[str, float]], None]:
    """:func:`~pathweave.store.backends.vector_search` shaped as ``(hits, version)`` with no version."""
    return vector_search(store, label, vector, k, accept=accept), None


def _submit(fn, *args):
    """``fn(*args)`` on the shared search pool, in the caller's context (its current span:
    a traced query's searches are its children)."""
    return _SEARCHES.submit(contextvars.copy_context().run, fn, *args)


def _lexical(store, label: str, query: str, k: int, accept=None) -> tuple[list[tuple[str, float]], None]:
    """:func:`~pathweave.store.backends.fulltext_search`'s ``k`` best shaped as ``(hits,
    version)`` with no version, less a group of equal scores split by the cut
    (:func:`~pathweave.retrieval.lexical.complete_ties`)."""
    return complete_ties(fulltext_search(store, label, query, k + 1, accept=accept), k), None


class QueryResources:
    """The pieces the retrieval modes use, for one store/tenant. Thread-safe; topologies are
    shared through ``cache`` (one per process serves every tenant)."""

    def __init__(self, store: GraphStore, embedder: Embedder, settings: Settings,
                 cache: TopologyCache | None = None, llm=None, question_parser=None) -> None:
        self.store = store
        self._llm = llm  # an LLMClient, a function returning one, or None: connected on first use
        self.embedder = embedder
        self.settings = settings
        if cache is None:  # not ``cache or``: an empty cache is falsy (it has a length)
            cache = TopologyCache.of(settings.query)
        self.cache = cache
        self.records = RecordWriter(store)
        self._embedder_checked: int | None = None  # the graph version whose embedder record was checked
        # question -> (triples, entity names): the configured extractor, given by the layer that
        # owns it (CLI, API, benchmarks); None = APR's fallback (one "asks" triple per question)
        self.question_parser = question_parser

    def llm_client(self):
        """The LLM client of the LLM modes: the one given (or the given function's), else one
        for ``PATHWEAVE_LLM_*`` (the managed local server, started on demand). Raises
        :class:`~pathweave.errors.LLMUnavailable` when none can be had
        (:func:`pathweave.llm.client.connect`)."""
        if self._llm is None:
            from pathweave.llm.client import connect

            self._llm = connect(self.settings.data_dir, self.settings.llm)
        return self._llm if hasattr(self._llm, "chat") else self._llm()

    @property
    def prunerag_params(self) -> PruneRAGSettings:
        """PruneRAG parameters (section ``prunerag``, ``PATHWEAVE_PRUNERAG_*``, spec §4)."""
        return self.settings.prunerag

    def token_counter(self) -> TokenCounter:
        """Token counter for budgets: ``settings.selection.context_tokenizer`` or the embedder's tokenizer."""
        return TokenCounter(self.settings.selection.context_tokenizer or None)

    def held_version(self) -> int | None:
        """The graph version of the topology this process holds for the tenant (no store
        read; None when it holds none): a restricted query's searches start from it and
        check it against the version they read."""
        return self.cache.held_version(self.store.tenant, self._whole())

    def _whole(self, asked: bool = False) -> bool:
        """Whether this query needs the whole topology: asked, or a stage 1 that is not the push."""
        return asked or self.settings.retrieval.stage1_ppr != "push"

    def topology(self, version: int | None = None, whole: bool = False) -> Topology:
        """The tenant's topology at the store's current graph version (``version``: as this
        query's vector searches read it, :meth:`nearest`; None: read it): its frontier
        (setting ``query.topology``) unless ``whole`` is asked or stage 1 is not the push
        (``retrieval.stage1_ppr`` power or gds run on the whole graph). A whole topology of a
        tenant over ``query.whole_max_passages`` passages is refused
        (:class:`~pathweave.errors.NotApplicable`) when the process otherwise holds frontiers:
        reading it would cost the corpus, not the query."""
        whole = self._whole(whole)
        if whole and self.cache.frontier_bytes is not None and \
                self.cache.held_version(self.store.tenant, whole=True) is None:  # counted once, before it is read
            limit = self.settings.query.whole_max_passages
            size = self.store.run("tenant_passage_count", limit=limit + 1)[0]["n"]
            if size > limit:
                raise NotApplicable(f"this mode needs the tenant's whole graph, and the tenant holds more than "
                                    f"query.whole_max_passages = {limit} passages: use proprag or dense, or raise "
                                    f"the setting")
        return self.cache.get(self.store, version, whole)

    def frontier(self, topology: Topology, access: Access = UNRESTRICTED) -> Frontier | None:
        """One query's :class:`~pathweave.graph.frontier.Frontier` on ``topology`` for
        ``access`` (its push reads at most ``retrieval.frontier_passages`` passages); None
        for a whole topology."""
        if not isinstance(topology, FrontierTopology):
            return None
        return Frontier(topology, self.store, access, self.settings.retrieval.frontier_passages)

    def reader(self, topology: Topology) -> NodeReader:
        """Reads this tenant's node rows through the topology's bounded node cache."""
        return NodeReader(self.store, topology.nodes, self.store.dimensions)

    def nearest(self, searches: dict[str, tuple[str, int]], vector: np.ndarray,
                lexical: dict[str, tuple[str, int]] | None = None, question: str = "",
                accept: dict | None = None) -> tuple[dict[str, list[tuple[str, float]]], int | None]:
        """Run ``searches`` (``{name: (label, k)}``) for ``vector`` concurrently on the shared
        pool: ``{name: [(id, cosine)] best first}`` and the tenant's graph version the first
        search's statement read (:func:`~pathweave.store.backends.versioned_vector_search`; None when
        it read none), so the query's topology needs no round trip of its own for it.
        ``lexical`` (``{name: (label, k)}``): full-text searches for ``question``'s terms on the
        same pool (:mod:`pathweave.retrieval.lexical`), ``[(id, relevance)]`` under their names.
        ``accept`` (``{label: acceptor}``, a restricted caller's,
        :func:`pathweave.graph.visibility.acceptors`): each search keeps only the hits its
        label's acceptor accepts (and widens for them)."""
        accept = accept or {}
        futures = {name: _submit(_versioned if n == 0 else _unversioned, self.store, label,
                                          vector, k, accept.get(label))
                   for n, (name, (label, k)) in enumerate(searches.items())}
        query = lucene_query(question) if lexical else ""
        futures.update({name: _submit(_lexical, self.store, label, query, k, accept.get(label))
                        for name, (label, k) in (lexical or {}).items()})
        found = {name: future.result() for name, future in futures.items()}
        versions = [version for _, version in found.values() if version is not None]
        version = max(versions) if versions else None
        self.check_embedder(version)
        return {name: hits for name, (hits, _) in found.items()}, version

    def check_embedder(self, version: int | None) -> None:
        """The tenant's vectors must be this process's embedder's (:func:`pathweave.embedding.embedder_record.check`),
        asked once per graph ``version`` (a re-embedding bumps it at its start and its end).
        Raises :class:`~pathweave.embedding.embedder_record.EmbedderMismatch`,
        :class:`~pathweave.embedding.embedder_record.ReembedInProgress`."""
        if version is None or version != self._embedder_checked:
            embedder_record.check(self.store, self.embedder)
            self._embedder_checked = version

    def passage_hits(self, reader: NodeReader, ids: list[str], scores: list[float],
                     access: Access = UNRESTRICTED, view: TopologyView | None = None) -> list[PassageHit]:
        """The ranked passages ``ids`` (best first, with their ``scores``) with their texts
        and citations (page / section / reference / document source): the result's one read
        (statement ``subgraph_passage_texts``; titles come with G_sub or the node cache). For
        a restricted ``access`` each passage's document, source and citation are those of
        the first of its documents it may read: read (``passage_citations``) for the
        passages several documents hold (``view``'s ``shared_passages``; all of them
        without a ``view``); a passage one document holds is readable only through it, the
        document the node cache names."""
        meta = reader.passages(ids)
        texts = reader.passage_texts(ids)
        if access.restricted:
            shared = None if view is None else view.extras.get("shared_passages")
            # a passage the view does not hold (a frontier's) is asked too: how many documents hold it is unknown
            asked = set(ids) if shared is None else {pid for pid in ids if view.passage_index.get(pid, -1) in shared
                                                     or view.passage_index.get(pid, view.n_passages) >= view.n_passages}
            cited = {pid: None for pid in ids if pid not in asked}
            cited.update(passage_citations(self.store, sorted(asked), access))
            meta = {pid: (title, doc_id if cited[pid] is None else cited[pid]["doc_id"], vec)
                    for pid, (title, doc_id, vec) in meta.items() if pid in cited}
            texts = {pid: (text, page, section, *((title, source) if cited[pid] is None
                                                  else (cited[pid]["title"], cited[pid]["source"])))
                     for pid, (text, page, section, title, source) in texts.items() if pid in cited}
        hits = []
        for rank, (pid, score) in enumerate(zip(ids, scores), 1):
            title, doc_id, _ = meta.get(pid) or ("", "", None)
            text, page, section, cited_title, source = texts.get(pid) or ("", None, None, None, None)
            hits.append(PassageHit(passage_id=pid, doc_id=doc_id or "", title=title or "", text=text or "",
                                   score=round(float(score), 8), rank=rank, page=page, section=section,
                                   reference=format_citation(cited_title or title, page, section), source=source))
        return hits

    def submit_record(self, result: QueryResult) -> None:
        """Write ``result``'s reasoning record: now, on the query's thread, when setting
        ``query.record_before_answer`` is on (any process reading the store finds it once the
        query has answered) or for a context sent in a session (the session's next query
        reads what it was sent); otherwise off the query path on the record writer. Sets
        ``result.record`` (written, failed: after the store's retries; pending). The record
        names the current trace, when the query is traced."""
        if result.trace_id is None:
            result.trace_id = current_trace_id()
        if self.settings.query.record_before_answer or (result.context is not None and result.context.session_id):
            result.record = "written" if self.records.write_now(result.model_copy()) else "failed"
        else:
            result.record = "pending"
            self.records.submit(result.model_copy())
