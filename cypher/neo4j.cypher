// Statements of the Neo4j backend (Neo4j 5.26 LTS + Graph Data Science 2.13+),
// run through pathweave.dialect.Neo4jDialect and pathweave.gds; the default
// store (ArcadeDB) never runs the `neo4j_*` ones. Parameters only as $name;
// index names and labels are fixed here, one statement per vector index.
// (The vector searches both backends run are in topology.cypher.)

// name: neo4j_vector_index_passage
// Cosine vector index over Passage.embedding ($dimensions: embedder size, e.g. 384).
// Quantization off (all seven indexes): Neo4j 5.26 quantizes index vectors by default,
// which gave a vector its own score as 0.983 instead of 1.0 and lost neighbours at cosine
// 0.95 against a 0.93 threshold (alias layer 1); the ArcadeDB index is exact.
// Manual: Cypher Manual 5, Indexes > Vector indexes (CREATE VECTOR INDEX, index configuration).
CREATE VECTOR INDEX passage_embedding IF NOT EXISTS
FOR (n:Passage) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_vector_index_proposition
CREATE VECTOR INDEX proposition_embedding IF NOT EXISTS
FOR (n:Proposition) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_vector_index_entity
CREATE VECTOR INDEX entity_embedding IF NOT EXISTS
FOR (n:Entity) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_vector_index_relation
CREATE VECTOR INDEX relation_embedding IF NOT EXISTS
FOR (n:Relation) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_vector_index_triple
// Fact texts of triples (the HippoRAG 2 baseline's fact retrieval).
CREATE VECTOR INDEX triple_embedding IF NOT EXISTS
FOR (n:Triple) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_vector_index_run
// APR fact runs: the embedding of the run's lines (coarse candidates, spec §3).
CREATE VECTOR INDEX run_embedding IF NOT EXISTS
FOR (n:Run) ON (n.embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_vector_index_run_memory
// APR question and answer runs (earlier queries of the tenant, spec §3).
CREATE VECTOR INDEX run_memory_embedding IF NOT EXISTS
FOR (n:Run) ON (n.memory_embedding)
OPTIONS {indexConfig: {`vector.dimensions`: $dimensions, `vector.similarity_function`: 'cosine',
                       `vector.quantization.enabled`: false}};

// name: neo4j_fulltext_index_passage
// Lucene full-text index over a passage's title and text (lexical hits beside the
// vector hits; names, codes and rare terms that small embedders miss).
// Manual: Cypher Manual 5, Indexes > Full-text indexes (CREATE FULLTEXT INDEX).
CREATE FULLTEXT INDEX passage_fulltext IF NOT EXISTS FOR (n:Passage) ON EACH [n.title, n.text];

// name: neo4j_fulltext_index_proposition
CREATE FULLTEXT INDEX proposition_fulltext IF NOT EXISTS FOR (n:Proposition) ON EACH [n.text];

// name: neo4j_fulltext_index_entity
CREATE FULLTEXT INDEX entity_fulltext IF NOT EXISTS FOR (n:Entity) ON EACH [n.name];

// name: neo4j_await_indexes
// Blocks until every index is online (at most $timeout_s seconds), after creating them.
CALL db.awaitIndexes($timeout_s);

// name: neo4j_gds_graph_size
// Upper bounds of the node and relationship counts of the tenant's PPR projection
// (below), for the GDS memory estimate logged before projecting.
CALL () { MATCH (n:Entity) WHERE n.tenant = $tenant RETURN count(n) AS entities }
CALL () { MATCH (n:Passage) WHERE n.tenant = $tenant RETURN count(n) AS passages }
CALL () {
  MATCH (q:Proposition) WHERE q.tenant = $tenant
  WITH COUNT { (q)-[:MENTIONS]->(:Entity) } AS k, COUNT { (q)<-[:STATES]-(:Passage) } AS s
  RETURN sum(k * (k - 1) / 2) AS cooccurrence, sum(k * s) AS mentions
}
CALL () { MATCH (a:Entity)-[r:SYNONYM]->(:Entity) WHERE a.tenant = $tenant RETURN count(r) AS synonyms }
RETURN entities + passages AS node_count,
       cooccurrence + mentions + synonyms AS relationship_count;

// name: neo4j_gds_project_ppr
// The tenant's PPR graph (spec §1) as GDS graph $graph_name: nodes = all entities and
// passages of the tenant; undirected LINK relationships with `weight`: entity-entity
// +1 per proposition mentioning both, synonymy = SYNONYM.score (parallel to the
// co-occurrence link, so weights add up as in the in-process snapshot),
// passage-entity 1.0 for every entity of the passage's propositions. Node property
// `passage` (1.0 passage, 0.0 entity) lets neo4j_gds_personalized_pagerank return passages only.
// Manual: GDS 2.x, Projecting graphs using Cypher (gds.graph.project aggregation).
CALL () {
  MATCH (q:Proposition)-[:MENTIONS]->(a:Entity), (q)-[:MENTIONS]->(b:Entity)
  WHERE q.tenant = $tenant AND a.entity_id < b.entity_id
  RETURN a AS source, b AS target, toFloat(count(DISTINCT q)) AS weight
  UNION ALL
  MATCH (a:Entity)-[r:SYNONYM]->(b:Entity)
  WHERE a.tenant = $tenant AND a <> b
  RETURN a AS source, b AS target, toFloat(r.score) AS weight
  UNION ALL
  MATCH (p:Passage)-[:STATES]->(:Proposition)-[:MENTIONS]->(e:Entity)
  WHERE p.tenant = $tenant
  RETURN DISTINCT p AS source, e AS target, 1.0 AS weight
  UNION ALL
  MATCH (n) WHERE (n:Entity OR n:Passage) AND n.tenant = $tenant
  RETURN n AS source, null AS target, 1.0 AS weight
}
RETURN gds.graph.project($graph_name, source, target, {
  sourceNodeLabels: labels(source),
  targetNodeLabels: labels(target),
  sourceNodeProperties: {passage: CASE WHEN source:Passage THEN 1.0 ELSE 0.0 END},
  targetNodeProperties: {passage: CASE WHEN target:Passage THEN 1.0 ELSE 0.0 END},
  relationshipType: 'LINK',
  relationshipProperties: {weight: weight}
}, {undirectedRelationshipTypes: ['LINK']}) AS graph;

// name: neo4j_gds_personalized_pagerank
// Stage-1 PPR (spec §1 step 4) on the projected PPR graph $graph_name with a weighted
// reset vector. GDS 2.13's pageRank takes unweighted sourceNodes (each source gets the
// reset 1 - damping) and PageRank is linear in its reset, so the reset
// sum_g group.weight * 1[group.nodes] is one pageRank call per group of $groups
// ([{nodes: [GDS node id], weight: float}]) summed here, in one round trip. Returns the
// passage nodes (`passage` = 1.0) with their score normalized to sum 1 over all nodes.
// Manual: GDS 2.13, PageRank (personalised: sourceNodes), gds.util.nodeProperty.
UNWIND $groups AS grp
CALL gds.pageRank.stream($graph_name, {
  sourceNodes: grp.nodes, dampingFactor: $damping, relationshipWeightProperty: 'weight',
  maxIterations: $max_iterations, tolerance: $tolerance
}) YIELD nodeId, score
WITH nodeId, sum(score * grp.weight) AS score
WITH collect([nodeId, score]) AS rows, sum(score) AS total
UNWIND rows AS row
WITH row[0] AS node, row[1] / total AS score, total
WHERE total > 0 AND score > 0 AND gds.util.nodeProperty($graph_name, node, 'passage') = 1.0
RETURN node, score;

// name: neo4j_gds_node_keys
// GDS node ids (the legacy internal ids, hence the deprecated id()) of the tenant's
// entities and passages: the PPR seeds go in and the passage scores come out by them.
MATCH (n:Entity) WHERE n.tenant = $tenant
RETURN id(n) AS node, n.entity_id AS key, false AS passage
UNION ALL
MATCH (n:Passage) WHERE n.tenant = $tenant
RETURN id(n) AS node, n.passage_id AS key, true AS passage;

// name: neo4j_gds_project_entities
// The tenant's entities with their embeddings as GDS graph $graph_name (no relationships)
// for gds.knn (synonymy) and gds.kmeans (alias consolidation layer 2). Entities with
// <= 2 alphanumeric characters are left out (spec §1; norm_name keeps only [0-9a-z]
// and single spaces). $ids: null = all entities, else only these entity ids. Every
// row has a null target (an unconnected node); GDS wants each sourceNode* key paired
// with a targetNode* one.
MATCH (e:Entity)
WHERE e.tenant = $tenant AND e.embedding IS NOT NULL
  AND size(replace(coalesce(e.norm_name, ''), ' ', '')) > 2
  AND ($ids IS NULL OR e.entity_id IN $ids)
RETURN gds.graph.project($graph_name, e, null, {
  sourceNodeLabels: ['Entity'],
  targetNodeLabels: null,
  sourceNodeProperties: {embedding: e.embedding},
  targetNodeProperties: null
}) AS graph;

// name: neo4j_gds_entity_keys
// GDS node ids of the tenant's entities (see neo4j_gds_node_keys).
MATCH (e:Entity) WHERE e.tenant = $tenant
RETURN id(e) AS node, e.entity_id AS key;

// name: neo4j_import_synonyms
// kNN synonymy candidates written back as SYNONYM edges (spec §1). rows: {src, dst}
// entity ids, src < dst. The score is recomputed here as the raw cosine of the two
// embeddings and only pairs with cosine >= $threshold are kept, whatever scale the
// kNN reported. Large imports: runs in an auto-commit transaction, committing every
// 5000 rows; returns the edges written. Manual: Cypher Manual 5, CALL subqueries in
// transactions.
UNWIND $rows AS row
CALL (row) {
  MATCH (a:Entity {entity_id: row.src}), (b:Entity {entity_id: row.dst})
  WITH a, b, gds.similarity.cosine(a.embedding, b.embedding) AS cosine
  WHERE cosine >= $threshold
  MERGE (a)-[r:SYNONYM]->(b)
  SET r.score = round(cosine, 6)
  RETURN count(r) AS written
} IN TRANSACTIONS OF 5000 ROWS
RETURN sum(written) AS written;

// name: neo4j_drop_tenant
// Deletes every node of tenant $tenant with its relationships, 1000 nodes per
// transaction (auto-commit). Used by the contract tests' teardown and for ops.
MATCH (n) WHERE n.tenant = $tenant
CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 1000 ROWS;
