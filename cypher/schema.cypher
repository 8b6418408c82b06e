// Schema: uniqueness constraints on the stable ids of every node label (spec §0).
// Each is idempotent (IF NOT EXISTS) and runs at store start. Vector indexes are
// created by the dialect module (ArcadeDB SQL / Neo4j CREATE VECTOR INDEX).

// name: constraint_document
// Documents are identified by a content hash of tenant + source content.
CREATE CONSTRAINT document_id IF NOT EXISTS FOR (n:Document) REQUIRE n.doc_id IS UNIQUE;

// name: constraint_passage
CREATE CONSTRAINT passage_id IF NOT EXISTS FOR (n:Passage) REQUIRE n.passage_id IS UNIQUE;

// name: constraint_entity
CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (n:Entity) REQUIRE n.entity_id IS UNIQUE;

// name: constraint_proposition
CREATE CONSTRAINT proposition_id IF NOT EXISTS FOR (n:Proposition) REQUIRE n.prop_id IS UNIQUE;

// name: constraint_relation
CREATE CONSTRAINT relation_id IF NOT EXISTS FOR (n:Relation) REQUIRE n.relation_id IS UNIQUE;

// name: constraint_triple
CREATE CONSTRAINT triple_id IF NOT EXISTS FOR (n:Triple) REQUIRE n.triple_id IS UNIQUE;

// name: constraint_query
CREATE CONSTRAINT query_id IF NOT EXISTS FOR (n:Query) REQUIRE n.query_id IS UNIQUE;

// name: constraint_path
CREATE CONSTRAINT path_id IF NOT EXISTS FOR (n:Path) REQUIRE n.path_id IS UNIQUE;

// name: constraint_meta
// One Meta node per tenant holds the graph version counter.
CREATE CONSTRAINT meta_id IF NOT EXISTS FOR (n:Meta) REQUIRE n.meta_id IS UNIQUE;

// name: constraint_answer
// Generated answers (spec §0: (:Query)-[:ANSWERED]->(:Answer)); answer_id = the query's id.
CREATE CONSTRAINT answer_id IF NOT EXISTS FOR (n:Answer) REQUIRE n.answer_id IS UNIQUE;

// name: constraint_tree_node
// PruneRAG tree nodes (spec §4); node_id = "<query_id>:n<i>".
CREATE CONSTRAINT tree_node_id IF NOT EXISTS FOR (n:TreeNode) REQUIRE n.node_id IS UNIQUE;

// Not constraints: the range index on each label's tenant, so a statement that reads a whole
// tenant (counts, topology loads, the alias and requeue sweeps) seeks its own tenant's nodes
// instead of scanning the label across every tenant of the database. Created with the
// constraints (idempotent); Neo4j populates an index added to an existing database in the
// background and plans with it once it is online.

// name: constraint_tenant_document
CREATE INDEX document_tenant IF NOT EXISTS FOR (n:Document) ON (n.tenant);

// name: constraint_tenant_passage
CREATE INDEX passage_tenant IF NOT EXISTS FOR (n:Passage) ON (n.tenant);

// name: constraint_tenant_proposition
CREATE INDEX proposition_tenant IF NOT EXISTS FOR (n:Proposition) ON (n.tenant);

// name: constraint_tenant_entity
CREATE INDEX entity_tenant IF NOT EXISTS FOR (n:Entity) ON (n.tenant);

// name: constraint_tenant_relation
CREATE INDEX relation_tenant IF NOT EXISTS FOR (n:Relation) ON (n.tenant);

// name: constraint_tenant_triple
CREATE INDEX triple_tenant IF NOT EXISTS FOR (n:Triple) ON (n.tenant);

// name: constraint_tenant_run
CREATE INDEX run_tenant IF NOT EXISTS FOR (n:Run) ON (n.tenant);

// name: constraint_tenant_query
CREATE INDEX query_tenant IF NOT EXISTS FOR (n:Query) ON (n.tenant);

// name: constraint_tenant_graph_change
CREATE INDEX graph_change_tenant IF NOT EXISTS FOR (n:GraphChange) ON (n.tenant);

// name: constraint_tenant_document_status
CREATE INDEX document_status_tenant IF NOT EXISTS FOR (n:DocumentStatus) ON (n.tenant);

// name: constraint_tree_node_query
// A stored PruneRAG tree read by its query's id (read_query_tree) seeks that query's nodes,
// not every TreeNode of the database.
CREATE INDEX tree_node_query IF NOT EXISTS FOR (n:TreeNode) ON (n.query_id);
