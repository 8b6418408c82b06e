"""The graph-store backend interface: what Pathweave asks of a store beyond
running the named statements of ``cypher/``, with declared capabilities.

Both backends answer vector searches with ``db.index.vector.queryNodes`` (statements
``vector_search`` / ``vector_knn`` in ``cypher/topology.cypher``). What only Neo4j + GDS
can do in the database (stage-1 Personalized PageRank, kNN synonymy, k-means) is a
:class:`Capability`; a caller checks ``backend.capabilities`` and otherwise runs its own
code (the in-process topology, the vector-index kNN). A backend knows nothing of
retrieval structures: it takes ids and returns ids and scores.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


class GraphStore(Protocol):
    """What a backend uses of :class:`pathweave.store.graph_store.GraphStore` (defined there; a
    protocol here so that backends do not import the store that holds them)."""

    tenant: str
    backend: Backend

    def run(self, name: str, **params) -> list[dict]:
        """Run a named statement for the tenant."""


class Capability(str, enum.Enum):
    """What a backend can compute inside the database."""

    VECTOR_SEARCH = "vector_search"  # db.index.vector.queryNodes (both backends)
    PPR = "ppr"  # stage-1 Personalized PageRank (GDS pageRank with sourceNodes)
    KNN = "knn"  # synonymy kNN over all entity embeddings (gds.knn)
    KMEANS = "kmeans"  # entity clusters (gds.kmeans)


#: (label, property) pairs that carry an embedder-sized vector index (spec §0; Triple: the
#: fact texts of the HippoRAG 2 baseline; Run: APR's fact runs (``embedding``) and question
#: and answer runs (``memory_embedding``), the coarse candidates of spec §3).
VECTOR_INDEXES: tuple[tuple[str, str], ...] = (
    ("Passage", "embedding"),
    ("Proposition", "embedding"),
    ("Entity", "embedding"),
    ("Relation", "embedding"),
    ("Triple", "embedding"),
    ("Run", "embedding"),
    ("Run", "memory_embedding"),
)


def index_statement(prefix: str, label: str, prop: str) -> str:
    """The name of the per-vector-index statement ``prefix`` for ``label.prop`` (label and
    property cannot be parameters): ``<prefix>_<label>``, ``_memory`` for ``memory_embedding``."""
    return f"{prefix}_{label.lower()}" + ("_memory" if prop == "memory_embedding" else "")


#: The exact search of a small tenant for each vector index (``cypher/topology.cypher``).
EXACT_SEARCHES: dict[tuple[str, str], str] = {pair: index_statement("vector_exact", *pair) for pair in VECTOR_INDEXES}

EXACT_MAX_NODES = 20_000
"""The most nodes an exact search reads (its statement collects them and answers every
score: about 1 MB)."""

EXACT_PER_PLACE = 4.0
"""Before each widening, the tenant is scored exactly instead when it holds at most this many
nodes per index place the widening is expected to need (``k`` x the places asked / the
tenant's nodes among them: the tenant's share seen so far). Scoring a tenant exactly costs
about what widening a crowded search costs when the tenant holds some four nodes per place,
on both stores (``pathweave bench tenants``, figures in docs/benchmarks-history.md): several rounds of growing k, each with its
own overhead, where the estimate counts only the last round's places."""

EXACT_SIZE_TTL_S = 600.0
"""How long the size of a tenant's label that an exact search read is trusted to skip an
exact search it would refuse (a tenant grows or shrinks; the statement itself always decides
on the live size, so a stale size only costs time)."""

#: Full-text (Lucene) indexes: label -> the string properties indexed together (lexical
#: hits beside the vector hits).
FULLTEXT_INDEXES: dict[str, tuple[str, ...]] = {
    "Passage": ("title", "text"),
    "Proposition": ("text",),
    "Entity": ("name",),
}


@runtime_checkable
class Backend(Protocol):
    """A graph store reached over Bolt. ``name``: ``arcadedb`` | ``neo4j``."""

    name: str
    capabilities: frozenset[Capability]
    similarity_normalized: bool
    """Whether ``vector.similarity.cosine`` answers ``(1 + cos) / 2`` (Neo4j) rather than the
    cosine itself (ArcadeDB)."""

    def create_vector_indexes(self, dimensions: int) -> None:
        """Create the cosine vector indexes of :data:`VECTOR_INDEXES` idempotently."""

    def vector_index_name(self, label: str, prop: str = "embedding") -> str:
        """The index name ``db.index.vector.queryNodes`` takes for ``label.prop``."""

    def create_fulltext_indexes(self) -> None:
        """Create the full-text indexes of :data:`FULLTEXT_INDEXES` idempotently."""

    def fulltext_index_name(self, label: str) -> str:
        """The index name ``db.index.fulltext.queryNodes`` takes for ``label``."""

    def personalized_pagerank(self, store: GraphStore, seeds: Mapping[str, float], damping: float,
                              version: int) -> dict[str, float] | None:
        """Only with :attr:`Capability.PPR`: ``{passage_id: score}`` of the tenant's PPR graph
        at ``version``, or None while that version's projection is not ready."""

    def write_synonyms(self, store: GraphStore, threshold: float, max_per_entity: int) -> int:
        """Only with :attr:`Capability.KNN`: write the tenant's SYNONYM edges, return the count."""

    def kmeans_entities(self, store: GraphStore, k: int, entity_ids: Sequence[str] | None = None,
                        seed: int = 42) -> dict[str, int]:
        """Only with :attr:`Capability.KMEANS`: ``{entity_id: cluster}``."""

    def graph_changed(self, store: GraphStore) -> None:
        """Called after every recorded graph change (Neo4j: schedule the re-projection)."""

    def close(self) -> None:
        """Release what the backend holds (the driver is the store's)."""


class Acceptor(Protocol):
    """Which of an index's hits a search keeps (a restricted caller's readable nodes,
    :func:`pathweave.graph.visibility.acceptors`): ``accepts(id)``, ``share`` in (0, 1],
    about the fraction of the tenant's nodes it accepts, and ``prepare(ids)``, called with a
    round's candidate ids before any is asked."""

    share: float

    def accepts(self, node_id: str) -> bool: ...

    def prepare(self, ids: list[str]) -> None: ...


MIN_FIRST_SHARE = 0.05
"""The smallest share :func:`first_ask` sizes a restricted search's first round for (a caller
reading less of the tenant widens from there, x4 per round)."""


def first_ask(k: int, share: float) -> int:
    """The places a restricted search asks for first, to keep ``k`` hits when about ``share``
    of the tenant's nodes are accepted (at least :data:`MIN_FIRST_SHARE`): the accepted
    hits among ``n`` places are about binomial (mean ``n * share``, variance ``n * share *
    (1 - share)``), so ``k / share`` places fall short half the time and each shortfall
    costs a round asking four times as many. Two standard deviations more,
    ``(k + 2 * sqrt(k * (1 - share))) / share``, fall short about one time in forty."""
    share = min(1.0, max(share, MIN_FIRST_SHARE))
    return math.ceil((k + 2.0 * math.sqrt(k * (1.0 - share))) / share)


def cosine_of(score: float) -> float:
    """The raw cosine of a vector index's normalized score ``(1 + cos) / 2``."""
    return 2.0 * float(score) - 1.0


def ask_wider(found: int, mine: int, asked: int, need: int, last: int, max_k: int) -> bool:
    """Whether a search of a vector index shared by every tenant must be asked again with a
    larger k: it returned ``found`` rows (``last`` the time before, -1 on the first ask) for
    ``asked`` places, ``mine`` of them this tenant's, and ``need`` of the tenant's are
    wanted. Yes while fewer than ``need`` are the tenant's and ``asked < max_k``, if all
    places came back (more may lie beyond) or other tenants' nodes took at least half the
    places and the answer grew (an approximate index crowded by other tenants'
    near-duplicates returns fewer than asked).

    A tenant beside one other with the same documents is not crowded: its twin takes as
    many places as its own nodes, few of them, and a wider ask finds nothing new (with "any
    other tenant's node" as the rule, a tenant ingesting the same documents as another
    repeated every synonymy and alias ask wider, for the same SYNONYM and ALIAS_OF edges;
    docs/benchmarks-history.md)."""
    if mine >= need or asked >= max_k:
        return False
    return found >= asked or (2 * (found - mine) >= asked and found > last)


def vector_search(store: GraphStore, label: str, vector: np.ndarray, k: int,
                  max_k: int = 100_000, prop: str = "embedding", exact: bool = True,
                  accept: Acceptor | None = None) -> list[tuple[str, float]]:
    """The tenant's ``k`` nodes of ``label`` nearest to the L2-normalized ``(d,)`` ``vector``
    in the index on ``label.prop``: ``[(id, cosine)]``, best first.

    The index is shared by every tenant of the database. While other tenants' nodes crowd
    the answer (:func:`ask_wider`), the search widens (x4 each time, at most ``max_k``), unless
    the tenant is small enough to be scored exactly for less than the widening is expected to
    cost (``exact``; :func:`exact_search`, bound :data:`EXACT_PER_PLACE`):
    then a small tenant's search costs what its own size costs, however large the others are.
    Once a search of the tenant's ``label.prop`` ended exact, the next ones (for
    :data:`EXACT_SIZE_TTL_S`, within the same bound per place asked) are scored exactly at
    once, without the index rounds that showed the crowding (an exact answer: at least as good
    as the index's); then the index is asked again, so a change in the other tenants is
    noticed. ``accept``: only the hits it accepts count (a restricted caller's readable
    nodes, :func:`pathweave.graph.visibility.acceptors`); the first round asks for
    :func:`first_ask` places.
    """
    return _nearest(store, "vector_search", label, vector, k, max_k, prop, exact, accept)[0]


def versioned_vector_search(store: GraphStore, label: str, vector: np.ndarray, k: int,
                            max_k: int = 100_000, exact: bool = True, accept: Acceptor | None = None
                            ) -> tuple[list[tuple[str, float]], int | None]:
    """:func:`vector_search` on ``label.embedding`` plus the tenant's graph version, read by
    the first index round's statement (``vector_search_versioned``): ``(hits, version)``;
    version None when the index gave no rows or the tenant has no version yet (ask
    :meth:`~pathweave.store.graph_store.GraphStore.graph_version`)."""
    hits, rows = _nearest(store, "vector_search_versioned", label, vector, k, max_k, "embedding", exact, accept,
                          meta_id=store.meta_id)
    return hits, next((int(row["version"]) for row in rows if row["version"] is not None), None)


_sizes: dict[tuple[str, str, str, str], tuple[int, float]] = {}
"""(database, tenant, label, property) -> (the tenant's nodes of the label as the last exact
search read them, capped at ``EXACT_MAX_NODES + 1``; until when (monotonic s) that is trusted);
at most 4,096 entries."""
_exact_bounds: dict[tuple[str, str, str, str], tuple[float, float]] = {}
"""(database, tenant, label, property) -> (the bound per place asked (bound / k) under which a
widening search of the tenant last ended in an exact search; until when (monotonic s) the next
searches start there); at most 4,096 entries."""
_sizes_lock = threading.Lock()


def _search_key(store: GraphStore, label: str, prop: str) -> tuple[str, str, str, str]:
    return str(getattr(store, "database", "")), store.tenant, label, prop


def _remembered(table: dict, key: tuple) -> Any:
    """``table[key]``'s value while its time is not up (None otherwise)."""
    with _sizes_lock:
        value, until = table.get(key, (None, 0.0))
    return value if until > time.monotonic() else None


def _remember(table: dict, key: tuple, value: Any) -> None:
    """``table[key] = value`` for :data:`EXACT_SIZE_TTL_S`; the table holds at most 4,096
    entries (the expired are forgotten first, else the oldest quarter)."""
    with _sizes_lock:
        if key not in table and len(table) >= 4096:
            now = time.monotonic()
            for old in [name for name, (_, t) in table.items() if t <= now] or list(table)[:1024]:
                del table[old]
        table[key] = (value, time.monotonic() + EXACT_SIZE_TTL_S)


def exact_search(store: GraphStore, label: str, prop: str, vector: list[float], k: int,
                 bound: int, accept: Acceptor | None = None) -> tuple[list[tuple[str, float]], dict] | None:
    """The tenant's ``k`` nodes of ``label`` with ``prop`` nearest to ``vector``, scored exactly
    when the tenant holds at most ``bound`` (capped at :data:`EXACT_MAX_NODES`) nodes of the
    label (statement ``vector_exact_*``: one read of at most ``EXACT_MAX_NODES + 1`` nodes
    through the tenant index, scored only within the bound): ``([(id, cosine)] best first,
    the statement's row)`` (the row carries the tenant's graph ``version``); None when it holds
    more. The size read is remembered for :data:`EXACT_SIZE_TTL_S`, so a search that would be
    refused is not asked. ``accept``: only the nodes it accepts are returned."""
    bound = min(int(bound), EXACT_MAX_NODES)
    key = _search_key(store, label, prop)
    size = _remembered(_sizes, key)
    if size is not None and size > bound:
        return None
    row = store.run(EXACT_SEARCHES[(label, prop)], limit=EXACT_MAX_NODES + 1, bound=bound, vector=vector,
                    meta_id=getattr(store, "meta_id", None))[0]
    _remember(_sizes, key, int(row["size"]))
    if int(row["size"]) > bound:
        return None
    to_cosine = cosine_of if store.backend.similarity_normalized else float
    hits = sorted(((i, to_cosine(s)) for i, s in zip(row["ids"], row["scores"]) if s is not None),
                  key=lambda hit: -hit[1])
    return accepted(hits, k, accept)[:k], row


def accepted(hits: list[tuple[str, float]], k: int, accept: Acceptor | None) -> list[tuple[str, float]]:
    """The ``hits`` (in order) that ``accept`` accepts, prepared (``accept.prepare``) a chunk
    at a time, best first, until ``k`` are kept: the rest is neither prepared nor kept."""
    if accept is None:
        return hits
    kept: list[tuple[str, float]] = []
    step = max(2 * k, 64)
    for start in range(0, len(hits), step):
        chunk = hits[start:start + step]
        accept.prepare([i for i, _ in chunk])
        kept += [hit for hit in chunk if accept.accepts(hit[0])]
        if len(kept) >= k:
            break
    return kept


def _nearest(store: GraphStore, statement: str, label: str, vector: np.ndarray, k: int, max_k: int, prop: str,
             exact: bool, accept: Acceptor | None = None, **params) -> tuple[list[tuple[str, float]], list[dict]]:
    """The search of :func:`vector_search` with ``statement``: the tenant's ``k`` best ``(id,
    cosine)`` and the rows of the index's last round."""
    if k <= 0:
        return [], []
    index = store.backend.vector_index_name(label, prop)
    values = np.asarray(vector, dtype=float).tolist()
    if not exact or (label, prop) not in EXACT_SEARCHES:
        return _widening(store, statement, k, max_k, cosine_of, accept=accept, index=index, vector=values, **params)
    key = _search_key(store, label, prop)
    per_place = _remembered(_exact_bounds, key)
    if per_place is not None:  # the last widening search of this tenant ended exact: start there
        found = exact_search(store, label, prop, values, k, int(per_place * k), accept)
        if found is not None:
            return found[0], [found[1]]

    def scored(bound: int):
        found = exact_search(store, label, prop, values, k, bound, accept)
        if found is not None:
            _remember(_exact_bounds, key, bound / k)
        return found
    return _widening(store, statement, k, max_k, cosine_of, exact=scored, accept=accept, index=index, vector=values,
                     **params)


def fulltext_search(store: GraphStore, label: str, query: str, k: int, max_k: int = 100_000,
                    accept: Acceptor | None = None) -> list[tuple[str, float]]:
    """The tenant's ``k`` best ``label`` nodes of the full-text index for the Lucene ``query``
    (:func:`pathweave.retrieval.lexical.lucene_query`): ``[(id, relevance)]``, best first
    (statement ``fulltext_search``; widened like :func:`vector_search`, the index being shared
    by every tenant; ``accept`` as there). Empty for an empty query."""
    if not query:
        return []
    return _widening(store, "fulltext_search", k, max_k, float, accept=accept,
                     index=store.backend.fulltext_index_name(label), query=query)[0]


def _widening(store: GraphStore, statement: str, k: int, max_k: int, score, exact=None,
              accept: Acceptor | None = None, **params) -> tuple[list[tuple[str, float]], list[dict]]:
    """Ask ``statement`` for ``k`` places, x4 while :func:`ask_wider` says so: the tenant's
    ``k`` best ``(id, score(row score))`` and the rows of the last round. ``exact(bound)``:
    asked before each widening with the nodes the tenant may hold to be scored exactly
    instead (:data:`EXACT_PER_PLACE` x the places the widening is expected to need); unless
    it answers None, its hits are the result, with its row as the rows. ``accept``: only the
    tenant's rows it accepts count as the tenant's (the others crowd the answer like other
    tenants' nodes); the first round asks for :func:`first_ask` places."""
    if k <= 0:
        return [], []
    asked, last = k if accept is None else min(max_k, first_ask(k, accept.share)), -1
    while True:
        rows = store.run(statement, k=asked, **params)
        mine = accepted([(row["id"], score(row["score"])) for row in rows if row["tenant"] == store.tenant], k,
                        accept)
        if not ask_wider(len(rows), len(mine), asked, k, last, max_k):
            mine.sort(key=lambda item: -item[1])
            return mine[:k], rows
        if exact is not None:  # the places still to read at the share seen so far
            scored = exact(int(EXACT_PER_PLACE * k * asked / max(1, len(mine))))
            if scored is not None:
                return scored[0], [scored[1]]
        asked, last = min(max_k, asked * 4), len(rows)


def vector_knn(store: GraphStore, label: str, ids: Sequence[str], vectors: np.ndarray, k: int,
               min_cosine: float, batch: int = 256, max_k: int = 10_000, first_k: int = 16) -> list[dict]:
    """For each ``ids[i]`` with ``vectors[i]`` (``(n, d)`` float32, L2-normalized): up to ``k``
    of the tenant's ``label`` nodes with cosine >= ``min_cosine``, itself included, as rows
    ``{src, dst, norm_name, cosine}``. One ``vector_knn`` statement per ``batch`` vectors.

    Most vectors have few neighbours above the threshold, so each is first asked for
    ``first_k`` places, and asked again with a larger k (x4, at most ``max_k``) while
    :func:`ask_wider` says so (all places taken above the threshold, or crowded by other
    tenants) until its ``k + 1`` best of the tenant are known. This is about twice as quick as
    asking each vector for ``k + 1`` places at once, with nearly the same pairs (the index is
    approximate); figures in docs/benchmarks-history.md."""
    index = store.backend.vector_index_name(label)
    min_score = (1.0 + min_cosine) / 2.0
    out: list[dict] = []
    todo = list(range(len(ids)))
    asked = min(k + 1, first_k)
    returned: dict[int, int] = {}  # rows the index gave each vector last time
    while todo:
        again: list[int] = []
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            rows = store.run("vector_knn", index=index, k=asked, min_score=min_score,
                             rows=[{"id": str(i), "vector": np.asarray(vectors[i], dtype=float).tolist()}
                                   for i in chunk])
            hits: dict[int, list[dict]] = {i: [] for i in chunk}
            for row in rows:
                hits[int(row["src"])].append(row)
            for i, found in hits.items():
                mine = [r for r in found if r["tenant"] == store.tenant]
                wider = ask_wider(len(found), len(mine), asked, k + 1, returned.get(i, -1), max_k)
                returned[i] = len(found)
                if wider:
                    again.append(i)
                    continue
                mine.sort(key=lambda r: -r["score"])
                out.extend({"src": ids[i], "dst": r["dst"], "norm_name": r["norm_name"] or "",
                            "cosine": cosine_of(r["score"])} for r in mine[:k + 1])
        todo, asked = again, min(max_k, asked * 4)
    return out
