"""What differs between the default store (ArcadeDB over Bolt) and Neo4j.

One function per difference; nothing else in Pathweave branches on the
backend. The Cypher statements themselves are shared (``cypher/``).

ArcadeDB: vector indexes are created in ArcadeDB SQL over its HTTP port
(``LSM_VECTOR``) and named ``Label[property]`` for
``db.index.vector.queryNodes``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

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


@dataclass(frozen=True)
class ArcadeDialect:
    """The managed ArcadeDB server: HTTP base URL, credentials and database."""

    http_url: str
    user: str
    password: str
    database: str
    name: str = "arcadedb"

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
