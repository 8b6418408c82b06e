"""The query entry point: embeds the question, runs a retrieval mode on the
tenant's current snapshot, builds the :class:`~pathweave.model.QueryResult`
and (by default) writes the reasoning record back to the graph.
"""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np

from pathweave.dialect import stage1_passage_scores
from pathweave.embeddings import Embedder
from pathweave.model import Mode, PassageHit, PathStep, QueryResult, ReasoningPath, SeedEntity
from pathweave.reasoning import RecordWriter, read_reasoning_record
from pathweave.retrieval.context import candidate_graph, select_context
from pathweave.retrieval.hipporag import build_hippo_graph, hipporag2
from pathweave.retrieval.proprag import proprag
from pathweave.selection import TokenCounter
from pathweave.settings import Settings
from pathweave.snapshot import GraphSnapshot, SnapshotCache
from pathweave.store import GraphStore

MODES: tuple[str, ...] = ("proprag", "dense", "hipporag2")




class Retriever:
    """Answers queries for one store/tenant. Thread-safe; the snapshot is shared."""

    def __init__(self, store: GraphStore, embedder: Embedder, settings: Settings,
                 cache: SnapshotCache | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.cache = cache or SnapshotCache()
        self.records = RecordWriter(store)

    def flush(self) -> None:
        """Wait until the reasoning records of earlier queries are in the store."""
        self.records.flush()

    def read_record(self, query_id: str) -> dict:
        """A reasoning record of this tenant, after the pending writes (see
        :func:`~pathweave.reasoning.read_reasoning_record`; KeyError when unknown)."""
        self.flush()
        return read_reasoning_record(self.store, query_id)

    def token_counter(self) -> TokenCounter:
        """Token counter for budgets: ``settings.context_tokenizer`` or the embedder's tokenizer."""
        return TokenCounter(self.settings.context_tokenizer or None)

    def snapshot(self) -> GraphSnapshot:
        """The tenant's current snapshot (rebuilt if the graph version changed)."""
        return self.cache.get(self.store)

    def warm_up(self, queries: int = 50) -> float:
        """Run ``queries`` un-recorded PropRAG queries built from the tenant's passage titles
        ("What is known about <title>?") and return the seconds taken.

        The first forward passes of each new input shape are slow on CPU (bfloat16 kernels
        are generated per shape): in a process that has just ingested, the first ~100
        benchmark queries had p95 ~0.8-1.1 s against ~0.25 s after 100 such warm-up
        queries (measured on the 2-core machine). Benchmarks, and services before they
        take traffic, call this once.
        """
        started = time.perf_counter()
        titles = list(dict.fromkeys(t for t in self.snapshot().passage_titles if t))[:queries]
        for title in titles:
            self.query(f"What is known about {title}?", write_record=False)
        return time.perf_counter() - started

    def query(self, question: str, mode: Mode = "proprag", k: int = 5, write_record: bool | None = None,
              token_budget: int | None = None, select: str = "auto", style: str = "bullets") -> QueryResult:
        """Top ``k`` passages (and, for proprag, the top paths and seeds) for ``question``.

        With ``token_budget`` (tokens), also the best connected evidence that fits it
        (spec §5; ``select``: ilp | greedy | auto; ``style``: bullets | triples) as
        ``result.context``. Raises ValueError on an empty question, an unknown mode,
        k < 1 or a negative budget.
        """
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
        return self._query(question, mode, k, write_record, token_budget, select, style)

    def _query(self, question: str, mode: Mode, k: int, write_record: bool | None, token_budget: int | None,
               select: str, style: str) -> QueryResult:
        timings: dict[str, float] = {}
        last = [time.perf_counter()]

        def clock(stage: str) -> None:
            now = time.perf_counter()
            timings[stage] = round((now - last[0]) * 1000, 2)
            last[0] = now

        snapshot = self.snapshot()
        clock("snapshot")
        query_vec = self.embedder.encode_one(question)
        clock("embed")
        result = QueryResult(query_id=uuid.uuid4().hex, question=question, mode=mode, passages=[],
                             graph_version=snapshot.version)
        if not snapshot.passage_ids:
            order, scores = np.zeros(0, dtype=np.int64), np.zeros(0)
        elif mode == "dense":
            scores = snapshot.passage_emb @ query_vec
            order = np.argsort(-scores, kind="stable")
            clock("dense")
        elif mode == "hipporag2":
            graph = snapshot.extras.get("hipporag2")
            if graph is None:
                graph = snapshot.extras.setdefault("hipporag2", build_hippo_graph(snapshot, self.embedder.encode))
            order, scores = hipporag2(query_vec, snapshot, graph)
            clock("ppr")
        else:
            params = self.settings.proprag.for_device(self.embedder.device)
            out = proprag(query_vec, snapshot, params, self.embedder.encode, clock,
                          lambda reset, damping: stage1_passage_scores(self.store, snapshot, reset, damping))
            order, scores = out.order, out.scores
            result.paths = [
                ReasoningPath(
                    path_id=f"{result.query_id}:{rank}", rank=rank, score=round(path.score, 6),
                    steps=[PathStep(prop_id=snapshot.prop_ids[p], text=snapshot.prop_texts[p], via=via)
                           for p, via in zip(path.props, vias)],
                )
                for rank, (path, vias) in enumerate(zip(out.paths, out.vias), 1)
            ]
            result.seeds = [
                SeedEntity(entity_id=snapshot.entity_ids[e], name=snapshot.entity_names[e], weight=round(w, 6))
                for e, w in sorted(out.seeds.items(), key=lambda item: -item[1])
            ]
        depth = k if token_budget is None else max(k, self.settings.context_passages)
        result.passages = [
            PassageHit(passage_id=snapshot.passage_ids[i], doc_id=snapshot.passage_docs[i],
                       title=snapshot.passage_titles[i], text=snapshot.passage_texts[i],
                       score=round(float(scores[i]), 8), rank=rank)
            for rank, i in enumerate(order[:depth], 1)
        ]
        if token_budget is not None and len(order):
            result.context = select_context(candidate_graph(result, snapshot, query_vec), token_budget, select,
                                            self.token_counter(), style, self.settings.select_time_limit_ms)
            clock("select")
        result.passages = result.passages[:k]
        if self.settings.write_reasoning if write_record is None else write_record:
            self.records.submit(result.model_copy())  # written on the writer's thread, off the query path
            clock("record")
        result.timings_ms = timings
        result.timings_ms["total"] = round(sum(timings.values()), 2)
        return result
