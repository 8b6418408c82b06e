// Documents, ingestion jobs and per-document status (workers and the API).
//
// (:Job {job_id, tenant, created_at, doc_ids, versions, total, batches, queue}) is one
// POST/PUT /v1/documents submission; (:DocumentStatus {doc_id, tenant, version, status,
// applied_version, attempts, error, job_id, worker, lease_until, title, source, queued_at,
// started_at, finished_at, seconds, passages, propositions, entities, triples}) is the head
// of one document: its newest accepted version and that version's state, queued | running |
// done | failed | deleted (the transitions: pathweave_ingest.lifecycle). Status nodes are
// kept apart from (:Document) because the pipeline treats an existing Document as
// ingested. Every statement filters by $tenant.
//
// Compare-and-set on a head: Neo4j reads committed data without locking it, so a WHERE on
// the head's version or status, checked before the write lock is taken, may pass on a value
// that a concurrent transaction (an accept, a DELETE) is replacing, and the write then lands
// on the newer version. Every statement that changes a head on condition therefore takes the
// head's write lock first (`SET s.cas = true REMOVE s.cas`: a write that leaves nothing) and
// only then reads the version and status it compares (ArcadeDB's optimistic transactions
// reject the conflict by themselves).

// name: constraint_job
CREATE CONSTRAINT job_id IF NOT EXISTS FOR (n:Job) REQUIRE n.job_id IS UNIQUE;

// name: constraint_document_status
CREATE CONSTRAINT document_status_id IF NOT EXISTS FOR (n:DocumentStatus) REQUIRE n.doc_id IS UNIQUE;

// name: constraint_document_status_state
// Not a constraint: the (tenant, status) index of the status nodes, which the requeue sweep
// (doc_requeue_candidates) looks up; created with the constraints.
CREATE INDEX document_status_state IF NOT EXISTS FOR (n:DocumentStatus) ON (n.tenant, n.status);

// name: ping
// Readiness probe: the store answers a trivial query.
RETURN 1 AS ok;

// name: job_create
// One submission. $doc_ids: every document of the request (also those already ingested);
// $versions: the version of each that this job stands for (same order).
MERGE (j:Job {job_id: $job_id})
ON CREATE SET j.tenant = $tenant, j.created_at = $created_at, j.doc_ids = $doc_ids, j.versions = $versions,
              j.total = $total, j.batches = $batches, j.queue = $queue
RETURN j.job_id AS job_id;

// name: job_get
MATCH (j:Job {job_id: $job_id}) WHERE j.tenant = $tenant
RETURN j.job_id AS job_id, j.created_at AS created_at, j.doc_ids AS doc_ids, j.versions AS versions,
       j.total AS total, j.batches AS batches, j.queue AS queue;

// name: document_states
// Which of $ids exist as ingested documents (with the stored version's content_hash, so
// a changed version of a source is told apart) and their status node, if any: the newest
// accepted version, its state, attempts, lease (ms since the epoch) and the version the
// graph shows (applied_version).
UNWIND $ids AS id
OPTIONAL MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant
OPTIONAL MATCH (s:DocumentStatus {doc_id: id}) WHERE s.tenant = $tenant
RETURN id AS doc_id, d IS NOT NULL AS ingested, d.content_hash AS content_hash, d.acl AS acl, s.status AS status,
       s.acl AS head_acl, coalesce(s.acl_set, false) AS head_acl_set,
       s.attempts AS attempts, s.version AS version, s.applied_version AS applied_version,
       s.lease_until AS lease_until, s.worker AS worker, coalesce(d.links_pending, false) AS links_pending;

// name: doc_lock
// First statement of a transaction that accepts writes (pathweave_ingest.lifecycle): the
// status node of each of $ids, created at version 0 when the document has none, is
// written, so this transaction holds its lock until it commits and concurrent accepts of
// one document are serialized. $owner: a token of this one transaction (the same on each of
// its tries), kept among the head's last 4 (lock_tokens); replayed: the head holds it, so an
// earlier try committed (a commit whose outcome the store did not tell); latest: and no other
// writer locked the head since (the try may do that try's work again: the same outcome), else
// a newer write superseded it (the try leaves that head alone). Returns the head as this
// transaction sees it; an id whose head belongs to another tenant gives no row (and nothing
// of it is touched).
UNWIND $ids AS id
WITH DISTINCT id
OPTIONAL MATCH (other:DocumentStatus {doc_id: id}) WHERE other.tenant <> $tenant
WITH id, other WHERE other IS NULL
MERGE (s:DocumentStatus {doc_id: id})
ON CREATE SET s.tenant = $tenant, s.version = 0
WITH s, id, $owner IN coalesce(s.lock_tokens, []) AS replayed,
     coalesce(head(s.lock_tokens) = $owner, false) AS latest
SET s.lock_tokens = ([$owner] + [t IN coalesce(s.lock_tokens, []) WHERE t <> $owner])[0..4]
WITH s, id, replayed, latest
OPTIONAL MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant
RETURN id AS doc_id, d IS NOT NULL AS ingested, d.content_hash AS content_hash, d.acl AS acl, s.status AS status,
       s.attempts AS attempts, coalesce(s.version, 0) AS version, s.applied_version AS applied_version,
       s.acl AS head_acl, coalesce(s.acl_set, false) AS head_acl_set, replayed, latest;

// name: doc_accept
// A new version of each document (status node locked by doc_lock in this transaction):
// version + 1, queued under $job_id, attempts and lease cleared, the task payload (JSON) kept
// until the version is done, so it can be queued again (doc_requeue). rows: {doc_id, title,
// source, queued_at, payload, acl, acl_given}: a write that names an access list makes it the
// head's (the newest accepted list, what the write that makes a version visible stores).
// Returns each document's new version.
// replay: not run when the job $job_id is written (pathweave_ingest.jobs.create_job reads it
// first: the accept committed on an earlier try, the versions it took stand).
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.version = coalesce(s.version, 0) + 1, s.status = 'queued', s.job_id = $job_id, s.title = row.title,
    s.source = row.source, s.queued_at = row.queued_at, s.attempts = 0, s.error = null,
    s.started_at = null, s.finished_at = null, s.seconds = null, s.lease_until = null, s.worker = null,
    s.payload = row.payload, s.acl = CASE WHEN row.acl_given THEN row.acl ELSE s.acl END,
    s.acl_set = coalesce(s.acl_set, false) OR row.acl_given
RETURN s.doc_id AS doc_id, s.version AS version;

// name: doc_status_already_done
// Documents of a job whose stored version is this content and that no version is pending
// for: a status node the lock just created (a document the CLI ingested) reads done.
// rows: {doc_id, title, source, queued_at}
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant AND s.status IS NULL
SET s.status = 'done', s.job_id = $job_id, s.title = row.title, s.source = row.source,
    s.queued_at = row.queued_at, s.finished_at = row.queued_at, s.attempts = 0, s.seconds = 0.0,
    s.applied_version = s.version
RETURN count(s) AS n;

// name: doc_status_get
// The heads of $ids, each with the access list that guards it: the newest accepted one (a
// write or PATCH named it), else the stored document's (null: the whole tenant reads it);
// acl_known false: neither (a first version in flight that names none, a tombstone).
UNWIND $ids AS id
MATCH (s:DocumentStatus {doc_id: id}) WHERE s.tenant = $tenant
OPTIONAL MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant
RETURN s.doc_id AS doc_id, s.status AS status, s.attempts AS attempts, s.error AS error,
       CASE WHEN coalesce(s.acl_set, false) THEN s.acl ELSE d.acl END AS acl,
       coalesce(s.acl_set, false) OR d IS NOT NULL AS acl_known,
       s.job_id AS job_id, s.title AS title, s.source AS source, s.queued_at AS queued_at,
       s.started_at AS started_at, s.finished_at AS finished_at, s.seconds AS seconds,
       s.passages AS passages, s.propositions AS propositions, s.entities AS entities,
       s.triples AS triples, s.version AS version, s.applied_version AS applied_version,
       s.bookmarks AS bookmarks, s.worker AS worker;

// name: doc_claim
// A worker takes documents (compare-and-set): only the newest accepted version ($rows'
// version), only when it is queued, or running under an expired lease (its worker died)
// or under this very task chain (resumed after a transient store error). rows: {doc_id,
// version, count, resumed}: count 1 for a new attempt, 0 for a resumed one (only this
// process's own, $worker). $now and
// $lease_until: ms since the epoch. Returns the documents taken with their payloads (JSON, kept
// on the head since the version was accepted: a queued batch carries references only).
// replay: a head this very claim took ($worker at $started_at, a commit whose outcome the
// store did not tell) is taken again without counting a new attempt.
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row, coalesce(s.status = 'running' AND s.worker = $worker AND s.started_at = $started_at, false) AS replayed
WHERE s.version = row.version
  AND (s.status = 'queued' OR replayed
       OR (s.status = 'running' AND ((row.resumed AND s.worker = $worker) OR coalesce(s.lease_until, 0) < $now)))
SET s.status = 'running', s.attempts = coalesce(s.attempts, 0) + CASE WHEN replayed THEN 0 ELSE row.count END,
    s.started_at = $started_at, s.worker = $worker, s.lease_until = $lease_until
RETURN s.doc_id AS doc_id, s.payload AS payload;

// name: doc_lease_renew
// The worker running documents extends their lease. rows: {doc_id, version}; $lease_until
// in ms since the epoch. Returns the documents whose lease it still holds.
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row
WHERE s.version = row.version AND s.status = 'running' AND s.worker = $worker
SET s.lease_until = $lease_until
RETURN s.doc_id AS doc_id;

// name: doc_version_fence
// First statement of the transaction that makes a version visible (the atomic swap): each
// document's newest accepted version must still be the one written (rows: {doc_id,
// version}); the write locks the status node until the swap commits, so no newer version
// can be accepted in between. Returns the documents whose version holds.
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row
WHERE s.version = row.version
SET s.applied_version = row.version
RETURN s.doc_id AS doc_id;

// name: doc_applied
// A write applied without a queue (the CLI's ingest: an added or replaced document), accepted
// as a new version in the very transaction that makes it visible, its status node locked by
// doc_lock just before: version + 1, done; a version queued or running is superseded by it.
// rows: {doc_id, title, source, finished_at, acl, acl_given} (acl as in doc_accept).
// Returns each document's new version.
// replay: not run for a head doc_lock found replayed (the version it took stands).
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
WITH s, row, coalesce(s.version, 0) + 1 AS version
SET s.version = version, s.status = 'done', s.applied_version = version, s.job_id = null,
    s.acl = CASE WHEN row.acl_given THEN row.acl ELSE s.acl END,
    s.acl_set = coalesce(s.acl_set, false) OR row.acl_given,
    s.title = row.title, s.source = row.source, s.queued_at = row.finished_at,
    s.started_at = row.finished_at, s.finished_at = row.finished_at, s.attempts = 0, s.error = null,
    s.seconds = null, s.lease_until = null, s.worker = null, s.payload = null, s.passages = null,
    s.propositions = null, s.entities = null, s.triples = null
RETURN s.doc_id AS doc_id, version;

// name: doc_status_done
// The version finished (only if it is still the newest). rows: {doc_id, version,
// finished_at, seconds, passages, propositions, entities, triples, bookmarks}; bookmarks:
// the worker's after the version's write committed (Neo4j; empty on ArcadeDB), so a reader
// in another process can wait for that state. Returns those set.
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row
WHERE s.version = row.version
SET s.status = 'done', s.error = null, s.finished_at = row.finished_at, s.seconds = row.seconds,
    s.passages = row.passages, s.propositions = row.propositions, s.entities = row.entities,
    s.triples = row.triples, s.applied_version = row.version, s.lease_until = null, s.payload = null,
    s.bookmarks = row.bookmarks
RETURN s.doc_id AS doc_id;

// name: doc_status_retry
// A failed attempt that will be retried: back to queued with the last error (only if the
// version is still the newest and still running under $worker: a worker whose lease ran out
// and whose document another worker finished meanwhile changes nothing). rows: {doc_id,
// version, attempts, error}
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row
WHERE s.version = row.version AND s.status = 'running' AND s.worker = $worker
SET s.status = 'queued', s.error = row.error, s.attempts = row.attempts, s.lease_until = null
RETURN s.doc_id AS doc_id;

// name: doc_status_failed
// Given up on a version, with the error (only if it is still the newest and not finished).
// rows: {doc_id, version, error, finished_at}
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row
WHERE s.version = row.version AND s.status IN ['queued', 'running']
SET s.status = 'failed', s.error = row.error, s.finished_at = row.finished_at, s.lease_until = null
RETURN s.doc_id AS doc_id;

// name: doc_requeue_candidates
// Versions to run again (pathweave jobs requeue, POST /v1/jobs/requeue, the API's sweep),
// looked up by state through the (tenant, status) index, so a sweep costs what is pending,
// not the tenant's size: $statuses holds 'running' (those whose lease ran out before $now,
// ms: their worker died and no delivery took them over), with 'failed' and 'queued' when
// asked (a queued one queued before $queued_before, ISO time: its message was lost, or was in
// a queue that is gone). Only those whose payload is kept.
UNWIND $statuses AS st
MATCH (s:DocumentStatus {tenant: $tenant, status: st})
WHERE s.payload IS NOT NULL AND (st <> 'running' OR coalesce(s.lease_until, 0) < $now)
  AND (st <> 'queued' OR coalesce(s.queued_at, '') < $queued_before)
RETURN s.doc_id AS doc_id, s.version AS version, s.payload AS payload
ORDER BY doc_id
LIMIT $limit;

// name: doc_requeue
// Back to queued under $job_id (compare-and-set: the same version, still failed, queued
// before $queued_before, or running under a lease that ran out before $now: two sweeps at
// once queue a version once). A failed version starts its attempts over (a person asked); a
// dead worker's keeps them, so a document that kills workers still runs out.
// rows: {doc_id, version}. Returns those queued.
UNWIND $rows AS row
MATCH (s:DocumentStatus {doc_id: row.doc_id}) WHERE s.tenant = $tenant
SET s.cas = true REMOVE s.cas
WITH s, row
WHERE s.version = row.version
  AND (($failed AND s.status = 'failed')
       OR ($queued AND s.status = 'queued' AND coalesce(s.queued_at, '') < $queued_before)
       OR (s.status = 'running' AND coalesce(s.lease_until, 0) < $now))
SET s.attempts = CASE WHEN s.status = 'failed' THEN 0 ELSE coalesce(s.attempts, 0) END
SET s.status = 'queued', s.job_id = $job_id, s.error = null, s.lease_until = null, s.worker = null,
    s.queued_at = $queued_at, s.finished_at = null
RETURN s.doc_id AS doc_id;

// name: doc_mark_deleted
// A DELETE (or a folder sync's removal) accepted as a new version of each of $ids, whose
// status nodes doc_lock holds in this transaction: the tombstone keeps the version counter,
// so an older version still queued can never come back. $finished_at: ISO time.
// replay: not run for a head doc_lock found replayed (the tombstone it took stands).
UNWIND $ids AS id
MATCH (s:DocumentStatus {doc_id: id}) WHERE s.tenant = $tenant
WITH s, coalesce(s.version, 0) + 1 AS version
SET s.version = version, s.status = 'deleted', s.applied_version = version, s.finished_at = $finished_at,
    s.error = null, s.lease_until = null, s.worker = null, s.payload = null
RETURN s.doc_id AS doc_id, version;

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
RETURN d.doc_id AS doc_id, d.title AS title, d.source AS source, d.ingested_at AS ingested_at, d.acl AS acl;

// name: documents_with_source_prefix
// Documents identified by their source (identity 'source') whose source starts with $prefix
// (folder sync: the documents of a folder, to find those whose files are gone).
MATCH (d:Document) WHERE d.tenant = $tenant AND d.identity = 'source' AND d.source STARTS WITH $prefix
RETURN d.doc_id AS doc_id, d.source AS source, d.title AS title, d.content_hash AS content_hash;

// name: doc_status_list
// Every status node of the tenant but the tombstones of deleted documents.
MATCH (s:DocumentStatus) WHERE s.tenant = $tenant AND coalesce(s.status, '') <> 'deleted'
RETURN s.doc_id AS doc_id, s.status AS status, s.attempts AS attempts, s.error AS error,
       s.job_id AS job_id, s.title AS title, s.source AS source, s.queued_at AS queued_at,
       s.started_at AS started_at, s.finished_at AS finished_at, s.seconds AS seconds,
       s.passages AS passages, s.propositions AS propositions, s.entities AS entities,
       s.triples AS triples, s.version AS version;

// name: documents_links_pending
// The documents $ids were just written (inside their write transaction): their entities'
// synonymy and alias links are still to do (cleared by documents_linked; a worker that finds
// the flag repairs them, whatever version came since).
UNWIND $ids AS id
MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant
SET d.links_pending = true
RETURN count(d) AS n;

// name: documents_linked
// The entities of the documents $ids are linked (synonymy edges, alias groups).
UNWIND $ids AS id
MATCH (d:Document {doc_id: id}) WHERE d.tenant = $tenant AND d.links_pending IS NOT NULL
REMOVE d.links_pending
RETURN count(d) AS n;

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

// --- Removing a version from the graph (inside the transaction that replaces or deletes it,
// pathweave_ingest.documents) ---

// name: document_unlink_next
// The reading-order edges between passages of $doc_id (before its version is replaced or
// removed; a new version writes its own).
MATCH (d:Document {doc_id: $doc_id}) WHERE d.tenant = $tenant
MATCH (d)<-[:PART_OF]-(p:Passage)-[n:NEXT]->(q:Passage)-[:PART_OF]->(d)
DELETE n
RETURN count(*) AS n;

// name: document_detach_passages
// Cuts the passages of $doc_id off it (its version is replaced or removed); returns their
// ids: those no document holds afterwards are removed (passages_without_document).
MATCH (d:Document {doc_id: $doc_id}) WHERE d.tenant = $tenant
MATCH (d)<-[r:PART_OF]-(p:Passage)
WITH r, p.passage_id AS id
DELETE r
RETURN DISTINCT id;

// name: passages_without_document
// Of the passages $ids, those no document holds (a passage another document or the new
// version of the same document shares stays).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id}) WHERE p.tenant = $tenant
  AND NOT EXISTS { MATCH (p)-[:PART_OF]->(:Document) }
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

// name: doc_head_set_acl
// The newest accepted access list of document $doc_id (its status node, locked by doc_lock
// in this transaction): what a write of a version still queued or running stores.
MATCH (s:DocumentStatus {doc_id: $doc_id}) WHERE s.tenant = $tenant
SET s.acl = $acl, s.acl_set = true
RETURN s.doc_id AS doc_id;

// name: doc_head_acl
// The newest accepted access list of each of $ids (heads locked in this transaction):
// acl_set false when no write or PATCH ever named one.
UNWIND $ids AS id
MATCH (s:DocumentStatus {doc_id: id}) WHERE s.tenant = $tenant
RETURN s.doc_id AS doc_id, s.acl AS acl, coalesce(s.acl_set, false) AS acl_set;

// name: document_set_acl
// Sets the access list of the stored document $doc_id ($acl: principals; null: the whole
// tenant may read it) and returns the ids of its passages, whose access the query
// processes re-read (the graph change record's `access`). No row: no such document.
MATCH (d:Document {doc_id: $doc_id}) WHERE d.tenant = $tenant
SET d.acl = $acl
WITH d
OPTIONAL MATCH (p:Passage)-[:PART_OF]->(d)
RETURN d.doc_id AS doc_id, collect(p.passage_id) AS passage_ids;

// name: delete_document_node
MATCH (d:Document {doc_id: $doc_id}) WHERE d.tenant = $tenant
DETACH DELETE d
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
RETURN q.query_id AS query_id, q.text AS text, q.mode AS mode, q.created_at AS created_at,
       q.principals AS principals, q.trace_id AS trace_id;

// name: passage_citations
// Where each passage of $ids comes from (citations "title, p. N" / "title > section"): its
// page or heading path and, one row per document holding it (ordered by document id), the
// document's id, title, source and access list (a caller cites the first it may read).
UNWIND $ids AS id
MATCH (p:Passage {passage_id: id}) WHERE p.tenant = $tenant
OPTIONAL MATCH (p)-[:PART_OF]->(d:Document)
RETURN id AS passage_id, p.page AS page, p.section AS section, coalesce(d.title, p.title) AS title,
       d.source AS source, d.doc_id AS doc_id, d.acl AS acl, d IS NOT NULL AS held
ORDER BY passage_id, doc_id;

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
RETURN d.title AS title, d.source AS source, d.ingested_at AS ingested_at, d.acl AS acl,
       p.passage_id AS passage_id, p.position AS position, p.text AS text;

// name: api_queries_recent
// The tenant's $limit most recent reasoning records, newest first (the explorer's list page).
MATCH (q:Query) WHERE q.tenant = $tenant
RETURN q.query_id AS query_id, q.text AS text, q.mode AS mode, q.created_at AS created_at,
       q.principals AS principals
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
       d.title AS doc_title, d.source AS source, d.acl AS acl, d IS NOT NULL AS held
ORDER BY passage_id, doc_id;

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
