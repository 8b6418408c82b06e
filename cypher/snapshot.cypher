// Reads of a tenant's whole retrieval graph into the in-process snapshot
// (CSR matrices for Personalized PageRank, embedding matrices). Run only when
// the tenant's graph version changed.

// name: snapshot_passages
MATCH (p:Passage) WHERE p.tenant = $tenant
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
RETURN p.passage_id AS id, p.title AS title, p.text AS text, p.embedding AS embedding,
       d.doc_id AS doc_id;

// name: snapshot_propositions
MATCH (p:Proposition) WHERE p.tenant = $tenant
RETURN p.prop_id AS id, p.text AS text, p.embedding AS embedding;

// name: snapshot_entities
MATCH (e:Entity) WHERE e.tenant = $tenant
RETURN e.entity_id AS id, e.name AS name, e.embedding AS embedding;

// name: snapshot_states
MATCH (p:Passage)-[:STATES]->(q:Proposition) WHERE p.tenant = $tenant
RETURN p.passage_id AS passage_id, q.prop_id AS prop_id;

// name: snapshot_proposition_mentions
MATCH (q:Proposition)-[:MENTIONS]->(e:Entity) WHERE q.tenant = $tenant
RETURN q.prop_id AS prop_id, e.entity_id AS entity_id;

// name: snapshot_synonyms
MATCH (a:Entity)-[r:SYNONYM]->(b:Entity) WHERE a.tenant = $tenant
RETURN a.entity_id AS src, b.entity_id AS dst, r.score AS score;

// name: snapshot_triples
// Triples with the passages asserting them (HippoRAG 2 baseline).
MATCH (p:Passage)-[:ASSERTS]->(t:Triple) WHERE p.tenant = $tenant
RETURN t.triple_id AS triple_id, p.passage_id AS passage_id, t.subject_id AS subject_id,
       t.object_id AS object_id, t.subject AS subject, t.relation AS relation, t.object AS object;
