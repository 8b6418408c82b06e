"""HippoRAG 2 baseline (spec §2), LLM-free variant, for comparison runs.

Facts (triples) embedded as ``str((s, p, o))`` lower-cased; the top 5 facts
seed their entities with ``fact_score / |passages of the entity|`` averaged
over occurrences (top 5 entities kept); passages get ``0.05 x`` min-max dense
score; PPR with damping 0.5 on a graph of triple edges (+1 each way),
synonymy edges (cosine >= 0.8, overwriting) and passage–entity edges.
No facts -> dense ranking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweave.ppr import Walk, min_max, personalized_pagerank, transition_matrix
from pathweave.snapshot import GraphSnapshot

TOP_FACTS = 5
TOP_ENTITIES = 5
PASSAGE_SEED = 0.05
DAMPING = 0.5


@dataclass
class HippoGraph:
    """Facts ``(F, d)`` and their entity indices, the PPR walk (transition prepared for
    power iteration) over entities + passages, and the passage count of every entity ``(E,)``."""

    fact_emb: np.ndarray
    fact_entities: list[tuple[int, int]]
    walk: Walk
    passages_per_entity: np.ndarray


def build_hippo_graph(snapshot: GraphSnapshot, encode: Callable[[list[str]], np.ndarray]) -> HippoGraph:
    """Build (and embed the facts of) the HippoRAG 2 graph for a snapshot."""
    e_index = {e: i for i, e in enumerate(snapshot.entity_ids)}
    p_index = {p: i for i, p in enumerate(snapshot.passage_ids)}
    n_e, n_p = snapshot.n_entities, len(snapshot.passage_ids)
    facts: dict[str, tuple[str, int, int]] = {}
    links: set[tuple[int, int]] = set()
    for row in snapshot.triples:
        s, o = e_index.get(row["subject_id"]), e_index.get(row["object_id"])
        p = p_index.get(row["passage_id"])
        if s is None or o is None:
            continue
        text = str((row["subject"].lower(), row["relation"].lower(), row["object"].lower()))
        facts.setdefault(row["triple_id"], (text, s, o))
        if p is not None:
            links.update({(p, s), (p, o)})
    values = list(facts.values())
    entity_block = sp.lil_matrix((n_e, n_e))
    for _, s, o in values:
        entity_block[s, o] += 1.0
        entity_block[o, s] += 1.0
    entity_block = entity_block.tocsr()
    syn = snapshot.synonyms.tocoo()
    entity_block = entity_block.tolil()
    for a, b, score in zip(syn.row, syn.col, syn.data):
        entity_block[a, b] = score  # synonymy overwrites
    entity_block = entity_block.tocsr()
    if links:
        rows, cols = zip(*links)
        passage_entity = sp.csr_matrix((np.ones(len(links)), (rows, cols)), shape=(n_p, n_e))
    else:
        passage_entity = sp.csr_matrix((n_p, n_e))
    adjacency = sp.bmat([[entity_block, passage_entity.T], [passage_entity, None]], format="csr")
    return HippoGraph(
        fact_emb=encode([v[0] for v in values]),
        fact_entities=[(s, o) for _, s, o in values],
        walk=Walk.of(transition_matrix(adjacency)),
        passages_per_entity=np.asarray(passage_entity.sum(axis=0)).ravel(),
    )


def hipporag2(query: np.ndarray, snapshot: GraphSnapshot, graph: HippoGraph) -> tuple[np.ndarray, np.ndarray]:
    """Passage order and scores ``(P,)`` for an L2-normalized ``(d,)`` query."""
    n_e = snapshot.n_entities
    dense = snapshot.passage_emb @ query
    if len(graph.fact_entities) == 0:
        return np.argsort(-dense, kind="stable"), dense
    fact_scores = min_max(graph.fact_emb @ query)
    top = np.argsort(-fact_scores, kind="stable")[:TOP_FACTS]
    weights: dict[int, float] = {}
    counts: dict[int, int] = {}
    for f in top:
        for entity in graph.fact_entities[f]:
            weight = fact_scores[f]
            if graph.passages_per_entity[entity] > 0:
                weight /= graph.passages_per_entity[entity]
            weights[entity] = weights.get(entity, 0.0) + weight
            counts[entity] = counts.get(entity, 0) + 1
    mean = {e: w / counts[e] for e, w in weights.items()}
    keep = sorted(mean, key=lambda e: -mean[e])[:TOP_ENTITIES]
    reset = np.zeros(n_e + len(snapshot.passage_ids))
    for entity in keep:
        reset[entity] = mean[entity]
    reset[n_e:] = PASSAGE_SEED * min_max(dense)
    if reset.sum() <= 0:
        return np.argsort(-dense, kind="stable"), dense
    scores = personalized_pagerank(graph.walk, reset, DAMPING)[n_e:]
    return np.argsort(-scores, kind="stable"), scores
