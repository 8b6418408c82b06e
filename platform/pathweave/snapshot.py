"""In-process snapshot of a tenant's retrieval graph, read from the store.

Holds the embedding matrices and the sparse incidence matrices that PropRAG
(spec §1) and the HippoRAG 2 baseline (spec §2) need, plus the CSR
adjacency of the PPR graph (entities + passages; propositions are not PPR
nodes). Rebuilt only when the tenant's graph version changes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from pathweave.ppr import Walk, transition_matrix
from pathweave.store import GraphStore


def _matrix(rows: list[dict], key: str, dim: int) -> np.ndarray:
    if not rows:
        return np.zeros((0, dim), dtype=np.float32)
    matrix = np.asarray([row[key] for row in rows], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def _incidence(pairs: list[tuple[int, int]], shape: tuple[int, int]) -> sp.csr_matrix:
    if not pairs:
        return sp.csr_matrix(shape, dtype=np.float32)
    rows, cols = zip(*pairs)
    matrix = sp.csr_matrix((np.ones(len(pairs), dtype=np.float32), (rows, cols)), shape=shape)
    matrix.data[:] = 1.0  # duplicates collapse to 1
    return matrix


@dataclass
class GraphSnapshot:
    """A tenant's graph at one version.

    Shapes: ``passage_emb (P, d)``, ``prop_emb (R, d)``, ``entity_emb (E, d)`` float32
    L2-normalized; ``states (P, R)``, ``prop_entities (R, E)``, ``passage_entities (P, E)``
    binary CSR; ``synonyms (E, E)`` symmetric CSR of cosine scores; ``adjacency``
    ``(E + P, E + P)`` PPR graph (entities first, then passages), its
    row-stochastic ``transition`` and that transition prepared for power iteration (``walk``).
    """

    version: int
    passage_ids: list[str]
    passage_titles: list[str]
    passage_texts: list[str]
    passage_docs: list[str]
    passage_emb: np.ndarray
    prop_ids: list[str]
    prop_texts: list[str]
    prop_emb: np.ndarray
    entity_ids: list[str]
    entity_names: list[str]
    entity_emb: np.ndarray
    states: sp.csr_matrix
    prop_entities: sp.csr_matrix
    passage_entities: sp.csr_matrix
    synonyms: sp.csr_matrix
    adjacency: sp.csr_matrix
    transition: sp.csr_matrix
    triples: list[dict]
    load_ms: float = 0.0
    extras: dict = field(default_factory=dict)  # lazily computed per-baseline data

    def derived(self, key, build):
        """``build()``'s result, computed once per snapshot and kept in ``extras[key]``
        (whole-graph matrices that queries reuse, e.g. transposes)."""
        if key not in self.extras:
            self.extras[key] = build()
        return self.extras[key]

    @property
    def walk(self) -> Walk:
        """``transition`` prepared for :func:`~pathweave.ppr.personalized_pagerank` (built once)."""
        return self.derived("walk", lambda: Walk.of(self.transition))

    @property
    def n_entities(self) -> int:
        return len(self.entity_ids)

    @property
    def prop_passages(self) -> sp.csr_matrix:
        """``(R, P)`` transpose of ``states``."""
        return self.derived("prop_passages", lambda: self.states.T.tocsr())


def build_snapshot(store: GraphStore, version: int | None = None, dim: int = 384) -> GraphSnapshot:
    """Read the tenant's graph from the store and build the matrices (spec §1 PPR graph)."""
    started = time.perf_counter()
    version = store.graph_version() if version is None else version
    passages = store.run("snapshot_passages")
    passages = list({row["id"]: row for row in passages}.values())
    props = store.run("snapshot_propositions")
    entities = store.run("snapshot_entities")
    p_index = {row["id"]: i for i, row in enumerate(passages)}
    r_index = {row["id"]: i for i, row in enumerate(props)}
    e_index = {row["id"]: i for i, row in enumerate(entities)}
    n_p, n_r, n_e = len(passages), len(props), len(entities)
    states = _incidence([
        (p_index[row["passage_id"]], r_index[row["prop_id"]]) for row in store.run("snapshot_states")
        if row["passage_id"] in p_index and row["prop_id"] in r_index
    ], (n_p, n_r))
    prop_entities = _incidence([
        (r_index[row["prop_id"]], e_index[row["entity_id"]]) for row in store.run("snapshot_proposition_mentions")
        if row["prop_id"] in r_index and row["entity_id"] in e_index
    ], (n_r, n_e))
    syn_rows = [
        (e_index[row["src"]], e_index[row["dst"]], float(row["score"])) for row in store.run("snapshot_synonyms")
        if row["src"] in e_index and row["dst"] in e_index
    ]
    if syn_rows:
        a, b, s = map(np.asarray, zip(*syn_rows))
        synonyms = sp.csr_matrix((np.r_[s, s], (np.r_[a, b], np.r_[b, a])), shape=(n_e, n_e))
        synonyms.sum_duplicates()
        synonyms.data = np.minimum(synonyms.data, 1.0)
    else:
        synonyms = sp.csr_matrix((n_e, n_e), dtype=np.float64)
    passage_entities = (states @ prop_entities).tocsr()
    passage_entities.data[:] = 1.0
    # entity-entity: +1 per co-occurrence inside one proposition, plus synonymy cosine
    cooccurrence = (prop_entities.T @ prop_entities).tocsr().astype(np.float64)
    cooccurrence.setdiag(0)
    cooccurrence.eliminate_zeros()
    entity_block = cooccurrence + synonyms
    adjacency = sp.bmat([[entity_block, passage_entities.T], [passage_entities, None]], format="csr")
    triples = store.run("snapshot_triples")
    return GraphSnapshot(
        version=version,
        passage_ids=[row["id"] for row in passages],
        passage_titles=[row["title"] or "" for row in passages],
        passage_texts=[row["text"] for row in passages],
        passage_docs=[row["doc_id"] or "" for row in passages],
        passage_emb=_matrix(passages, "embedding", dim),
        prop_ids=[row["id"] for row in props],
        prop_texts=[row["text"] for row in props],
        prop_emb=_matrix(props, "embedding", dim),
        entity_ids=[row["id"] for row in entities],
        entity_names=[row["name"] for row in entities],
        entity_emb=_matrix(entities, "embedding", dim),
        states=states, prop_entities=prop_entities, passage_entities=passage_entities,
        synonyms=synonyms, adjacency=adjacency, transition=transition_matrix(adjacency),
        triples=triples, load_ms=(time.perf_counter() - started) * 1000,
    )


class SnapshotCache:
    """One snapshot per tenant, refreshed when the store's graph version changes."""

    def __init__(self) -> None:
        self._snapshots: dict[str, GraphSnapshot] = {}
        self._lock = threading.Lock()

    def get(self, store: GraphStore) -> GraphSnapshot:
        """The current snapshot of ``store.tenant`` (one version read per call)."""
        version = store.graph_version()
        with self._lock:
            cached = self._snapshots.get(store.tenant)
            if cached is None or cached.version != version:
                cached = build_snapshot(store, version, store.dimensions)
                self._snapshots[store.tenant] = cached
            return cached

