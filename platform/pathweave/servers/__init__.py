"""Managed servers: the local processes Pathweave starts on demand and supervises (the
ArcadeDB and Neo4j store servers, the llama.cpp model server): start lock, wait until
ready, server info, owner and data-dir watchdogs. Knows nothing of the graph or queries."""
