// Generated answers and PruneRAG trees, written with the query's reasoning record (spec §0, §4):
// (:Query)-[:ANSWERED]->(:Answer)-[:CITES {order}]->(:Passage|:Proposition),
// (:Query)-[:TREE]->(:TreeNode)-[:CHILD {order}]->(:TreeNode), (:TreeNode)-[:RETRIEVED {rank}]->(:Passage).

// name: write_answer
// The answer text, what it was generated from, the model, tokens in/out, LLM calls and latency (ms).
MATCH (q:Query {query_id: $query_id})
MERGE (a:Answer {answer_id: $query_id})
ON CREATE SET a.tenant = $tenant
SET a.text = $text, a.source = $source, a.model = $model, a.llm_calls = $llm_calls,
    a.prompt_tokens = $prompt_tokens, a.completion_tokens = $completion_tokens,
    a.latency_ms = $latency_ms, a.error = $error, a.citations = $citations
MERGE (q)-[r:ANSWERED]->(a)
RETURN a.answer_id AS answer_id;

// name: answer_cites_passages
// rows: {id, order}
UNWIND $rows AS row
MATCH (a:Answer {answer_id: $query_id}), (x:Passage {passage_id: row.id})
MERGE (a)-[c:CITES]->(x)
SET c.order = row.order
RETURN count(c) AS n;

// name: answer_cites_propositions
// rows: {id, order}
UNWIND $rows AS row
MATCH (a:Answer {answer_id: $query_id}), (x:Proposition {prop_id: row.id})
MERGE (a)-[c:CITES]->(x)
SET c.order = row.order
RETURN count(c) AS n;

// name: write_tree_nodes
// rows: {node_id, kind, text, depth, decision, answer, confidence, llm_calls, error}
UNWIND $rows AS row
MERGE (t:TreeNode {node_id: row.node_id})
ON CREATE SET t.tenant = $tenant, t.query_id = $query_id
SET t.kind = row.kind, t.text = row.text, t.depth = row.depth, t.decision = row.decision,
    t.answer = row.answer, t.confidence = row.confidence, t.llm_calls = row.llm_calls, t.error = row.error
RETURN count(t) AS n;

// name: link_tree_root
// The tree's root and what the whole tree cost (LLM calls, tokens, ms, retrievals).
MATCH (q:Query {query_id: $query_id}), (t:TreeNode {node_id: $node_id})
MERGE (q)-[r:TREE]->(t)
SET r.llm_calls = $llm_calls, r.prompt_tokens = $prompt_tokens, r.completion_tokens = $completion_tokens,
    r.llm_ms = $llm_ms, r.retrievals = $retrievals
RETURN count(r) AS n;

// name: link_tree_children
// rows: {parent, child, order}
UNWIND $rows AS row
MATCH (p:TreeNode {node_id: row.parent}), (c:TreeNode {node_id: row.child})
MERGE (p)-[e:CHILD]->(c)
SET e.order = row.order
RETURN count(e) AS n;

// name: tree_retrieved
// rows: {node_id, passage_id, rank, score}
UNWIND $rows AS row
MATCH (t:TreeNode {node_id: row.node_id}), (x:Passage {passage_id: row.passage_id})
MERGE (t)-[r:RETRIEVED]->(x)
SET r.rank = row.rank, r.score = row.score
RETURN count(r) AS n;

// name: read_query_answer
// A stored answer and the ids it cites (empty when the query has none).
MATCH (q:Query {query_id: $query_id})-[:ANSWERED]->(a:Answer)
WHERE q.tenant = $tenant
OPTIONAL MATCH (a)-[c:CITES]->(x)
RETURN a.text AS text, a.source AS source, a.model AS model, a.llm_calls AS llm_calls,
       a.prompt_tokens AS prompt_tokens, a.completion_tokens AS completion_tokens,
       a.latency_ms AS latency_ms, a.error AS error, a.citations AS citations,
       labels(x)[0] AS cited_label, coalesce(x.passage_id, x.prop_id) AS cited_id, c.order AS cited_order
ORDER BY cited_order;

// name: read_query_tree
// A stored PruneRAG tree: its nodes (with the totals on the TREE edge).
MATCH (q:Query {query_id: $query_id})-[r:TREE]->(:TreeNode)
WHERE q.tenant = $tenant
MATCH (t:TreeNode {query_id: $query_id})
WHERE t.tenant = $tenant
RETURN r.llm_calls AS llm_calls, r.prompt_tokens AS prompt_tokens, r.completion_tokens AS completion_tokens,
       r.llm_ms AS llm_ms, r.retrievals AS retrievals, t.node_id AS node_id, t.kind AS kind, t.text AS text,
       t.depth AS depth, t.decision AS decision, t.answer AS answer, t.confidence AS confidence,
       t.llm_calls AS node_llm_calls, t.error AS error
ORDER BY depth, node_id;

// name: read_tree_children
MATCH (p:TreeNode {query_id: $query_id})-[e:CHILD]->(c:TreeNode)
WHERE p.tenant = $tenant
RETURN p.node_id AS parent, c.node_id AS child, e.order AS order
ORDER BY parent, order;

// name: read_tree_retrieved
MATCH (t:TreeNode {query_id: $query_id})-[r:RETRIEVED]->(x:Passage)
WHERE t.tenant = $tenant
RETURN t.node_id AS node_id, x.passage_id AS passage_id, x.title AS title, x.text AS text, r.rank AS rank,
       r.score AS score
ORDER BY node_id, rank;
