"""Records of answered queries: reasoning records (G_sub and the paths, written back for
Neo4j Browser), answer records, citations and session ids. Knows no retrieval mode: each
mode hands its own steps to the record."""
