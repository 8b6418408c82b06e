"""Graph-store backends behind one interface (:class:`~pathweave.store.backends.base.Backend`):
the managed ArcadeDB server (default) and Neo4j + Graph Data Science (optional extra
``pathweave[neo4j]`` for the GDS client)."""

from pathweave.store.backends.base import (FULLTEXT_INDEXES, VECTOR_INDEXES, Backend, Capability, fulltext_search, vector_knn,
                                    vector_search, versioned_vector_search)

__all__ = ["FULLTEXT_INDEXES", "VECTOR_INDEXES", "Backend", "Capability", "fulltext_search", "vector_knn",
           "vector_search", "versioned_vector_search"]
