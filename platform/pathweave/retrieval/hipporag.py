"""HippoRAG 2 baseline (spec §2), LLM-free variant, for comparison runs.

Facts (triples) embedded as ``str((s, p, o))`` lower-cased at ingestion and found through
the store's Triple vector index; the top 5 facts seed their entities with
``fact_score / |passages of the entity|`` averaged over occurrences (top 5 entities kept);
the top passages of the passage index get ``0.05 x`` their dense score min-max
normalized over the passages the index returned (``weak_passage_seeds``; the facts' scores
likewise over the facts returned); PPR
with damping 0.5 on a graph of triple edges (+1 each way), synonymy edges (cosine >= 0.8,
overwriting) and passage–entity edges, built from the tenant's topology. No facts ->
dense ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweave.graph.ppr import Walk, min_max, personalized_pagerank, transition_matrix
from pathweave.retrieval.proprag import weak_passage_seeds
from pathweave.retrieval.strategy import QueryFrame, Ranking, RankingMode
from pathweave.graph.topology import TopologyView
from pathweave.graph.visibility import visible_view

TOP_FACTS = 5
TOP_ENTITIES = 5
PASSAGE_SEED = 0.05
"""Weight of the passage seeds (times their normalized cosine) in the PPR reset (spec §2)."""
DAMPING = 0.5


@dataclass
class HippoGraph:
    """The PPR walk over entities + passages of a topology view and the passage count of
    every entity ``(E,)``."""

    walk: Walk
    passages_per_entity: np.ndarray


def build_hippo_graph(view: TopologyView) -> HippoGraph:
    """The HippoRAG 2 graph of a topology view (once per view)."""
    n_e, n_p = view.n_entities, view.n_passages
    passages, triples = view.assertions
    alive = np.unique(triples)
    ends = view.triple_ends[alive] if len(alive) else np.zeros((0, 2), np.int64)
    ends = ends[(ends[:, 0] < n_e) & (ends[:, 1] < n_e)]
    edges = sp.csr_matrix((np.ones(2 * len(ends)), (np.r_[ends[:, 0], ends[:, 1]], np.r_[ends[:, 1], ends[:, 0]])),
                          shape=(n_e, n_e))
    edges.sum_duplicates()
    synonyms = view.synonyms
    mask = synonyms.copy()
    mask.data[:] = 1.0
    entity_block = (edges - edges.multiply(mask) + synonyms).tocsr()  # synonymy overwrites
    if len(passages):
        link_rows = np.r_[passages, passages]
        link_cols = np.r_[view.triple_ends[triples, 0], view.triple_ends[triples, 1]]
        keep = link_cols < n_e
        passage_entity = sp.csr_matrix((np.ones(int(keep.sum())), (link_rows[keep], link_cols[keep])), shape=(n_p, n_e))
        passage_entity.sum_duplicates()
        passage_entity.data[:] = 1.0
    else:
        passage_entity = sp.csr_matrix((n_p, n_e))
    adjacency = sp.bmat([[entity_block, passage_entity.T], [passage_entity, None]], format="csr")
    return HippoGraph(walk=Walk.of(transition_matrix(adjacency)),
                      passages_per_entity=np.asarray(passage_entity.sum(axis=0)).ravel())


def hipporag2(view: TopologyView, graph: HippoGraph, facts: list[tuple[str, float]],
              passage_seeds: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Passage scores ``(P,)`` (topology order) of one query.

    ``facts``: the nearest facts ``[(triple_id, cosine)]`` best first (at least the top 5);
    their cosines are min-max normalized over the facts given; ``passage_seeds``:
    (topology indices, weights) of the weak passage seeds. Without facts, the passage seeds
    alone (a dense ranking of the top passages)."""
    n_e = view.n_entities
    reset = np.zeros(n_e + view.n_passages)
    reset[n_e + passage_seeds[0]] = passage_seeds[1]
    known = [(view.triple_index.get(t, -1), cos) for t, cos in facts]
    known = [(t, cos) for t, cos in known if 0 <= t < len(view.triple_ends)]
    if known:
        fact_scores = min_max(np.asarray([cos for _, cos in known]))
        weights: dict[int, float] = {}
        counts: dict[int, int] = {}
        for (t, _), score in list(zip(known, fact_scores))[:TOP_FACTS]:
            for entity in view.triple_ends[t]:
                entity = int(entity)
                if entity >= n_e:
                    continue
                weight = score
                if graph.passages_per_entity[entity] > 0:
                    weight /= graph.passages_per_entity[entity]
                weights[entity] = weights.get(entity, 0.0) + weight
                counts[entity] = counts.get(entity, 0) + 1
        mean = {e: w / counts[e] for e, w in weights.items()}
        for entity in sorted(mean, key=lambda e: -mean[e])[:TOP_ENTITIES]:
            reset[entity] = mean[entity]
    if reset.sum() <= 0:
        return np.zeros(view.n_passages)
    if not known:
        return reset[n_e:]
    return personalized_pagerank(graph.walk, reset, DAMPING)[n_e:]


class HippoRAG2Mode(RankingMode):
    """Retrieval mode ``hipporag2`` (spec §2, baseline): fact and passage vector searches,
    then :func:`hipporag2` on the topology (its walk built once per graph version). Its
    power iteration needs the tenant's whole graph: where the process holds frontiers, the
    whole topology is read for it, and refused above ``query.whole_max_passages``
    (:meth:`~pathweave.retrieval.resources.QueryResources.topology`)."""

    name = "hipporag2"

    def searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        """The Triple vector index for the fact seeds (at least :data:`TOP_FACTS`) and the
        Passage index for the passage seeds (``retrieval.stage1_passage_seeds``; spec §2)."""
        params = resources.settings.retrieval.for_device(resources.embedder.device)
        return {"facts": ("Triple", max(TOP_FACTS, 20)), "passages": ("Passage", params.stage1_passage_seeds)}

    def rank(self, frame: QueryFrame) -> Ranking:
        """Passages by HippoRAG 2's Personalized PageRank (:func:`hipporag2`: fact-seeded
        entities, passage seeds weighted :data:`PASSAGE_SEED`, damping :data:`DAMPING`), best
        first, at most ``frame.depth``, with ``(P,)`` PPR mass as scores; on the whole
        topology (read for it where the process holds frontiers; refused with
        :class:`~pathweave.errors.PathweaveError` above ``query.whole_max_passages``)."""
        view = frame.view
        if frame.frontier is not None:
            view = visible_view(frame.resources.topology(view.version, whole=True).view(), frame.access)
        seeds = weak_passage_seeds(view, frame.found["passages"], PASSAGE_SEED)
        frame.clock("seeds")
        graph = view.extras.get("hipporag2") or view.keep("hipporag2", build_hippo_graph(view))
        ranked = hipporag2(view, graph, frame.found["facts"], seeds)
        candidates = np.flatnonzero(view.alive & (ranked > 0))
        order = candidates[np.argsort(-ranked[candidates], kind="stable")][:frame.depth]
        frame.clock("ppr")
        return Ranking([view.passage_ids[i] for i in order], ranked[order].tolist(), view=view)
