"""Coarse and fine run scores (APR, spec §3 "Coarse score" / "Fine score"; paper §2.4, App. A.3).

Coarse (symbol space): ``w_ent x max cos(entities of q, entities of run) + w_rel x max
cos(relations of q, relations of run)``. Fine (triple lines): on ``S = cos(query lines,
candidate lines)`` (``(nq, nc)``), the sum of

- RelTopT: mean of the top ``t`` entries of S;
- Coverage: ``w_cov x`` fraction of query lines with ``max_j S_ij >= coverage_min``;
- many-to-many: ``w_mp x log1p(sum sigmoid((S - pair_center) / pair_temperature) / sqrt(nq nc))``;
- 1:1 matching: greedily the largest unused entries ``>= match_min`` (one per row and
  column): ``w_11 x sum / sqrt(matches)`` (0 without a match);
- whole-chunk gate: ``w_whole x sigmoid((s - whole_center) / whole_temperature) x s / sqrt(nc)``
  with ``s`` the cosine of the concatenated texts.

The thresholds apply to S itself (the reference divides S by nq first; spec: don't).
"""

from __future__ import annotations

import numpy as np

from pathweave.settings import AprSettings


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def coarse_score(query_entities: np.ndarray, query_relations: np.ndarray, run_entities: np.ndarray,
                 run_relations: np.ndarray, entity_weight: float = 1.0, relation_weight: float = 0.3) -> float:
    """Coarse score of one run: ``entity_weight x max cos`` over the ``(a, d)`` query and
    ``(b, d)`` run entity vectors ``+ relation_weight x max cos`` over the relation vectors
    (all L2-normalized; an empty side contributes 0)."""
    def best(a: np.ndarray, b: np.ndarray) -> float:
        if len(a) == 0 or len(b) == 0:
            return 0.0
        return float(np.max(a @ b.T))
    return entity_weight * best(query_entities, run_entities) + relation_weight * best(query_relations, run_relations)


def greedy_matching(S: np.ndarray, minimum: float) -> list[float]:
    """Entries of a greedy 1:1 matching on ``S``: repeatedly the largest entry ``>= minimum``
    whose row and column are both unused. Returns the matched values, largest first."""
    order = np.argsort(-S, axis=None, kind="stable")
    rows, cols, out = set(), set(), []
    for flat in order:
        i, j = divmod(int(flat), S.shape[1])
        value = float(S[i, j])
        if value < minimum:
            break
        if i in rows or j in cols:
            continue
        rows.add(i)
        cols.add(j)
        out.append(value)
    return out


def fine_terms(S: np.ndarray, whole: float, params: AprSettings = AprSettings()) -> dict[str, float]:
    """The five weighted terms of the fine score of one candidate (their sum is the score).

    ``S``: ``(nq, nc)`` cosines between the query's and the candidate's line embeddings;
    ``whole``: cosine between the concatenated query text and candidate text; ``params``:
    the thresholds and weights of section ``apr``. Raises ValueError on an empty ``S``.
    """
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or S.size == 0:
        raise ValueError("S must be a non-empty (nq, nc) matrix")
    nq, nc = S.shape
    flat = np.sort(S, axis=None)[::-1]
    matches = greedy_matching(S, params.match_min)
    return {
        "rel_top_t": float(flat[:params.fine_top_t].mean()),
        "coverage": params.w_coverage * float(np.mean(S.max(axis=1) >= params.coverage_min)),
        "many_to_many": params.w_pairs * float(np.log1p(
            _sigmoid((S - params.pair_center) / params.pair_temperature).sum() / np.sqrt(nq * nc))),
        "matching": params.w_matching * (sum(matches) / np.sqrt(len(matches)) if matches else 0.0),
        "whole": params.w_whole * float(_sigmoid((whole - params.whole_center) / params.whole_temperature))
                 * whole / np.sqrt(nc),
    }


def fine_score(S: np.ndarray, whole: float, params: AprSettings = AprSettings()) -> float:
    """The fine score of one candidate run: the sum of :func:`fine_terms`."""
    return float(sum(fine_terms(S, whole, params).values()))


def answer_quota(answers: int, top_m: int = 20, share: float = 0.1) -> int:
    """Runs kept from the answers channel: ``min(max(1, floor(share x answers)), top_m)``."""
    return min(max(1, int(np.floor(share * answers))), top_m)
