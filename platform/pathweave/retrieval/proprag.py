"""PropRAG two-stage retrieval (PropRAG paper §3; spec §1), LLM-free.

Stage 1: propositions -> entity seeds (+ weak passage seeds) -> Personalized
PageRank over the whole entity–passage graph -> subgraph G_sub of the top K
passages. Stage 2: beam search over proposition paths inside G_sub -> entity
seeds from the best paths -> PPR on G_sub -> final passage ranking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pathweave.ppr import min_max, personalized_pagerank, transition_matrix
from pathweave.retrieval.beam import Path, PropositionGraph, beam_search
from pathweave.settings import PropRAGParams
from pathweave.snapshot import GraphSnapshot


@dataclass
class PropRAGOutput:
    """Passage order and scores ``(P,)``, top paths with the linking entity per step,
    stage-2 seed entities ``{entity index: weight}``, and stage timings (ms)."""

    order: np.ndarray
    scores: np.ndarray
    paths: list[Path]
    vias: list[list[str | None]]
    seeds: dict[int, float]
    timings: dict[str, float] = field(default_factory=dict)


def _top_entities(paths: list[Path], snapshot: GraphSnapshot, query: np.ndarray, limit: int) -> dict[int, float]:
    """Entities of ``paths`` weighted by the best score of a path containing them; top ``limit``
    (ties broken by the entity's own cosine to the query)."""
    weights: dict[int, float] = {}
    pe = snapshot.prop_entities
    for path in paths:
        for prop in path.props:
            for entity in pe.indices[pe.indptr[prop]:pe.indptr[prop + 1]]:
                weights[int(entity)] = max(weights.get(int(entity), -np.inf), path.score)
    if not weights:
        return {}
    ids = np.fromiter(weights, dtype=np.int64)
    tie = snapshot.entity_emb[ids] @ query
    order = np.lexsort((-tie, -np.array([weights[i] for i in ids])))[:limit]
    return {int(ids[i]): weights[int(ids[i])] for i in order}


def _normalized(seeds: dict[int, float]) -> dict[int, float]:
    if not seeds:
        return {}
    keys = list(seeds)
    return dict(zip(keys, min_max(np.array([seeds[k] for k in keys])).tolist()))


def proprag(
    query: np.ndarray, snapshot: GraphSnapshot, params: PropRAGParams,
    encode: Callable[[list[str]], np.ndarray], clock: Callable[[str], None] = lambda _: None,
    stage1_ppr: Callable[[np.ndarray, float], np.ndarray | None] = lambda reset, damping: None,
) -> PropRAGOutput:
    """Run both stages for an L2-normalized ``(d,)`` query vector; ``clock(stage)`` marks timings.

    ``stage1_ppr(reset (E+P,), damping) -> (P,) | None`` lets the store's database run the
    whole-graph PPR (Neo4j GDS); None falls back to the in-process power iteration.
    """
    n_e, n_p = snapshot.n_entities, len(snapshot.passage_ids)
    dense = snapshot.passage_emb @ query
    # ---- stage 1 -------------------------------------------------------------------
    prop_scores = snapshot.prop_emb @ query
    top = np.argsort(-prop_scores)[: params.stage1_props][: params.stage1_paths]
    entity_score = np.asarray(snapshot.prop_entities[top].T @ prop_scores[top]).ravel()
    seeds = np.zeros(n_e + n_p)
    positive = np.flatnonzero(entity_score > 0)
    chosen = positive[np.argsort(-entity_score[positive])][: params.seed_entities]
    seeds[chosen] = 1.0
    seeds[n_e:] = params.passage_seed_weight * min_max(dense)
    if seeds.sum() <= 0:
        seeds[n_e:] = 1.0
    stage1 = stage1_ppr(seeds, params.damping_stage1)
    if stage1 is None:
        stage1 = personalized_pagerank(snapshot.walk, seeds, params.damping_stage1)[n_e:]
    stage1_order = np.argsort(-stage1, kind="stable")
    clock("stage1")
    # ---- stage 2 -------------------------------------------------------------------
    sub_passages = stage1_order[: params.subgraph_passages]
    allowed = np.asarray(snapshot.states[sub_passages].sum(axis=0)).ravel() > 0
    paths, initial, graph = beam_search(query, snapshot, allowed, params, encode)
    clock("beam")
    exploit = _normalized(_top_entities(paths, snapshot, query, params.seeds_per_side))
    explore = _normalized(_top_entities(initial, snapshot, query, params.seeds_per_side))
    combined = {k: max(exploit.get(k, 0.0), explore.get(k, 0.0)) for k in exploit.keys() | explore.keys()}
    sub_entities = np.flatnonzero(np.asarray(snapshot.passage_entities[sub_passages].sum(axis=0)).ravel() > 0)
    sub_entities = np.union1d(sub_entities, np.fromiter(combined, dtype=np.int64))
    nodes = np.concatenate([sub_entities, n_e + sub_passages])
    local = {int(node): i for i, node in enumerate(nodes)}
    reset = np.zeros(len(nodes))
    for entity, weight in combined.items():
        reset[local[entity]] = weight
    reset[len(sub_entities):] = params.passage_seed_weight * min_max(dense[sub_passages])
    final = np.full(n_p, -np.inf)
    if reset.sum() > 0:
        sub_adjacency = snapshot.adjacency[nodes][:, nodes]
        stage2 = personalized_pagerank(transition_matrix(sub_adjacency), reset, params.damping_stage2)
        sub_scores = stage2[len(sub_entities):]
    else:
        sub_scores = stage1[sub_passages]
    # G_sub passages ranked by stage 2, everything else below them by stage 1
    sub_order = sub_passages[np.argsort(-sub_scores, kind="stable")]
    rest = stage1_order[params.subgraph_passages:]
    order = np.concatenate([sub_order, rest])
    final[sub_passages] = sub_scores
    final[rest] = stage1[rest]  # ranked below every G_sub passage by `order`
    clock("stage2")
    vias = [[None] + [graph.via(a, b) for a, b in zip(p.props, p.props[1:])] for p in paths]
    return PropRAGOutput(order=order, scores=final, paths=paths, vias=vias, seeds=combined)
