// Pathweave: reasoning record of a query (Query -> Paths -> Propositions -> Entities -> Passages)
// name: browser_reasoning_record
// Graph view of one stored query: its ranked reasoning paths (FOUND {rank, score}),
// each path's propositions in order (STEP {order, via}), the entities every proposition
// mentions, the passages stating them, and the passages the query finally selected
// (SELECTED {rank, weight}).
// Parameters: $tenant (e.g. 'default'); $query_id, or null for the tenant's latest query.
MATCH (q:Query)
WHERE q.tenant = $tenant AND ($query_id IS NULL OR q.query_id = $query_id)
WITH q ORDER BY q.created_at DESC LIMIT 1
MATCH found = (q)-[:FOUND]->(:Path)-[:STEP]->(x:Proposition)
RETURN found,
       COLLECT { MATCH m = (x)-[:MENTIONS]->(:Entity) RETURN m } AS mentions,
       COLLECT { MATCH s = (x)<-[:STATES]-(:Passage) RETURN s } AS stated_by,
       COLLECT { MATCH c = (q)-[:SELECTED]->(:Passage) RETURN c } AS selected;

// Pathweave: reasoning record as a table
// name: browser_reasoning_record_table
// The same record as rows: one per path step, in rank then step order, with the
// linking entity (`via`), the proposition and the passages that state it.
// Parameters: $tenant; $query_id, or null for the latest query.
MATCH (q:Query)
WHERE q.tenant = $tenant AND ($query_id IS NULL OR q.query_id = $query_id)
WITH q ORDER BY q.created_at DESC LIMIT 1
MATCH (q)-[f:FOUND]->(p:Path)-[s:STEP]->(x:Proposition)
RETURN q.text AS query, f.rank AS path_rank, round(f.score, 4) AS path_score, s.order AS step,
       s.via AS via, x.text AS proposition,
       COLLECT { MATCH (x)-[:MENTIONS]->(e:Entity) RETURN e.name } AS entities,
       COLLECT { MATCH (x)<-[:STATES]-(d:Passage) RETURN d.passage_id } AS passages
ORDER BY path_rank, step;
