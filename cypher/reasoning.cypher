// Reasoning records written back after each query (spec §0), explored in
// Neo4j Browser: (:Query)-[:FOUND]->(:Path)-[:STEP]->(:Proposition) and
// (:Query)-[:SELECTED]->(:Passage|:Proposition|:Entity).

// name: write_query
// $principals: the caller's (null: unrestricted); only callers reading at least what it
// read may read the record (read_query_principals, pathweave.access). $trace_id: the
// query's OpenTelemetry trace (null when untraced): a record in the Browser leads to it.
MERGE (q:Query {query_id: $query_id})
ON CREATE SET q.tenant = $tenant, q.text = $text, q.mode = $mode, q.created_at = $created_at,
              q.principals = $principals, q.trace_id = $trace_id
RETURN q.query_id AS query_id;

// name: read_query_principals
// Whether the tenant has query $query_id, and the principals of the caller that asked it.
MATCH (q:Query {query_id: $query_id}) WHERE q.tenant = $tenant
RETURN q.principals AS principals;

// name: write_query_session
// The session of query $query_id (a budgeted context sent in a session): the same
// (:Session {session_key})-[:IN_SESSION]->(:Query) as APR's queries.
MATCH (q:Query {query_id: $query_id})
SET q.session_id = $session_id
MERGE (s:Session {session_key: $session_key})
ON CREATE SET s.tenant = $tenant, s.session_id = $session_id, s.created_at = $created_at
MERGE (s)-[:IN_SESSION]->(q)
RETURN count(q) AS n;

// name: session_context_lines
// The context lines the earlier queries of session $session_key sent or referenced, with
// their session codes ("S3"): what a new context of the session references by code.
MATCH (s:Session {session_key: $session_key})-[:IN_SESSION]->(q:Query)-[sel:SELECTED]->(x)
WHERE s.tenant = $tenant AND sel.code IS NOT NULL
RETURN DISTINCT coalesce(x.passage_id, x.prop_id) AS id, sel.code AS code;

// name: write_paths
// rows: {path_id, rank, score, text}
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id})
MERGE (p:Path {path_id: row.path_id})
ON CREATE SET p.tenant = $tenant, p.score = row.score, p.text = row.text
MERGE (q)-[f:FOUND]->(p)
SET f.rank = row.rank, f.score = row.score
RETURN count(p) AS n;

// name: write_steps
// rows: {path_id, prop_id, order, via}: `via` names the entity linking this step to the previous one.
UNWIND $rows AS row
MATCH (p:Path {path_id: row.path_id}), (x:Proposition {prop_id: row.prop_id})
MERGE (p)-[s:STEP {order: row.order}]->(x)
SET s.via = row.via
RETURN count(s) AS n;

// name: select_passages
// rows: {id, rank, weight, code, referenced}: code = the line's session code ("S3") or
// null; referenced = the session had it already, only the code was sent.
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id}), (x:Passage {passage_id: row.id})
MERGE (q)-[s:SELECTED]->(x)
SET s.rank = row.rank, s.weight = row.weight, s.code = row.code, s.referenced = row.referenced
RETURN count(s) AS n;

// name: select_propositions
// rows: as select_passages
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id}), (x:Proposition {prop_id: row.id})
MERGE (q)-[s:SELECTED]->(x)
SET s.rank = row.rank, s.weight = row.weight, s.code = row.code, s.referenced = row.referenced
RETURN count(s) AS n;

// name: select_entities
UNWIND $rows AS row
MATCH (q:Query {query_id: $query_id}), (x:Entity {entity_id: row.id})
MERGE (q)-[s:SELECTED]->(x)
SET s.rank = row.rank, s.weight = row.weight
RETURN count(s) AS n;

// name: read_query_paths
// A stored reasoning record: its paths and their steps in order.
MATCH (q:Query {query_id: $query_id})-[f:FOUND]->(p:Path)-[s:STEP]->(x:Proposition)
WHERE q.tenant = $tenant
RETURN q.text AS text, f.rank AS rank, p.path_id AS path_id, p.score AS score,
       s.order AS step, s.via AS via, x.prop_id AS prop_id, x.text AS proposition
ORDER BY rank, step;

// name: read_query_selected
MATCH (q:Query {query_id: $query_id})-[s:SELECTED]->(x)
WHERE q.tenant = $tenant
RETURN labels(x)[0] AS label, coalesce(x.passage_id, x.prop_id, x.entity_id) AS id,
       s.rank AS rank, s.weight AS weight, s.code AS code, coalesce(s.referenced, false) AS referenced
ORDER BY label, rank;
