"""Synonymy edges between entities (spec §1): cosine kNN over entity
embeddings through the store's vector index, an edge when cos >= threshold (0.8),
at most ``max_per_entity`` (100) per entity, entities with <= 2 alphanumeric
characters skipped. (On Neo4j with GDS the backend's ``gds.knn`` does it instead for a
bulk load, :func:`tenant_knn_pays`.)
"""

from __future__ import annotations

import math

import numpy as np

from pathweave.text import alnum_count

#: ``gds.knn`` (NN-descent) compares all of the tenant's entities whatever changed, while the
#: vector index costs one search per new entity: GDS runs synonymy only where the new entities
#: are at least this share of the tenant's (a first or bulk load). Figures on Neo4j 5.26 +
#: GDS 2.13: see docs/benchmarks.md, "Synonymy on Neo4j".
TENANT_KNN_SHARE = 0.25


def tenant_knn_count_bound(new_entities: int) -> int:
    """The tenant size from which :func:`tenant_knn_pays` answers no for ``new_entities``: the
    tenant's entities need counting only up to it."""
    return math.ceil(new_entities / TENANT_KNN_SHARE) + 1


def tenant_knn_pays(new_entities: int, tenant_entities: int) -> bool:
    """Whether one ``gds.knn`` over the tenant's ``tenant_entities`` entities (the new ones
    included) beats ``new_entities`` vector-index searches (:data:`TENANT_KNN_SHARE`). A
    one-document ingest into a large tenant takes the index, so its cost does not grow with
    the tenant (freshness)."""
    return new_entities > 0 and new_entities >= TENANT_KNN_SHARE * tenant_entities


def write_synonyms(store, ids: list[str], vectors: np.ndarray, names: dict[str, str],
                   threshold: float = 0.8, max_per_entity: int = 100) -> int:
    """Synonymy edges from the entities ``ids`` (``(n, d)`` L2-normalized ``vectors``, their
    normalized ``names``) to the tenant's entities, found with the store's Entity vector
    index (:func:`pathweave.store.backends.vector_knn`; no tenant-wide entity matrix is read),
    and written as SYNONYM edges (each unordered pair once, src < dst). Call after the
    entities are committed. Returns the number of pairs written."""
    from pathweave.store.backends import vector_knn

    eligible = [i for i, entity in enumerate(ids) if alnum_count(names.get(entity, "")) > 2]
    if not eligible:
        return 0
    rows = vector_knn(store, "Entity", [ids[i] for i in eligible], np.asarray(vectors)[eligible],
                      max_per_entity, threshold)
    by_source: dict[str, list[dict]] = {}
    for row in rows:
        if row["dst"] != row["src"] and alnum_count(row["norm_name"]) > 2 and row["cosine"] >= threshold:
            by_source.setdefault(row["src"], []).append(row)
    pairs: dict[tuple[str, str], float] = {}
    for src, hits in by_source.items():
        for row in sorted(hits, key=lambda r: -r["cosine"])[:max_per_entity]:
            key = (src, row["dst"]) if src < row["dst"] else (row["dst"], src)
            pairs[key] = max(pairs.get(key, 0.0), min(1.0, row["cosine"]))
    return store.write("upsert_synonyms", [{"src": a, "dst": b, "score": round(s, 6)} for (a, b), s in pairs.items()])
