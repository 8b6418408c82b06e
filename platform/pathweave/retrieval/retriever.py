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

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from pathweave.backends import Capability, vector_search
from pathweave.citations import format_citation
from pathweave.embeddings import Embedder
from pathweave.model import Mode, PassageHit, PathStep, QueryResult, ReasoningPath, SeedEntity
from pathweave.reasoning import RecordWriter, read_reasoning_record
from pathweave.retrieval.context import candidate_graph, select_context
from pathweave.retrieval.hipporag import TOP_FACTS, build_hippo_graph, hipporag2
from pathweave.retrieval.modes import MODES
from pathweave.retrieval.proprag import Stage1Seeds, proprag, weak_passage_seeds
from pathweave.selection import TokenCounter
from pathweave.settings import PruneRAGParams, Settings
from pathweave.store import GraphStore
from pathweave.subgraph import NodeReader, Subgraph, build_subgraph
from pathweave.topology import Topology, TopologyCache, TopologyView


_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pathweave-search")
"""Runs a query's vector searches concurrently (shared by every retriever of the process)."""
log = logging.getLogger(__name__)


@dataclass
class Retrieval:
    """One query's result with what it was computed on: the fetched ``subgraph`` (None for
    a dense or HippoRAG 2 query without a token budget) and the ``(d,)`` query vector."""

    result: QueryResult
    subgraph: Subgraph | None
    query: np.ndarray


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
        if self._llm is None:
            from pathweave.llm.client import connect

            self._llm = connect(self.settings.data_dir, self.settings.llm)
        return self._llm if hasattr(self._llm, "chat") else self._llm()

    @property
    def prunerag_params(self) -> PruneRAGParams:
        """PruneRAG parameters (section ``prunerag``, ``PATHWEAVE_PRUNERAG_*``, spec §4)."""
        return self.settings.prunerag

    def flush(self) -> None:
        """Wait until the reasoning records of earlier queries are in the store."""
        self.records.flush()

    def read_record(self, query_id: str) -> dict:
        """A reasoning record of this tenant, after the pending writes (see
        :func:`~pathweave.reasoning.read_reasoning_record`; KeyError when unknown)."""
        self.flush()
        return read_reasoning_record(self.store, query_id)

    def token_counter(self) -> TokenCounter:
        """Token counter for budgets: ``settings.selection.context_tokenizer`` or the embedder's tokenizer."""
        return TokenCounter(self.settings.selection.context_tokenizer or None)

    def topology(self) -> Topology:
        """The tenant's topology at the store's current graph version."""
        return self.cache.get(self.store)

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
            self.query(f"What is known about {title}?", mode="dense" if i % 5 == 4 else "proprag",
                       write_record=False)
        return time.perf_counter() - started

    def query(self, question: str, mode: Mode = "proprag", k: int = 5, write_record: bool | None = None,
              token_budget: int | None = None, select: str = "auto", style: str = "bullets",
              session_id: str | None = None) -> QueryResult:
        """Top ``k`` passages (and, for proprag, the top paths and seeds) for ``question``.

        With ``token_budget`` (tokens), also the best connected evidence that fits it
        (spec §5; ``select``: ilp | greedy | auto; ``style``: bullets | triples) as
        ``result.context``. ``session_id`` (mode ``apr``): runs the session already sent
        are referenced, not re-sent (spec §3). Raises ValueError on an empty question, an
        unknown mode, k < 1, a negative budget, or a session id with another mode than apr.
        """
        return self.search(question, mode, k, write_record, token_budget, select, style, session_id).result

    def search(self, question: str, mode: Mode = "proprag", k: int = 5, write_record: bool | None = None,
               token_budget: int | None = None, select: str = "auto", style: str = "bullets",
               session_id: str | None = None) -> Retrieval:
        """:meth:`query`, returning also the subgraph and query vector it used."""
        question = question.strip()
        if not question:
            raise ValueError("question is empty")
        if token_budget is not None and token_budget < 0:
            raise ValueError("token budget must be >= 0")
        if select not in ("ilp", "greedy", "auto"):
            raise ValueError(f"unknown selection method {select!r}; use ilp, greedy or auto")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if k < 1:
            raise ValueError("k must be at least 1")
        if session_id is not None and mode != "apr":
            raise ValueError("session_id applies to mode apr only")
        if mode == "apr":
            if token_budget is not None:
                raise ValueError("a token budget does not apply to mode apr (its prompt is the compact one)")
            from pathweave.apr.retrieval import apr_search

            result, outcome = apr_search(self, question, k, write_record, session_id)
            return Retrieval(result, None, outcome.query)
        if mode == "prunerag":
            if token_budget is not None:
                raise ValueError("a token budget does not apply to mode prunerag")
            from pathweave.retrieval.prunerag import prunerag_search

            return prunerag_search(self, question, k, write_record)
        return self._search(question, mode, k, write_record, token_budget, select, style)

    # ---- helpers ----------------------------------------------------------------------
    def _nearest(self, label: str, vector: np.ndarray, k: int):
        return _SEARCHES.submit(vector_search, self.store, label, vector, k)

    def _in_database_ppr(self, view: TopologyView, ppr_timings: dict[str, float]):
        """Stage-1 PPR in the database (Neo4j GDS) when asked (``retrieval.stage1_ppr = gds``)
        and the backend can, mapped to the view.
        Records its milliseconds in ``ppr_timings``: ``stage1_gds`` when GDS answered,
        ``stage1_gds_fallback`` when it did not (projection of this graph version not ready
        yet, or a GDS error, logged by the backend) and the in-process PPR ran instead."""
        backend = self.store.backend
        if self.settings.retrieval.stage1_ppr != "gds":
            return None
        if Capability.PPR not in backend.capabilities:  # asked for GDS on a backend without it
            log.error("retrieval.stage1_ppr = gds, but the %s store has no Graph Data Science: "
                      "stage 1 runs the local push PPR", backend.name)
            ppr_timings["stage1_gds_fallback"] = 0.0
            return None
        ids = view.entity_ids[:view.n_entities] + view.passage_ids[:view.n_passages]

        def run(reset: np.ndarray, damping: float) -> np.ndarray | None:
            seeds = {ids[i]: float(reset[i]) for i in np.flatnonzero(reset > 0)}
            started = time.perf_counter()
            scores = backend.personalized_pagerank(self.store, seeds, damping, view.version)
            key = "stage1_gds" if scores is not None else "stage1_gds_fallback"
            ppr_timings[key] = round((time.perf_counter() - started) * 1000, 2)
            if scores is None:
                return None
            return np.fromiter((scores.get(pid, 0.0) for pid in view.passage_ids[:view.n_passages]),
                               dtype=np.float64, count=view.n_passages)
        return run

    def _hits(self, reader: NodeReader, ids: list[str], scores: list[float]) -> list[PassageHit]:
        """The ranked passages with their texts and citations (page / section / reference)."""
        meta = reader.passages(ids)
        texts = reader.passage_texts(ids)
        hits = []
        for rank, (pid, score) in enumerate(zip(ids, scores), 1):
            title, doc_id, _ = meta.get(pid) or ("", "", None)
            text, page, section, cited_title = texts.get(pid) or ("", None, None, None)
            hits.append(PassageHit(passage_id=pid, doc_id=doc_id or "", title=title or "", text=text or "",
                                   score=round(float(score), 8), rank=rank, page=page, section=section,
                                   reference=format_citation(cited_title or title, page, section)))
        return hits

    # ---- one query ----------------------------------------------------------------------
    def _search(self, question: str, mode: Mode, k: int, write_record: bool | None, token_budget: int | None,
                select: str, style: str) -> Retrieval:
        timings: dict[str, float] = {}
        ppr_timings: dict[str, float] = {}  # inside stage "stage1" (not added to the total twice)
        last = [time.perf_counter()]

        def clock(stage: str) -> None:
            now = time.perf_counter()
            timings[stage] = round((now - last[0]) * 1000, 2)
            last[0] = now

        topology = self.topology()
        view = topology.view()  # built here on the first query after a change
        clock("topology")
        reader = self.reader(topology)
        query_vec = self.embedder.encode_one(question)
        clock("embed")
        result = QueryResult(query_id=uuid.uuid4().hex, question=question, mode=mode, passages=[],
                             graph_version=view.version)
        depth = k if token_budget is None else max(k, self.settings.selection.context_passages)
        params = self.settings.retrieval.for_device(self.embedder.device)
        subgraph: Subgraph | None = None
        ids: list[str] = []
        scores: list[float] = []
        if mode == "dense":
            hits = vector_search(self.store, "Passage", query_vec, depth)
            ids, scores = [h[0] for h in hits], [h[1] for h in hits]
            clock("dense")
        elif mode == "hipporag2":
            facts = self._nearest("Triple", query_vec, max(TOP_FACTS, 20))
            passages = self._nearest("Passage", query_vec, params.stage1_passage_seeds)
            seeds = weak_passage_seeds(view, passages.result(), 0.05)
            clock("seeds")
            graph = view.derived("hipporag2", lambda: build_hippo_graph(view))
            ranked = hipporag2(view, graph, facts.result(), seeds)
            candidates = np.flatnonzero(view.alive & (ranked > 0))
            order = candidates[np.argsort(-ranked[candidates], kind="stable")][:depth]
            ids, scores = [view.passage_ids[i] for i in order], ranked[order].tolist()
            clock("ppr")
        else:
            props = self._nearest("Proposition", query_vec, params.stage1_props)
            passages = self._nearest("Passage", query_vec, params.stage1_passage_seeds)
            seeds = Stage1Seeds(props.result(), passages.result())
            if self.settings.apr.proprag_question_runs:  # APR: earlier similar questions' passages (spec §3)
                from pathweave.apr.retrieval import earlier_question_passages

                known = dict(seeds.passages)
                for pid, cos in earlier_question_passages(self.store, query_vec):
                    known[pid] = max(known.get(pid, cos), cos)
                seeds.passages = sorted(known.items(), key=lambda item: -item[1])
            clock("seeds")
            out = proprag(query_vec, seeds, view, reader, params, self.embedder.encode, clock,
                          self._in_database_ppr(view, ppr_timings))
            subgraph = out.subgraph
            top = out.order[:depth]
            ids, scores = [view.passage_ids[i] for i in top], out.scores[top].tolist()
            result.paths = [
                ReasoningPath(
                    path_id=f"{result.query_id}:{rank}", rank=rank, score=round(path.score, 6),
                    steps=[PathStep(prop_id=subgraph.prop_ids[p], text=subgraph.prop_texts[p], via=via)
                           for p, via in zip(path.props, vias)],
                )
                for rank, (path, vias) in enumerate(zip(out.paths, out.vias), 1)
            ]
            subgraph.ensure_entities(list(out.seeds))
            result.seeds = [
                SeedEntity(entity_id=subgraph.entity_ids[e], name=subgraph.entity_names[e], weight=round(w, 6))
                for e, w in sorted(out.seeds.items(), key=lambda item: -item[1])
            ]
        result.passages = self._hits(reader, ids, scores)
        clock("passages")
        if token_budget is not None and result.passages:
            if subgraph is None:
                subgraph = build_subgraph(view, view.index_of(view.passage_index, ids, view.n_passages), reader)
            graph = candidate_graph(result, subgraph, query_vec, self.settings.selection.path_weight)
            result.context = select_context(graph, token_budget, select, self.token_counter(), style,
                                            self.settings.selection.select_time_limit_ms)
            clock("select")
        result.passages = result.passages[:k]
        if self.settings.query.write_reasoning if write_record is None else write_record:
            self.records.submit(result.model_copy())  # written on the writer's thread, off the query path
            clock("record")
        result.timings_ms = timings
        result.timings_ms["total"] = round(sum(timings.values()), 2)
        result.timings_ms.update(ppr_timings)
        return Retrieval(result, subgraph, query_vec)
