"""LLM-free beam search over proposition paths (PropRAG §3.3; spec §1 stage 2, steps 1-4).

Works on G_sub (:class:`~pathweave.graph.subgraph.Subgraph`, the propositions of the stage-1
passages fetched from the store) restricted to its *allowed* propositions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pathweave.settings import RetrievalSettings
from pathweave.graph.subgraph import Subgraph


@dataclass(frozen=True)
class Path:
    """Proposition indices (into the subgraph) in order, and the path score."""

    props: tuple[int, ...]
    score: float


def _entity_reach(subgraph: Subgraph, synonym_step_min: float) -> sp.csr_matrix:
    """``(E, E)`` binary: an entity reaches itself and its synonyms scoring >= ``synonym_step_min``."""
    synonyms = subgraph.synonyms.copy()
    synonyms.data = (synonyms.data >= synonym_step_min).astype(np.float64)
    synonyms.eliminate_zeros()
    return (sp.identity(subgraph.n_entities, format="csr") + synonyms).tocsr()


def _linked(mentions: sp.csr_matrix, entity_reach: sp.csr_matrix) -> sp.csr_matrix:
    """``(R, R)``: propositions sharing an exact or synonymous entity (sorted rows), so a
    step's neighbours are one row slice instead of two sparse row selections; ``mentions``
    ``(R, E)``, ``entity_reach`` ``(E, E)`` (:func:`_entity_reach`)."""
    linked = (mentions @ entity_reach @ mentions.T).tocsr()
    linked.sort_indices()
    return linked


class PropositionGraph:
    """Neighbourhoods between allowed propositions: sharing an exact entity or a
    synonymous one (SYNONYM score >= ``synonym_step_min``)."""

    def __init__(self, subgraph: Subgraph, allowed: np.ndarray, synonym_step_min: float) -> None:
        self.subgraph = subgraph
        self.allowed = allowed  # (R,) bool
        # whole-graph matrices, built once per subgraph and threshold (kept in its extras)
        key = ("neighbourhoods", synonym_step_min)
        if key not in subgraph.extras:
            reach = _entity_reach(subgraph, synonym_step_min)
            subgraph.extras[key] = (reach, _linked(subgraph.prop_entities, reach))
        self.entity_reach, self.linked = subgraph.extras[key]  # (E, E), (R, R)

    def entities(self, prop: int) -> np.ndarray:
        """``(k,)`` int: the entities (G_sub indices) proposition ``prop`` mentions."""
        pe = self.subgraph.prop_entities
        return pe.indices[pe.indptr[prop]:pe.indptr[prop + 1]]

    def neighbours(self, prop: int) -> np.ndarray:
        """``(k,)`` int: the allowed propositions linked to ``prop`` through an exact or synonymous entity."""
        linked = self.linked
        props = linked.indices[linked.indptr[prop]:linked.indptr[prop + 1]]
        return props[self.allowed[props]]

    def via(self, previous: int, current: int) -> str | None:
        """Name of an entity linking two steps (exact first, then synonym), or None for a jump."""
        names = self.subgraph.entity_names
        prev, cur = set(self.entities(previous).tolist()), self.entities(current).tolist()
        for entity in cur:
            if entity in prev:
                return names[entity]
        for entity in cur:
            linked = self.entity_reach[entity].indices
            if any(int(x) in prev for x in linked):
                return names[entity]
        return None


def beam_search(
    query: np.ndarray, subgraph: Subgraph, allowed: np.ndarray, params: RetrievalSettings,
    encode: Callable[[list[str]], np.ndarray],
) -> tuple[list[Path], list[Path], PropositionGraph]:
    """Beam search from the best allowed propositions.

    ``query``: ``(d,)`` L2-normalized; ``allowed``: ``(R,)`` bool; ``params``: beam width B,
    jump points, re-scored candidates M (``rescore_top``; None counts as 0) at the levels up to
    ``rescore_until_depth`` (None: every level), L_max,
    paths kept, SYNONYM step threshold (spec §1 defaults); ``encode``: texts ->
    ``(n, d)`` normalized (used to re-score the top M candidates by their
    concatenated text; that score replaces the mean-embedding score).
    Returns ``(top_paths, initial_paths, graph)``: at most ``top_paths`` paths of the
    pool (initial B paths + best B of each depth), and the B initial paths.
    """
    graph = PropositionGraph(subgraph, allowed, params.synonym_step_min)
    candidates = np.flatnonzero(allowed)
    if len(candidates) == 0:
        return [], [], graph
    scores = subgraph.prop_emb[candidates] @ query
    order = candidates[np.argsort(-scores, kind="stable")]
    cosine = dict(zip(candidates.tolist(), scores.tolist()))
    initial = [Path((int(p),), float(cosine[int(p)])) for p in order[: params.beam_width]]
    jumps = [int(p) for p in order[: params.jump_points]]
    pool = list(initial)
    beam = list(initial)
    for depth in range(2, params.max_depth + 1):
        expanded: dict[frozenset, tuple[int, ...]] = {}
        for path in beam:
            for nxt in list(graph.neighbours(path.props[-1])) + jumps:
                nxt = int(nxt)
                if nxt in path.props:
                    continue
                new = path.props + (nxt,)
                expanded.setdefault(frozenset(new), new)
        if not expanded:
            break
        paths = list(expanded.values())
        means = subgraph.prop_emb[np.asarray(paths)].mean(axis=1)  # every path here has `depth` steps
        means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
        path_scores = means @ query
        ranked = np.argsort(-path_scores, kind="stable")
        rescore = params.rescore_until_depth is None or depth <= params.rescore_until_depth
        if rescore and len(paths) > params.beam_width and (params.rescore_top or 0) > 0:
            top = ranked[: params.rescore_top]
            texts = [" ".join(subgraph.prop_texts[i] for i in paths[j]) for j in top]
            rescored = encode(texts) @ query
            path_scores = path_scores.copy()
            path_scores[top] = rescored
            ranked = top[np.argsort(-rescored, kind="stable")]
        beam = [Path(paths[j], float(path_scores[j])) for j in ranked[: params.beam_width]]
        pool.extend(beam)
    pool.sort(key=lambda p: -p.score)
    return pool[: params.top_paths], initial, graph
