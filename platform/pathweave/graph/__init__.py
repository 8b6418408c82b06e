"""The in-memory query graph: a tenant's topology (:mod:`.topology`), the bounded node
cache, vector codecs, Personalized PageRank and the reasoning subgraph G_sub fetched for one
query. Reads the store; never writes it."""
