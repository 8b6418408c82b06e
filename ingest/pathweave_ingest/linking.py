"""Linking a committed write's new entities to the tenant: synonymy edges, then alias
consolidation (spec §0 synonymy, spec §3 two-layer aliases). Run by the pipeline after
each group's transaction (on its writer thread) and by a worker repairing what a killed
attempt left undone (:func:`pathweave_ingest.tasks.repair_links`): one code path."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pathweave.store.backends import Capability
from pathweave.settings import Settings
from pathweave.store.graph_store import GraphStore
from pathweave_ingest.aliases import consolidate, entity_count
from pathweave_ingest.profile import IngestProfile
from pathweave_ingest.synonyms import (cap_synonyms, over_cap, tenant_knn_count_bound, tenant_knn_pays,
                                      write_synonyms)


@dataclass
class Links:
    """What linking wrote: synonym edges (written less those the cap removed: the net change,
    negative when the cap removed more older edges than were written), by which method
    (``"gds.knn"`` | ``"vector index"``, empty when nothing was linked) and the entity ids whose
    alias edge changed."""

    synonym_edges: int = 0
    method: str = ""
    alias_changes: list[str] = field(default_factory=list)


def link_entities(store: GraphStore, settings: Settings, ids: list[str], vectors: np.ndarray,
                  names: dict[str, str], profile: IngestProfile | None = None) -> Links:
    """Synonymy edges and alias groups of the entities ``ids`` (their ``(n, d)`` float32
    L2-normalized ``vectors`` and normalized ``names``), already written.

    Synonymy (cosine >= ``ingest.synonym_threshold``, at most ``ingest.synonym_max`` per
    entity) runs in the database either way: one search of the Entity vector index per
    entity (never a tenant-wide entity matrix in this process), or, with ``ingest.synonymy
    = gds`` on a backend that can (Neo4j + GDS), ``gds.knn`` over the whole tenant when
    the entities are a bulk load (:func:`~pathweave_ingest.synonyms.tenant_knn_pays`).
    Then :func:`~pathweave_ingest.aliases.consolidate` (layer 1 reads the SYNONYM edges just
    written: each new entity's nearest). Last, an entity those searches found keeps at most
    ``ingest.synonym_max`` edges too (:func:`~pathweave_ingest.synonyms.cap_synonyms`; after
    ``gds.knn``, which rewrites the tenant's edges, every entity over the cap,
    :func:`~pathweave_ingest.synonyms.over_cap`), so a common entity's edges do not grow
    with the tenant. Busy seconds go to ``profile``'s stages ``synonymy`` and ``aliases``.
    Idempotent (MERGE)."""
    if not ids:
        return Links()
    profile = profile or IngestProfile()
    ingest = settings.ingest
    with profile.stage("synonymy"):
        written, method = None, "vector index"
        backend = store.backend
        if ingest.synonymy == "gds" and Capability.KNN in backend.capabilities and tenant_knn_pays(
                len(ids), entity_count(store, tenant_knn_count_bound(len(ids)))):
            written = backend.write_synonyms(store, ingest.synonym_threshold, ingest.synonym_max)
            method = "gds.knn"
        if written is None:
            written, method = write_synonyms(store, ids, vectors, names, ingest.synonym_threshold,
                                             ingest.synonym_max), "vector index"
    with profile.stage("aliases"):  # layer 1 reads each new entity's own nearest: before the cap
        changed = consolidate(store, ids, vectors, names, settings.aliases,
                              (ingest.synonym_threshold, ingest.synonym_max))
    with profile.stage("synonymy"):  # at most synonym_max at both ends
        capped = over_cap(store, ingest.synonym_max) if method == "gds.knn" else ids
        written -= cap_synonyms(store, capped, ingest.synonym_max)
    return Links(written, method, changed)
