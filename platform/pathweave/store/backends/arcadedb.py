"""The default backend: the managed ArcadeDB server, spoken to over Bolt.

Vector indexes are created in ArcadeDB SQL over its HTTP port (``LSM_VECTOR``, cosine,
named ``Label[property]``) and queried with ``db.index.vector.queryNodes`` like Neo4j's; so
are the full-text indexes (``FULL_TEXT``, Lucene; ``db.index.fulltext.queryNodes``).
ArcadeDB has no graph-algorithm library: PropRAG's PPR runs on the query process's
topology (:mod:`pathweave.graph.topology`) and synonymy asks the vector index
(:func:`pathweave.store.backends.base.vector_knn`).
"""

from __future__ import annotations

from dataclasses import dataclass
import httpx

from pathweave.store.backends.base import FULLTEXT_INDEXES, VECTOR_INDEXES, Capability, GraphStore

#: ArcadeDB SQL DDL for one vector index; identifiers come from VECTOR_INDEXES only
#: (DDL identifiers cannot be parameters), the dimension is an int.
_ARCADE_VECTOR_DDL = (
    "CREATE VERTEX TYPE {label} IF NOT EXISTS",
    "CREATE PROPERTY {label}.{prop} IF NOT EXISTS ARRAY_OF_FLOATS",
    "CREATE INDEX IF NOT EXISTS ON {label} ({prop}) LSM_VECTOR "
    "METADATA {{dimensions: {dimensions}, similarity: 'COSINE'}}",
)


#: ArcadeDB SQL DDL for one full-text index (Lucene); identifiers come from
#: FULLTEXT_INDEXES only. Its name is ``Label[p1,p2]``; queried with db.index.fulltext.queryNodes.
_ARCADE_FULLTEXT_DDL = (
    "CREATE VERTEX TYPE {label} IF NOT EXISTS",
    "CREATE PROPERTY {label}.{prop} IF NOT EXISTS STRING",
    "CREATE INDEX IF NOT EXISTS ON {label} ({props}) FULL_TEXT",
)


@dataclass(frozen=True)
class ArcadeBackend:
    """The managed ArcadeDB server: HTTP base URL, credentials and database."""

    http_url: str
    user: str
    password: str
    database: str
    name: str = "arcadedb"
    capabilities: frozenset[Capability] = frozenset({Capability.VECTOR_SEARCH})
    similarity_normalized: bool = False  # vector.similarity.cosine answers the cosine itself

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

    def create_fulltext_indexes(self) -> None:
        """Create the full-text indexes idempotently (ArcadeDB SQL, ``FULL_TEXT``, Lucene)."""
        for label, props in FULLTEXT_INDEXES.items():
            self._sql(_ARCADE_FULLTEXT_DDL[0].format(label=label))
            for prop in props:
                self._sql(_ARCADE_FULLTEXT_DDL[1].format(label=label, prop=prop))
            self._sql(_ARCADE_FULLTEXT_DDL[2].format(label=label, props=", ".join(props)))

    def fulltext_index_name(self, label: str) -> str:
        """Index name for ``db.index.fulltext.queryNodes`` (``Label[p1,p2]``)."""
        return f"{label}[{','.join(FULLTEXT_INDEXES[label])}]"

    def personalized_pagerank(self, store: GraphStore, seeds, damping: float, version: int):
        """Not a capability of this backend."""
        raise NotImplementedError("ArcadeDB has no in-database PPR (Capability.PPR)")

    def write_synonyms(self, store: GraphStore, threshold: float, max_per_entity: int) -> int:
        """Not a capability of this backend."""
        raise NotImplementedError("ArcadeDB has no in-database kNN (Capability.KNN)")

    def kmeans_entities(self, store: GraphStore, k: int, entity_ids=None, seed: int = 42) -> dict[str, int]:
        """Not a capability of this backend."""
        raise NotImplementedError("ArcadeDB has no in-database k-means (Capability.KMEANS)")

    def graph_changed(self, store: GraphStore) -> None:
        """Nothing to refresh: topologies follow the graph-change log."""

    def close(self) -> None:
        """Nothing to release."""
