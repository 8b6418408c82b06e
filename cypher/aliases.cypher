// Alias consolidation (spec §0 "alias consolidation, reversible", §3 "Entity consolidation";
// APR paper §2.7): (:Entity)-[:ALIAS_OF {score, method}]->(:Entity canonical). An alias group
// is one canonical entity and the entities with an ALIAS_OF edge to it (no chains: a
// canonical has no ALIAS_OF of its own). Alias nodes are never deleted. An entity a person
// split off (`pathweave aliases split`) carries alias_split = true and is left out of
// automatic consolidation from then on. Used by pathweave_ingest.aliases and the topology.

// name: alias_entity_count
// Number of the tenant's entities, counted up to $cap: min(n, $cap). Callers need only
// whether n reaches a bound (k = min(50, max(5, floor(sqrt(n)))) stops growing at 2,500;
// the layer-2 budget; the gds.knn share), so the count stops there instead of reading
// every entity of a large tenant on each ingestion batch.
MATCH (e:Entity) WHERE e.tenant = $tenant
WITH e LIMIT $cap
RETURN count(e) AS n;

// name: alias_entities
// Name, normalized name, type, embedding (base64 float32, pathweave.graph.vectors), split flag and
// current canonical (null when the entity is no alias) of the entities $ids.
UNWIND $ids AS id
MATCH (e:Entity {entity_id: id})
WHERE e.tenant = $tenant
OPTIONAL MATCH (e)-[:ALIAS_OF]->(c:Entity)
RETURN e.entity_id AS id, e.name AS name, e.norm_name AS norm_name, e.type AS type, e.vec AS vec,
       coalesce(e.alias_split, false) AS split, c.entity_id AS canonical;

// name: alias_members
// The aliases of the canonical entities $ids: one row per ALIAS_OF edge. Anchored on the
// canonical first (its id is indexed), so the store walks its edges instead of every Entity.
UNWIND $ids AS id
MATCH (c:Entity {entity_id: id})
WHERE c.tenant = $tenant
MATCH (a:Entity)-[r:ALIAS_OF]->(c)
RETURN c.entity_id AS canonical, a.entity_id AS alias, r.score AS score, r.method AS method;

// name: alias_clear
// Removes the ALIAS_OF edges leaving the entities $ids (before their group is rewritten,
// or when a person splits them off). Returns the number removed.
UNWIND $ids AS id
MATCH (a:Entity {entity_id: id})
WHERE a.tenant = $tenant
MATCH (a)-[r:ALIAS_OF]->(:Entity)
DELETE r
RETURN count(*) AS n;

// name: alias_link
// Writes alias edges. rows: {alias, canonical, score (cosine to the canonical), method
// ('knn' | 'kmeans')}; MERGE on the pair, score and method overwritten.
UNWIND $rows AS row
MATCH (a:Entity {entity_id: row.alias}), (c:Entity {entity_id: row.canonical})
WHERE a.tenant = $tenant AND c.tenant = $tenant
MERGE (a)-[r:ALIAS_OF]->(c)
SET r.score = row.score, r.method = row.method
RETURN count(r) AS n;

// name: alias_mark_split
// Marks the entities $ids as split off by a person: consolidation leaves them alone.
MATCH (e:Entity)
WHERE e.entity_id IN $ids AND e.tenant = $tenant
SET e.alias_split = true
RETURN count(e) AS n;

// name: alias_loose_groups
// Canonical entities of groups with a member whose cosine to the canonical is below
// $threshold (layer-1 chains): the groups layer 2 refines with k-means.
MATCH (a:Entity)-[r:ALIAS_OF]->(c:Entity)
WHERE a.tenant = $tenant AND r.score < $threshold
RETURN DISTINCT c.entity_id AS id;

// name: alias_find_entity
// Entities of the tenant whose id is $key or whose normalized name is $norm
// (`pathweave aliases show|split ENTITY`).
MATCH (e:Entity)
WHERE e.tenant = $tenant AND (e.entity_id = $key OR e.norm_name = $norm)
OPTIONAL MATCH (e)-[:ALIAS_OF]->(c:Entity)
RETURN e.entity_id AS id, e.name AS name, c.entity_id AS canonical;

// name: alias_groups
// Every alias edge of the tenant with both names (`pathweave aliases show`), largest
// groups first is the caller's ordering.
MATCH (a:Entity)-[r:ALIAS_OF]->(c:Entity)
WHERE a.tenant = $tenant
RETURN c.entity_id AS canonical, c.name AS canonical_name, a.entity_id AS alias, a.name AS alias_name,
       r.score AS score, r.method AS method;

// name: topology_aliases
// Every alias edge of the tenant as (alias, canonical) ids (a topology's full build).
MATCH (a:Entity)-[:ALIAS_OF]->(c:Entity)
WHERE a.tenant = $tenant
RETURN a.entity_id AS alias, c.entity_id AS canonical;

// name: topology_entity_aliases
// The canonical of those of the entities $ids that are aliases (a change record's
// `aliases`: entities whose ALIAS_OF edge was written or removed).
UNWIND $ids AS id
MATCH (a:Entity {entity_id: id})-[:ALIAS_OF]->(c:Entity)
WHERE a.tenant = $tenant
RETURN a.entity_id AS alias, c.entity_id AS canonical;

// name: alias_tenant_entities
// A page of the tenant's entities (id order) with normalized name and embedding (base64
// float32): a whole-tenant consolidation pass reads them $limit at a time from $skip.
MATCH (e:Entity) WHERE e.tenant = $tenant
RETURN e.entity_id AS id, e.norm_name AS norm_name, e.vec AS vec
ORDER BY id SKIP $skip LIMIT $limit;

// name: alias_clear_tenant
// Removes every ALIAS_OF edge of the tenant (split flags stay); returns the aliases released.
MATCH (a:Entity)-[r:ALIAS_OF]->(:Entity)
WHERE a.tenant = $tenant
WITH a, r, a.entity_id AS id
DELETE r
RETURN id;

// name: alias_canonical_count
// Number of the tenant's entities that are no alias (what retrieval sees as distinct nodes).
MATCH (e:Entity) WHERE e.tenant = $tenant AND NOT (e)-[:ALIAS_OF]->(:Entity)
RETURN count(e) AS n;

// name: alias_mark_unrefined
// Alias groups were written that layer 2 has not refined (layer 1 while the tenant was within
// the k-means budget, a removal's repair, a split): the tenant's next batch past the budget
// refines every loose group once (pathweave_ingest.aliases.consolidate). A count on the
// tenant's Meta node $meta_id, so concurrent marks all count.
// replay: counts twice (the count only says that groups wait; a refinement covers the count
// it read, so at most one refinement more).
MERGE (m:Meta {meta_id: $meta_id})
ON CREATE SET m.tenant = $tenant, m.version = 0
SET m.alias_unrefined = coalesce(m.alias_unrefined, 0) + 1
RETURN m.alias_unrefined AS unrefined;

// name: alias_refine_state
// The count of alias_mark_unrefined and the count the last tenant-wide refinement covered.
MATCH (m:Meta {meta_id: $meta_id}) WHERE m.tenant = $tenant
RETURN coalesce(m.alias_unrefined, 0) AS unrefined, coalesce(m.alias_refined, 0) AS refined;

// name: alias_mark_refined
// Every loose group was refined after the count $unrefined was read (a mark made meanwhile
// stays due: the count only grows).
MATCH (m:Meta {meta_id: $meta_id}) WHERE m.tenant = $tenant
SET m.cas = true REMOVE m.cas
WITH m
SET m.alias_refined = CASE WHEN coalesce(m.alias_refined, 0) > $unrefined THEN m.alias_refined ELSE $unrefined END
RETURN m.alias_refined AS refined;
