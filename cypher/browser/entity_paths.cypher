// Pathweave: every reasoning path through an entity
// name: browser_entity_paths
// Every stored reasoning path with a step whose proposition mentions the entity, newest
// query first: the query, the path and all its steps with their entities, so you see
// what the entity was connected to.
// Parameters: $tenant; $entity = an entity id, its name, or its lower-case name.
MATCH (e:Entity)
WHERE e.tenant = $tenant AND (e.entity_id = $entity OR e.name = $entity OR e.norm_name = toLower($entity))
MATCH (path:Path)-[:STEP]->(:Proposition)-[:MENTIONS]->(e)
WITH DISTINCT e, path
MATCH found = (q:Query)-[:FOUND]->(path)
RETURN found, e,
       COLLECT { MATCH s = (path)-[:STEP]->(:Proposition)-[:MENTIONS]->(:Entity) RETURN s } AS steps
ORDER BY q.created_at DESC
LIMIT 50;
