"""The Neo4j backend: Neo4j 5.26 + Graph Data Science, reached with the official driver.

Vector indexes with ``CREATE VECTOR INDEX`` (``cypher/neo4j.cypher``, named
``label_property``), queried with ``db.index.vector.queryNodes`` like ArcadeDB's. With
GDS (:mod:`pathweave.store.backends.gds`, the optional ``graphdatascience`` client) it has the
PPR, kNN and k-means capabilities: stage-1 PPR on a projection kept current in the
background (debounced after each graph change), synonymy by ``gds.knn``, clusters by
``gds.kmeans``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pathweave.store.backends import gds as gds_ops
from pathweave.store.backends.base import FULLTEXT_INDEXES, VECTOR_INDEXES, Capability, index_statement
from pathweave.store.statements import statement

if TYPE_CHECKING:
    from neo4j import Driver

    from pathweave.store.backends.base import GraphStore

log = logging.getLogger(__name__)

#: Neo4j: the named statement creating each vector index (cypher/neo4j.cypher).
_NEO4J_VECTOR_STATEMENTS: dict[tuple[str, str], str] = {
    pair: index_statement("neo4j_vector_index", *pair) for pair in VECTOR_INDEXES}


class Neo4jBackend:
    """A Neo4j 5.26 server (GDS plugin for PPR, kNN and k-means) reached with ``driver``.

    The GDS client is created on first use; when the server has no GDS (or it fails),
    a warning is logged once and the GDS methods return None, so PropRAG and
    ingestion fall back to their in-process code (same results, see pathweave.store.backends.gds).
    ``debounce_s``: seconds the graph version must stay unchanged before the tenant's
    PPR graph is re-projected. ``gds_endpoint``: ``(uri, (user, password))`` of the server the
    GDS calls go to (a cluster's secondary; None: the store's own, over ``driver``).
    ``max_heap_percent``: the share of that server's heap a projection's memory estimate may
    take before it is refused (:class:`~pathweave.store.backends.gds.ProjectionTooLarge`). ``project_after_changes``: schedule that re-projection after
    each graph change (True where stage 1 runs in GDS, ``retrieval.stage1_ppr = gds``;
    otherwise a projection is made only when a query asks for one).
    """

    name = "neo4j"
    similarity_normalized = True  # vector.similarity.cosine answers (1 + cos) / 2

    def __init__(self, driver: Driver, database: str, debounce_s: float = 5.0, gds: Any = None,
                 project_after_changes: bool = True, gds_endpoint: tuple[str, tuple[str, str]] | None = None,
                 max_heap_percent: float = 100.0) -> None:
        self.driver = driver
        self.project_after_changes = project_after_changes
        self.database = database
        self.gds_endpoint = gds_endpoint
        self._gds = gds
        self._gds_failed = False
        self._lock = threading.Lock()
        self.projector = gds_ops.PprProjector(self._client, debounce_s, max_heap_percent=max_heap_percent)

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Vector search always; PPR, kNN and k-means when the server has GDS (the client
        connects on first use)."""
        if self._client() is None:
            return frozenset({Capability.VECTOR_SEARCH})
        return frozenset(Capability)

    def _run(self, name: str, **params: Any) -> list[dict[str, Any]]:
        with self.driver.session(database=self.database) as session:
            return [record.data() for record in session.run(statement(name), params)]

    def create_vector_indexes(self, dimensions: int) -> None:
        """Create the cosine vector indexes idempotently (``CREATE VECTOR INDEX … IF NOT
        EXISTS``) and wait until they are online (``db.awaitIndexes``, 300 s)."""
        for label, prop in VECTOR_INDEXES:
            self._run(_NEO4J_VECTOR_STATEMENTS[(label, prop)], dimensions=int(dimensions))
        self._run("neo4j_await_indexes", timeout_s=300)

    def create_fulltext_indexes(self) -> None:
        """Create the Lucene full-text indexes idempotently (``CREATE FULLTEXT INDEX … IF NOT
        EXISTS``, ``cypher/neo4j.cypher``) and wait until they are online."""
        for label in FULLTEXT_INDEXES:
            self._run(f"neo4j_fulltext_index_{label.lower()}")
        self._run("neo4j_await_indexes", timeout_s=300)

    def fulltext_index_name(self, label: str) -> str:
        """Index name for ``db.index.fulltext.queryNodes`` (``label_fulltext``)."""
        return f"{label.lower()}_fulltext"

    def vector_index_name(self, label: str, prop: str = "embedding") -> str:
        """Index name for ``db.index.vector.queryNodes`` (``label_prop``, e.g. ``passage_embedding``)."""
        return f"{label.lower()}_{prop}"

    def _client(self) -> Any:
        """The ``graphdatascience`` client (lazily), or None when GDS is unavailable."""
        with self._lock:
            if self._gds is None and not self._gds_failed:
                try:
                    from graphdatascience import GraphDataScience

                    if self.gds_endpoint is None:  # the store's own server
                        self._gds = GraphDataScience(self.driver, database=self.database, arrow=False,
                                                     show_progress=False)
                    else:  # a cluster's secondary: its own connection
                        uri, auth = self.gds_endpoint
                        self._gds = GraphDataScience(uri, auth=auth, database=self.database, arrow=False,
                                                     show_progress=False)
                except Exception as error:  # noqa: BLE001 - no GDS: in-process fallback
                    self._gds_failed = True
                    log.error("Graph Data Science unavailable on the Neo4j server (%s); PPR, "
                              "synonymy and k-means run in process", error)
            return self._gds

    def personalized_pagerank(self, store: GraphStore, seeds: Mapping[str, float], damping: float,
                              version: int) -> dict[str, float] | None:
        """Stage-1 PPR (spec §1 step 4) with ``gds.pageRank.stream`` on the tenant's PPR
        graph of ``version``: ``{passage_id: score}`` (scores sum to 1 over all nodes, as
        pathweave.graph.ppr). None (use the in-process PPR) when GDS is unavailable, the
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
            log.error("GDS PageRank failed for tenant %r (in-process PPR used): %s", store.tenant, error)
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
            log.error("GDS kNN synonymy failed for tenant %r (Python used): %s", store.tenant, error)
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
        if self.project_after_changes and self._client() is not None:
            self.projector.schedule(store, store.graph_version())

    def close(self) -> None:
        """Cancel pending projections and close the GDS client (the driver stays open)."""
        self.projector.cancel()
        if self._gds is not None:
            self._gds.close()
