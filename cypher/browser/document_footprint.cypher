// Pathweave: a document's footprint in the graph
// name: browser_document_footprint
// Graph view of what one document put into the graph: its passages (PART_OF, in
// reading order by NEXT), the propositions they state, the entities mentioned, the
// triples they assert, and the queries that selected its passages.
// Parameters: $tenant; $document = a document id, title or source path.
MATCH (d:Document)
WHERE d.tenant = $tenant AND (d.doc_id = $document OR d.title = $document OR d.source = $document)
MATCH part = (p:Passage)-[:PART_OF]->(d)
WITH d, collect(part) AS parts, collect(p) AS passages
RETURN d, parts,
       COLLECT { UNWIND passages AS p MATCH n = (p)-[:NEXT]->(:Passage) RETURN n } AS reading_order,
       COLLECT { UNWIND passages AS p MATCH s = (p)-[:STATES]->(:Proposition)-[:MENTIONS]->(:Entity) RETURN s } AS propositions,
       COLLECT { UNWIND passages AS p MATCH t = (p)-[:ASSERTS]->(:Triple) RETURN t } AS triples,
       COLLECT { UNWIND passages AS p MATCH q = (:Query)-[:SELECTED]->(p) RETURN q } AS selected_by;

// Pathweave: a document's footprint as counts
// name: browser_document_footprint_counts
// One row per matching document: how many passages, propositions, entities (and how
// many of them no other document mentions), triples and queries it accounts for.
// Parameters: $tenant; $document = a document id, title or source path.
MATCH (d:Document)
WHERE d.tenant = $tenant AND (d.doc_id = $document OR d.title = $document OR d.source = $document)
MATCH (p:Passage)-[:PART_OF]->(d)
WITH d, collect(p) AS passages
RETURN d.doc_id AS doc_id, d.title AS title, d.source AS source, size(passages) AS passages,
       COUNT { UNWIND passages AS p MATCH (p)-[:STATES]->(x:Proposition) RETURN DISTINCT x } AS propositions,
       COUNT { UNWIND passages AS p MATCH (p)-[:MENTIONS]->(e:Entity) RETURN DISTINCT e } AS entities,
       COUNT {
         UNWIND passages AS p MATCH (p)-[:MENTIONS]->(e:Entity)
         WHERE NOT EXISTS { MATCH (e)<-[:MENTIONS]-(o:Passage)-[:PART_OF]->(other:Document) WHERE other <> d }
         RETURN DISTINCT e
       } AS entities_only_here,
       COUNT { UNWIND passages AS p MATCH (p)-[:ASSERTS]->(t:Triple) RETURN DISTINCT t } AS triples,
       COUNT { UNWIND passages AS p MATCH (q:Query)-[:SELECTED]->(p) RETURN DISTINCT q } AS queries;
