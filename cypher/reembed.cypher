// `pathweave reembed`: a tenant's vectors rewritten with another embedder, page by
// page in id order (resumable from the last id done, kept on Meta by begin_reembed). Each
// page statement returns the texts the node was embedded from at ingestion; each write
// statement sets its vector properties: `embedding` (the vector index's) and `vec` (base64
// float32, what queries read), `line_vec` for a triple's APR line.

// name: reembed_page_passages
// Passages after id $after: id, title, text (embedded as "title\ntext", or text alone).
MATCH (n:Passage) WHERE n.tenant = $tenant AND n.passage_id > $after
RETURN n.passage_id AS id, n.title AS title, n.text AS text ORDER BY id LIMIT $limit;

// name: reembed_page_propositions
MATCH (n:Proposition) WHERE n.tenant = $tenant AND n.prop_id > $after
RETURN n.prop_id AS id, n.text AS text ORDER BY id LIMIT $limit;

// name: reembed_page_entities
// Entities after $after: id, name (what was embedded), norm_name (synonymy skips short ones).
MATCH (n:Entity) WHERE n.tenant = $tenant AND n.entity_id > $after
RETURN n.entity_id AS id, n.name AS text, n.norm_name AS norm_name ORDER BY id LIMIT $limit;

// name: reembed_page_relations
MATCH (n:Relation) WHERE n.tenant = $tenant AND n.relation_id > $after
RETURN n.relation_id AS id, n.name AS text ORDER BY id LIMIT $limit;

// name: reembed_page_triples
// Triples after $after: their words (the fact text and APR's line are made of them) and
// whether they carry a fact embedding (passage-asserted) and a line vector.
MATCH (n:Triple) WHERE n.tenant = $tenant AND n.triple_id > $after
RETURN n.triple_id AS id, n.subject AS subject, n.relation AS relation, n.object AS object,
       n.embedding IS NOT NULL AS fact, n.line_vec IS NOT NULL AS line ORDER BY id LIMIT $limit;

// name: reembed_page_runs
// APR runs after $after: their text and which vector property they carry (fact runs
// `embedding`, question and answer runs `memory_embedding`).
MATCH (n:Run) WHERE n.tenant = $tenant AND n.run_id > $after
RETURN n.run_id AS id, n.text AS text, n.memory_embedding IS NOT NULL AS memory ORDER BY id LIMIT $limit;

// name: reembed_write_passages
// rows: {id, embedding, vec}
UNWIND $rows AS row
MATCH (n:Passage {passage_id: row.id}) WHERE n.tenant = $tenant
SET n.embedding = row.embedding, n.vec = row.vec
RETURN count(n) AS n;

// name: reembed_write_propositions
UNWIND $rows AS row
MATCH (n:Proposition {prop_id: row.id}) WHERE n.tenant = $tenant
SET n.embedding = row.embedding, n.vec = row.vec
RETURN count(n) AS n;

// name: reembed_write_entities
UNWIND $rows AS row
MATCH (n:Entity {entity_id: row.id}) WHERE n.tenant = $tenant
SET n.embedding = row.embedding, n.vec = row.vec
RETURN count(n) AS n;

// name: reembed_write_relations
UNWIND $rows AS row
MATCH (n:Relation {relation_id: row.id}) WHERE n.tenant = $tenant
SET n.embedding = row.embedding, n.vec = row.vec
RETURN count(n) AS n;

// name: reembed_write_triples
// rows: {id, embedding (null: the triple has no fact embedding), line_vec (null: none)}
UNWIND $rows AS row
MATCH (n:Triple {triple_id: row.id}) WHERE n.tenant = $tenant
SET n.embedding = row.embedding, n.line_vec = row.line_vec
RETURN count(n) AS n;

// name: reembed_write_runs
// rows: {id, embedding (fact runs, else null), memory_embedding (question/answer runs, else null), vec}
UNWIND $rows AS row
MATCH (n:Run {run_id: row.id}) WHERE n.tenant = $tenant
SET n.embedding = row.embedding, n.memory_embedding = row.memory_embedding, n.vec = row.vec
RETURN count(n) AS n;

// name: reembed_clear_synonyms
// Removes up to $limit of the tenant's SYNONYM edges (they are re-found with the new
// embedder and its threshold); returns how many were removed.
MATCH (a:Entity)-[r:SYNONYM]->(:Entity) WHERE a.tenant = $tenant
WITH r LIMIT $limit
DELETE r
RETURN count(*) AS n;
