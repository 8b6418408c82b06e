// Ingestion writes (spec §0). Every statement takes a batch `$rows` (UNWIND),
// MERGEs on stable content-hash ids and sets properties only ON CREATE, so the
// same input written twice leaves the graph unchanged.

// name: existing_passage_ids
// Which of $ids are already stored (their embeddings are not recomputed).
MATCH (n:Passage) WHERE n.passage_id IN $ids RETURN n.passage_id AS id;

// name: existing_proposition_ids
MATCH (n:Proposition) WHERE n.prop_id IN $ids RETURN n.prop_id AS id;

// name: existing_entity_ids
// An entity only APR's questions or answers named (no MENTIONS, no RELATES) counts as new:
// a document that mentions it gives it synonymy and alias links as if it came first.
MATCH (n:Entity) WHERE n.entity_id IN $ids
  AND (EXISTS { MATCH ()-[:MENTIONS]->(n) } OR EXISTS { MATCH (n)-[:RELATES]-() })
RETURN n.entity_id AS id;

// name: existing_relation_ids
MATCH (n:Relation) WHERE n.relation_id IN $ids RETURN n.relation_id AS id;

// name: existing_triple_ids
// A triple without its fact embedding (a memory triple an APR query wrote first) counts as new.
MATCH (n:Triple) WHERE n.triple_id IN $ids AND n.embedding IS NOT NULL RETURN n.triple_id AS id;

// name: existing_document_hashes
// Which of $ids are stored, with the content hash of the stored version (a source whose
// hash differs is replaced) and its access list (one that differs is set without re-ingesting).
MATCH (n:Document) WHERE n.doc_id IN $ids AND n.tenant = $tenant
RETURN n.doc_id AS id, n.content_hash AS content_hash, n.acl AS acl;

// name: upsert_documents
// rows: {doc_id, tenant, source, title, content_hash, identity, ingested_at, acl, keep_acl}; acl:
// the access list (principals; null: the whole tenant may read it, pathweave.access), for a
// stored document only unless keep_acl (a write that names none keeps the stored one); identity is
// 'source' (doc_id hashes tenant + source: a changed source replaces its old version) or
// 'content' (doc_id hashes tenant + title + text).
// A new version of a stored source keeps its Document node (the atomic swap replaces what
// hangs off it in the same transaction), so its properties are set either way.
UNWIND $rows AS row
MERGE (d:Document {doc_id: row.doc_id})
ON CREATE SET d.tenant = row.tenant, d.identity = row.identity, d.acl = row.acl
ON MATCH SET d.acl = CASE WHEN row.keep_acl THEN d.acl ELSE row.acl END
SET d.source = row.source, d.title = row.title, d.content_hash = row.content_hash, d.ingested_at = row.ingested_at
RETURN count(d) AS n;

// name: upsert_passages
// rows: {passage_id, doc_id, tenant, title, text, position, token_count, page, section, embedding, vec};
// page (1-based PDF page) or section (heading path "A > B") may be null; `vec`: the
// embedding as base64 float32, what queries read (`embedding` feeds the vector index).
UNWIND $rows AS row
MERGE (p:Passage {passage_id: row.passage_id})
ON CREATE SET p.tenant = row.tenant, p.title = row.title, p.text = row.text, p.token_count = row.token_count,
              p.embedding = row.embedding, p.vec = row.vec
SET p.position = row.position, p.page = row.page, p.section = row.section
WITH p, row
MATCH (d:Document {doc_id: row.doc_id})
MERGE (p)-[:PART_OF]->(d)
RETURN count(p) AS n;

// name: link_next
// Reading order inside a document. rows: {src, dst} passage ids.
UNWIND $rows AS row
MATCH (a:Passage {passage_id: row.src}), (b:Passage {passage_id: row.dst})
MERGE (a)-[:NEXT]->(b)
RETURN count(*) AS n;

// name: upsert_entities
// rows: {entity_id, tenant, name, norm_name, type, embedding, vec}
UNWIND $rows AS row
MERGE (e:Entity {entity_id: row.entity_id})
ON CREATE SET e.tenant = row.tenant, e.name = row.name, e.norm_name = row.norm_name,
              e.type = row.type, e.embedding = row.embedding, e.vec = row.vec
RETURN count(e) AS n;

// name: upsert_propositions
// rows: {prop_id, tenant, text, embedding, vec}
UNWIND $rows AS row
MERGE (p:Proposition {prop_id: row.prop_id})
ON CREATE SET p.tenant = row.tenant, p.text = row.text, p.embedding = row.embedding, p.vec = row.vec
RETURN count(p) AS n;

// name: link_states
// A passage states a proposition. rows: {passage_id, prop_id}
UNWIND $rows AS row
MATCH (a:Passage {passage_id: row.passage_id}), (b:Proposition {prop_id: row.prop_id})
MERGE (a)-[:STATES]->(b)
RETURN count(*) AS n;

// name: link_proposition_mentions
// The proposition hyper-edge over its entities. rows: {prop_id, entity_id}
UNWIND $rows AS row
MATCH (a:Proposition {prop_id: row.prop_id}), (b:Entity {entity_id: row.entity_id})
MERGE (a)-[:MENTIONS]->(b)
RETURN count(*) AS n;

// name: link_passage_mentions
// rows: {passage_id, entity_id}
UNWIND $rows AS row
MATCH (a:Passage {passage_id: row.passage_id}), (b:Entity {entity_id: row.entity_id})
MERGE (a)-[:MENTIONS]->(b)
RETURN count(*) AS n;

// name: upsert_relations
// The relation vocabulary. rows: {relation_id, tenant, name, embedding, vec (base64 float32:
// what APR's codebook view reads)}
UNWIND $rows AS row
MERGE (r:Relation {relation_id: row.relation_id})
ON CREATE SET r.tenant = row.tenant, r.name = row.name, r.embedding = row.embedding, r.vec = row.vec
RETURN count(r) AS n;

// name: upsert_triples
// A triple node (provenance) asserted by a passage, plus the RELATES edge between
// its entities. rows: {triple_id, tenant, passage_id, subject_id, object_id,
// subject, relation, object, relation_id, embedding (the fact text's, indexed for the
// HippoRAG 2 baseline's fact retrieval; null when the triple exists already: a memory triple
// an APR query wrote first has none and gets it here)}
UNWIND $rows AS row
MERGE (t:Triple {triple_id: row.triple_id})
ON CREATE SET t.tenant = row.tenant, t.subject = row.subject, t.relation = row.relation,
              t.object = row.object, t.relation_id = row.relation_id,
              t.subject_id = row.subject_id, t.object_id = row.object_id
SET t.embedding = coalesce(t.embedding, row.embedding)
WITH t, row
MATCH (p:Passage {passage_id: row.passage_id})
MERGE (p)-[:ASSERTS]->(t)
WITH t, row
MATCH (s:Entity {entity_id: row.subject_id}), (o:Entity {entity_id: row.object_id})
MERGE (s)-[r:RELATES {triple_id: row.triple_id}]->(o)
ON CREATE SET r.relation = row.relation, r.relation_id = row.relation_id
RETURN count(t) AS n;

// name: upsert_synonyms
// kNN synonymy edges between entities (spec §1). rows: {src, dst, score}
UNWIND $rows AS row
MATCH (a:Entity {entity_id: row.src}), (b:Entity {entity_id: row.dst})
MERGE (a)-[r:SYNONYM]->(b)
SET r.score = row.score
RETURN count(r) AS n;

// name: synonym_degrees
// How many SYNONYM edges (either direction) each of the entities $ids has: the synonym cap
// reads the edges only of the entities above it.
UNWIND $ids AS id
MATCH (a:Entity {entity_id: id}) WHERE a.tenant = $tenant
OPTIONAL MATCH (a)-[r:SYNONYM]-()
RETURN id, count(r) AS degree;

// name: synonym_over_cap
// The tenant's entities with more than $k SYNONYM edges (either direction): after gds.knn
// rewrote the tenant's edges (a bulk load, whose cost is the tenant's anyway), the entities
// the synonym cap reads.
MATCH (a:Entity) WHERE a.tenant = $tenant
OPTIONAL MATCH (a)-[r:SYNONYM]-()
WITH a, count(r) AS degree
WHERE degree > $k
RETURN a.entity_id AS id;

// name: delete_synonyms
// Removes the SYNONYM edges between the pairs $pairs ({src, dst}, either direction): the edges
// beyond an entity's synonym cap (spec §1: at most synonym_max per entity, at both ends).
UNWIND $pairs AS pair
MATCH (a:Entity {entity_id: pair.src})-[r:SYNONYM]-(b:Entity {entity_id: pair.dst})
WHERE a.tenant = $tenant
DELETE r
RETURN count(*) AS n;

// name: graph_version
MATCH (m:Meta {meta_id: $meta_id}) RETURN m.version AS version;

// name: entity_embeddings
// All entities of a tenant with their vectors (tests and operations; ingestion's
// synonymy asks the vector index instead).
MATCH (e:Entity) WHERE e.tenant = $tenant
RETURN e.entity_id AS id, e.norm_name AS norm_name, e.embedding AS embedding;

// name: count_nodes
// Node counts of a tenant by label (idempotency checks, status); the graph-change log
// (GraphChange, bookkeeping of versions, not content) is left out.
MATCH (n) WHERE n.tenant = $tenant AND labels(n)[0] <> 'GraphChange'
RETURN labels(n)[0] AS label, count(n) AS n;

// name: count_relationships
// Relationship counts of a tenant by type (source node's tenant).
MATCH (a)-[r]->() WHERE a.tenant = $tenant
RETURN type(r) AS type, count(r) AS n;

// name: count_document_apr
// The document side of the symbols APR shares with queries, for a tenant: entities a passage or
// proposition mentions or a RELATES edge joins, relations an asserted triple uses, the triples a
// passage asserts, the fact runs and their ordered EDGEs (APR queries add question and answer
// runs, their memory triples, entities and relations beside them). GraphStore.document_counts
// uses it to compare a graph that served queries with a clean replay of its documents.
MATCH (t:Triple) WHERE t.tenant = $tenant AND EXISTS { MATCH (:Passage)-[:ASSERTS]->(t) }
WITH count(t) AS triples, collect(DISTINCT t.relation_id) AS relation_ids
OPTIONAL MATCH (e:Entity) WHERE e.tenant = $tenant
  AND (EXISTS { MATCH ()-[:MENTIONS]->(e) } OR EXISTS { MATCH (e)-[:RELATES]-() })
WITH triples, relation_ids, count(e) AS entities
OPTIONAL MATCH (r:Run {channel: 'fact'}) WHERE r.tenant = $tenant
OPTIONAL MATCH (r)-[x:EDGE]->()
RETURN triples, size(relation_ids) AS relations, entities, count(DISTINCT r) AS runs, count(x) AS edges;
