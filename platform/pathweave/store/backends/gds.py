"""Neo4j Graph Data Science for the Neo4j backend (spec §1 PPR and synonymy, §3 k-means).

Uses the official ``graphdatascience`` client (2.x API: ``gds.graph.project.cypher``,
``gds.page_rank``, ``gds.knn``, ``gds.kmeans``). Every function takes the client ``gds``
and ``run(name, **params) -> list[dict]``, a tenant-scoped runner of named statements
(``GraphStore.run``), so unit tests pin the exact calls with fakes. The Cypher lives in
``cypher/neo4j.cypher``.

PPR graph (spec §1): the tenant's entities and passages, undirected ``LINK``
relationships weighted by ``weight`` (co-occurrence counts, synonymy cosine,
passage-entity 1.0): the same graph as :mod:`pathweave.graph.topology` builds in process.
It is a named GDS graph ``pathweave-ppr-<tenant>-v<version>`` kept in GDS memory; with
the graph version in the name, every process (API replicas, workers) sees which
version is projected. :class:`PprProjector` projects a new version in a background
thread once the version has stopped changing for ``debounce_s`` seconds (each
ingestion batch bumps it), never inside a query, logs a GDS memory estimate first and
drops the tenant's older versions after.

Scores: GDS PageRank with ``sourceNodes`` ``[(node, bias)]`` solves
``x = (1 - d) b + d x T`` with ``T`` the weighted transition matrix (isolated nodes
pass nothing on). :func:`pathweave.graph.ppr.personalized_pagerank` returns the mass of
isolated nodes to the seeds instead, which only adds a multiple of the seed vector:
its result is a scalar multiple of GDS's. Normalizing the GDS stream to sum 1 (as
here) gives the in-process scores, up to the tolerance.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from pathweave.store.statements import statement
from pathweave.errors import PathweaveError

log = logging.getLogger(__name__)

#: Runs a named statement of ``cypher/`` for the tenant: ``run(name, **params) -> rows``.
Run = Callable[..., list[dict[str, Any]]]

GRAPH_PREFIX = "pathweave"
REL_TYPE = "LINK"
WEIGHT = "weight"
#: Stage-1 PageRank: iterations cap and per-node score change to stop at (GDS defaults
#: 20 / 1e-7 stop early at damping 0.75; these match pathweave.graph.ppr's power iteration).
PPR_MAX_ITERATIONS = 100
PPR_TOLERANCE = 1e-8
#: Tenants' PPR graphs kept in the GDS catalog at most (least recently projected dropped).
MAX_PPR_GRAPHS = 16
#: Reset groups of the stage-1 PPR (GDS 2.13 sourceNodes are unweighted): the seed entities'
#: weight plus 7 bins of passage weights, i.e. at most 8 pageRank calls per query.
RESET_LEVELS = 8
#: k-means runs per clustering, the lowest inertia kept (scikit-learn's n_init=10).
KMEANS_RESTARTS = 10
#: kNN compares every candidate it samples (1.0 = the most exact neighbour lists).
KNN_SAMPLE_RATE = 1.0
#: Synonym pairs sent per import call (the statement commits every 5000 rows).
IMPORT_CHUNK = 50_000


class Store(Protocol):
    """What the projector needs of a :class:`pathweave.store.graph_store.GraphStore`."""

    tenant: str

    def run(self, name: str, **params: Any) -> list[dict[str, Any]]: ...

    def graph_version(self) -> int: ...


@dataclass(frozen=True)
class PprGraph:
    """A projected PPR graph: its catalog name, the tenant graph version it holds, the
    client's ``Graph`` handle, ``node_ids`` (entity/passage id -> GDS node id) and
    ``passages`` (GDS node id -> passage id)."""

    name: str
    version: int
    graph: Any
    node_ids: dict[str, int]
    passages: dict[int, str]


def ppr_graph_name(tenant: str, version: int) -> str:
    """Catalog name of the tenant's PPR graph at ``version``."""
    return f"{GRAPH_PREFIX}-ppr-{tenant}-v{int(version)}"


def _ppr_version(name: str, tenant: str) -> int | None:
    """The version in ``name`` when it is one of ``tenant``'s PPR graphs, else None."""
    prefix = f"{GRAPH_PREFIX}-ppr-{tenant}-v"
    suffix = name[len(prefix):] if name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def _node_keys(run: Run) -> tuple[dict[str, int], dict[int, str]]:
    node_ids: dict[str, int] = {}
    passages: dict[int, str] = {}
    for row in run("neo4j_gds_node_keys"):
        node = int(row["node"])
        node_ids[row["key"]] = node
        if row["passage"]:
            passages[node] = row["key"]
    return node_ids, passages


def graph_size(run: Run) -> tuple[int, int]:
    """Upper bounds ``(nodes, relationships)`` of the tenant's PPR graph."""
    rows = run("neo4j_gds_graph_size")
    if not rows:
        return 0, 0
    return int(rows[0]["node_count"] or 0), int(rows[0]["relationship_count"] or 0)


class ProjectionTooLarge(PathweaveError, RuntimeError):
    """A projection's memory estimate exceeds the share of the GDS server's heap it may take
    (``store.gds_max_heap_percent``): refused before anything is loaded."""


def estimate_ppr_memory(gds: Any, nodes: int, relationships: int, damping: float) -> Any | None:
    """GDS memory estimate (``gds.pageRank.stats.estimate`` on a fictive graph of this
    size, graph included), logged; None when the server cannot estimate (then nothing is
    refused on its account)."""
    fictive = {
        "nodeProjection": "*",
        "relationshipProjection": {REL_TYPE: {"type": "*", "orientation": "UNDIRECTED", "properties": WEIGHT}},
        "nodeCount": int(nodes),
        "relationshipCount": int(relationships),
    }
    try:
        estimate = gds.page_rank.estimate(
            fictive, damping_factor=float(damping), relationship_weight_property=WEIGHT,
            max_iterations=PPR_MAX_ITERATIONS, tolerance=PPR_TOLERANCE,
        )
    except Exception as error:  # noqa: BLE001 - an estimate never blocks the projection
        log.warning("GDS memory estimate failed (%d nodes, %d relationships): %s", nodes, relationships, error)
        return None
    log.info(
        "GDS memory estimate for the PPR graph (%d nodes, <= %d relationships): %s "
        "(%.1f%%-%.1f%% of the heap)", nodes, relationships, estimate.required_memory,
        estimate.heap_percentage_min, estimate.heap_percentage_max,
    )
    return estimate


def load_ppr_graph(gds: Any, run: Run, tenant: str, version: int) -> PprGraph | None:
    """The tenant's PPR graph at ``version`` if the catalog has it (any process made it)."""
    name = ppr_graph_name(tenant, version)
    if not gds.graph.exists(name):
        return None
    return PprGraph(name, int(version), gds.graph.get(name), *_node_keys(run))


def project_ppr_graph(gds: Any, run: Run, tenant: str, version: int, damping: float = 0.75,
                      max_heap_percent: float = 100.0) -> PprGraph | None:
    """Project the tenant's PPR graph for ``version`` (memory estimate first) and drop its
    older versions. None when the tenant has no entity or passage yet.

    Raises :class:`ProjectionTooLarge` when the estimate's upper bound exceeds
    ``max_heap_percent`` of the server's heap (nothing is projected), and the client's errors
    (e.g. the server's own memory guard); a graph of the same name projected meanwhile by
    another process is loaded instead.
    """
    nodes, relationships = graph_size(run)
    if nodes == 0:
        return None
    estimate = estimate_ppr_memory(gds, nodes, relationships, damping)
    if estimate is not None and float(estimate.heap_percentage_max) > max_heap_percent:
        raise ProjectionTooLarge(
            f"the PPR graph of tenant {tenant!r} ({nodes} nodes, <= {relationships} relationships) would need "
            f"{estimate.required_memory}, up to {float(estimate.heap_percentage_max):.1f}% of the GDS server's heap, "
            f"over the {max_heap_percent:g}% allowed (PATHWEAVE_STORE_GDS_MAX_HEAP_PERCENT): not projected, stage 1 "
            "runs in process; give the GDS server more heap or allow a larger share")
    name = ppr_graph_name(tenant, version)
    started = time.perf_counter()
    try:
        graph, result = gds.graph.project.cypher(statement("neo4j_gds_project_ppr"), graph_name=name, tenant=tenant)
    except Exception:
        if not gds.graph.exists(name):
            raise
        graph, result = gds.graph.get(name), None
    if result is not None:
        log.info("projected GDS graph %s: %d nodes, %d relationships in %.0f ms", name,
                 result.node_count, result.relationship_count, (time.perf_counter() - started) * 1000)
    projected = PprGraph(name, int(version), graph, *_node_keys(run))
    drop_stale_graphs(gds, tenant, int(version))
    evict_least_recent_graphs(gds, MAX_PPR_GRAPHS, keep=name)
    return projected


def evict_least_recent_graphs(gds: Any, limit: int, keep: str = "") -> list[str]:
    """Keep at most ``limit`` PPR graphs (every tenant's, in this database) in the GDS
    catalog: drop the least recently projected beyond it (never ``keep``). GDS holds each on
    the heap, 25 MB or more even for a tiny tenant, so the catalog is bounded like any cache;
    a dropped tenant is projected again when next queried (in-process PPR meanwhile).
    Returns the dropped names."""
    database = gds.database()
    mine = [info for info in gds.graph.list()
            if info.graph_name.startswith(f"{GRAPH_PREFIX}-ppr-") and (not database or info.database == database)]
    if len(mine) <= limit:
        return []
    mine.sort(key=lambda info: str(getattr(info, "creation_time", "")))  # oldest first
    dropped = []
    for info in mine[:len(mine) - limit]:
        if info.graph_name != keep:
            gds.graph.drop(info.graph_name, fail_if_missing=False)
            dropped.append(info.graph_name)
    if dropped:
        log.info("dropped %d least recently projected GDS graphs (limit %d)", len(dropped), limit)
    return dropped


def drop_stale_graphs(gds: Any, tenant: str, version: int) -> list[str]:
    """Drop the tenant's PPR graphs older than ``version`` (in this database); their names."""
    database = gds.database()
    dropped = []
    for info in gds.graph.list():
        old = _ppr_version(info.graph_name, tenant)
        if old is not None and old < version and (not database or info.database == database):
            gds.graph.drop(info.graph_name, fail_if_missing=False)
            dropped.append(info.graph_name)
    return dropped


def reset_groups(weights: Mapping[int, float], levels: int = RESET_LEVELS) -> list[dict[str, Any]]:
    """The reset vector ``{node: weight}`` as groups ``[{"nodes": [node], "weight": w}]`` of
    equal weight, for GDS 2.13's unweighted ``sourceNodes`` (one pageRank call per group).

    Exact when the positive weights take at most ``levels`` distinct values. Otherwise the
    largest weight keeps its own group (stage 1's seed entities, 1.0) and the others (the
    passages' ``0.05 x`` normalized cosines) fall into ``levels - 1`` equal-width bins, each
    at its members' mean weight (bin mass preserved; error <= half a bin width per node).
    Groups are ordered by decreasing weight; zero and negative weights are left out."""
    positive = {int(node): float(w) for node, w in weights.items() if w > 0}
    distinct = sorted(set(positive.values()), reverse=True)
    if len(distinct) <= levels:
        buckets = {w: [n for n, v in positive.items() if v == w] for w in distinct}
        return [{"nodes": sorted(nodes), "weight": w} for w, nodes in buckets.items()]
    top = distinct[0]
    rest = {n: w for n, w in positive.items() if w != top}
    low, high = min(rest.values()), max(rest.values())
    width = (high - low) / (levels - 1)
    bins: dict[int, list[int]] = {}
    for node, w in rest.items():
        bins.setdefault(min(levels - 2, int((w - low) / width)), []).append(node)
    groups = [{"nodes": sorted(n for n, w in positive.items() if w == top), "weight": top}]
    for index in sorted(bins, reverse=True):
        nodes = sorted(bins[index])
        groups.append({"nodes": nodes, "weight": sum(rest[n] for n in nodes) / len(nodes)})
    return groups


def personalized_pagerank(gds: Any, graph: PprGraph, seeds: Mapping[str, float], damping: float) -> dict[str, float]:
    """Stage-1 PPR (spec §1 step 4) in GDS: ``{passage_id: score}`` normalized to sum 1
    over all nodes (see the module docstring), passages with a positive score only.

    ``seeds``: entity or passage id -> non-negative bias (the reset vector, any scale);
    ids absent from the graph and zero weights are skipped. GDS 2.13's ``sourceNodes`` carry
    no bias, so the reset goes in as groups of equal weight (:func:`reset_groups`), one
    ``gds.pageRank.stream`` each, summed in the database by the named statement
    ``neo4j_gds_personalized_pagerank`` (one round trip). ``damping``: probability of
    following an edge. Empty dict when no seed is in the graph.
    """
    weights = {graph.node_ids[key]: float(weight) for key, weight in seeds.items()
               if weight > 0 and key in graph.node_ids}
    if not weights:
        return {}
    rows = gds.run_cypher(statement("neo4j_gds_personalized_pagerank"), params={
        "graph_name": graph.name, "groups": reset_groups(weights), "damping": float(damping),
        "max_iterations": PPR_MAX_ITERATIONS, "tolerance": PPR_TOLERANCE})
    if rows.empty:
        return {}
    passages = graph.passages
    return {passages[node]: score for node, score in zip(map(int, rows["node"]), map(float, rows["score"]))
            if node in passages}


@contextmanager
def entity_graph(gds: Any, run: Run, tenant: str, entity_ids: Sequence[str] | None = None) -> Iterator[tuple[Any, int]]:
    """A transient GDS graph of the tenant's entities with their ``embedding`` (entities
    with <= 2 alphanumeric characters left out; only ``entity_ids`` when given):
    ``(graph, node_count)``, dropped on exit; ``(None, 0)`` when no entity qualifies.
    The name is unique per call."""
    name = f"{GRAPH_PREFIX}-entities-{tenant}-{uuid.uuid4().hex[:12]}"
    ids = list(entity_ids) if entity_ids is not None else None
    try:
        graph, result = gds.graph.project.cypher(statement("neo4j_gds_project_entities"),
                                                 graph_name=name, tenant=tenant, ids=ids)
    except ValueError:  # the client's answer when the projection made no graph: no entity qualifies
        yield None, 0
        return
    try:
        yield graph, int(result.node_count)
    finally:
        gds.graph.drop(name, fail_if_missing=False)


def _entity_keys(run: Run) -> dict[int, str]:
    return {int(row["node"]): row["key"] for row in run("neo4j_gds_entity_keys")}


def synonym_candidates(gds: Any, run: Run, tenant: str, threshold: float = 0.8,
                       top_k: int = 100) -> list[dict[str, str]]:
    """Synonymy candidates (spec §1) from ``gds.knn`` over entity embeddings: rows
    ``{src, dst}`` (entity ids, ``src < dst``, each pair once, sorted).

    ``top_k`` neighbours per entity with similarity >= ``threshold``. The kNN's cosine
    is ranked like the raw cosine; the exact raw cosine filter is applied when they are
    written (:func:`write_synonyms`), so no pair below ``threshold`` is kept.
    """
    with entity_graph(gds, run, tenant) as (graph, count):
        if count < 2:
            return []
        frame = gds.knn.stream(
            graph, node_properties={"embedding": "COSINE"}, top_k=int(top_k),
            similarity_cutoff=float(threshold), sample_rate=KNN_SAMPLE_RATE, log_progress=False,
        )
    keys = _entity_keys(run)
    pairs: set[tuple[str, str]] = set()
    for a, b in zip(map(int, frame["node1"]), map(int, frame["node2"])):
        src, dst = keys.get(a), keys.get(b)
        if src and dst and src != dst:
            pairs.add((src, dst) if src < dst else (dst, src))
    return [{"src": src, "dst": dst} for src, dst in sorted(pairs)]


def write_synonyms(gds: Any, run: Run, tenant: str, threshold: float = 0.8, top_k: int = 100) -> int:
    """Write the tenant's synonymy edges: kNN candidates (:func:`synonym_candidates`)
    merged as ``SYNONYM {score}`` where the raw cosine >= ``threshold`` (statement
    ``neo4j_import_synonyms``, ``CALL … IN TRANSACTIONS``). Returns the edges written."""
    rows = synonym_candidates(gds, run, tenant, threshold, top_k)
    written = 0
    for start in range(0, len(rows), IMPORT_CHUNK):
        result = run("neo4j_import_synonyms", rows=rows[start:start + IMPORT_CHUNK], threshold=float(threshold))
        written += int(result[0]["written"] or 0) if result else 0
    return written


def kmeans_entities(gds: Any, run: Run, tenant: str, k: int, entity_ids: Sequence[str] | None = None,
                    seed: int = 42) -> dict[str, int]:
    """``gds.kmeans`` over entity embeddings (APR layer-2 alias consolidation, spec §3):
    ``{entity_id: cluster}`` for the tenant's entities (or ``entity_ids``), ``k`` capped
    at the number of entities; empty when there are none.

    Like scikit-learn's KMeans (k-means++ seeds, 10 runs, the lowest inertia kept): one
    projection, :data:`KMEANS_RESTARTS` ``gds.kmeans.stream`` calls with k-means++ seeds
    ``seed``, ``seed + 1``, ..., and the run with the smallest sum of squared distances to
    the centroids wins. GDS's own ``numberOfRestarts`` did not keep the best run: on a
    4-point chain it returned {A, B, C}, {D} for 2 of 3 seeds, not {A, B}, {C, D}."""
    with entity_graph(gds, run, tenant, entity_ids) as (graph, count):
        if count == 0:
            return {}
        best, best_inertia = None, float("inf")
        for attempt in range(KMEANS_RESTARTS):
            frame = gds.kmeans.stream(graph, node_property="embedding", k=min(int(k), count),
                                      random_seed=int(seed) + attempt, initial_sampler="kmeans++",
                                      log_progress=False)
            inertia = float((frame["distanceFromCentroid"] ** 2).sum()) if "distanceFromCentroid" in frame else 0.0
            if inertia < best_inertia - 1e-12:
                best, best_inertia = frame, inertia
    keys = _entity_keys(run)
    return {keys[node]: int(cluster)
            for node, cluster in zip(map(int, best["nodeId"]), best["communityId"]) if node in keys}


class PprProjector:
    """Per-process cache of the tenants' PPR graphs with debounced re-projection.

    :meth:`graph` returns the projection of exactly the asked version or None; on None
    a projection is scheduled ``debounce_s`` seconds later in a daemon thread. A request
    for a newer version restarts the tenant's timer (ingestion batches in a row project
    once); repeated requests for the pending version do not, so steady queries cannot
    postpone it. Thread-safe.
    """

    def __init__(self, gds: Callable[[], Any], debounce_s: float = 5.0, damping: float = 0.75,
                 max_heap_percent: float = 100.0) -> None:
        self._gds = gds
        self.debounce_s = debounce_s
        self.damping = damping
        self.max_heap_percent = max_heap_percent
        self._refused: dict[str, int] = {}  # tenant -> the version whose projection was refused
        self._graphs: dict[str, PprGraph] = {}
        self._pending: dict[str, tuple[int, threading.Timer]] = {}
        self._lock = threading.Lock()

    def graph(self, store: Store, version: int) -> PprGraph | None:
        """The tenant's projection at ``version`` (cached, else from the GDS catalog), or
        None after scheduling its projection."""
        with self._lock:
            cached = self._graphs.get(store.tenant)
        if cached is not None and cached.version == version:
            return cached
        found = load_ppr_graph(self._gds(), store.run, store.tenant, version)
        if found is not None:
            with self._lock:
                self._graphs[store.tenant] = found
            return found
        self.schedule(store, version)
        return None

    def schedule(self, store: Store, version: int) -> None:
        """Project the tenant's graph ``debounce_s`` seconds from now unless that version
        is already pending (a newer version restarts the timer)."""
        with self._lock:
            if self._refused.get(store.tenant) == version:  # too large for the heap: not again
                return
            pending = self._pending.get(store.tenant)
            if pending is not None:
                if pending[0] >= version:
                    return
                pending[1].cancel()
            timer = threading.Timer(self.debounce_s, self._project, args=(store, version))
            timer.daemon = True
            self._pending[store.tenant] = (version, timer)
            timer.start()

    def forget(self, tenant: str) -> None:
        """Drop the cached handle (e.g. after the server lost its in-memory graphs)."""
        with self._lock:
            self._graphs.pop(tenant, None)

    def project_now(self, store: Store) -> PprGraph | None:
        """Project (or load) the tenant's current version synchronously (tests, CLI)."""
        version = store.graph_version()
        gds = self._gds()
        bookmarks = getattr(store, "last_bookmarks", lambda: [])()
        if bookmarks and hasattr(gds, "set_bookmarks"):  # GDS on a secondary reads at least this state
            from neo4j import Bookmarks

            gds.set_bookmarks(Bookmarks.from_raw_values(bookmarks))
        graph = (load_ppr_graph(gds, store.run, store.tenant, version)
                 or project_ppr_graph(gds, store.run, store.tenant, version, self.damping, self.max_heap_percent))
        if graph is not None:
            with self._lock:
                self._graphs[store.tenant] = graph
        return graph

    def cancel(self) -> None:
        """Cancel every pending projection."""
        with self._lock:
            for _, timer in self._pending.values():
                timer.cancel()
            self._pending.clear()

    def _project(self, store: Store, version: int) -> None:
        try:
            self.project_now(store)
        except ProjectionTooLarge as refused:  # queries fall back to the in-process PPR
            log.error("%s", refused)
            with self._lock:
                self._refused[store.tenant] = version
        except Exception:  # noqa: BLE001 - a background thread: log, queries fall back
            log.exception("GDS projection for tenant %r failed", store.tenant)
        finally:
            with self._lock:  # done, unless a newer version was scheduled meanwhile
                pending = self._pending.get(store.tenant)
                if pending is not None and pending[0] == version:
                    del self._pending[store.tenant]
