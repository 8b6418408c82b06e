"""Synonymy edges between entities (spec §1): cosine kNN over entity
embeddings, an edge when cos >= threshold (0.8), at most ``max_per_entity``
(100) per entity, entities with <= 2 alphanumeric characters skipped.
"""

from __future__ import annotations

import numpy as np

from pathweave.text import alnum_count


def synonym_pairs(
    query_ids: list[str], query_vectors: np.ndarray, all_ids: list[str], all_vectors: np.ndarray,
    names: dict[str, str], threshold: float = 0.8, max_per_entity: int = 100, block: int = 2048,
) -> list[dict]:
    """Synonym edges from each query entity to its nearest entities.

    ``query_vectors`` ``(m, d)`` and ``all_vectors`` ``(n, d)`` float32, L2-normalized;
    ``names`` maps id -> normalized name. Returns rows ``{src, dst, score}`` with
    each unordered pair once (src < dst).
    """
    if not query_ids or not all_ids:
        return []
    eligible = np.array([alnum_count(names.get(i, "")) > 2 for i in all_ids])
    all_vectors = np.asarray(all_vectors, dtype=np.float32)
    pairs: dict[tuple[str, str], float] = {}
    for start in range(0, len(query_ids), block):
        ids = query_ids[start:start + block]
        sims = np.asarray(query_vectors[start:start + block], dtype=np.float32) @ all_vectors.T
        sims[:, ~eligible] = -1.0
        for row, qid in enumerate(ids):
            if alnum_count(names.get(qid, "")) <= 2:
                continue
            scores = sims[row]
            hits = np.flatnonzero(scores >= threshold)
            if len(hits) > max_per_entity + 1:
                hits = hits[np.argpartition(-scores[hits], max_per_entity)[: max_per_entity + 1]]
            hits = hits[np.argsort(-scores[hits])]
            kept = 0
            for index in hits:
                other = all_ids[index]
                if other == qid:
                    continue
                key = (qid, other) if qid < other else (other, qid)
                pairs[key] = max(pairs.get(key, 0.0), float(scores[index]))
                kept += 1
                if kept >= max_per_entity:
                    break
    return [{"src": a, "dst": b, "score": round(s, 6)} for (a, b), s in pairs.items()]
