"""Store access: the graph store over Bolt (:mod:`.graph_store`), the named Cypher
statements it runs (:mod:`.statements`, the ``cypher/`` files shipped as package data) and
what differs between ArcadeDB and Neo4j + GDS (:mod:`.backends`). Starts no process:
opening a managed store sits above this package and :mod:`pathweave.servers`."""
