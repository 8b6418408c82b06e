// The query path's reads (issue 10): the graph-change log that keeps each process's
// integer topology current, the topology reads themselves (ids only: no texts, no
// embeddings), the Cypher-fetched neighbourhood of a query (G_sub) and the vector
// searches that seed retrieval. `vec` is the node's embedding as base64 little-endian
// float32 (pathweave.graph.vectors): over Bolt a string decodes ~20x faster in Python than
// the same vector as a float list or as bytes (measured: 500 rows 31 ms vs 560-700 ms).

// name: record_graph_change
// Bumps the tenant's graph version and records what this version changed, so that
// in-process topologies apply the change instead of re-reading the tenant. $added /
// $removed: passage ids written / deleted; $removed_entities: entity ids deleted;
// $entities: entity ids whose SYNONYM edges were (re)written; $aliases: entity ids whose
// ALIAS_OF edge was written or removed (cypher/aliases.cypher); $access: passage ids whose
// documents' access lists changed (cypher/documents.cypher). Run in a write transaction.
// replay: the change is recorded again under the next version (applying a change record
// twice gives the same topology; the version only has to grow).
MERGE (m:Meta {meta_id: $meta_id})
ON CREATE SET m.tenant = $tenant, m.version = 0
SET m.version = m.version + 1
WITH m
CREATE (c:GraphChange {change_id: $meta_id + ':' + toString(m.version), tenant: $tenant,
                       version: m.version, added: $added, removed: $removed,
                       removed_entities: $removed_entities, entities: $entities,
                       aliases: $aliases, access: $access})
RETURN m.version AS version;

// name: prune_graph_changes
// Keeps the tenant's last $keep change records (a process further behind rebuilds its
// topology from the store instead).
MATCH (c:GraphChange) WHERE c.tenant = $tenant AND c.version <= $version - $keep
DETACH DELETE c
RETURN count(*) AS n;

// name: graph_changes_since
// The change records after version $since, oldest first.
MATCH (c:GraphChange) WHERE c.tenant = $tenant AND c.version > $since
RETURN c.version AS version, c.added AS added, c.removed AS removed,
       c.removed_entities AS removed_entities, c.entities AS entities, c.aliases AS aliases,
       c.access AS access
ORDER BY version;

// name: topology_passage_ids
// Every passage id of the tenant (a full topology build starts from these).
MATCH (p:Passage) WHERE p.tenant = $tenant
RETURN p.passage_id AS id;

// name: topology_passage_propositions
// For the passages $ids: each stated proposition with the entities it mentions (the
// proposition hyper-edge), and of those that are aliases the ALIAS_OF edge: `aliased[i]`
// is an alias of `canonicals[i]` (a frontier maps a passage's row to canonical entities
// without a lookup of its own per entity). One row per (passage, proposition).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})-[:STATES]->(q:Proposition)
OPTIONAL MATCH (q)-[:MENTIONS]->(e:Entity)
OPTIONAL MATCH (e)-[:ALIAS_OF]->(c:Entity)
RETURN id AS passage_id, q.prop_id AS prop_id, collect(e.entity_id) AS entities,
       collect(CASE WHEN c IS NULL THEN null ELSE e.entity_id END) AS aliased,
       collect(c.entity_id) AS canonicals;

// name: topology_passage_access
// For the passages $ids: the access list of every document holding each, one row per
// (passage, document); acl null: the whole tenant may read the document. A passage no
// document holds has no row (nobody restricted reads it).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})-[:PART_OF]->(d:Document)
WHERE p.tenant = $tenant
RETURN id AS passage_id, d.acl AS acl;

// name: topology_passage_triples
// For the passages $ids: the triples each asserts, with subject and object entity ids
// (the HippoRAG 2 baseline's graph).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})-[:ASSERTS]->(t:Triple)
RETURN id AS passage_id, t.triple_id AS triple_id, t.subject_id AS subject_id, t.object_id AS object_id;

// name: topology_entity_synonyms
// SYNONYM edges touching the entities $ids (either direction) with their cosine score.
UNWIND $ids AS id
MATCH (a:Entity {entity_id: id})-[r:SYNONYM]-(b:Entity)
RETURN a.entity_id AS src, b.entity_id AS dst, r.score AS score;

// name: topology_synonyms
// Every SYNONYM edge of the tenant (full topology build).
MATCH (a:Entity)-[r:SYNONYM]->(b:Entity) WHERE a.tenant = $tenant
RETURN a.entity_id AS src, b.entity_id AS dst, r.score AS score;

// name: tenant_passage_count
// How many passages the tenant holds, counted up to $limit (a mode needing the whole
// topology is refused above a limit, read through the tenant index).
MATCH (p:Passage) WHERE p.tenant = $tenant
WITH p LIMIT $limit
RETURN count(p) AS n;

// name: frontier_entity_passages
// A query's frontier (pathweave.graph.frontier): for each entity of $ids, its alias group
// (its canonical entity, itself when it is no alias, and the canonical's aliases) and the
// passages stating a proposition that mentions a member: what a process must hold for
// the entity's row of the PPR graph to be whole. One row per entity found. `degree`: how
// many passages; their ids only when at most $limit (a hub entity beyond what the query
// could read is declined on its count, its ids never sent).
UNWIND $ids AS id
MATCH (e:Entity {entity_id: id})
WHERE e.tenant = $tenant
OPTIONAL MATCH (e)-[:ALIAS_OF]->(c:Entity)
WITH id, coalesce(c, e) AS canonical
OPTIONAL MATCH (a:Entity)-[:ALIAS_OF]->(canonical)
WITH id, canonical, collect(a) AS aliases
UNWIND [canonical] + aliases AS member
OPTIONAL MATCH (member)<-[:MENTIONS]-(:Proposition)<-[:STATES]-(p:Passage)
WITH id, canonical, collect(DISTINCT member.entity_id) AS members, collect(DISTINCT p.passage_id) AS passages
RETURN id, canonical.entity_id AS canonical, members, size(passages) AS degree,
       CASE WHEN size(passages) <= $limit THEN passages ELSE [] END AS passages;

// name: frontier_proposition_passages
// The passages stating the propositions $ids (a query's proposition seeds and hits, read
// into its frontier). One row per (proposition, passage).
UNWIND $ids AS id
MATCH (q:Proposition {prop_id: id})<-[:STATES]-(p:Passage)
WHERE q.tenant = $tenant
RETURN id, p.passage_id AS passage_id;

// name: frontier_triple_passages
// The passages asserting the triples $ids (a restricted query's triple hits, read into its
// frontier to decide which it may see). One row per (triple, passage).
UNWIND $ids AS id
MATCH (t:Triple {triple_id: id})<-[:ASSERTS]-(p:Passage)
WHERE t.tenant = $tenant
RETURN id, p.passage_id AS passage_id;

// name: subgraph_passages
// Title, document and embedding of the passages $ids (G_sub of a query, spec §1 stage 2).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
RETURN p.passage_id AS id, p.title AS title, p.vec AS vec, min(d.doc_id) AS doc_id;

// name: subgraph_passage_texts
// Texts of the passages $ids (only the ones a result returns), with what their citations
// need: the page or heading path, the document's title and its source (the result's one
// read: the API cites from it without another statement).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
WITH p, d ORDER BY d.doc_id
WITH p, collect(d)[0] AS d
RETURN p.passage_id AS id, p.text AS text, p.page AS page, p.section AS section,
       coalesce(d.title, p.title) AS cited_title, d.source AS source;

// name: subgraph_propositions
// Text and embedding of the propositions $ids.
UNWIND $ids AS id
MATCH (q:Proposition {prop_id: id})
RETURN q.prop_id AS id, q.text AS text, q.vec AS vec;

// name: subgraph_entities
// Name and embedding of the entities $ids.
UNWIND $ids AS id
MATCH (e:Entity {entity_id: id})
RETURN e.entity_id AS id, e.name AS name, e.vec AS vec;

// name: vector_search
// Both backends. The $k nearest nodes of vector index $index to $vector, with their
// tenant: the caller keeps its tenant's rows and asks again with a larger $k when other
// tenants took the places (pathweave.backend.vector_search). score is the index's
// normalized cosine (1 + cos) / 2 in [0, 1].
// Manual: Cypher Manual 5, Vector indexes > db.index.vector.queryNodes.
CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score
RETURN coalesce(node.passage_id, node.prop_id, node.entity_id, node.triple_id, node.run_id) AS id,
       node.tenant AS tenant, score;

// Exact search of a small tenant, one statement per vector index (label and property are
// not parameters): the tenant's nodes of the label, read through the tenant index up to
// $limit, and, when the tenant holds at most $bound of them, the ids and scores of those
// that carry the vector: vector.similarity.cosine to $vector (Neo4j answers (1 + cos) / 2 like
// the index, ArcadeDB the cosine itself; null for a zero vector). One row: size (the nodes
// read, at most $limit: the caller remembers it), ids, scores (empty when the tenant holds
// more than $bound), and the
// tenant's graph version (Meta node $meta_id, as vector_search_versioned reads it). A small tenant whose index search other
// tenants crowd asks this instead of widening (pathweave.store.backends.base.vector_search), so
// its cost follows its own size, not the other tenants'.

// name: vector_exact_passage
// Passage.embedding of a small tenant, scored exactly (see above).
MATCH (n:Passage) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.embedding IS NOT NULL | n.passage_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.embedding IS NOT NULL | vector.similarity.cosine(n.embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_exact_proposition
// Proposition.embedding of a small tenant, scored exactly (see above).
MATCH (n:Proposition) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.embedding IS NOT NULL | n.prop_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.embedding IS NOT NULL | vector.similarity.cosine(n.embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_exact_entity
// Entity.embedding of a small tenant, scored exactly (see above).
MATCH (n:Entity) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.embedding IS NOT NULL | n.entity_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.embedding IS NOT NULL | vector.similarity.cosine(n.embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_exact_relation
// Relation.embedding of a small tenant, scored exactly (see above).
MATCH (n:Relation) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.embedding IS NOT NULL | n.relation_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.embedding IS NOT NULL | vector.similarity.cosine(n.embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_exact_triple
// Triple.embedding of a small tenant, scored exactly (see above).
MATCH (n:Triple) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.embedding IS NOT NULL | n.triple_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.embedding IS NOT NULL | vector.similarity.cosine(n.embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_exact_run
// Run.embedding of a small tenant, scored exactly (see above).
MATCH (n:Run) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.embedding IS NOT NULL | n.run_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.embedding IS NOT NULL | vector.similarity.cosine(n.embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_exact_run_memory
// Run.memory_embedding of a small tenant, scored exactly (see above).
MATCH (n:Run) WHERE n.tenant = $tenant
WITH n LIMIT $limit
WITH collect(n) AS nodes
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN size(nodes) AS size, m.version AS version,
       CASE WHEN size(nodes) <= $bound THEN [n IN nodes WHERE n.memory_embedding IS NOT NULL | n.run_id] ELSE [] END AS ids,
       CASE WHEN size(nodes) <= $bound
            THEN [n IN nodes WHERE n.memory_embedding IS NOT NULL | vector.similarity.cosine(n.memory_embedding, $vector)]
            ELSE [] END AS scores;

// name: vector_search_versioned
// Both backends. vector_search plus the tenant's graph version (Meta node $meta_id; null
// before the first ingestion) in the same statement: a ranking query's searches tell its
// topology the version to be at, so the query reads the version in no round trip of its own
// (issue 33). One indexed lookup of the Meta node per row (k rows).
CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score
OPTIONAL MATCH (m:Meta {meta_id: $meta_id})
RETURN coalesce(node.passage_id, node.prop_id, node.entity_id, node.triple_id, node.run_id) AS id,
       node.tenant AS tenant, score, m.version AS version;

// name: fulltext_search
// Both backends. The $k best nodes of full-text index $index for the Lucene query
// $query (pathweave.retrieval.lexical.lucene_query: the question's terms, each quoted and
// escaped), with their tenant: as vector_search, the caller keeps its tenant's rows and asks
// again with a larger $k when other tenants took the places. score: the index's relevance
// (BM25), comparable only within one search.
// Manual: Cypher Manual 5, Full-text indexes > db.index.fulltext.queryNodes.
CALL db.index.fulltext.queryNodes($index, $query, {limit: $k}) YIELD node, score
RETURN coalesce(node.passage_id, node.prop_id, node.entity_id) AS id, node.tenant AS tenant, score;

// name: vector_knn
// Both backends. For each row {id, vector}: the $k nearest nodes of index $index with
// normalized score >= $min_score, any tenant (the caller filters and widens $k where the
// places were all taken), plus the neighbour's norm_name (synonymy skips short names).
UNWIND $rows AS row
CALL db.index.vector.queryNodes($index, $k, row.vector) YIELD node, score
WITH row, node, score WHERE score >= $min_score
RETURN row.id AS src, coalesce(node.entity_id, node.passage_id, node.prop_id) AS dst,
       node.tenant AS tenant, node.norm_name AS norm_name, score;

// name: passage_titles
// Up to $limit distinct passage titles of the tenant (warm-up queries).
MATCH (p:Passage) WHERE p.tenant = $tenant AND p.title IS NOT NULL
RETURN DISTINCT p.title AS title LIMIT $limit;
