// AutoPrunedRetriever (spec §3, graph model §0): the codebook (a stable per-tenant integer
// `code` on Entity, Relation, Triple and Run, counted by one (:Codebook) node per tenant and
// kind), runs `(:Run {run_id, channel})-[:EDGE {order}]->(:Triple)` linked to their passage
// (HAS_RUN), query (ASKED) or answer (AS_RUN), and sessions: `(:Query {session_id})`,
// `(:Query)-[:SENT]->(:Run)` for the runs a query's prompt carried in full and
// `(:Query)-[:REUSED]->(:Run)` for those it only referenced (sent earlier in its session).
// Every statement filters by $tenant; writes take a batch `$rows` / `$ids` (UNWIND).

// name: constraint_run
CREATE CONSTRAINT run_id IF NOT EXISTS FOR (n:Run) REQUIRE n.run_id IS UNIQUE;

// name: constraint_codebook
// One counter node per tenant and kind: codebook_id = "codebook:<tenant>:<kind>".
CREATE CONSTRAINT codebook_id IF NOT EXISTS FOR (n:Codebook) REQUIRE n.codebook_id IS UNIQUE;

// name: constraint_session
// (:Session {session_key}) = tenant + session_id; links the session's queries (IN_SESSION) so
// a session is read without scanning the tenant's queries.
CREATE CONSTRAINT session_key IF NOT EXISTS FOR (n:Session) REQUIRE n.session_key IS UNIQUE;

// --- The codebook: codes assigned once (nodes that have one keep it: re-ingest changes nothing).
// The counter node is locked by every assigning transaction before it is read (`SET c.cas =
// true REMOVE c.cas`, a write that leaves nothing: Neo4j reads without locks, and the counter
// read before the lock would be a lost update), so concurrent assignments are serialized on
// Neo4j and conflict (and are retried) on ArcadeDB: codes stay unique per tenant and kind.

// name: apr_code_entities
// Give the entities $ids that have no code the next codes of $codebook_id.
MERGE (c:Codebook {codebook_id: $codebook_id})
ON CREATE SET c.tenant = $tenant, c.next_code = 0
SET c.cas = true REMOVE c.cas
WITH c
UNWIND $ids AS id
MATCH (n:Entity {entity_id: id}) WHERE n.tenant = $tenant AND n.code IS NULL
WITH c, collect(DISTINCT n) AS fresh
WITH c, fresh, c.next_code AS base
UNWIND range(0, size(fresh) - 1) AS i
WITH c, base, fresh[i] AS n, i
SET n.code = base + i
WITH c, base, count(n) AS k
SET c.next_code = base + k
RETURN k AS n;

// name: apr_code_relations
// Give the relations $ids that have no code the next codes of $codebook_id.
MERGE (c:Codebook {codebook_id: $codebook_id})
ON CREATE SET c.tenant = $tenant, c.next_code = 0
SET c.cas = true REMOVE c.cas
WITH c
UNWIND $ids AS id
MATCH (n:Relation {relation_id: id}) WHERE n.tenant = $tenant AND n.code IS NULL
WITH c, collect(DISTINCT n) AS fresh
WITH c, fresh, c.next_code AS base
UNWIND range(0, size(fresh) - 1) AS i
WITH c, base, fresh[i] AS n, i
SET n.code = base + i
WITH c, base, count(n) AS k
SET c.next_code = base + k
RETURN k AS n;

// name: apr_code_triples
// Give the triples (edges of the codebook) $ids that have no code the next codes of $codebook_id.
MERGE (c:Codebook {codebook_id: $codebook_id})
ON CREATE SET c.tenant = $tenant, c.next_code = 0
SET c.cas = true REMOVE c.cas
WITH c
UNWIND $ids AS id
MATCH (n:Triple {triple_id: id}) WHERE n.tenant = $tenant AND n.code IS NULL
WITH c, collect(DISTINCT n) AS fresh
WITH c, fresh, c.next_code AS base
UNWIND range(0, size(fresh) - 1) AS i
WITH c, base, fresh[i] AS n, i
SET n.code = base + i
WITH c, base, count(n) AS k
SET c.next_code = base + k
RETURN k AS n;

// name: apr_code_runs
// Give the runs $ids that have no code the next codes of $codebook_id (a prompt refers to
// a run sent earlier in its session by this code).
MERGE (c:Codebook {codebook_id: $codebook_id})
ON CREATE SET c.tenant = $tenant, c.next_code = 0
SET c.cas = true REMOVE c.cas
WITH c
UNWIND $ids AS id
MATCH (n:Run {run_id: id}) WHERE n.tenant = $tenant AND n.code IS NULL
WITH c, collect(DISTINCT n) AS fresh
WITH c, fresh, c.next_code AS base
UNWIND range(0, size(fresh) - 1) AS i
WITH c, base, fresh[i] AS n, i
SET n.code = base + i
WITH c, base, count(n) AS k
SET c.next_code = base + k
RETURN k AS n;

// --- Runs written at ingestion (fact runs) and by queries (question and answer runs).

// name: apr_triple_lines
// The embedding of each triple's line "h r t" (base64 float32, what the fine score reads),
// set once. rows: {triple_id, line_vec}
UNWIND $rows AS row
MATCH (t:Triple {triple_id: row.triple_id}) WHERE t.tenant = $tenant AND t.line_vec IS NULL
SET t.line_vec = row.line_vec
RETURN count(t) AS n;

// name: apr_upsert_memory_triples
// Triples of questions and answers (edges of the codebook that no passage asserts): no
// RELATES edge and no fact-index embedding, so PropRAG's and HippoRAG 2's graphs are unchanged.
// rows: {triple_id, tenant, subject, relation, object, subject_id, object_id, relation_id, line_vec}
UNWIND $rows AS row
MERGE (t:Triple {triple_id: row.triple_id})
ON CREATE SET t.tenant = row.tenant, t.subject = row.subject, t.relation = row.relation,
              t.object = row.object, t.subject_id = row.subject_id, t.object_id = row.object_id,
              t.relation_id = row.relation_id, t.line_vec = row.line_vec
RETURN count(t) AS n;

// name: apr_upsert_fact_runs
// Fact runs of a passage (spec §3 segmentation). rows: {run_id, tenant, passage_id, text,
// embedding (the run text's, indexed: coarse candidates), vec, entity_ids, relation_ids, size}
UNWIND $rows AS row
MERGE (r:Run {run_id: row.run_id})
ON CREATE SET r.tenant = row.tenant, r.channel = 'fact', r.text = row.text, r.embedding = row.embedding,
              r.vec = row.vec, r.entity_ids = row.entity_ids, r.relation_ids = row.relation_ids,
              r.size = row.size
WITH r, row
MATCH (p:Passage {passage_id: row.passage_id})
MERGE (p)-[:HAS_RUN]->(r)
RETURN count(r) AS n;

// name: apr_upsert_memory_runs
// Question and answer runs. rows: {run_id, tenant, channel ('question'|'answer'), text,
// memory_embedding (indexed apart from the fact runs), vec, entity_ids, relation_ids, size,
// passage_ids (an answer's evidence passages; [] for questions)}
UNWIND $rows AS row
MERGE (r:Run {run_id: row.run_id})
ON CREATE SET r.tenant = row.tenant, r.channel = row.channel, r.text = row.text,
              r.memory_embedding = row.memory_embedding, r.vec = row.vec, r.entity_ids = row.entity_ids,
              r.relation_ids = row.relation_ids, r.size = row.size, r.passage_ids = row.passage_ids
RETURN count(r) AS n;

// name: apr_link_run_edges
// The ordered edges of runs. rows: {run_id, triple_id, order}
UNWIND $rows AS row
MATCH (r:Run {run_id: row.run_id}), (t:Triple {triple_id: row.triple_id})
WHERE r.tenant = $tenant
MERGE (r)-[e:EDGE {order: row.order}]->(t)
RETURN count(e) AS n;

// name: apr_delete_passage_runs
// Document deletion: the fact runs of $passage_ids that no other passage has.
MATCH (p:Passage)-[:HAS_RUN]->(r:Run)
WHERE p.passage_id IN $passage_ids AND r.tenant = $tenant
WITH DISTINCT r
WHERE NOT EXISTS { MATCH (o:Passage)-[:HAS_RUN]->(r) WHERE NOT o.passage_id IN $passage_ids }
WITH r, r.run_id AS id
DETACH DELETE r
RETURN id;

// --- Queries, sessions and what they sent or reused.

// name: apr_write_query
// The query node of an APR query (the reasoning record writer MERGEs the same node), with
// its session: (:Session {session_key})-[:IN_SESSION]->(:Query) when $session_id is set.
MERGE (q:Query {query_id: $query_id})
ON CREATE SET q.tenant = $tenant, q.text = $text, q.mode = $mode, q.created_at = $created_at
SET q.session_id = $session_id
WITH q
UNWIND CASE WHEN $session_id IS NULL THEN [] ELSE [$session_id] END AS sid
MERGE (s:Session {session_key: $session_key})
ON CREATE SET s.tenant = $tenant, s.session_id = sid, s.created_at = $created_at
MERGE (s)-[:IN_SESSION]->(q)
RETURN count(q) AS n;

// name: apr_link_asked
// The question run of query $query_id. rows: {run_id}
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id}), (r:Run {run_id: row.run_id})
WHERE q.tenant = $tenant
MERGE (q)-[:ASKED]->(r)
RETURN count(r) AS n;

// name: apr_link_sent
// Runs the prompt of query $query_id carried in full. rows: {run_id, rank, channel}
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id}), (r:Run {run_id: row.run_id})
WHERE q.tenant = $tenant
MERGE (q)-[e:SENT]->(r)
ON CREATE SET e.rank = row.rank, e.channel = row.channel
RETURN count(e) AS n;

// name: apr_link_reused
// Runs the prompt of query $query_id referenced by code (sent earlier in its session).
// rows: {run_id, rank, channel}
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id}), (r:Run {run_id: row.run_id})
WHERE q.tenant = $tenant
MERGE (q)-[e:REUSED]->(r)
ON CREATE SET e.rank = row.rank, e.channel = row.channel
RETURN count(e) AS n;

// name: apr_write_answer_run
// The answer run of query $query_id: (:Answer {answer_id: $query_id})-[:AS_RUN]->(:Run).
// The Answer node is the LLM answer's when one was generated (ANSWERED, answers.cypher);
// otherwise one with source 'evidence' (the selected evidence stands for the answer).
MATCH (r:Run {run_id: $run_id}) WHERE r.tenant = $tenant
MERGE (a:Answer {answer_id: $query_id})
ON CREATE SET a.tenant = $tenant, a.source = 'evidence', a.text = $text
MERGE (a)-[:AS_RUN]->(r)
RETURN count(r) AS n;

// name: apr_session_runs
// Every run the session $session_key's queries sent, asked or reused, and their answer
// runs (what the model has seen or said in this session), with its code.
MATCH (s:Session {session_key: $session_key})-[:IN_SESSION]->(q:Query)
WHERE s.tenant = $tenant
MATCH (q)-[:SENT|ASKED|REUSED]->(r:Run)
RETURN DISTINCT r.run_id AS id, r.code AS code
UNION
MATCH (s:Session {session_key: $session_key})-[:IN_SESSION]->(q:Query)
WHERE s.tenant = $tenant
MATCH (a:Answer {answer_id: q.query_id})-[:AS_RUN]->(r:Run)
RETURN DISTINCT r.run_id AS id, r.code AS code;

// name: apr_query_runs
// The runs a query asked, sent and reused (the reasoning record's APR part).
MATCH (q:Query {query_id: $query_id})-[e:ASKED|SENT|REUSED]->(r:Run)
WHERE q.tenant = $tenant
RETURN type(e) AS link, r.run_id AS run_id, r.code AS code, r.channel AS channel, e.rank AS rank,
       q.session_id AS session_id
ORDER BY link, rank;

// --- Reads of the codebook view (by id, through the query process's node cache).

// name: apr_run_rows
// Runs $ids: channel, code, text vector, entity and relation ids, triple ids in order, and
// the passages they come from (fact runs: HAS_RUN; answer runs: their evidence passages).
UNWIND $ids AS id
MATCH (r:Run {run_id: id}) WHERE r.tenant = $tenant
OPTIONAL MATCH (r)-[e:EDGE]->(t:Triple)
WITH r, id, e, t ORDER BY e.order
WITH r, id, collect(t.triple_id) AS triple_ids
OPTIONAL MATCH (p:Passage)-[:HAS_RUN]->(r)
WITH r, id, triple_ids, collect(p.passage_id) AS passages
RETURN id, r.channel AS channel, r.code AS code, r.text AS text, r.vec AS vec,
       r.entity_ids AS entity_ids, r.relation_ids AS relation_ids, triple_ids,
       coalesce(r.passage_ids, []) + passages AS passage_ids;

// name: apr_triple_rows
// Triples $ids: code, words, entity/relation ids and the line vector.
UNWIND $ids AS id
MATCH (t:Triple {triple_id: id}) WHERE t.tenant = $tenant
RETURN id, t.code AS code, t.subject AS subject, t.relation AS relation, t.object AS object,
       t.subject_id AS subject_id, t.object_id AS object_id, t.relation_id AS relation_id,
       t.line_vec AS line_vec;

// name: apr_entity_rows
// Entities $ids: code, name and vector.
UNWIND $ids AS id
MATCH (e:Entity {entity_id: id}) WHERE e.tenant = $tenant
RETURN id, e.code AS code, e.name AS name, e.vec AS vec;

// name: apr_relation_rows
// Relations $ids: code, name and vector.
UNWIND $ids AS id
MATCH (r:Relation {relation_id: id}) WHERE r.tenant = $tenant
RETURN id, r.code AS code, r.name AS name, r.vec AS vec;

// name: apr_tenant_codes
// Every coded node of the tenant: label, id and code (tests and operations).
MATCH (n) WHERE n.tenant = $tenant AND n.code IS NOT NULL
WITH n, labels(n)[0] AS label
RETURN label, CASE label WHEN 'Entity' THEN n.entity_id WHEN 'Relation' THEN n.relation_id
                         WHEN 'Triple' THEN n.triple_id ELSE n.run_id END AS id, n.code AS code;

// name: apr_passage_runs
// The fact runs of the passages $ids with their triples' words in EDGE order (tests, the explorer).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})-[:HAS_RUN]->(r:Run)-[e:EDGE]->(t:Triple)
WHERE p.tenant = $tenant
WITH id, r, e, t ORDER BY e.order
RETURN id AS passage_id, r.run_id AS run_id, r.code AS code,
       collect([t.subject, t.relation, t.object]) AS triples;

// name: apr_passage_fact_runs
// The fact runs of the passages $ids (mode apr's facts channel from PropRAG's top passages).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id})-[:HAS_RUN]->(r:Run)
WHERE p.tenant = $tenant
RETURN id AS passage_id, r.run_id AS run_id;

// name: apr_question_run_passages
// PropRAG with earlier questions (setting apr.proprag_question_runs): for the question runs
// $ids, the passages of the fact runs the queries that asked them sent or reused.
UNWIND $ids AS id
MATCH (r:Run {run_id: id})
WHERE r.tenant = $tenant
MATCH (q:Query)-[:ASKED]->(r)
MATCH (q)-[:SENT|REUSED]->(f:Run)<-[:HAS_RUN]-(p:Passage)
RETURN id, collect(DISTINCT p.passage_id) AS passage_ids;
