// Documents, ingestion jobs and per-document status (workers and the API).
//
// (:Job {job_id, tenant, created_at, doc_ids, total, batches, queue}) is one
// POST /v1/documents submission; (:DocumentStatus {doc_id, tenant, status,
// attempts, error, job_id, title, source, queued_at, started_at, finished_at,
// seconds, passages, propositions, entities, triples}) is the latest state of
// one document: queued | running | done | failed. Status nodes are kept apart
// from (:Document) because the pipeline treats an existing Document as
// ingested. Every statement filters by $tenant.

// name: constraint_job
CREATE CONSTRAINT job_id IF NOT EXISTS FOR (n:Job) REQUIRE n.job_id IS UNIQUE;

// name: constraint_document_status
CREATE CONSTRAINT document_status_id IF NOT EXISTS FOR (n:DocumentStatus) REQUIRE n.doc_id IS UNIQUE;

// name: ping
// Readiness probe: the store answers a trivial query.
RETURN 1 AS ok;

// name: job_create
// One submission. $doc_ids: every document of the request (also those already ingested).
MERGE (j:Job {job_id: $job_id})
ON CREATE SET j.tenant = $tenant, j.created_at = $created_at, j.doc_ids = $doc_ids,
              j.total = $total, j.batches = $batches, j.queue = $queue
RETURN j.job_id AS job_id;

// name: job_get
MATCH (j:Job {job_id: $job_id}) WHERE j.tenant = $tenant
RETURN j.job_id AS job_id, j.created_at AS created_at, j.doc_ids AS doc_ids, j.total AS total,
       j.batches AS batches, j.queue AS queue;

// name: document_states
// Which of $ids exist as ingested documents (with the stored version's content_hash, so
// a changed version of a source is told apart) and their status node, if any.
UNWIND $ids AS id
OPTIONAL MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant
OPTIONAL MATCH (s:DocumentStatus {doc_id: id}) WHERE s.tenant = $tenant
RETURN id AS doc_id, d IS NOT NULL AS ingested, d.content_hash AS content_hash, s.status AS status,
       s.attempts AS attempts;

// name: doc_status_queue
// (Re)queue documents of a job. rows: {doc_id, title, source, queued_at}. A document still
// queued keeps its attempts (the caller never re-queues a running one); any other starts at 0.
UNWIND $rows AS row
MERGE (s:DocumentStatus {doc_id: row.doc_id})
ON CREATE SET s.tenant = $tenant
WITH s, row, CASE WHEN s.status = 'queued' THEN coalesce(s.attempts, 0) ELSE 0 END AS attempts
SET s.status = 'queued', s.job_id = $job_id, s.title = row.title, s.source = row.source,
    s.queued_at = row.queued_at, s.attempts = attempts, s.error = null, s.started_at = null,
    s.finished_at = null, s.seconds = null
RETURN count(s) AS n;

// name: doc_status_already_done
// Documents of a job that are already ingested (e.g. by the CLI): status done, counts kept.
// rows: {doc_id, title, source, queued_at}
UNWIND $rows AS row
MERGE (s:DocumentStatus {doc_id: row.doc_id})
ON CREATE SET s.tenant = $tenant, s.status = 'done', s.job_id = $job_id, s.title = row.title,
              s.source = row.source, s.queued_at = row.queued_at, s.finished_at = row.queued_at,
              s.attempts = 0, s.seconds = 0.0
RETURN count(s) AS n;

// name: doc_status_get
UNWIND $ids AS id
MATCH (s:DocumentStatus {doc_id: id}) WHERE s.tenant = $tenant
RETURN s.doc_id AS doc_id, s.status AS status, s.attempts AS attempts, s.error AS error,
       s.job_id AS job_id, s.title AS title, s.source AS source, s.queued_at AS queued_at,
       s.started_at AS started_at, s.finished_at AS finished_at, s.seconds AS seconds,
       s.passages AS passages, s.propositions AS propositions, s.entities AS entities,
       s.triples AS triples;

// name: doc_status_running
// A worker starts documents. rows: {doc_id, started_at, worker, count}: count is 1 for a new
// attempt, 0 when the same attempt resumes after a transient store error.
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.status = 'running', s.attempts = coalesce(s.attempts, 0) + row.count, s.started_at = row.started_at,
    s.worker = row.worker
RETURN count(s) AS n;

// name: doc_status_done
// rows: {doc_id, finished_at, seconds, passages, propositions, entities, triples}
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.status = 'done', s.error = null, s.finished_at = row.finished_at, s.seconds = row.seconds,
    s.passages = row.passages, s.propositions = row.propositions, s.entities = row.entities,
    s.triples = row.triples
RETURN count(s) AS n;

// name: doc_status_retry
// A failed attempt that will be retried: back to queued with the last error. rows: {doc_id, error}
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.status = 'queued', s.error = row.error
RETURN count(s) AS n;

// name: doc_status_failed
// The poison-document path: given up, with the error. rows: {doc_id, error, finished_at}
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.status = 'failed', s.error = row.error, s.finished_at = row.finished_at
RETURN count(s) AS n;

// name: document_counts
// What the graph holds for each of $ids: passages, propositions, triples, entities mentioned.
UNWIND $ids AS id
MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant
OPTIONAL MATCH (p:Passage)-[:PART_OF]->(d)
OPTIONAL MATCH (p)-[:STATES]->(r:Proposition)
OPTIONAL MATCH (p)-[:ASSERTS]->(t:Triple)
OPTIONAL MATCH (p)-[:MENTIONS]->(e:Entity)
RETURN id AS doc_id, count(DISTINCT p) AS passages, count(DISTINCT r) AS propositions,
       count(DISTINCT t) AS triples, count(DISTINCT e) AS entities;

// name: documents_list
// Every ingested document of the tenant (the API merges in the status nodes).
MATCH (d:Document) WHERE d.tenant = $tenant
RETURN d.doc_id AS doc_id, d.title AS title, d.source AS source, d.ingested_at AS ingested_at;

// name: documents_with_source_prefix
// Documents identified by their source (identity 'source') whose source starts with $prefix
// (folder sync: the documents of a folder, to find those whose files are gone).
MATCH (d:Document) WHERE d.tenant = $tenant AND d.identity = 'source' AND d.source STARTS WITH $prefix
RETURN d.doc_id AS doc_id, d.source AS source, d.title AS title, d.content_hash AS content_hash;

// name: doc_status_list
MATCH (s:DocumentStatus) WHERE s.tenant = $tenant
RETURN s.doc_id AS doc_id, s.status AS status, s.attempts AS attempts, s.error AS error,
       s.job_id AS job_id, s.title AS title, s.source AS source, s.queued_at AS queued_at,
       s.started_at AS started_at, s.finished_at AS finished_at, s.seconds AS seconds,
       s.passages AS passages, s.propositions AS propositions, s.entities AS entities,
       s.triples AS triples;

// name: document_entity_embeddings
// Entities mentioned by the passages of $ids (synonymy repair after a crashed attempt).
UNWIND $ids AS id
MATCH (d:Document {doc_id: id})<-[:PART_OF]-(:Passage)-[:MENTIONS]->(e:Entity)
WHERE d.tenant = $tenant
RETURN DISTINCT e.entity_id AS id, e.norm_name AS norm_name, e.vec AS vec;

// name: document_passage_ids
// Passage ids of the documents $ids.
UNWIND $ids AS id
MATCH (d:Document {doc_id: id})<-[:PART_OF]-(p:Passage)
WHERE d.tenant = $tenant
RETURN DISTINCT p.passage_id AS id;

// --- Document deletion (one transaction, see pathweave_ingest.jobs.delete_document) ---

// name: delete_doc_passages
// Passages that belong to $doc_id only (a passage shared with another document stays).
MATCH (d:Document {doc_id: $doc_id})<-[:PART_OF]-(p:Passage)
WHERE d.tenant = $tenant
  AND NOT EXISTS { MATCH (p)-[:PART_OF]->(o:Document) WHERE o.doc_id <> $doc_id }
RETURN DISTINCT p.passage_id AS id;

// name: delete_doc_propositions
// Propositions stated only by passages in $passage_ids.
MATCH (p:Passage)-[:STATES]->(r:Proposition)
WHERE p.passage_id IN $passage_ids AND r.tenant = $tenant
WITH DISTINCT r
WHERE NOT EXISTS { MATCH (o:Passage)-[:STATES]->(r) WHERE NOT o.passage_id IN $passage_ids }
RETURN r.prop_id AS id;

// name: delete_doc_triples
// Triples asserted only by passages in $passage_ids.
MATCH (p:Passage)-[:ASSERTS]->(t:Triple)
WHERE p.passage_id IN $passage_ids AND t.tenant = $tenant
WITH DISTINCT t
WHERE NOT EXISTS { MATCH (o:Passage)-[:ASSERTS]->(t) WHERE NOT o.passage_id IN $passage_ids }
RETURN t.triple_id AS id, t.subject_id AS subject_id, t.object_id AS object_id,
       t.relation_id AS relation_id;

// name: delete_doc_candidate_entities
// Entities mentioned by the removed passages ($passage_ids) or propositions ($prop_ids).
MATCH (p:Passage)-[:MENTIONS]->(e:Entity)
WHERE p.passage_id IN $passage_ids AND e.tenant = $tenant
RETURN DISTINCT e.entity_id AS id
UNION
MATCH (r:Proposition)-[:MENTIONS]->(e:Entity)
WHERE r.prop_id IN $prop_ids AND e.tenant = $tenant
RETURN DISTINCT e.entity_id AS id;

// name: delete_doc_orphan_entities
// Of $entity_ids, those nothing else will reference once $source_ids and $triple_ids are gone.
MATCH (e:Entity) WHERE e.entity_id IN $entity_ids AND e.tenant = $tenant
  AND NOT EXISTS { MATCH (x)-[:MENTIONS]->(e) WHERE NOT coalesce(x.passage_id, x.prop_id) IN $source_ids }
  AND NOT EXISTS { MATCH (e)-[r:RELATES]-() WHERE NOT r.triple_id IN $triple_ids }
RETURN e.entity_id AS id;

// name: delete_doc_relates
// The RELATES edges of the removed triples. rows: {triple_id, subject_id}
UNWIND $rows AS row
MATCH (s:Entity {entity_id: row.subject_id})-[r:RELATES]->()
WHERE s.tenant = $tenant AND r.triple_id = row.triple_id
DELETE r
RETURN count(*) AS n;

// name: delete_triples_by_id
// Deletes the Triple nodes of $ids (with their edges); returns the ids actually removed (change record).
MATCH (t:Triple) WHERE t.triple_id IN $ids AND t.tenant = $tenant
WITH t, t.triple_id AS id
DETACH DELETE t
RETURN id;

// name: delete_propositions_by_id
// Deletes the Proposition nodes of $ids (with their edges); returns the ids actually removed (change record).
MATCH (r:Proposition) WHERE r.prop_id IN $ids AND r.tenant = $tenant
WITH r, r.prop_id AS id
DETACH DELETE r
RETURN id;

// name: delete_passages_by_id
// Deletes the Passage nodes of $ids (with their edges); returns the ids actually removed (change record).
MATCH (p:Passage) WHERE p.passage_id IN $ids AND p.tenant = $tenant
WITH p, p.passage_id AS id
DETACH DELETE p
RETURN id;

// name: delete_entities_by_id
// Deletes the Entity nodes of $ids (with their edges); returns the ids actually removed (change record).
MATCH (e:Entity) WHERE e.entity_id IN $ids AND e.tenant = $tenant
WITH e, e.entity_id AS id
DETACH DELETE e
RETURN id;

// name: delete_document_node
MATCH (d:Document {doc_id: $doc_id}) WHERE d.tenant = $tenant
DETACH DELETE d
RETURN count(*) AS n;

// name: delete_document_status
MATCH (s:DocumentStatus {doc_id: $doc_id}) WHERE s.tenant = $tenant
DETACH DELETE s
RETURN count(*) AS n;

// name: delete_orphan_relations
// Relations of $relation_ids that no triple of the tenant uses any more.
MATCH (r:Relation) WHERE r.relation_id IN $relation_ids AND r.tenant = $tenant
  AND NOT EXISTS { MATCH (t:Triple) WHERE t.relation_id = r.relation_id AND t.tenant = $tenant }
DETACH DELETE r
RETURN count(*) AS n;

// --- Reads for the API ---

// name: api_query_get
// A reasoning record's Query node (also when it selected nothing).
MATCH (q:Query {query_id: $query_id}) WHERE q.tenant = $tenant
RETURN q.query_id AS query_id, q.text AS text, q.mode AS mode, q.created_at AS created_at;

// name: passage_citations
// Where each passage of $ids comes from (citations "title, p. N" / "title > section"):
// its page or heading path and its document's title and source.
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id}) WHERE p.tenant = $tenant
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
WITH p, id, d ORDER BY d.doc_id
WITH p, id, collect(d)[0] AS d
RETURN id AS passage_id, p.page AS page, p.section AS section, coalesce(d.title, p.title) AS title,
       d.source AS source;

// name: proposition_citing_passages
// Passages stating each proposition of $prop_ids (a context statement cites one of them).
UNWIND $prop_ids AS pid
MATCH (r:Proposition {prop_id: pid})
WHERE r.tenant = $tenant
MATCH (p:Passage)-[:STATES]->(r)
RETURN pid AS prop_id, p.passage_id AS passage_id ORDER BY p.passage_id;

// name: api_document_get
// A document of the tenant with its passages (one row per passage; one row with a null
// passage when it has none).
MATCH (d:Document {doc_id: $doc_id}) WHERE d.tenant = $tenant
OPTIONAL MATCH (p:Passage)-[:PART_OF]->(d)
RETURN d.title AS title, d.source AS source, d.ingested_at AS ingested_at,
       p.passage_id AS passage_id, p.position AS position, p.text AS text;

// name: api_queries_recent
// The tenant's $limit most recent reasoning records, newest first (the explorer's list page).
MATCH (q:Query) WHERE q.tenant = $tenant
RETURN q.query_id AS query_id, q.text AS text, q.mode AS mode, q.created_at AS created_at
ORDER BY created_at DESC
LIMIT $limit;

// name: api_propositions_stated
// The passages stating each proposition of $prop_ids (the explorer draws them).
UNWIND $prop_ids AS pid
MATCH (r:Proposition {prop_id: pid})
WHERE r.tenant = $tenant
MATCH (p:Passage)-[:STATES]->(r)
RETURN pid AS prop_id, p.passage_id AS passage_id;

// name: api_passages_get
// Passages of $ids with their documents (the explorer's side panel and document links).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id}) WHERE p.tenant = $tenant
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
RETURN p.passage_id AS passage_id, p.title AS title, p.text AS text, d.doc_id AS doc_id,
       d.title AS doc_title, d.source AS source;

// name: api_propositions_text
// Text of each proposition of $ids.
UNWIND $ids AS id
MATCH (x:Proposition {prop_id: id}) WHERE x.tenant = $tenant
RETURN x.prop_id AS id, x.text AS text;

// name: api_entities_name
// Name of each entity of $ids.
UNWIND $ids AS id
MATCH (x:Entity {entity_id: id}) WHERE x.tenant = $tenant
RETURN x.entity_id AS id, x.name AS text;
