"""PropRAG two-stage retrieval (PropRAG paper §3; spec §1), LLM-free, on the graph store.

Stage 1 (coarse, on the tenant's integer topology): the store's proposition vector index
gives the top propositions -> entity seeds; its passage index gives the top passages ->
weak passage seeds -> Personalized PageRank over the entity–passage graph (local push,
the exact power iteration, or GDS on Neo4j) -> the top K passages. Stage 2 (fine, on
G_sub fetched from the store, :mod:`pathweave.graph.subgraph`): beam search over proposition
paths -> entity seeds from the best paths -> PPR on G_sub -> final passage ranking.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pathweave.store.backends import Capability, vector_search
from pathweave.model import PathStep, ReasoningPath, SeedEntity
from pathweave.graph.ppr import min_max, personalized_pagerank, push_pagerank, transition_matrix, Walk
from pathweave.telemetry import stage_span
from pathweave.retrieval.beam import Path, beam_search
from pathweave.retrieval.lexical import rrf
from pathweave.retrieval.strategy import RERUNS, QueryFrame, Ranking, RankingMode
from pathweave.settings import RetrievalSettings
from pathweave.graph.subgraph import NodeReader, Subgraph, build_subgraph
from pathweave.graph.frontier import Frontier, FrontierMoved
from pathweave.graph.topology import TopologyView
from pathweave.graph.visibility import acceptors

log = logging.getLogger(__name__)


@dataclass
class Stage1Seeds:
    """What the indexes returned for one query: ``props`` / ``passages`` as ``[(id, score)]``
    best first (the top ``stage1_props`` propositions and the top ``stage1_passage_seeds``
    passages: cosines, or reciprocal-rank-fused scores with lexical hits), and ``entities``
    whose names the full-text index matched to the question's terms."""

    props: list[tuple[str, float]]
    passages: list[tuple[str, float]]
    entities: list[tuple[str, float]] = field(default_factory=list)  # named in the question (lexical hits)


@dataclass
class PropRAGOutput:
    """Passage order (topology indices) and scores ``(P,)``, top paths (indices into
    ``subgraph``) with the linking entity per step, stage-2 seed entities ``{local entity
    index: weight}``, the fetched G_sub, and stage timings (ms)."""

    order: np.ndarray
    scores: np.ndarray
    paths: list[Path]
    vias: list[list[str | None]]
    seeds: dict[int, float]
    subgraph: Subgraph
    timings: dict[str, float] = field(default_factory=dict)
    view: TopologyView | None = None  # the view ranked on (a frontier's, grown by stage 1)


def _top_entities(paths: list[Path], subgraph: Subgraph, query: np.ndarray, limit: int) -> dict[int, float]:
    """Entities of ``paths`` weighted by the best score of a path containing them; top ``limit``
    (ties broken by the entity's own cosine to the query)."""
    weights: dict[int, float] = {}
    pe = subgraph.prop_entities
    for path in paths:
        for prop in path.props:
            for entity in pe.indices[pe.indptr[prop]:pe.indptr[prop + 1]]:
                weights[int(entity)] = max(weights.get(int(entity), -np.inf), path.score)
    if not weights:
        return {}
    ids = np.fromiter(weights, dtype=np.int64)
    subgraph.ensure_entities(ids)
    tie = subgraph.entity_emb[ids] @ query
    order = np.lexsort((-tie, -np.array([weights[i] for i in ids])))[:limit]
    return {int(ids[i]): weights[int(ids[i])] for i in order}


def _normalized(seeds: dict[int, float]) -> dict[int, float]:
    if not seeds:
        return {}
    keys = list(seeds)
    return dict(zip(keys, min_max(np.array([seeds[k] for k in keys])).tolist()))


def weak_passage_seeds(view: TopologyView, hits: list[tuple[str, float]],
                       weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Topology indices and seed weights ``weight x (cos - low) / (best - low)`` of the
    passage ``hits`` (spec §1 step 3, min-max over the top N passages the index returned;
    the rest get 0). Normalizing against the tenant's least similar passage instead costs one
    more vector search per query (with the negated query) and did not improve recall on
    MuSiQue (figures in docs/benchmarks-history.md)."""
    index = [view.passage_index.get(pid, -1) for pid, _ in hits]
    keep = [i for i, p in enumerate(index) if 0 <= p < view.n_passages]
    if not keep:
        return np.zeros(0, np.int64), np.zeros(0)
    values = min_max(np.asarray([hits[i][1] for i in keep]))
    return np.asarray([index[i] for i in keep], dtype=np.int64), weight * values


def stage1_reset(query_seeds: Stage1Seeds, view: TopologyView, params: RetrievalSettings) -> np.ndarray:
    """The stage-1 PPR seeds ``(E + P,)`` on ``view`` (spec §1 stage 1, steps 1-3): the top
    ``stage1_paths`` of the ``stage1_props`` nearest propositions seed their entities (sum of
    scores; the top ``seed_entities`` get 1.0), as do the entities the question names; the
    top passages get ``passage_seed_weight`` x their normalized cosine, or 1.0 when nothing
    else seeds. All zeros when nothing does."""
    n_e, n_p = view.n_entities, view.n_passages
    kept = query_seeds.props[: params.stage1_paths]
    props = [(view.prop_index.get(pid, -1), cos) for pid, cos in kept]
    props = [(r, cos) for r, cos in props if 0 <= r < view.prop_entities.shape[0]]
    reset = np.zeros(n_e + n_p)
    if props:
        rows = np.asarray([r for r, _ in props], dtype=np.int64)
        entity_score = np.asarray(view.prop_entities[rows].T @ np.asarray([c for _, c in props])).ravel()
        positive = np.flatnonzero(entity_score > 0)
        chosen = positive[np.argsort(-entity_score[positive], kind="stable")][: params.seed_entities]
        reset[chosen] = 1.0
    named = [view.entity_index.get(eid, -1) for eid, _ in query_seeds.entities[: params.lexical_entities]]
    reset[[e for e in named if 0 <= e < n_e]] = 1.0  # entities the question names join the seeds
    passages, weights = weak_passage_seeds(view, query_seeds.passages, params.passage_seed_weight)
    reset[n_e + passages] = weights
    if reset.sum() <= 0 and len(passages):
        reset[n_e + passages] = 1.0
    return reset


def stage1(query_seeds: Stage1Seeds, view: TopologyView, params: RetrievalSettings,
           in_database: Callable[[np.ndarray, float], np.ndarray | None] | None = None) -> np.ndarray:
    """Stage-1 passage scores ``(P,)`` (spec §1 stage 1) on the topology ``view``: PPR with
    ``damping_stage1`` from :func:`stage1_reset`'s seeds: ``in_database(reset, damping)``
    when given and it answers (Neo4j GDS, ``params.stage1_ppr == "gds"``), else ``power``
    (power iteration, tol 1e-6) when asked, else ``push`` (local push, error below
    ``ppr_epsilon`` x degree per node).
    """
    n_e, n_p = view.n_entities, view.n_passages
    reset = stage1_reset(query_seeds, view, params)
    if reset.sum() <= 0:
        return np.zeros(n_p)
    scores = in_database(reset, params.damping_stage1) if in_database else None
    if scores is not None:
        return scores
    if params.stage1_ppr == "power":
        walk = view.extras.get("walk") or view.keep("walk", Walk.of(transition_matrix(view.adjacency)))
        return personalized_pagerank(walk, reset, params.damping_stage1)[n_e:]
    return push_pagerank(view.adjacency, view.degree, reset, params.damping_stage1, params.ppr_epsilon)[n_e:]


def frontier_stage1(query_seeds: Stage1Seeds, frontier: Frontier,
                    params: RetrievalSettings) -> tuple[TopologyView, np.ndarray]:
    """Stage 1 on a query's frontier (:mod:`pathweave.graph.frontier`): the seeds' passages
    read (those stating the top propositions, the passage hits), :func:`stage1_reset`'s
    seeds, and the push from them reading the rows it reaches (at most
    ``frontier_passages`` passages, error below ``ppr_epsilon`` x degree where that is not
    spent): the frontier's last view and its passages' ``(P,)`` scores."""
    for _ in range(RERUNS):
        frontier.read_propositions([pid for pid, _ in query_seeds.props[: params.stage1_paths]])
        frontier.read_passages([pid for pid, _ in query_seeds.passages])
        view = frontier.view()
        reset = stage1_reset(query_seeds, view, params)
        n_e = view.n_entities
        entities, passages = np.flatnonzero(reset[:n_e]), np.flatnonzero(reset[n_e:])
        try:
            return frontier.pagerank(view, entities, reset[entities], passages, reset[n_e + passages],
                                     params.damping_stage1, params.ppr_epsilon)
        except FrontierMoved:  # started again empty under this query: read its seeds again
            continue
    if reset.sum() <= 0:  # moved under every try: the push on the last seeds' view, as it holds them
        return view, np.zeros(view.n_passages)
    return view, push_pagerank(view.adjacency, view.degree, reset, params.damping_stage1, params.ppr_epsilon)[n_e:]


def proprag(
    query: np.ndarray, query_seeds: Stage1Seeds, view: TopologyView, reader: NodeReader | None,
    params: RetrievalSettings, encode: Callable[[list[str]], np.ndarray],
    clock: Callable[[str], None] = lambda _: None,
    in_database: Callable[[np.ndarray, float], np.ndarray | None] | None = None,
    frontier: Frontier | None = None,
) -> PropRAGOutput:
    """Both stages for an L2-normalized ``(d,)`` query vector; ``clock(stage)`` marks timings
    (stage1, fetch, beam, stage2). ``reader`` reads G_sub's texts and embeddings. With a
    ``frontier``, stage 1 is :func:`frontier_stage1` and the rest runs on the view it grew
    (``PropRAGOutput.view``)."""
    if frontier is not None:
        view, first = frontier_stage1(query_seeds, frontier, params)
    else:
        first = stage1(query_seeds, view, params, in_database)
    candidates = np.flatnonzero(view.alive & (first > 0))
    stage1_order = candidates[np.argsort(-first[candidates], kind="stable")]
    clock("stage1")
    # ---- stage 2 on G_sub -------------------------------------------------------------
    sub_passages = stage1_order[: params.subgraph_passages]
    if frontier is not None:  # G_sub's synonym edges, read where the push did not need them
        view = frontier.with_synonyms(view, sub_passages)
    subgraph = build_subgraph(view, sub_passages, reader)
    clock("fetch")
    allowed = np.ones(len(subgraph.prop_ids), dtype=bool)
    paths, initial, graph = beam_search(query, subgraph, allowed, params, encode)
    clock("beam")
    exploit = _normalized(_top_entities(paths, subgraph, query, params.seeds_per_side))
    explore = _normalized(_top_entities(initial, subgraph, query, params.seeds_per_side))
    combined = {k: max(exploit.get(k, 0.0), explore.get(k, 0.0)) for k in exploit.keys() | explore.keys()}
    n_sub_e = subgraph.n_entities
    reset = np.zeros(n_sub_e + len(sub_passages))
    for entity, weight in combined.items():
        reset[entity] = weight
    dense = subgraph.passage_emb @ query
    reset[n_sub_e:] = params.passage_seed_weight * min_max(dense)
    if reset.sum() > 0:
        sub_scores = personalized_pagerank(subgraph.walk, reset, params.damping_stage2)[n_sub_e:]
    else:
        sub_scores = first[sub_passages]
    # G_sub passages ranked by stage 2, everything else below them by stage 1
    local = np.argsort(-sub_scores, kind="stable")
    rest = stage1_order[params.subgraph_passages:]
    order = np.concatenate([sub_passages[local], rest])
    final = np.full(view.n_passages, -np.inf)
    final[sub_passages] = sub_scores
    final[rest] = first[rest]  # ranked below every G_sub passage by `order`
    clock("stage2")
    subgraph.ensure_entities(np.unique(np.concatenate(
        [subgraph.prop_entities[list(p.props)].indices for p in paths] or [np.zeros(0, np.int64)])))
    vias = [[None] + [graph.via(a, b) for a, b in zip(p.props, p.props[1:])] for p in paths]
    return PropRAGOutput(order=order, scores=final, paths=paths, vias=vias, seeds=combined, subgraph=subgraph,
                         view=view)


def in_database_ppr(store, stage1_ppr: str, view: TopologyView, ppr_timings: dict[str, float]):
    """Stage-1 PPR in the database (Neo4j GDS) when asked (``stage1_ppr == "gds"``,
    setting ``retrieval.stage1_ppr``) and the backend can, mapped to the view: a
    ``run(reset, damping) -> (P,) scores | None`` for :func:`stage1`, else None. Records its
    milliseconds in ``ppr_timings``: ``stage1_gds`` when GDS answered,
    ``stage1_gds_fallback`` when it did not (projection of this graph version not ready
    yet, or a GDS error, logged by the backend) and the in-process PPR ran instead."""
    backend = store.backend
    if stage1_ppr != "gds":
        return None
    if Capability.PPR not in backend.capabilities:  # asked for GDS on a backend without it
        log.error("retrieval.stage1_ppr = gds, but the %s store has no Graph Data Science: "
                  "stage 1 runs the local push PPR", backend.name)
        ppr_timings["stage1_gds_fallback"] = 0.0
        stage_span("stage1_gds_fallback", time.time_ns(), time.time_ns())
        return None
    ids = view.entity_ids[:view.n_entities] + view.passage_ids[:view.n_passages]

    def run(reset: np.ndarray, damping: float) -> np.ndarray | None:
        seeds = {ids[i]: float(reset[i]) for i in np.flatnonzero(reset > 0)}
        started, started_ns = time.perf_counter(), time.time_ns()
        scores = backend.personalized_pagerank(store, seeds, damping, view.version)
        key = "stage1_gds" if scores is not None else "stage1_gds_fallback"
        ppr_timings[key] = round((time.perf_counter() - started) * 1000, 2)
        stage_span(key, started_ns, time.time_ns())
        if scores is None:
            return None
        return np.fromiter((scores.get(pid, 0.0) for pid in view.passage_ids[:view.n_passages]),
                           dtype=np.float64, count=view.n_passages)
    return run


def earlier_question_passages(store, vector: np.ndarray, k: int = 10, min_cos: float = 0.8) -> list[tuple[str, float]]:
    """Passages of earlier similar questions (PropRAG's extra candidates, setting
    ``apr.proprag_question_runs``): of the ``k`` question and answer runs nearest the ``(d,)``
    question ``vector`` with cosine >= ``min_cos``, the question runs, and the passages of the
    fact runs their queries sent or reused, each with the cosine of its question run:
    ``[(passage_id, cos)]``."""
    hits = [(i, cos) for i, cos in vector_search(store, "Run", vector, k, prop="memory_embedding") if cos >= min_cos]
    if not hits:
        return []
    cos_of = dict(hits)
    out: dict[str, float] = {}
    for row in store.run("apr_question_run_passages", ids=list(cos_of)):
        for pid in row["passage_ids"]:
            out[pid] = max(out.get(pid, -1.0), cos_of[row["id"]])
    return sorted(out.items(), key=lambda item: -item[1])


class PropRAGMode(RankingMode):
    """Retrieval mode ``proprag`` (spec §1): the proposition and passage vector searches
    (run concurrently), :func:`proprag` on the topology and G_sub, and the top paths (with
    the entity linking each step) and stage-2 seed entities in the result. With setting
    ``apr.proprag_question_runs``, earlier similar questions' passages join the passage
    seeds (spec §3)."""

    name = "proprag"

    def searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        """Stage 1's seeds (PropRAG §3.2, spec §1): the Proposition vector index for
        ``retrieval.stage1_props`` propositions and the Passage index for
        ``retrieval.stage1_passage_seeds`` passages (both for the embedder's device)."""
        params = resources.settings.retrieval.for_device(resources.embedder.device)
        return {"props": ("Proposition", params.stage1_props), "passages": ("Passage", params.stage1_passage_seeds)}

    def lexical_searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        """The Passage full-text index for as many passages as the vector seeds, and the
        Entity full-text index for ``retrieval.lexical_entities`` entities when set."""
        params = resources.settings.retrieval
        return {"passages_text": ("Passage", params.stage1_passage_seeds),
                **({"entities_text": ("Entity", params.lexical_entities)} if params.lexical_entities else {})}

    def rank(self, frame: QueryFrame) -> Ranking:
        """Passages by :func:`proprag` (stage 1's Personalized PageRank, on the query's
        frontier where the process holds one, in GDS for an unrestricted caller where the
        store runs it; beam search over G_sub's proposition paths; stage 2's PPR from the
        beam's entities), best first, at most ``frame.depth``, with stage 2's ``(P,)`` mass
        as scores; with G_sub, the top paths (each step's linking entity) and stage 2's
        seed entities by weight. Full-text passage hits join the passage seeds by
        :func:`~pathweave.retrieval.lexical.rrf`; earlier similar questions' passages join
        them with ``apr.proprag_question_runs`` (spec §3), those ``frame.access`` may read.
        Raises :class:`~pathweave.graph.frontier.FrontierMoved` when the frontier started
        again before the push's first round."""
        resources, view = frame.resources, frame.view
        params = resources.settings.retrieval.for_device(resources.embedder.device)
        passages = frame.found["passages"]
        if "passages_text" in frame.found:
            passages = rrf([passages, frame.found["passages_text"]])[:params.stage1_passage_seeds]
        seeds = Stage1Seeds(frame.found["props"], passages, frame.found.get("entities_text", []))
        if resources.settings.apr.proprag_question_runs:
            known = dict(seeds.passages)
            readable = frame.frontier.acceptors() if frame.frontier is not None else acceptors(view, frame.access)
            earlier = earlier_question_passages(resources.store, frame.vector)
            if readable is not None:
                readable["Passage"].prepare([pid for pid, _ in earlier])
            for pid, cos in earlier:
                if readable is not None and not readable["Passage"].accepts(pid):
                    continue
                known[pid] = max(known.get(pid, cos), cos)
            seeds.passages = sorted(known.items(), key=lambda item: -item[1])
        frame.clock("seeds")
        # GDS runs on the tenant's whole projection: a restricted caller's stage 1 runs here
        in_database = None if frame.access.restricted or frame.frontier is not None else \
            in_database_ppr(resources.store, params.stage1_ppr, view, frame.ppr_timings)
        out = proprag(frame.vector, seeds, view, frame.reader, params, resources.embedder.encode, frame.clock,
                      in_database, frame.frontier)
        view = out.view
        subgraph = out.subgraph
        top = out.order[:frame.depth]
        paths = [
            ReasoningPath(path_id=f"{frame.query_id}:{rank}", rank=rank, score=round(path.score, 6),
                          steps=[PathStep(prop_id=subgraph.prop_ids[p], text=subgraph.prop_texts[p], via=via)
                                 for p, via in zip(path.props, vias)])
            for rank, (path, vias) in enumerate(zip(out.paths, out.vias), 1)
        ]
        subgraph.ensure_entities(list(out.seeds))
        seed_entities = [
            SeedEntity(entity_id=subgraph.entity_ids[e], name=subgraph.entity_names[e], weight=round(w, 6))
            for e, w in sorted(out.seeds.items(), key=lambda item: -item[1])
        ]
        return Ranking([view.passage_ids[i] for i in top], out.scores[top].tolist(), subgraph, paths, seed_entities,
                       view)
