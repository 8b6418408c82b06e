// Pathweave: an entity's aliases and synonyms
// name: browser_entity_aliases
// The entity with its kNN synonyms (SYNONYM {score}, either direction), its canonical
// entity if it was consolidated (ALIAS_OF {score, method}), the other aliases of that
// canonical entity, and the aliases merged into this one.
// Parameters: $tenant; $entity = an entity id, its name, or its lower-case name.
MATCH (e:Entity)
WHERE e.tenant = $tenant AND (e.entity_id = $entity OR e.name = $entity OR e.norm_name = toLower($entity))
RETURN e,
       COLLECT { MATCH s = (e)-[:SYNONYM]-(:Entity) RETURN s } AS synonyms,
       COLLECT { MATCH a = (e)-[:ALIAS_OF]->(:Entity) RETURN a } AS canonical,
       COLLECT { MATCH a = (e)-[:ALIAS_OF]->(:Entity)<-[:ALIAS_OF]-(:Entity) RETURN a } AS sibling_aliases,
       COLLECT { MATCH a = (:Entity)-[:ALIAS_OF]->(e) RETURN a } AS merged_aliases;
