// The embedder a tenant's vectors came from, kept on the tenant's Meta node:
// name (a catalog embedder or a model directory's name), dimension and identity (artifact
// and version). Ingestion records it on a tenant's first write and every ingestion and
// query checks it (pathweave.embedding.embedder_record); `pathweave reembed` switches it, with
// `reembed_to` set while the tenant's vectors are being rewritten.

// name: embedder_record
// The tenant's recorded embedder and re-embedding state (no row before the first ingestion).
MATCH (m:Meta {meta_id: $meta_id})
RETURN m.embedder AS name, m.embedder_dim AS dim, m.embedder_identity AS identity,
       m.reembed_to AS reembed_to, m.reembed_cursor AS reembed_cursor;

// name: tenant_any_passage
// One passage id of the tenant, if it has any (a tenant written before embedders were
// recorded holds MiniLM vectors).
MATCH (p:Passage) WHERE p.tenant = $tenant
RETURN p.passage_id AS id LIMIT 1;

// name: record_embedder
// Records the tenant's embedder $embedder ($dim, $identity) and ends a re-embedding.
MERGE (m:Meta {meta_id: $meta_id})
ON CREATE SET m.tenant = $tenant, m.version = 0
SET m.embedder = $embedder, m.embedder_dim = $dim, m.embedder_identity = $identity,
    m.reembed_to = null, m.reembed_cursor = null
RETURN m.embedder AS name;

// name: begin_reembed
// Marks the tenant as being re-embedded to $target (queries and ingestion wait for it) and
// keeps $cursor, the label and last node id done, so an interrupted run resumes there.
MERGE (m:Meta {meta_id: $meta_id})
ON CREATE SET m.tenant = $tenant, m.version = 0
SET m.reembed_to = $target, m.reembed_cursor = $cursor
RETURN m.reembed_to AS target;

// name: claim_embedder
// A first ingestion records its embedder unless another one got there first (one write
// transaction on the Meta node, so two first ingestions cannot both record theirs): returns
// the tenant's embedder and re-embedding state after it.
MERGE (m:Meta {meta_id: $meta_id})
ON CREATE SET m.tenant = $tenant, m.version = 0
SET m.embedder_dim = CASE WHEN m.embedder IS NULL THEN $dim ELSE m.embedder_dim END,
    m.embedder_identity = CASE WHEN m.embedder IS NULL THEN $identity ELSE m.embedder_identity END,
    m.embedder = coalesce(m.embedder, $embedder)
RETURN m.embedder AS name, m.embedder_dim AS dim, m.embedder_identity AS identity, m.reembed_to AS reembed_to;

// name: embedder_guard
// Inside each ingestion group's write transaction: the tenant is still on $embedder and not
// being re-embedded (an ingestion that started before `pathweave reembed` must not write
// vectors of the old embedder behind its cursor). No row: the group is refused. The record
// is locked before it is read (a write that leaves nothing; Neo4j reads without locks), so a
// re-embedding that starts meanwhile waits for this transaction's commit instead of passing it.
MATCH (m:Meta {meta_id: $meta_id})
SET m.cas = true REMOVE m.cas
WITH m WHERE m.embedder = $embedder AND m.reembed_to IS NULL
RETURN m.embedder AS name;
