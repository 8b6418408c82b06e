"""A tenant's retrieval graph as integers, kept current from the graph-change log.

What a query process holds of a tenant: ids and incidence only — which passage states
which proposition, which entities each proposition mentions (the proposition
hyper-edge), the SYNONYM scores, which passage asserts which triple — never a text or an
embedding (those stay in the store and are fetched per query for the neighbourhood,
:mod:`pathweave.graph.subgraph`). From it come PropRAG's PPR graph (spec §1: entities +
passages; entity-entity +1 per co-occurrence inside one proposition plus synonymy
cosine; passage-entity 1.0 for every entity of the passage's propositions) and the
HippoRAG 2 baseline's graph (spec §2).

Alias consolidation (spec §3, ``ALIAS_OF``): every alias entity is mapped onto its
canonical entity when the matrices are built, so PPR, beam search and the HippoRAG 2
graph see one node per alias group (its index and name are the canonical's; an alias
keeps its index, with no edges). The incidence lists keep the entities as stated, so a
split (or a removed group) needs no re-read.

Every ingestion batch and every deletion records a ``GraphChange`` (passages added and
removed, entities removed, entities whose synonyms were written, entities whose alias
edge changed; :meth:`GraphStore.record_change`).
:meth:`Topology.refresh` applies the records after its version: it fetches the
propositions, entities and triples of the added passages only, so a document is
queryable right after its ingest and the cost of a refresh is the change's size, not the
tenant's. A process that is further behind than the kept records (or new) builds from
the store once (ids only). The sparse matrices of a new version are derived from the
last version's when a query needs them: only the rows of what changed are replaced, and
the co-occurrence counts move by the changed propositions' own products, and the PPR
graph is the last one shifted (passages after the new entities) plus the change, not
re-stacked from scratch (keeping the SYNONYM edges as arrays and not re-stacking made a
one-passage change markedly cheaper on a large tenant; figures in docs/benchmarks-history.md).

:class:`FrontierTopology` is the same structure holding only what queries' frontiers
read (:mod:`pathweave.graph.frontier`): the default of a query process (``query.topology``).

Memory: a few integers per edge (the SYNONYM edges are two arrays, not a dict of Python
tuples; :attr:`Topology.bytes` estimates it, figures in docs/benchmarks-history.md); tenants unused
for ``idle_s`` or beyond ``max_tenants`` or the cache's byte bound are evicted from
:class:`TopologyCache`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from pathweave.graph.node_cache import NodeCache

if TYPE_CHECKING:
    from pathweave.settings import QuerySettings
    from pathweave.store.graph_store import GraphStore

FETCH_BATCH = 1000
"""Passages per topology read (``topology_passage_propositions`` / ``..._triples``)."""


def batched_read(store: GraphStore, statement: str, ids: list[str], **params) -> list[dict]:
    """The rows of ``statement`` for ``ids`` (and ``params``), :data:`FETCH_BATCH` ids per
    round trip."""
    rows: list[dict] = []
    for start in range(0, len(ids), FETCH_BATCH):
        rows += store.run(statement, ids=ids[start:start + FETCH_BATCH], **params)
    return rows


def _csr(rows: list[np.ndarray], cols: list[np.ndarray], shape: tuple[int, int],
         data: np.ndarray | None = None, binary: bool = True) -> sp.csr_matrix:
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    values = np.ones(len(r), dtype=np.float64) if data is None else data
    matrix = sp.csr_matrix((values, (r, c)), shape=shape)
    matrix.sum_duplicates()
    if binary:
        matrix.data[:] = 1.0
    return matrix


def _pad(matrix: sp.csr_matrix, shape: tuple[int, int]) -> sp.csr_matrix:
    """``matrix`` grown to ``shape`` with empty rows and columns (indices kept)."""
    indptr = np.r_[matrix.indptr, np.full(shape[0] - matrix.shape[0], matrix.indptr[-1])]
    return sp.csr_matrix((matrix.data, matrix.indices, indptr), shape=shape)


def _rows(rows: list[int], columns: list[np.ndarray], shape: tuple[int, int]) -> sp.csr_matrix:
    """Binary ``shape`` CSR whose row ``rows[i]`` has ones at ``columns[i]``; others empty."""
    counts = [len(c) for c in columns]
    return _csr([np.repeat(np.asarray(rows, dtype=np.int64), counts)], list(columns) or [np.zeros(0, np.int64)], shape)


def _replace_rows(matrix: sp.csr_matrix, shape: tuple[int, int], cleared: list[int],
                  replacement: sp.csr_matrix) -> sp.csr_matrix:
    """``matrix`` grown to ``shape``, rows ``cleared`` emptied, plus ``replacement``."""
    grown = _pad(matrix, shape)
    if cleared:
        counts = np.diff(grown.indptr)
        drop = np.zeros(shape[0], dtype=bool)
        drop[cleared] = True
        keep = ~np.repeat(drop, counts)
        counts[drop] = 0
        grown = sp.csr_matrix((grown.data[keep], grown.indices[keep], np.r_[0, np.cumsum(counts)]), shape=shape)
    return (grown + replacement).tocsr()


def _shift_passages(adjacency: sp.csr_matrix, n_entities: int, n_e: int, n_p: int) -> sp.csr_matrix:
    """The PPR graph ``adjacency`` (entities ``[0, n_entities)`` first, then passages) grown
    to ``n_e`` entities and ``n_p`` passages: the passage rows and columns move by
    ``n_e - n_entities``, new rows and columns are empty. One pass over the index array
    (no re-stacking of blocks)."""
    grow = n_e - n_entities
    indptr = adjacency.indptr
    n_old_p = adjacency.shape[0] - n_entities
    indptr = np.concatenate([indptr[:n_entities + 1], np.full(grow, indptr[n_entities], dtype=indptr.dtype),
                             indptr[n_entities + 1:], np.full(n_p - n_old_p, indptr[-1], dtype=indptr.dtype)])
    indices = adjacency.indices + np.where(adjacency.indices >= n_entities, grow, 0).astype(adjacency.indices.dtype)
    return sp.csr_matrix((adjacency.data, indices, indptr), shape=(n_e + n_p, n_e + n_p))


ID_BYTES = 240
"""Estimated bytes per id a topology holds (a str of ~40 characters, its dict entry and list
slot, and the newest view's index of it)."""

ENTRY_BYTES = 120
"""Estimated bytes per dict entry holding a small array or tuple (beside the array's data)."""


def _view_bytes(view: TopologyView) -> int:
    """The arrays' and sparse matrices' bytes of ``view`` and of what its queries kept."""
    def size(value, depth: int = 0) -> int:
        if sp.issparse(value):
            value = value.tocsr() if value.format not in ("csr", "csc") else value
            return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
        if isinstance(value, np.ndarray):
            return value.nbytes
        if depth >= 3:
            return 0
        if isinstance(value, (tuple, list)) and value and not isinstance(value[0], str):
            return sum(size(v, depth + 1) for v in value)
        if isinstance(value, dict):
            return sum(size(v, depth + 1) for v in value.values())
        if hasattr(value, "__dict__"):  # what a query kept (a walk's or a graph's matrices)
            return sum(size(v, depth + 1) for v in vars(value).values())
        return 0

    matrices = [view.states, view.prop_entities, view.synonyms, view.adjacency, view.degree, view.alive,
                view.triple_ends, view.assertions, view.canonical, view.access, view.extras]
    return sum(size(m) for m in matrices)


def _empty_view() -> TopologyView:
    """The view of an empty topology (what the first real view is derived from)."""
    empty = sp.csr_matrix((0, 0), dtype=np.float64)
    return TopologyView(version=-1, entity_ids=[], passage_ids=[], prop_ids=[], entity_index={}, passage_index={},
                        prop_index={}, states=empty, prop_entities=empty, synonyms=empty, adjacency=empty,
                        degree=np.zeros(0), alive=np.zeros(0, dtype=bool), triple_ids=[], triple_index={},
                        triple_ends=np.zeros((0, 2), np.int64), assertions=(np.zeros(0, np.int64),) * 2,
                        canonical=np.zeros(0, np.int64),
                        extras={"passage_entities": empty, "raw_prop_entities": empty,
                                "raw_triple_ends": np.zeros((0, 2), np.int64)})


def synonym_matrix(pairs: np.ndarray, scores: np.ndarray, canonical: np.ndarray) -> sp.csr_matrix:
    """``(E, E)`` symmetric SYNONYM cosines between canonical entities from the stored edges
    ``pairs (S, 2)`` with ``scores (S,)`` (the largest score where several pairs of one alias
    group meet; none inside a group), at most 1; ``canonical (E,)`` maps each entity to its
    alias group's canonical (itself when it is no alias)."""
    n_e = len(canonical)
    if not len(scores):
        return sp.csr_matrix((n_e, n_e), dtype=np.float64)
    mapped_pairs, scores = canonical[pairs], np.minimum(scores, 1.0)
    mapped = (mapped_pairs != pairs).any(axis=1)  # pairs with an alias at an end

    def symmetric(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> sp.csr_matrix:
        return _csr([a, b], [b, a], (n_e, n_e), data=np.r_[s, s], binary=False)

    # pairs between canonical entities are distinct already (one row per stored pair)
    plain = symmetric(mapped_pairs[~mapped, 0], mapped_pairs[~mapped, 1], scores[~mapped])
    if not mapped.any():
        return plain
    pairs, scores = mapped_pairs[mapped], scores[mapped]
    keep = pairs[:, 0] != pairs[:, 1]
    lo, hi = np.minimum(pairs[keep, 0], pairs[keep, 1]), np.maximum(pairs[keep, 0], pairs[keep, 1])
    keys, scores = lo * n_e + hi, scores[keep]
    order = np.lexsort((-scores, keys))
    first = np.r_[True, keys[order][1:] != keys[order][:-1]] if len(order) else np.zeros(0, bool)
    best = order[first]
    return plain.maximum(symmetric(lo[best], hi[best], scores[best])).tocsr()


@dataclass
class TopologyView:
    """The matrices of one topology version (immutable; shared by concurrent queries).

    Shapes (E entities, P passages, R propositions, all ids ever seen by this topology;
    removed ones have no edges): ``states (P, R)``, ``prop_entities (R, E)`` binary CSR;
    ``synonyms (E, E)`` symmetric cosine scores; ``adjacency (E + P, E + P)`` the PPR
    graph (entities first) with its weighted ``degree (E + P,)``; ``alive (P,)`` bool;
    ``canonical (E,)`` the entity each entity stands for (its alias group's canonical, else
    itself): the matrices use canonical entities only. ``access (P,)`` each passage's access
    class, an index into ``access_classes`` (the distinct access lists,
    :func:`pathweave.access.passage_acl`); what a restricted caller sees of the view is
    :func:`pathweave.graph.visibility.visible_view`. ``extras["shared_passages"]``: the
    passages several documents hold (a frozenset of passage rows; a restricted caller's
    citation of one is read from the store, the others' from the node cache).
    """

    version: int
    entity_ids: list[str]
    passage_ids: list[str]
    prop_ids: list[str]
    entity_index: dict[str, int]
    passage_index: dict[str, int]
    prop_index: dict[str, int]
    states: sp.csr_matrix
    prop_entities: sp.csr_matrix
    synonyms: sp.csr_matrix
    adjacency: sp.csr_matrix
    degree: np.ndarray
    alive: np.ndarray
    triple_ids: list[str]
    triple_index: dict[str, int]
    triple_ends: np.ndarray  # (T, 2) subject and object entity of every triple seen
    assertions: tuple[np.ndarray, np.ndarray]  # (passage, triple) pairs of alive passages
    canonical: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    access: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # (P,) access class per passage
    access_classes: tuple = (None,)  # the access lists of the classes (None: the whole tenant)
    extras: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def n_entities(self) -> int:
        """E: the entities of the view (every id this topology has seen, dead ones too)."""
        return self.prop_entities.shape[1]

    @property
    def n_passages(self) -> int:
        """P: the passages of the view (every id seen; :attr:`alive` marks the current)."""
        return self.states.shape[0]

    def keep(self, key: Any, value: Any) -> Any:
        """Keep ``value`` under ``key`` for this view's later queries (e.g. the HippoRAG 2
        graph, built from the view by the first query that needs it: ``extras.get(key)``
        first) and return what is kept: the value of a concurrent query that kept one first."""
        with self._lock:
            return self.extras.setdefault(key, value)

    def index_of(self, index: dict[str, int], ids, limit: int) -> np.ndarray:
        """``(k,)`` int64: the indices of ``ids`` known to this view (``< limit``), in order; unknown ids dropped."""
        out = [index.get(i, -1) for i in ids]
        return np.asarray([i for i in out if 0 <= i < limit], dtype=np.int64)


class Topology:
    """One tenant's integer topology; :meth:`refresh` brings it to the store's version,
    :meth:`view` returns the matrices of the current version. Thread-safe."""

    def __init__(self, tenant: str, node_cache_entries: int = 50_000) -> None:
        self.tenant = tenant
        self.nodes = NodeCache(node_cache_entries)  # rows queries read (texts, vectors), bounded
        self.version = -1  # nothing read yet
        self.entity_index: dict[str, int] = {}
        self.entity_ids: list[str] = []
        self.passage_index: dict[str, int] = {}
        self.passage_ids: list[str] = []
        self.prop_index: dict[str, int] = {}
        self.prop_ids: list[str] = []
        self.passage_props: dict[int, np.ndarray] = {}  # alive passages only
        self.prop_entities: dict[int, np.ndarray] = {}  # propositions stated by an alive passage
        self.prop_refs: dict[int, int] = {}
        self.triple_index: dict[str, int] = {}
        self.triple_ids: list[str] = []
        self.triple_ends: dict[int, tuple[int, int]] = {}  # triple -> (subject, object) entities
        self.passage_triples: dict[int, np.ndarray] = {}  # alive passages -> triples they assert
        self.synonym_pairs = np.zeros((0, 2), dtype=np.int64)  # (S, 2) SYNONYM edges (a, b), a < b, one row each
        self.synonym_scores = np.zeros(0, dtype=np.float64)  # (S,) their cosines
        self.aliases: dict[int, int] = {}  # alias entity -> its canonical entity
        self.passage_access: dict[int, int] = {}  # passage -> its access class (absent: class 0, the whole tenant)
        self.shared_passages: set[int] = set()  # passages several documents hold (cited by a readable one)
        self.access_classes: list[tuple[str, ...] | None] = [None]  # class -> its access list
        self._access_index: dict[tuple[str, ...] | None, int] = {None: 0}
        self.last_used = time.monotonic()
        self.refresh_ms = 0.0
        self.on_built: Callable[[str], None] | None = None  # called with the tenant after a view is built
        self._view: TopologyView | None = None
        self._last: TopologyView = _empty_view()  # the newest view built: the next one is derived from it
        self._added: set[int] = set()  # passages added since self._last
        self._removed: set[int] = set()  # passages removed since self._last
        self._born: set[int] = set()  # propositions alive now and not in self._last
        self._dead: set[int] = set()  # propositions of self._last gone since
        self._synonyms_changed = False
        self._lock = threading.RLock()

    # ---- ids ----------------------------------------------------------------------
    @staticmethod
    def _intern(index: dict[str, int], ids: list[str], key: str) -> int:
        found = index.get(key)
        if found is None:
            found = len(ids)
            ids.append(key)
            index[key] = found
        return found

    def _entities(self, keys) -> np.ndarray:
        return np.fromiter((self._intern(self.entity_index, self.entity_ids, k) for k in keys if k),
                           dtype=np.int64)

    # ---- changes --------------------------------------------------------------------
    def add_passages(self, proposition_rows: list[dict], triple_rows: list[dict], passage_ids: list[str]) -> None:
        """Add passages (idempotent: an alive passage is skipped) from the rows of
        ``topology_passage_propositions`` / ``topology_passage_triples`` for ``passage_ids``."""
        props: dict[str, dict[str, list[str]]] = {pid: {} for pid in passage_ids}
        for row in proposition_rows:
            props.setdefault(row["passage_id"], {})[row["prop_id"]] = row["entities"] or []
        triples: dict[str, dict[str, tuple[str, str]]] = {}
        for row in triple_rows:
            triples.setdefault(row["passage_id"], {})[row["triple_id"]] = (row["subject_id"], row["object_id"])
        for pid, stated in props.items():
            p = self._intern(self.passage_index, self.passage_ids, pid)
            if p in self.passage_props:
                continue
            prop_idx = []
            for prop_id, entities in stated.items():
                r = self._intern(self.prop_index, self.prop_ids, prop_id)
                prop_idx.append(r)
                if self.prop_refs.get(r, 0) == 0:
                    self.prop_entities[r] = np.unique(self._entities(entities))
                    self._born.add(r)
                self.prop_refs[r] = self.prop_refs.get(r, 0) + 1
            self.passage_props[p] = np.asarray(sorted(set(prop_idx)), dtype=np.int64)
            self._added.add(p)
            asserted = []
            for triple_id, (subject, obj) in triples.get(pid, {}).items():
                if subject and obj:
                    t = self._intern(self.triple_index, self.triple_ids, triple_id)
                    self.triple_ends.setdefault(t, (int(self._entities([subject])[0]), int(self._entities([obj])[0])))
                    asserted.append(t)
            self.passage_triples[p] = np.asarray(sorted(set(asserted)), dtype=np.int64)
        self._view = None

    def remove_passages(self, passage_ids: list[str]) -> None:
        """Remove passages and what only they stated (as ``DELETE /v1/documents`` does)."""
        for pid in passage_ids:
            p = self.passage_index.get(pid)
            if p is None or p not in self.passage_props:
                continue
            gone = [pid]
            for r in self.passage_props.pop(p).tolist():
                self.prop_refs[r] -= 1
                if self.prop_refs[r] <= 0:
                    del self.prop_refs[r]
                    self.prop_entities.pop(r)
                    if r in self._born:
                        self._born.discard(r)  # born after the last view: never in it
                    else:
                        self._dead.add(r)
                    gone.append(self.prop_ids[r])
            self._added.discard(p)
            self._removed.add(p)
            self.passage_triples.pop(p, None)
            self.passage_access.pop(p, None)
            self.shared_passages.discard(p)
            self.nodes.evict(gone)
        self._view = None

    def remove_entities(self, entity_ids: list[str]) -> None:
        """Drop the SYNONYM and ALIAS_OF edges of deleted entities."""
        gone = {self.entity_index[e] for e in entity_ids if e in self.entity_index}
        self.nodes.evict(entity_ids)
        if gone:
            self._drop_synonyms(np.fromiter(gone, dtype=np.int64, count=len(gone)))
            self.aliases = {a: c for a, c in self.aliases.items() if a not in gone and c not in gone}
            self._synonyms_changed = True
            self._view = None

    def set_synonyms(self, entity_ids: list[str], rows: list[dict]) -> None:
        """Replace the SYNONYM edges touching ``entity_ids`` by ``rows`` ``{src, dst, score}``."""
        touched = self._entities(entity_ids)
        if len(touched):
            self._drop_synonyms(touched)
        if rows:
            ends = np.asarray([(self._intern(self.entity_index, self.entity_ids, row["src"]),
                                self._intern(self.entity_index, self.entity_ids, row["dst"])) for row in rows],
                              dtype=np.int64).reshape(-1, 2)
            scores = np.asarray([float(row["score"]) for row in rows], dtype=np.float64)
            differ = ends[:, 0] != ends[:, 1]
            pairs = np.concatenate([self.synonym_pairs, np.sort(ends[differ], axis=1)])
            scores = np.concatenate([self.synonym_scores, scores[differ]])
            keys = pairs[:, 0] * len(self.entity_ids) + pairs[:, 1]
            _, last = np.unique(keys[::-1], return_index=True)  # a pair given twice keeps its last score
            keep = np.sort(len(keys) - 1 - last)
            self.synonym_pairs, self.synonym_scores = pairs[keep], scores[keep]
        self._synonyms_changed = True
        self._view = None

    def _drop_synonyms(self, entities: np.ndarray) -> None:
        """Remove the SYNONYM edges touching ``entities`` (entity indices)."""
        keep = ~np.isin(self.synonym_pairs, entities).any(axis=1)
        self.synonym_pairs, self.synonym_scores = self.synonym_pairs[keep], self.synonym_scores[keep]

    def set_aliases(self, entity_ids: list[str], rows: list[dict]) -> None:
        """Replace the alias edges leaving ``entity_ids`` by ``rows`` ``{alias, canonical}``
        (statement ``topology_entity_aliases``: the current edges of those entities)."""
        for e in self._entities(entity_ids).tolist():
            self.aliases.pop(e, None)
        for row in rows:
            a, c = self._entities((row["alias"], row["canonical"])).tolist()
            if a != c:
                self.aliases[a] = c
        self._view = None

    def set_access(self, passage_ids: list[str], rows: list[dict]) -> None:
        """Set the access class of ``passage_ids`` from the rows of ``topology_passage_access``
        (``{passage_id, acl}``, one per document holding the passage): the union of its
        documents' lists, or the whole tenant when one has none (:func:`pathweave.access.passage_acl`).
        Their node-cache rows are forgotten: the documents holding them (whose first one the
        cache names, and cites for a passage one document holds) may have changed."""
        from pathweave.access import passage_acl

        self.nodes.evict(passage_ids)
        acls: dict[str, list] = {pid: [] for pid in passage_ids}
        for row in rows:
            acls.setdefault(row["passage_id"], []).append(row["acl"])
        for pid, lists in acls.items():
            acl = passage_acl(lists) if lists else ()
            cls = self._access_index.get(acl)
            if cls is None:
                cls = self._access_index[acl] = len(self.access_classes)
                self.access_classes.append(acl)
            p = self._intern(self.passage_index, self.passage_ids, pid)
            shared = len(lists) > 1
            if shared != (p in self.shared_passages):  # the view's extras name the shared passages
                (self.shared_passages.add if shared else self.shared_passages.discard)(p)
                self._view = None
            if self.passage_access.get(p, 0) != cls:
                if cls:
                    self.passage_access[p] = cls
                else:
                    self.passage_access.pop(p, None)
                self._view = None

    def _read_access(self, store: GraphStore, passage_ids: list[str]) -> None:
        for start in range(0, len(passage_ids), FETCH_BATCH):
            chunk = passage_ids[start:start + FETCH_BATCH]
            self.set_access(chunk, store.run("topology_passage_access", ids=chunk))

    def _read_aliases(self, store: GraphStore, entity_ids: list[str]) -> None:
        self.set_aliases(entity_ids, batched_read(store, "topology_entity_aliases", entity_ids))

    # ---- reading the store --------------------------------------------------------
    @staticmethod
    def _passage_rows(store: GraphStore, chunk: list[str]) -> tuple[list[dict], list[dict], list[dict]]:
        """The rows of the passages ``chunk``: access (read first: no passage without its
        access), propositions with their entities, triples."""
        return (store.run("topology_passage_access", ids=chunk),
                store.run("topology_passage_propositions", ids=chunk),
                store.run("topology_passage_triples", ids=chunk))

    def _add_passage_rows(self, chunk: list[str], rows: tuple[list[dict], list[dict], list[dict]]) -> list[str]:
        """Add the passages of ``chunk`` from their :meth:`_passage_rows`; an id the store
        returned nothing for (not held any more) is left out. Returns those added."""
        access, props, triples = rows
        there = {row["passage_id"] for row in access} | {row["passage_id"] for row in props}
        chunk = [p for p in chunk if p in there]
        self.add_passages(props, triples, chunk)
        self.set_access(chunk, access)
        return chunk

    def _fetch_passages(self, store: GraphStore, passage_ids: list[str]) -> None:
        for start in range(0, len(passage_ids), FETCH_BATCH):
            chunk = passage_ids[start:start + FETCH_BATCH]
            self._add_passage_rows(chunk, self._passage_rows(store, chunk))

    def fresh(self) -> Topology:
        """An empty topology of the same kind and bounds (what :meth:`refresh` builds
        anew when the change records do not reach back to this one's version)."""
        return Topology(self.tenant, self.nodes.max_entries)

    def apply_added(self, store: GraphStore, passage_ids: list[str]) -> None:
        """Take in the passages a change record added (:meth:`refresh`): all of them."""
        self._fetch_passages(store, passage_ids)

    def load(self, store: GraphStore) -> None:
        """Build from the store (ids only): every passage's propositions, entities and
        triples, every SYNONYM and every ALIAS_OF edge. The version is read first, so changes recorded
        meanwhile are applied again by the next :meth:`refresh` (applying is idempotent)."""
        version = store.graph_version()
        self._fetch_passages(store, [row["id"] for row in store.run("topology_passage_ids")])
        self.set_synonyms([], store.run("topology_synonyms"))
        self.set_aliases([], store.run("topology_aliases"))
        self.version = version

    def refresh(self, store: GraphStore, version: int | None = None) -> bool:
        """Bring the topology to the store's graph version: apply the change records after
        :attr:`version`, or :meth:`load` when it is new or further behind than the kept
        records. ``version``: the store's version as the query's vector searches read it
        (None: read it now); one older than this topology's (another query refreshed meanwhile,
        or a restored store) is asked again. Returns whether anything was read."""
        with self._lock:
            self.last_used = time.monotonic()
            if version is None or version < self.version:
                version = store.graph_version()
            if version == self.version:
                return False
            started = time.perf_counter()
            changes = store.run("graph_changes_since", since=max(self.version, 0)) if self.version >= 0 else []
            contiguous = bool(changes) and changes[0]["version"] == self.version + 1 and all(
                b["version"] == a["version"] + 1 for a, b in zip(changes, changes[1:]))
            if self.version < 0 or not contiguous:
                fresh = self.fresh()
                fresh.load(store)
                self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in ("_lock", "on_built")})
            else:
                for change in changes:
                    self.remove_passages(change["removed"] or [])
                    self.remove_entities(change["removed_entities"] or [])
                    self.apply_added(store, change["added"] or [])
                    entities = change["entities"] or []
                    if entities:
                        self.set_synonyms(entities, batched_read(store, "topology_entity_synonyms", entities))
                    if change.get("aliases"):
                        self._read_aliases(store, change["aliases"])
                    if change.get("access"):
                        self._read_access(store, change["access"])
                    self.version = change["version"]
            self.refresh_ms = (time.perf_counter() - started) * 1000
            return True

    # ---- matrices -------------------------------------------------------------------
    def view(self) -> TopologyView:
        """The matrices of the current version (built on first use after a change)."""
        with self._lock:
            self.last_used = time.monotonic()
            built = self._view is None
            if built:
                self._view = self._build()
            view = self._view
        if built and self.on_built is not None:
            self.on_built(self.tenant)  # the holding cache checks its bound (outside this lock)
        return view

    @property
    def bytes(self) -> int:
        """Approximate bytes this topology holds (its node cache apart), in O(1): about
        :data:`ID_BYTES` per id (the string, its index entry and list slot, the view's copy),
        :data:`ENTRY_BYTES` per incidence list plus 8 per entry it holds (as many as the
        newest view's matrices have edges), the SYNONYM arrays, and the arrays and sparse
        matrices of the newest view with what its queries kept. An estimate for the
        cache's bound, not an account."""
        view = self._view or self._last
        ids = len(self.entity_ids) + len(self.passage_ids) + len(self.prop_ids) + len(self.triple_ids)
        entries = len(self.passage_props) + len(self.prop_entities) + len(self.passage_triples) + \
            len(self.triple_ends) + len(self.aliases) + len(self.prop_refs) + len(self.passage_access)
        edges = view.states.nnz + view.prop_entities.nnz + len(view.assertions[0])
        with view._lock:  # what concurrent queries keep with the view is added under it
            held = _view_bytes(view)
        return (ids * ID_BYTES + entries * ENTRY_BYTES + edges * 8 + self.synonym_pairs.nbytes
                + self.synonym_scores.nbytes + held)

    def _canonical(self, n_e: int) -> np.ndarray:
        """``(E,)``: each entity's canonical entity (itself when it is no alias)."""
        canonical = np.arange(n_e, dtype=np.int64)
        if self.aliases:
            aliases = np.fromiter(self.aliases, dtype=np.int64, count=len(self.aliases))
            canonical[aliases] = np.fromiter(self.aliases.values(), dtype=np.int64, count=len(self.aliases))
        return canonical

    def _build(self) -> TopologyView:
        """The next view, derived from the last one and the changes since: the rows of the
        added and removed passages and propositions are replaced, and the co-occurrence
        counts move by the born and dead propositions' own products; an alias group that
        changed (:attr:`aliases`) re-maps the propositions naming its entities and the
        passages stating them the same way. A change costs its size plus the copies of the
        arrays (no Python loop over the tenant); the first view is the same computation from
        an empty one."""
        last = self._last
        n_e, n_p, n_r = len(self.entity_ids), len(self.passage_ids), len(self.prop_ids)
        canonical = self._canonical(n_e)
        before = np.arange(n_e, dtype=np.int64)
        before[:len(last.canonical)] = last.canonical
        born, dead, regrouped = set(self._born), set(self._dead), np.zeros(0, np.int64)
        moved = np.flatnonzero(canonical != before)  # entities whose alias group changed
        if len(moved):
            raw_last = last.extras["raw_prop_entities"]
            moved_old = moved[moved < raw_last.shape[1]]
            hit = np.unique(raw_last.tocsc()[:, moved_old].indices)  # propositions of the last view naming them
            hit = [r for r in hit.tolist() if r in self.prop_entities]
            dead.update(hit)
            born.update(hit)
            old_states = last.states.tocsc()
            regrouped = np.unique(old_states[:, hit].indices) if hit else regrouped
        born_list, dead_list = sorted(born), sorted(dead)
        raw_rows = _rows(born_list, [self.prop_entities[r] for r in born_list], (n_r, n_e))
        born_rows = _rows(born_list, [canonical[self.prop_entities[r]] for r in born_list], (n_r, n_e))
        dead_rows = _pad(last.prop_entities, (n_r, n_e))[dead_list]
        raw_prop_entities = _replace_rows(last.extras["raw_prop_entities"], (n_r, n_e), dead_list + born_list, raw_rows)
        prop_entities = _replace_rows(last.prop_entities, (n_r, n_e), dead_list + born_list, born_rows)
        # how the co-occurrence counts between distinct entities move: the change's own products
        # (the counts themselves live in the PPR graph's entity block)
        moved_counts = ((born_rows.T @ born_rows) - (dead_rows.T @ dead_rows)).tocsr()
        moved_counts = (moved_counts - sp.diags(moved_counts.diagonal())).tocsr()
        moved_counts.eliminate_zeros()
        added, removed = sorted(self._added), sorted(self._removed)
        states = _replace_rows(last.states, (n_p, n_r), removed + added,
                               _rows(added, [self.passage_props[p] for p in added], (n_p, n_r)))
        recomputed = sorted(set(added) | set(regrouped.tolist()))
        pick = sp.csr_matrix((np.ones(len(recomputed)), (recomputed, recomputed)), shape=(n_p, n_p))
        fresh_rows = (pick @ states @ prop_entities).tocsr()
        fresh_rows.data[:] = 1.0
        passage_entities = _replace_rows(last.extras["passage_entities"], (n_p, n_e), removed + recomputed, fresh_rows)
        if self._synonyms_changed or len(moved) or last.synonyms.shape != (n_e, n_e):
            synonyms = synonym_matrix(self.synonym_pairs, self.synonym_scores, canonical)
        else:
            synonyms = last.synonyms
        # the PPR graph: the last one with its passage block moved past the new entities, plus
        # what changed (co-occurrence counts, synonym scores, the recomputed passages' entities)
        entity_change = moved_counts
        if synonyms is not last.synonyms:
            entity_change = (entity_change + (synonyms - _pad(last.synonyms, (n_e, n_e)))).tocsr()
        passage_change = (passage_entities - _pad(last.extras["passage_entities"], (n_p, n_e))).tocsr()
        adjacency = (_shift_passages(last.adjacency, last.n_entities, n_e, n_p)
                     + sp.bmat([[entity_change, passage_change.T], [passage_change, None]], format="csr")).tocsr()
        adjacency.eliminate_zeros()
        alive = np.zeros(n_p, dtype=bool)
        alive[np.fromiter(self.passage_props, dtype=np.int64, count=len(self.passage_props))] = True
        asserting = [p for p, t in self.passage_triples.items() if len(t)]
        triple_passages = np.repeat(np.asarray(asserting, dtype=np.int64),
                                    [len(self.passage_triples[p]) for p in asserting])
        triple_rows = np.concatenate([self.passage_triples[p] for p in asserting]) if asserting else np.zeros(0, np.int64)
        raw_ends = last.extras["raw_triple_ends"]
        raw_ends = np.concatenate([raw_ends, np.asarray(
            [self.triple_ends[t] for t in range(len(raw_ends), len(self.triple_ids))], dtype=np.int64).reshape(-1, 2)])
        access = np.zeros(n_p, dtype=np.int32)
        if self.passage_access:
            access[np.fromiter(self.passage_access, dtype=np.int64, count=len(self.passage_access))] = \
                np.fromiter(self.passage_access.values(), dtype=np.int32, count=len(self.passage_access))
        self._added, self._removed, self._born, self._dead = set(), set(), set(), set()
        self._synonyms_changed = False
        self._last = TopologyView(
            version=self.version, entity_ids=self.entity_ids, passage_ids=self.passage_ids, prop_ids=self.prop_ids,
            entity_index=self.entity_index, passage_index=self.passage_index, prop_index=self.prop_index,
            states=states, prop_entities=prop_entities, synonyms=synonyms, adjacency=adjacency,
            degree=np.asarray(adjacency.sum(axis=1)).ravel(), alive=alive,
            triple_ids=self.triple_ids, triple_index=self.triple_index, triple_ends=canonical[raw_ends],
            assertions=(triple_passages, triple_rows), canonical=canonical,
            access=access, access_classes=tuple(self.access_classes),
            extras={"passage_entities": passage_entities,
                    "raw_prop_entities": raw_prop_entities, "raw_triple_ends": raw_ends,
                    "synonym_pairs": self.synonym_pairs, "synonym_scores": self.synonym_scores,
                    "shared_passages": frozenset(self.shared_passages)},
        )
        return self._last

    def edges(self) -> dict[tuple[str, str], float]:
        """The PPR graph's edges by id pairs ``{(a, b): weight}`` (a < b; for comparing two
        topologies built differently, e.g. incrementally vs from scratch)."""
        view = self.view()
        names = view.entity_ids[:view.n_entities] + view.passage_ids[:view.n_passages]
        upper = sp.triu(view.adjacency, k=1).tocoo()
        out = {}
        for a, b, w in zip(upper.row, upper.col, upper.data):
            if w != 0:
                x, y = names[a], names[b]
                out[(min(x, y), max(x, y))] = round(float(w), 6)
        return out


class FrontierTopology(Topology):
    """A tenant's topology holding only what queries' frontiers read (see the module's
    text). ``complete``: the entities (indices) whose rows are whole; ``floors``: the passage
    counts of entities a query declined to complete (over its budget), a lower bound of
    their degree; ``max_bytes``: the cap beyond which :meth:`trim` empties it (None: none).
    Reads go to the store outside the topology's lock; what they return is applied under it."""

    def __init__(self, tenant: str, node_cache_entries: int = 50_000, max_bytes: int | None = None) -> None:
        super().__init__(tenant, node_cache_entries)
        self.max_bytes = max_bytes
        self.complete: set[int] = set()
        self.floors: dict[int, int] = {}
        self.synonyms_read: set[int] = set()  # entities whose SYNONYM edges are held
        self.aliases_read: set[int] = set()  # entities whose ALIAS_OF edge (or its absence) is held
        self.generation = 0  # bumped whenever it starts again empty: indices of another generation mean nothing

    def fresh(self) -> FrontierTopology:
        """An empty frontier topology of the next generation, with this one's settings."""
        fresh = FrontierTopology(self.tenant, self.nodes.max_entries, self.max_bytes)
        fresh.generation = self.generation + 1
        return fresh

    def _build(self) -> TopologyView:
        """The view, with what a push needs to read together with it (under the same lock):
        ``extras["complete"]`` the complete entities, ``extras["floors"]`` ``(indices, counts)``,
        ``extras["generation"]``, and ``extras["partial"]`` (a restricted caller's view is
        always rebuilt from its readable passages: what is held may name entities no held
        passage mentions)."""
        view = super()._build()
        ends = np.asarray(sorted(self.floors.items()), dtype=np.int64).reshape(-1, 2)
        view.extras.update({"complete": np.fromiter(sorted(self.complete), dtype=np.int64, count=len(self.complete)),
                            "floors": (ends[:, 0], ends[:, 1].astype(np.float64)),
                            "generation": self.generation, "partial": True})
        return view

    def load(self, store: GraphStore) -> None:
        """Nothing is read but the version: a frontier reads what its query needs."""
        self.version = store.graph_version()

    def trim(self) -> bool:
        """Start again empty at the current version (the node cache kept) when over
        ``max_bytes``; returns whether it did. Views already handed out stay valid."""
        with self._lock:
            if self.max_bytes is None or self.bytes <= self.max_bytes:
                return False
            fresh = self.fresh()
            fresh.version, fresh.nodes = self.version, self.nodes
            self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in ("_lock", "on_built")})
            return True

    # ---- what the change log changes, restricted to what is held -----------------------
    def _loaded(self, passage_id: str) -> bool:
        return self.passage_index.get(passage_id, -1) in self.passage_props

    def unheld_propositions(self, prop_ids: list[str]) -> list[str]:
        """Those of ``prop_ids`` no held passage states."""
        with self._lock:
            return [r for r in prop_ids if self.prop_index.get(r, -1) not in self.prop_entities]

    def apply_added(self, store: GraphStore, passage_ids: list[str]) -> None:
        """Take in the added passages that mention a complete entity (they belong to its row);
        of those already held (another document holds them now), the access is read again."""
        with self._lock:
            held = [p for p in passage_ids if self._loaded(p)]
        if held:
            super()._read_access(store, held)
        if not self.complete or not passage_ids:
            return
        wanted = set()
        for row in batched_read(store, "topology_passage_propositions", passage_ids):
            entities = [self.entity_index.get(e, -1) for e in row["entities"] or []]
            if any(self.aliases.get(e, e) in self.complete for e in entities if e >= 0):
                wanted.add(row["passage_id"])
        self.read_passages(store, [p for p in passage_ids if p in wanted])

    def set_synonyms(self, entity_ids: list[str], rows: list[dict]) -> None:
        """The SYNONYM edges of the held entities among ``entity_ids`` (others are read when a
        frontier reaches them)."""
        known = [e for e in entity_ids if e in self.entity_index]
        rows = [r for r in rows if r["src"] in self.entity_index or r["dst"] in self.entity_index]
        if known or rows:
            super().set_synonyms(known, rows)

    def set_aliases(self, entity_ids: list[str], rows: list[dict]) -> None:
        """The alias edges of the held entities; a group whose members changed is no longer
        complete (its new member's passages are not read yet)."""
        rows = [r for r in rows if r["alias"] in self.entity_index or r["canonical"] in self.entity_index]
        known = [e for e in entity_ids if e in self.entity_index]
        if not known and not rows:
            return
        before = {self.entity_index[e]: self.aliases.get(self.entity_index[e]) for e in known}
        super().set_aliases(known, rows)
        for e, old in before.items():
            new = self.aliases.get(e)
            if new != old:  # the groups of both canonicals changed
                self.complete -= {e, old, new}
        for row in rows:  # an alias not listed (held as a canonical's member) moves too
            a = self.entity_index[row["alias"]]
            if a not in before:
                self.complete -= {self.aliases.get(a), a}

    def remove_entities(self, entity_ids: list[str]) -> None:
        """As a whole topology's, and the removed entities are no longer complete, nor
        their synonyms or alias edges held."""
        gone = {self.entity_index[e] for e in entity_ids if e in self.entity_index}
        self.complete -= gone
        self.synonyms_read -= gone
        self.aliases_read -= gone
        super().remove_entities(entity_ids)

    def _read_access(self, store: GraphStore, passage_ids: list[str]) -> None:
        super()._read_access(store, [p for p in passage_ids if self._loaded(p)])

    def _add_passage_rows(self, chunk: list[str], rows: tuple[list[dict], list[dict], list[dict]]) -> list[str]:
        """As a whole topology's, plus the alias edges of the entities the rows mention
        (their propositions' rows carry them: ``aliased`` / ``canonicals``)."""
        added = super()._add_passage_rows(chunk, rows)
        mentioned = sorted({e for row in rows[1] for e in row["entities"] or []})
        edges = {a: c for row in rows[1] for a, c in zip(row.get("aliased") or [], row.get("canonicals") or [])}
        if mentioned:
            self.set_aliases(mentioned, [{"alias": a, "canonical": c} for a, c in edges.items()])
            self.aliases_read.update(self.entity_index[e] for e in mentioned)
        return added

    # ---- reading what a frontier asks for --------------------------------------------
    def _current(self, read: Callable[[], Any], apply: Callable[[Any], None]) -> bool:
        """``apply(read())``: the store read outside the lock, applied under it unless a
        refresh moved the version meanwhile (what was read may predate a change the refresh
        applied: read again, at most :data:`READ_ROUNDS` times). Returns whether it applied."""
        for _ in range(READ_ROUNDS):
            with self._lock:
                seen = self.epoch
            rows = read()
            with self._lock:
                if self.epoch == seen:
                    apply(rows)
                    return True
        return False

    @property
    def epoch(self) -> tuple[int, int]:
        """``(version, generation)``: what a read must find unchanged to be applied."""
        return self.version, self.generation

    def read_passages(self, store: GraphStore, passage_ids: Iterable[str]) -> int:
        """Read the passages of ``passage_ids`` not held yet (their propositions, entities,
        triples and access), with the alias edges of the entities they bring (a passage's row
        goes to their canonical entities); returns how many were read. SYNONYM edges are read
        only where an entity's own row is needed (:meth:`read_synonyms`,
        :meth:`complete_entities`): a common entity's synonyms are most of a frontier's rows."""
        with self._lock:
            new = [p for p in dict.fromkeys(passage_ids) if not self._loaded(p)]
        read: list[str] = []
        for start in range(0, len(new), FETCH_BATCH):
            chunk = new[start:start + FETCH_BATCH]
            self._current(lambda chunk=chunk: self._passage_rows(store, chunk),
                          lambda rows, chunk=chunk: read.extend(self._add_passage_rows(chunk, rows)))
        return len(read)  # (the rows brought their entities' alias edges: _add_passage_rows)

    def read_synonyms(self, store: GraphStore, entity_ids: list[str]) -> bool:
        """Hold the SYNONYM edges of ``entity_ids`` (and the alias edges of the entities they
        name); returns whether anything was read."""
        with self._lock:
            unread = [e for e in dict.fromkeys(entity_ids) if self.entity_index.get(e, -1) not in self.synonyms_read]
        self._read_entity_edges(store, unread)
        return bool(unread)

    def _read_entity_edges(self, store: GraphStore, entity_ids: list[str]) -> None:
        """The SYNONYM edges of ``entity_ids`` and the alias edges of them and of the
        entities those edges name first (of those whose alias edge is not held already: the
        change log keeps a held one current)."""
        if not entity_ids:
            return

        def rows():
            synonyms = batched_read(store, "topology_entity_synonyms", entity_ids)
            named = sorted({r[end] for r in synonyms for end in ("src", "dst")} | set(entity_ids))
            with self._lock:
                unheld = [e for e in named if self.entity_index.get(e, -1) not in self.aliases_read]
            return synonyms, named, unheld, batched_read(store, "topology_entity_aliases", unheld)

        def apply(found):
            synonyms, named, unheld, aliases = found
            self._entities(named)  # held: their edges apply
            Topology.set_synonyms(self, entity_ids, synonyms)
            self.synonyms_read.update(self.entity_index[e] for e in entity_ids)
            self.set_aliases(unheld, aliases)
            self.aliases_read.update(self.entity_index[e] for e in unheld)
        self._current(rows, apply)

    def complete_entities(self, store: GraphStore, entity_ids: list[str],
                          budget: int) -> tuple[set[str], set[str], int, bool]:
        """Make the entities of ``entity_ids`` complete, in order, while the passages to read
        stay within ``budget``: ``(completed, declined)`` ids, the passages read and whether
        the topology moved meanwhile. A
        declined entity's passage count is kept as its degree's floor (:attr:`floors`); an
        entity the store no longer has is declined, and so is one with more passages than
        ``budget`` plus every passage held, on its count alone (a hub's passage ids are never
        read: ``frontier_entity_passages`` with ``$limit``). None is marked complete when a refresh
        moved the version while they were read (the push asks again: they count as declined
        none, completed none, and ``moved`` is returned true)."""
        with self._lock:
            seen = self.epoch
            held = len(self.passage_props)
        # an entity with more passages than the budget plus all that is held cannot fit: its
        # ids are not sent (a hub's), its count declines it
        rows = {row["id"]: row for row in batched_read(store, "frontier_entity_passages", entity_ids,
                                                       limit=budget + held)}
        taken: list[dict] = []
        wanted: list[str] = []
        declined: set[str] = set()
        with self._lock:
            for eid in entity_ids:
                row = rows.get(eid)
                whole = row is not None and len(row["passages"]) == row["degree"]
                missing = [] if not whole else [p for p in row["passages"] if not self._loaded(p)]
                if not whole or (len(wanted) + len(missing) > budget and missing):
                    declined.add(eid)
                    if row is not None:
                        self.floors[self._intern(self.entity_index, self.entity_ids, eid)] = row["degree"]
                        self._view = None  # the next view carries the floor
                    continue
                taken.append(row)
                wanted += missing
        read = self.read_passages(store, wanted)
        members = sorted({m for row in taken for m in row["members"]})
        with self._lock:
            unread = [m for m in members if self.entity_index.get(m, -1) not in self.synonyms_read]
        self._read_entity_edges(store, unread)

        with self._lock:  # the held aliases of these groups too: one the store no longer has is dropped
            canonicals = {self.entity_index[row["canonical"]] for row in taken if row["canonical"] in self.entity_index}
            asked = sorted(set(members) | {self.entity_ids[a] for a, c in self.aliases.items() if c in canonicals})
        moved = []

        def mark(aliases):
            if self.epoch != seen or any(not self._loaded(p) for p in wanted):
                moved.append(True)  # a refresh came between: nothing is known whole
                return
            self.set_aliases(asked, aliases)
            self.aliases_read.update(self.entity_index[e] for e in asked if e in self.entity_index)
            for row in taken:  # after the alias edges: their change would make the group incomplete again
                for eid in (row["id"], row["canonical"]):
                    self.complete.add(self._intern(self.entity_index, self.entity_ids, eid))
            self._view = None  # the next view carries them
        if not self._current(lambda: batched_read(store, "topology_entity_aliases", asked), mark) or moved:
            return set(), declined, read, True
        return {row["id"] for row in taken}, declined, read, False


READ_ROUNDS = 3
"""How many times a frontier's read is asked again when a refresh moved the topology's
version while it was read (:meth:`FrontierTopology._current`)."""


class TopologyCache:
    """Topologies of the tenants this process serves: at most ``max_tenants`` and about
    ``max_bytes`` (:attr:`Topology.bytes`; least recently used evicted first, never the
    topology a query is asking for), none unused for more than ``idle_s`` seconds."""

    def __init__(self, max_tenants: int = 16, idle_s: float = 3600.0, node_cache_entries: int = 50_000,
                 max_bytes: int | None = None, frontier_bytes: int | None = None) -> None:
        self.max_tenants = max_tenants
        self.idle_s = idle_s
        self.node_cache_entries = node_cache_entries
        self.max_bytes = max_bytes
        self.frontier_bytes = frontier_bytes  # None: tenants' topologies are whole
        self.evicted = 0  # topologies evicted over the bounds (not counting idle ones)
        self._topologies: OrderedDict[tuple[str, bool], Topology] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, query: QuerySettings) -> TopologyCache:
        """The cache section ``query`` configures (``topology``, its bounds)."""
        return cls(query.topology_max_tenants, query.topology_idle_s, query.node_cache_entries,
                   query.topology_max_mb << 20, query.frontier_max_mb << 20 if query.topology == "frontier" else None)

    def get(self, store: GraphStore, version: int | None = None, whole: bool = False) -> Topology:
        """The tenant's topology, refreshed to the store's graph version (``version``: as the
        caller read it, :meth:`Topology.refresh`): a
        :class:`FrontierTopology` when the cache holds frontiers
        and ``whole`` is not asked. Then, and after each view a query builds, the others are
        evicted, least recently used first, while the cache holds more than ``max_bytes``."""
        now = time.monotonic()
        key = (store.tenant, whole or self.frontier_bytes is None)
        with self._lock:
            for stale in [k for k, topo in self._topologies.items() if now - topo.last_used > self.idle_s]:
                del self._topologies[stale]
            topology = self._topologies.get(key)
            if topology is None:
                topology = Topology(store.tenant, self.node_cache_entries) if key[1] else \
                    FrontierTopology(store.tenant, self.node_cache_entries, self.frontier_bytes)
                self._topologies[key] = topology
                if self.max_bytes is not None:
                    topology.on_built = lambda tenant: self._shrink(keep=key)
            self._topologies.move_to_end(key)
            while len(self._topologies) > self.max_tenants:
                self._topologies.popitem(last=False)
                self.evicted += 1
        if topology.refresh(store, version) and self.max_bytes is not None:
            self._shrink(keep=key)
        return topology

    def held_version(self, tenant: str, whole: bool = False) -> int | None:
        """The graph version of ``tenant``'s topology (its frontier, unless ``whole`` or the
        cache holds whole ones) as this process holds it (no store read), None when none is
        held yet."""
        with self._lock:
            topology = self._topologies.get((tenant, whole or self.frontier_bytes is None))
        return topology.version if topology is not None and topology.version >= 0 else None

    def _shrink(self, keep: tuple[str, bool]) -> None:
        """Evict the least recently used topologies other than ``keep`` while the total is
        over ``max_bytes`` (a single tenant larger than the bound stays: its queries need it)."""
        with self._lock:
            total = sum(topo.bytes for topo in self._topologies.values())
            for key in list(self._topologies):
                if total <= self.max_bytes:
                    break
                if key != keep:
                    total -= self._topologies.pop(key).bytes
                    self.evicted += 1

    def stats(self) -> dict[str, int]:
        """What the process holds for its tenants: ``tenants``, ``node_cache_rows``,
        ``node_cache_bytes`` (approximate, :func:`pathweave.graph.node_cache.row_bytes`), the
        topologies' ``topology_bytes`` (approximate, :attr:`Topology.bytes`), ``evicted``
        (over the bounds so far), ``passages`` and ``entities`` (ids interned so far)."""
        with self._lock:
            topologies = list(self._topologies.values())
        return {"tenants": len(topologies), "node_cache_rows": sum(len(t.nodes) for t in topologies),
                "node_cache_bytes": sum(t.nodes.bytes for t in topologies),
                "topology_bytes": sum(t.bytes for t in topologies), "evicted": self.evicted,
                "passages": sum(len(t.passage_ids) for t in topologies),
                "entities": sum(len(t.entity_ids) for t in topologies)}

    def __len__(self) -> int:
        return len(self._topologies)
