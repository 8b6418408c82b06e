"""Synonymy edges between entities (spec §1): cosine kNN over entity
embeddings through the store's vector index, an edge when cos >= threshold (0.8),
at most ``max_per_entity`` (100) per entity, entities with <= 2 alphanumeric
characters skipped. (On Neo4j with GDS the backend's ``gds.knn`` does it instead for a
bulk load, :func:`tenant_knn_pays`.)
"""

from __future__ import annotations

import math

import numpy as np

from pathweave.store.graph_store import batched
from pathweave.text import alnum_count

#: ``gds.knn`` (NN-descent) compares all of the tenant's entities whatever changed, while the
#: vector index costs one search per new entity: GDS runs synonymy only where the new entities
#: are at least this share of the tenant's (a first or bulk load). Figures on Neo4j 5.26 +
#: GDS 2.13: see docs/benchmarks-history.md, "Synonymy on Neo4j".
TENANT_KNN_SHARE = 0.25
#: Entity ids or pairs per statement of the synonym cap.
BATCH = 1000


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


def beyond_cap(entities: set[str], rows: list[dict], k: int) -> list[tuple[str, str]]:
    """The SYNONYM edges beyond the cap: of the ``rows`` ``{src, dst, score}`` (each edge once
    or twice, either direction; every edge of each entity in ``entities``), the pairs ``(a, b)``,
    ``a < b``, outside the ``k`` strongest edges of an endpoint in ``entities`` (ties broken by
    the other end's id, so the cut is the same however the rows are ordered). Pure logic."""
    edges: dict[tuple[str, str], float] = {}
    for row in rows:
        if row["src"] != row["dst"]:
            a, b = sorted((row["src"], row["dst"]))
            edges[(a, b)] = float(row["score"])
    ranked: dict[str, list[tuple[float, str]]] = {}
    for (a, b), score in edges.items():
        for end, other in ((a, b), (b, a)):
            if end in entities:
                ranked.setdefault(end, []).append((-score, other))
    cut: set[tuple[str, str]] = set()
    for end, others in ranked.items():
        if len(others) > k:
            cut.update(tuple(sorted((end, other))) for _, other in sorted(others)[k:])
    return sorted(cut)


def over_cap(store, k: int) -> list[str]:
    """The tenant's entities with more than ``k`` SYNONYM edges (statement ``synonym_over_cap``:
    one pass over the tenant's entities, for the bulk path whose ``gds.knn`` rewrote the
    tenant's edges); none when ``k < 1``."""
    return [row["id"] for row in store.run("synonym_over_cap", k=int(k))] if k >= 1 else []


def cap_synonyms(store, ids: list[str], k: int) -> int:
    """Keep at most ``k`` SYNONYM edges at each end (spec §1's ``synonym_max`` per entity,
    held for the entities a search found as well as for the searching ones, so the tenant's
    edges stay O(entities) when many new entities share a common neighbour): reads the edges
    of the entities ``ids`` and of those of their neighbours that hold more than ``k``
    (statements ``topology_entity_synonyms``, ``synonym_degrees``; an entity that no edge of
    ``ids`` touches kept its edges), removes the edges beyond the cap (:func:`beyond_cap`,
    statement ``delete_synonyms``) and records both ends as changed, all in one transaction.
    Two batches capping one entity at once: on ArcadeDB the later commit conflicts and starts
    over; on Neo4j (read committed) a stale read can only cut edges already outside the
    entity's top ``k``, and the last cap, which starts after every edge was written, leaves
    at most ``k``. An edge cut stays cut when a stronger neighbour's document is later
    removed, until ``pathweave reembed`` links the tenant again. Reads
    about ``len(ids) * k`` rows plus ``k + len(ids)`` per neighbour over the cap. Returns the
    number of edges removed; ``k < 1`` removes none."""
    if k < 1 or not ids:
        return 0

    def work(run) -> int:
        rows: list[dict] = []
        for chunk in batched(ids, BATCH):
            rows += run("topology_entity_synonyms", ids=list(chunk))
        full = set(ids)
        for chunk in batched(sorted({row["dst"] for row in rows} - full), BATCH):
            over = [row["id"] for row in run("synonym_degrees", ids=list(chunk)) if int(row["degree"]) > k]
            if over:
                rows += run("topology_entity_synonyms", ids=over)
                full.update(over)
        cut = beyond_cap(full, rows, k)
        for chunk in batched(cut, BATCH):
            run("delete_synonyms", pairs=[{"src": a, "dst": b} for a, b in chunk])
        if cut:
            store.record_change_in(run, entities=sorted({end for pair in cut for end in pair}))
        return len(cut)
    removed = store.execute_write(work)
    if removed:
        store.backend.graph_changed(store)
    return removed
