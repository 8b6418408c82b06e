// Pathweave: PruneRAG decomposition tree and answer of a query
// name: browser_prunerag_tree
// Graph view of one stored query's PruneRAG tree (spec §4): the root (TREE, with the tree's
// LLM calls and tokens), sub-queries and entity leaves (CHILD {order}; each TreeNode has
// decision, answer, confidence, depth), the passages each node retrieved (RETRIEVED {rank})
// and the final answer (ANSWERED) with the passages it cites (CITES).
// Parameters: $tenant (e.g. 'default'); $query_id, or null for the tenant's latest prunerag query.
MATCH (q:Query)
WHERE q.tenant = $tenant AND ($query_id IS NULL OR q.query_id = $query_id) AND q.mode = 'prunerag'
WITH q ORDER BY q.created_at DESC LIMIT 1
MATCH tree = (q)-[:TREE]->(:TreeNode)
RETURN tree,
       COLLECT { MATCH c = (:TreeNode {query_id: q.query_id})-[:CHILD]->(:TreeNode) RETURN c } AS children,
       COLLECT { MATCH r = (:TreeNode {query_id: q.query_id})-[:RETRIEVED]->(:Passage) RETURN r } AS retrieved,
       COLLECT { MATCH a = (q)-[:ANSWERED]->(:Answer) RETURN a } AS answer;
