"""The store contract: one suite, every backend (spec §0 graph model).

- ``arcadedb``: the managed default store (conftest's session server in a temporary
  ``PATHWEAVE_DATA_DIR``, stopped at the end of the session);
- ``neo4j``: the managed Neo4j 5.26 + GDS 2.13 (the suite's Neo4j run,
  ``PATHWEAVE_STORE_BACKEND=neo4j``), with the GDS tests (``neo4j_only``).

Each test writes into a fresh tenant; on Neo4j the tenant is deleted afterwards.
Vectors are synthetic 384-d unit vectors (no embedder needed).
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest

from pathweave.store.backends import vector_search
from pathweave.store.graph_store import GraphStore

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

DIM = 384
NEO4J_ENV = ("NEO4J_URI", "NEO4J_PASSWORD")


def unit(*pairs: tuple[int, float]) -> list[float]:
    """A 384-d vector with the given (index, value) entries, L2-normalized."""
    vector = np.zeros(DIM)
    for index, value in pairs:
        vector[index] = value
    return (vector / np.linalg.norm(vector)).tolist()


@pytest.fixture(scope="module")
def backend(base_store) -> GraphStore:
    """The run's store (its tenant is replaced per test, see ``cstore``)."""
    return base_store


def scoped(backend: GraphStore, tenant: str) -> GraphStore:
    return GraphStore(backend.driver, backend.database, backend.backend, tenant, backend.batch_size,
                      backend.dimensions)


@pytest.fixture()
def cstore(backend):
    """The backend scoped to a fresh tenant (removed afterwards on Neo4j)."""
    tenants: list[str] = []

    def make() -> GraphStore:
        tenants.append(f"c{uuid.uuid4().hex[:10]}")
        return scoped(backend, tenants[-1])

    store = make()
    store.another = make  # a second tenant, for isolation checks
    yield store
    if backend.backend.name == "neo4j":
        for tenant in tenants:
            scoped(backend, tenant).run("neo4j_drop_tenant")


def graph_rows(tenant: str) -> list[tuple[str, list[dict]]]:
    """A small graph in the spec §0 model: 1 document, 3 passages, 3 entities,
    2 propositions, 1 relation, 1 triple, 1 synonym edge."""
    e = [unit((i, 1.0)) for i in range(6)]
    return [
        ("upsert_documents", [{"doc_id": f"{tenant}:doc", "tenant": tenant, "source": "a.txt", "title": "A",
                               "content_hash": "h", "ingested_at": "2026-01-01T00:00:00Z"}]),
        ("upsert_passages", [{"passage_id": f"{tenant}:p{i}", "doc_id": f"{tenant}:doc", "tenant": tenant,
                              "title": "A", "text": f"passage {i}", "position": i, "token_count": 2,
                              "embedding": e[i]} for i in range(3)]),
        ("link_next", [{"src": f"{tenant}:p0", "dst": f"{tenant}:p1"}, {"src": f"{tenant}:p1", "dst": f"{tenant}:p2"}]),
        ("upsert_entities", [{"entity_id": f"{tenant}:e{i}", "tenant": tenant, "name": f"Entity {i}",
                              "norm_name": f"entity {i}", "type": "ORG", "embedding": e[3 + i]} for i in range(3)]),
        ("upsert_propositions", [{"prop_id": f"{tenant}:r{i}", "tenant": tenant, "text": f"proposition {i}",
                                  "embedding": unit((i, 1.0), (5, 1.0))} for i in range(2)]),
        ("link_states", [{"passage_id": f"{tenant}:p{i}", "prop_id": f"{tenant}:r{i}"} for i in range(2)]),
        ("link_proposition_mentions", [{"prop_id": f"{tenant}:r0", "entity_id": f"{tenant}:e0"},
                                       {"prop_id": f"{tenant}:r0", "entity_id": f"{tenant}:e1"},
                                       {"prop_id": f"{tenant}:r1", "entity_id": f"{tenant}:e1"},
                                       {"prop_id": f"{tenant}:r1", "entity_id": f"{tenant}:e2"}]),
        ("link_passage_mentions", [{"passage_id": f"{tenant}:p0", "entity_id": f"{tenant}:e0"},
                                   {"passage_id": f"{tenant}:p0", "entity_id": f"{tenant}:e1"},
                                   {"passage_id": f"{tenant}:p1", "entity_id": f"{tenant}:e2"}]),
        ("upsert_relations", [{"relation_id": f"{tenant}:rel", "tenant": tenant, "name": "owns",
                               "embedding": unit((7, 1.0))}]),
        ("upsert_triples", [{"triple_id": f"{tenant}:t0", "tenant": tenant, "passage_id": f"{tenant}:p0",
                             "subject_id": f"{tenant}:e0", "object_id": f"{tenant}:e1", "subject": "Entity 0",
                             "relation": "owns", "object": "Entity 1", "relation_id": f"{tenant}:rel"}]),
        ("upsert_synonyms", [{"src": f"{tenant}:e1", "dst": f"{tenant}:e2", "score": 0.85}]),
    ]


EXPECTED_COUNTS = {
    "Document": 1, "Passage": 3, "Entity": 3, "Proposition": 2, "Relation": 1, "Triple": 1,
    "rel:PART_OF": 3, "rel:NEXT": 2, "rel:STATES": 2, "rel:MENTIONS": 7, "rel:ASSERTS": 1,
    "rel:RELATES": 1, "rel:SYNONYM": 1,
}


def write_graph(store: GraphStore) -> None:
    for name, rows in graph_rows(store.tenant):
        store.write(name, rows)


def test_schema_is_idempotent(cstore):
    """Creating the schema again (every start does) keeps the constraints and the vector
    indexes working: the same graph written twice gives the same counts (the unique ids
    hold) and each indexed label is still searchable."""
    cstore.ensure_schema(cstore.dimensions)
    cstore.ensure_schema(cstore.dimensions)
    write_graph(cstore)
    write_graph(cstore)
    assert cstore.counts() == EXPECTED_COUNTS
    assert vector_search(cstore, "Passage", unit((1, 1.0)), 1)[0][0] == f"{cstore.tenant}:p1"
    assert vector_search(cstore, "Entity", unit((4, 1.0)), 1)[0][0] == f"{cstore.tenant}:e1"


def test_ingest_statements_are_idempotent(cstore):
    write_graph(cstore)
    first = cstore.counts()
    assert first == EXPECTED_COUNTS
    write_graph(cstore)  # same content, same ids: nothing changes
    cstore.write_all(graph_rows(cstore.tenant))
    assert cstore.counts() == first
    ids = [f"{cstore.tenant}:p{i}" for i in range(4)]
    assert cstore.existing("existing_passage_ids", ids) == set(ids[:3])
    assert cstore.another().counts() == {}


def test_vector_index_query_nodes(cstore):
    write_graph(cstore)
    other = cstore.another()
    write_graph(other)  # same vectors in another tenant: never returned
    index = cstore.backend.vector_index_name("Passage")
    rows = [row for row in cstore.run("vector_search", index=index, k=10, vector=unit((1, 1.0)))
            if row["tenant"] == cstore.tenant]
    assert [row["id"] for row in rows][:1] == [f"{cstore.tenant}:p1"]
    assert all(row["id"].startswith(cstore.tenant) for row in rows)
    scores = {row["id"]: row["score"] for row in rows}
    # normalized cosine (1 + cos) / 2 on both backends: identical 1.0, orthogonal 0.5
    assert scores[f"{cstore.tenant}:p1"] == pytest.approx(1.0, abs=1e-3)
    assert scores.get(f"{cstore.tenant}:p0", 0.5) == pytest.approx(0.5, abs=1e-3)
    entity = vector_search(cstore, "Entity", unit((4, 1.0)), 3)
    assert entity[0][0] == f"{cstore.tenant}:e1"
    half = vector_search(cstore, "Proposition", unit((0, 1.0)), 5)
    assert half[0][0] == f"{cstore.tenant}:r0"
    assert half[0][1] == pytest.approx(1 / math.sqrt(2), abs=2e-3)  # the raw cosine


def test_graph_version_counter(cstore):
    assert cstore.graph_version() == 0
    assert cstore.record_change(added=["p"]) == 1
    assert cstore.record_change(removed=["p"], removed_entities=["e"]) == 2
    assert cstore.graph_version() == 2
    changes = cstore.run("graph_changes_since", since=0)
    assert [(c["version"], c["added"], c["removed"], c["removed_entities"]) for c in changes] == \
        [(1, ["p"], [], []), (2, [], ["p"], ["e"])]
    assert cstore.record_change(keep=1) == 3  # older records pruned
    assert [c["version"] for c in cstore.run("graph_changes_since", since=0)] == [3]
    assert cstore.another().graph_version() == 0


def write_record(store: GraphStore, query_id: str) -> None:
    t = store.tenant
    store.run_in_transaction([
        ("write_query", {"query_id": query_id, "text": "who owns entity 1?", "mode": "proprag",
                         "created_at": "2026-01-02T03:04:05Z", "principals": None, "trace_id": None}),
        ("write_paths", {"query_id": query_id, "rows": [
            {"path_id": f"{query_id}:0", "rank": 0, "score": 0.9, "text": "proposition 0 proposition 1"},
            {"path_id": f"{query_id}:1", "rank": 1, "score": 0.5, "text": "proposition 1"}]}),
        ("write_steps", {"rows": [
            {"path_id": f"{query_id}:0", "prop_id": f"{t}:r0", "order": 0, "via": None},
            {"path_id": f"{query_id}:0", "prop_id": f"{t}:r1", "order": 1, "via": "Entity 1"},
            {"path_id": f"{query_id}:1", "prop_id": f"{t}:r1", "order": 0, "via": None}]}),
        ("select_passages", {"query_id": query_id, "rows": [{"id": f"{t}:p1", "rank": 0, "weight": 0.7},
                                                             {"id": f"{t}:p0", "rank": 1, "weight": 0.3}]}),
        ("select_propositions", {"query_id": query_id, "rows": [{"id": f"{t}:r0", "rank": 0, "weight": 1.0}]}),
        ("select_entities", {"query_id": query_id, "rows": [{"id": f"{t}:e1", "rank": 0, "weight": 1.0}]}),
    ])


def test_reasoning_record_write_and_read(cstore):
    write_graph(cstore)
    query_id = f"{cstore.tenant}:q"
    write_record(cstore, query_id)
    write_record(cstore, query_id)  # idempotent
    paths = cstore.run("read_query_paths", query_id=query_id)
    assert [(row["rank"], row["step"], row["prop_id"], row["via"]) for row in paths] == [
        (0, 0, f"{cstore.tenant}:r0", None), (0, 1, f"{cstore.tenant}:r1", "Entity 1"),
        (1, 0, f"{cstore.tenant}:r1", None)]
    assert {row["text"] for row in paths} == {"who owns entity 1?"}
    assert paths[0]["score"] == pytest.approx(0.9)
    selected = cstore.run("read_query_selected", query_id=query_id)
    assert [(row["label"], row["id"], row["rank"]) for row in selected] == [
        ("Entity", f"{cstore.tenant}:e1", 0), ("Passage", f"{cstore.tenant}:p1", 0),
        ("Passage", f"{cstore.tenant}:p0", 1), ("Proposition", f"{cstore.tenant}:r0", 0)]
    assert cstore.counts()["Query"] == 1 and cstore.counts()["Path"] == 2
    assert cstore.another().run("read_query_paths", query_id=query_id) == []


def test_an_answer_and_a_prunerag_tree_are_written_and_read_back(cstore):
    """An answer citing a passage and a proposition, and a two-level PruneRAG tree whose
    nodes retrieved passages, round-trip through the query's record (``records.answers``):
    every statement of ``cypher/answers.cypher`` on this backend, without a model."""
    from pathweave.model import Answer, PassageHit, PruneTree, QueryResult, TreeNode
    from pathweave.records.answers import answer_steps, read_answer, read_tree

    t = cstore.tenant
    write_graph(cstore)
    query_id = f"{t}:q"
    write_record(cstore, query_id)
    hit = lambda i, rank: PassageHit(passage_id=f"{t}:p{i}", title=f"Passage {i}", text="", score=0.5, rank=rank)  # noqa: E731
    tree = PruneTree(nodes=[
        TreeNode(node_id="n0", kind="query", text="who owns entity 1?", depth=1, decision="decomposition",
                 llm_calls=1, passages=[hit(1, 1), hit(0, 2)], children=["n1", "n2"]),
        TreeNode(node_id="n1", kind="query", text="what is entity 1?", depth=2, decision="answer", answer="a thing",
                 confidence=0.8, llm_calls=1, passages=[hit(0, 1)]),
        TreeNode(node_id="n2", kind="query", text="who owns things?", depth=2, decision="low_confidence",
                 answer="nobody", confidence=0.2, llm_calls=2, error=None)],
        llm_calls=5, prompt_tokens=900, completion_tokens=40, llm_ms=1234.5, retrievals=3)
    answer = Answer(text="entity 0", source="prunerag", citations=["1", "S1"], passage_ids=[f"{t}:p1"],
                    prop_ids=[f"{t}:r0"], model="m", llm_calls=5, prompt_tokens=900, completion_tokens=40,
                    latency_ms=1300.0)
    result = QueryResult(query_id=query_id, question="who owns entity 1?", mode="prunerag", passages=[],
                         answer=answer, tree=tree)
    cstore.run_in_transaction(answer_steps(result))
    cstore.run_in_transaction(answer_steps(result))  # idempotent
    stored = read_answer(cstore, query_id)
    assert (stored["text"], stored["source"], stored["citations"], stored["prompt_tokens"]) == \
        ("entity 0", "prunerag", ["1", "S1"], 900)
    assert sorted((c["label"], c["id"]) for c in stored["cited"]) == [("Passage", f"{t}:p1"), ("Proposition", f"{t}:r0")]
    read = read_tree(cstore, query_id)
    assert (read["llm_calls"], read["retrievals"], read["llm_ms"]) == (5, 3, 1234.5)
    assert [(n["node_id"], n["decision"], n["answer"], n["depth"]) for n in read["nodes"]] == [
        (f"{query_id}:n0", "decomposition", None, 1), (f"{query_id}:n1", "answer", "a thing", 2),
        (f"{query_id}:n2", "low_confidence", "nobody", 2)]
    assert read["nodes"][0]["children"] == [f"{query_id}:n1", f"{query_id}:n2"]
    assert [[(p["passage_id"], p["rank"]) for p in n["passages"]] for n in read["nodes"]] == [
        [(f"{t}:p1", 1), (f"{t}:p0", 2)], [(f"{t}:p0", 1)], []]
    assert read_answer(cstore.another(), query_id) is None and read_tree(cstore.another(), query_id) is None


@pytest.mark.neo4j_only  # Neo4j's locks (ArcadeDB's optimistic transactions conflict at commit instead)
def test_a_deadlock_met_while_a_transaction_pulls_is_retried_and_both_writes_commit(cstore):
    """Two transactions update the same two documents in opposite orders, each waiting for the
    other after its first statement: Neo4j ends one of them with a deadlock, which the driver
    meets while it pulls the statement's result; that transaction runs again and both commit
    (a reasoning record or an ingestion batch meeting another writer is not lost)."""
    import threading

    t = cstore.tenant

    def document(i: int, title: str) -> dict:
        return {"doc_id": f"{t}:d{i}", "tenant": t, "source": f"d{i}.txt", "title": title, "content_hash": "h",
                "identity": "source", "ingested_at": "2026-01-01T00:00:00Z", "acl": None, "keep_acl": False}

    cstore.write("upsert_documents", [document(0, "start"), document(1, "start")])
    both_hold_one = threading.Barrier(2, timeout=20)
    statements_run = {"first": 0, "second": 0}
    errors: list[BaseException] = []

    def writer(label: str, order: tuple[int, int]) -> None:
        def on_step(name: str, seconds: float) -> None:
            statements_run[label] += 1
            if statements_run[label] == 1:  # the first attempt holds its first document's lock
                both_hold_one.wait()  # so does the other's: the next statements deadlock

        try:
            cstore.run_in_transaction([("upsert_documents", {"rows": [document(i, label)]}) for i in order],
                                      on_step=on_step)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=("first", (0, 1))),
               threading.Thread(target=writer, args=("second", (1, 0)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert statements_run["first"] + statements_run["second"] > 4  # one of them ran again
    titles = {cstore.run("api_document_get", doc_id=f"{t}:d{i}")[0]["title"] for i in (0, 1)}
    assert len(titles) == 1 and titles < {"first", "second"}  # one transaction's writes, whole, then the other's

def browser_statements() -> dict[str, str]:
    """The saved Neo4j Browser queries of cypher/browser/ (not loaded by the store)."""
    from pathweave.store.statements import cypher_dir, parse

    statements: dict[str, str] = {}
    for path in sorted((cypher_dir() / "browser").glob("*.cypher")):
        statements.update(parse(path.read_text(encoding="utf-8"), str(path)))
    return statements


def test_browser_queries(cstore):
    write_graph(cstore)
    t = cstore.tenant
    write_record(cstore, f"{t}:q")
    queries = browser_statements()
    assert set(queries) == {
        "browser_reasoning_record", "browser_reasoning_record_table", "browser_entity_paths",
        "browser_entity_aliases", "browser_document_footprint", "browser_document_footprint_counts",
        "browser_prunerag_tree"}

    def run(name: str, **params) -> list[dict]:
        with cstore.driver.session(database=cstore.database) as session:
            return [r.data() for r in session.run(queries[name], {"tenant": t, **params})]

    table = run("browser_reasoning_record_table", query_id=None)  # null = the latest query
    assert [(row["path_rank"], row["step"], row["proposition"]) for row in table] == [
        (0, 0, "proposition 0"), (0, 1, "proposition 1"), (1, 0, "proposition 1")]
    assert sorted(table[0]["entities"]) == ["Entity 0", "Entity 1"] and table[0]["passages"] == [f"{t}:p0"]
    assert len(run("browser_reasoning_record", query_id=f"{t}:q")) == 3
    assert run("browser_reasoning_record", query_id="nope") == []
    assert run("browser_prunerag_tree", query_id=None) == []  # no PruneRAG query in this tenant (tests/llm has one)
    assert len(run("browser_entity_paths", entity="entity 1")) == 2   # both paths step through e1
    aliases = run("browser_entity_aliases", entity=f"{t}:e1")
    assert len(aliases) == 1 and len(aliases[0]["synonyms"]) == 1
    counts = run("browser_document_footprint_counts", document="a.txt")
    assert [{k: v for k, v in row.items() if k not in ("doc_id", "title", "source")} for row in counts] == [
        {"passages": 3, "propositions": 2, "entities": 3, "entities_only_here": 3, "triples": 1, "queries": 1}]
    assert len(run("browser_document_footprint", document=f"{t}:doc")) == 1


# ---- Neo4j + GDS only ----------------------------------------------------------------


@pytest.fixture()
def gds_store(cstore):
    assert cstore.backend.name == "neo4j"
    assert cstore.backend._client() is not None, "the managed Neo4j has no Graph Data Science"
    return cstore


@pytest.mark.neo4j_only
def test_gds_stage1_ppr_equals_in_process_ppr(gds_store):
    from pathweave.graph.ppr import personalized_pagerank, transition_matrix
    from pathweave.graph.topology import Topology

    write_graph(gds_store)
    gds_store.record_change(added=[f"{gds_store.tenant}:p{i}" for i in range(3)])
    topology = Topology(gds_store.tenant)
    topology.refresh(gds_store)
    view = topology.view()
    assert gds_store.backend.projector.project_now(gds_store) is not None
    n_e, n_p = view.n_entities, view.n_passages
    reset = np.zeros(n_e + n_p)
    reset[view.entity_index[f"{gds_store.tenant}:e0"]] = 1.0
    reset[n_e:] = 0.05 * np.linspace(0, 1, n_p)
    ids = view.entity_ids[:n_e] + view.passage_ids[:n_p]
    scores = gds_store.backend.personalized_pagerank(
        gds_store, {ids[i]: float(reset[i]) for i in np.flatnonzero(reset)}, 0.75, view.version)
    in_database = np.asarray([scores.get(pid, 0.0) for pid in view.passage_ids[:n_p]])
    in_process = personalized_pagerank(transition_matrix(view.adjacency), reset, 0.75)[n_e:]
    np.testing.assert_allclose(in_database, in_process, atol=1e-6)


@pytest.mark.neo4j_only
def test_gds_knn_synonyms(gds_store):
    t = gds_store.tenant
    close = math.sqrt(1 - 0.9 ** 2)
    gds_store.write("upsert_entities", [
        {"entity_id": f"{t}:a", "tenant": t, "name": "Acme Corp", "norm_name": "acme corp", "type": "ORG",
         "embedding": unit((0, 1.0))},
        {"entity_id": f"{t}:b", "tenant": t, "name": "Acme Corporation", "norm_name": "acme corporation",
         "type": "ORG", "embedding": unit((0, 0.9), (1, close))},        # cos 0.9 with a
        {"entity_id": f"{t}:c", "tenant": t, "name": "Zenith", "norm_name": "zenith", "type": "ORG",
         "embedding": unit((0, 0.7), (2, math.sqrt(1 - 0.49)))},           # cos 0.7: no edge
        {"entity_id": f"{t}:d", "tenant": t, "name": "AC", "norm_name": "ac", "type": "ORG",
         "embedding": unit((0, 1.0))},                                      # <= 2 alnum: skipped
    ])
    assert gds_store.backend.write_synonyms(gds_store, 0.8, 100) == 1
    rows = gds_store.run("snapshot_synonyms")
    assert [(row["src"], row["dst"]) for row in rows] == [(f"{t}:a", f"{t}:b")]
    assert rows[0]["score"] == pytest.approx(0.9, abs=1e-5)
    assert gds_store.backend.write_synonyms(gds_store, 0.8, 100) == 1  # MERGE: still one edge
    assert gds_store.counts()["rel:SYNONYM"] == 1



def test_a_transient_error_the_driver_let_through_is_retried_and_no_other_failure_is():
    """What the driver raises when a transaction's close meets the result that failed (a
    ResultFailedError from the server's error) is retried when that error is transient
    (pure logic over the driver's own exception classes)."""
    from neo4j.exceptions import Neo4jError, ResultFailedError

    from pathweave.errors import is_transient
    from pathweave.store.retry import ambiguous, again, rolled_back, server_error

    deadlock = Neo4jError._hydrate_neo4j(code="Neo.TransientError.Transaction.DeadlockDetected", message="deadlock")
    syntax = Neo4jError._hydrate_neo4j(code="Neo.ClientError.Statement.SyntaxError", message="bad")

    def masked(cause: Exception) -> ResultFailedError:
        try:
            try:
                raise cause
            except Neo4jError as exc:
                raise ResultFailedError(None, "The result has failed.") from exc
        except ResultFailedError as exc:
            return exc

    assert rolled_back(masked(deadlock)) and again(masked(deadlock))
    assert not again(masked(syntax))
    assert not again(deadlock)  # the driver retries it itself
    assert not again(ResultFailedError(None, "no cause"))
    assert server_error(masked(deadlock)) is deadlock and is_transient(server_error(masked(deadlock)))
    conflict = Neo4jError._hydrate_neo4j(code="Neo.DatabaseError.General.UnknownError",
                                         message="ConcurrentModificationException on record #3:1")
    assert rolled_back(masked(conflict)) and rolled_back(conflict)  # an ArcadeDB conflict, behind it or not
    on_commit = Neo4jError._hydrate_neo4j(code="Neo.DatabaseError.General.UnknownError",
                                          message="Transaction error on commit")
    assert ambiguous(on_commit) and not rolled_back(on_commit) and again(on_commit)
