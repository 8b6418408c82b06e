// Whole-tenant reads of passages, propositions and synonym edges, for inspecting a
// tenant in tests and tools. Never on the query path: queries read the incremental
// topology (topology.cypher) and their neighbourhood G_sub.

// name: snapshot_passages
MATCH (p:Passage) WHERE p.tenant = $tenant
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
RETURN p.passage_id AS id, p.title AS title, p.text AS text, p.embedding AS embedding,
       d.doc_id AS doc_id;

// name: snapshot_propositions
MATCH (p:Proposition) WHERE p.tenant = $tenant
RETURN p.prop_id AS id, p.text AS text, p.embedding AS embedding;

// name: snapshot_synonyms
MATCH (a:Entity)-[r:SYNONYM]->(b:Entity) WHERE a.tenant = $tenant
RETURN a.entity_id AS src, b.entity_id AS dst, r.score AS score;

