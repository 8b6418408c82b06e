"""What differs between the default store (ArcadeDB over Bolt) and Neo4j.

One method per difference, same names on both dialects; nothing else in Pathweave
branches on the backend. The Cypher statements themselves are shared (``cypher/``).

- ``create_vector_indexes(dimensions)`` / ``vector_index_name(label, prop)``:
  ArcadeDB creates them in ArcadeDB SQL over its HTTP port (``LSM_VECTOR``, named
  ``Label[property]``); Neo4j with ``CREATE VECTOR INDEX`` (``cypher/neo4j.cypher``,
  named ``label_property``). Both are queried with ``db.index.vector.queryNodes``
  (statement ``vector_query_nodes``).
- ``stage1_ppr(store, seeds, damping, version)``: stage-1 Personalized PageRank in the
  database (Neo4j: GDS, :mod:`pathweave.gds`) or None = use the in-process PPR
  (ArcadeDB). :func:`stage1_passage_scores` wraps it for PropRAG's snapshot arrays.
- ``write_synonyms(store, threshold, max_per_entity)``: synonymy edges by ``gds.knn``
  (Neo4j) or None = compute them in Python (ArcadeDB).
- ``kmeans_entities(store, k, entity_ids)``: ``gds.kmeans`` clusters or None.
- ``graph_changed(store)``: after an ingestion batch (Neo4j: schedules the debounced
  re-projection); ``close()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from pathweave import gds as gds_ops
from pathweave.cypher import statement

if TYPE_CHECKING:
    from neo4j import Driver

    from pathweave.snapshot import GraphSnapshot
    from pathweave.store import GraphStore

log = logging.getLogger(__name__)

#: (label, property) pairs that carry a 384-d (embedder-sized) vector index (spec §0).
VECTOR_INDEXES: tuple[tuple[str, str], ...] = (
    ("Passage", "embedding"),
    ("Proposition", "embedding"),
    ("Entity", "embedding"),
    ("Relation", "embedding"),
)


#: ArcadeDB SQL DDL for one vector index; identifiers come from VECTOR_INDEXES only
#: (DDL identifiers cannot be parameters), the dimension is an int.
_ARCADE_VECTOR_DDL = (
    "CREATE VERTEX TYPE {label} IF NOT EXISTS",
    "CREATE PROPERTY {label}.{prop} IF NOT EXISTS ARRAY_OF_FLOATS",
    "CREATE INDEX IF NOT EXISTS ON {label} ({prop}) LSM_VECTOR "
    "METADATA {{dimensions: {dimensions}, similarity: 'COSINE'}}",
)

#: Neo4j: the named statement creating each vector index (cypher/neo4j.cypher).
_NEO4J_VECTOR_STATEMENTS: dict[tuple[str, str], str] = {
    ("Passage", "embedding"): "neo4j_vector_index_passage",
    ("Proposition", "embedding"): "neo4j_vector_index_proposition",
    ("Entity", "embedding"): "neo4j_vector_index_entity",
    ("Relation", "embedding"): "neo4j_vector_index_relation",
}


@dataclass(frozen=True)
class ArcadeDialect:
    """The managed ArcadeDB server: HTTP base URL, credentials and database."""

    http_url: str
    user: str
    password: str
    database: str
    name: str = "arcadedb"
    #: whether :meth:`stage1_ppr` can run PPR in the database (no: ArcadeDB has no GDS)
    runs_ppr = False

    def _sql(self, command: str) -> dict:
        response = httpx.post(
            f"{self.http_url}/api/v1/command/{self.database}",
            json={"language": "sql", "command": command},
            auth=(self.user, self.password),
            timeout=60,
        )
        if response.status_code != 200:
            raise RuntimeError(f"ArcadeDB SQL failed ({response.status_code}): {response.text[:300]}")
        return response.json()

    def create_vector_indexes(self, dimensions: int) -> None:
        """Create the vector indexes idempotently (ArcadeDB SQL, LSM_VECTOR, cosine)."""
        for label, prop in VECTOR_INDEXES:
            for template in _ARCADE_VECTOR_DDL:
                self._sql(template.format(label=label, prop=prop, dimensions=int(dimensions)))

    def vector_index_name(self, label: str, prop: str = "embedding") -> str:
        """Index name for ``db.index.vector.queryNodes`` (``Label[prop]``)."""
        return f"{label}[{prop}]"

    def stage1_ppr(self, store: GraphStore, seeds: Mapping[str, float], damping: float,
                   version: int) -> dict[str, float] | None:
        """None: ArcadeDB has no PPR; PropRAG runs it in process (pathweave.ppr)."""
        return None

    def write_synonyms(self, store: GraphStore, threshold: float, max_per_entity: int) -> int | None:
        """None: synonymy edges are computed in Python (pathweave_ingest.synonyms)."""
        return None

    def kmeans_entities(self, store: GraphStore, k: int, entity_ids: Sequence[str] | None = None,
                        seed: int = 42) -> dict[str, int] | None:
        """None: cluster in Python."""
        return None

    def graph_changed(self, store: GraphStore) -> None:
        """Nothing to refresh: the in-process snapshot follows the graph version."""

    def close(self) -> None:
        """Nothing to release."""


class Neo4jDialect:
    """A Neo4j 5.26 server (GDS plugin for PPR, kNN and k-means) reached with ``driver``.

    The GDS client is created on first use; when the server has no GDS (or it fails),
    a warning is logged once and the GDS methods return None, so PropRAG and
    ingestion fall back to their in-process code (same results, see pathweave.gds).
    ``debounce_s``: seconds the graph version must stay unchanged before the tenant's
    PPR graph is re-projected.
    """

    name = "neo4j"
    runs_ppr = True  # through GDS, when the server has it (stage1_ppr returns None otherwise)

    def __init__(self, driver: Driver, database: str, debounce_s: float = 5.0, gds: Any = None) -> None:
        self.driver = driver
        self.database = database
        self._gds = gds
        self._gds_failed = False
        self._lock = threading.Lock()
        self.projector = gds_ops.PprProjector(self._client, debounce_s)

    def _run(self, name: str, **params: Any) -> list[dict[str, Any]]:
        with self.driver.session(database=self.database) as session:
            return [record.data() for record in session.run(statement(name), params)]

    def create_vector_indexes(self, dimensions: int) -> None:
        """Create the cosine vector indexes idempotently (``CREATE VECTOR INDEX … IF NOT
        EXISTS``) and wait until they are online (``db.awaitIndexes``, 300 s)."""
        for label, prop in VECTOR_INDEXES:
            self._run(_NEO4J_VECTOR_STATEMENTS[(label, prop)], dimensions=int(dimensions))
        self._run("neo4j_await_indexes", timeout_s=300)

    def vector_index_name(self, label: str, prop: str = "embedding") -> str:
        """Index name for ``db.index.vector.queryNodes`` (``label_prop``, e.g. ``passage_embedding``)."""
        return f"{label.lower()}_{prop}"

    def _client(self) -> Any:
        """The ``graphdatascience`` client (lazily), or None when GDS is unavailable."""
        with self._lock:
            if self._gds is None and not self._gds_failed:
                try:
                    from graphdatascience import GraphDataScience

                    self._gds = GraphDataScience(self.driver, database=self.database, arrow=False,
                                                 show_progress=False)
                except Exception as error:  # noqa: BLE001 - no GDS: in-process fallback
                    self._gds_failed = True
                    log.warning("Graph Data Science unavailable on the Neo4j server (%s); PPR, "
                                "synonymy and k-means run in process", error)
            return self._gds

    def stage1_ppr(self, store: GraphStore, seeds: Mapping[str, float], damping: float,
                   version: int) -> dict[str, float] | None:
        """Stage-1 PPR (spec §1 step 4) with ``gds.pageRank.stream`` on the tenant's PPR
        graph of ``version``: ``{passage_id: score}`` (scores sum to 1 over all nodes, as
        pathweave.ppr). None (use the in-process PPR) when GDS is unavailable, the
        projection of that version is not ready yet (it is scheduled, debounced) or the
        call fails. ``seeds``: entity/passage id -> reset weight."""
        gds = self._client()
        if gds is None:
            return None
        try:
            graph = self.projector.graph(store, version)
            if graph is None:
                return None
            return gds_ops.personalized_pagerank(gds, graph, seeds, damping)
        except Exception as error:  # noqa: BLE001 - e.g. the server restarted and lost its graphs
            log.warning("GDS PageRank failed for tenant %r (in-process PPR used): %s", store.tenant, error)
            self.projector.forget(store.tenant)
            return None

    def write_synonyms(self, store: GraphStore, threshold: float, max_per_entity: int) -> int | None:
        """Synonymy edges of the tenant's entities by ``gds.knn`` (spec §1, cosine >=
        ``threshold``, ``max_per_entity`` neighbours), merged as SYNONYM; the count
        written, or None (compute in Python) when GDS is unavailable or fails."""
        gds = self._client()
        if gds is None:
            return None
        try:
            return gds_ops.write_synonyms(gds, store.run, store.tenant, threshold, max_per_entity)
        except Exception as error:  # noqa: BLE001
            log.warning("GDS kNN synonymy failed for tenant %r (Python used): %s", store.tenant, error)
            return None

    def kmeans_entities(self, store: GraphStore, k: int, entity_ids: Sequence[str] | None = None,
                        seed: int = 42) -> dict[str, int] | None:
        """``gds.kmeans`` clusters of entity embeddings ``{entity_id: cluster}`` (spec §3
        layer 2), or None when GDS is unavailable."""
        gds = self._client()
        if gds is None:
            return None
        return gds_ops.kmeans_entities(gds, store.run, store.tenant, k, entity_ids, seed)

    def graph_changed(self, store: GraphStore) -> None:
        """Schedule the debounced re-projection of the tenant's PPR graph (call after an
        ingestion batch bumped the graph version)."""
        if self._client() is not None:
            self.projector.schedule(store, store.graph_version())

    def close(self) -> None:
        """Cancel pending projections and close the GDS client (the driver stays open)."""
        self.projector.cancel()
        if self._gds is not None:
            self._gds.close()


def stage1_passage_scores(store: GraphStore, snapshot: GraphSnapshot, reset: np.ndarray,
                          damping: float) -> np.ndarray | None:
    """Stage-1 PPR passage scores ``(P,)`` in snapshot order computed by the store's
    database, or None to compute them in process.

    ``reset``: ``(E + P,)`` seed weights in the snapshot's node order (entities, then
    passages), as PropRAG builds them. Passages the database did not score get 0.
    """
    if not store.dialect.runs_ppr:
        return None
    ids = snapshot.entity_ids + snapshot.passage_ids
    seeds = {ids[i]: float(reset[i]) for i in np.flatnonzero(np.asarray(reset) > 0)}
    scores = store.dialect.stage1_ppr(store, seeds, damping, snapshot.version)
    if scores is None:
        return None
    return np.fromiter((scores.get(pid, 0.0) for pid in snapshot.passage_ids), dtype=np.float64,
                       count=len(snapshot.passage_ids))
