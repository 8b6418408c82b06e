"""Pins the exact Graph Data Science calls (graphdatascience 2.x client) and the Neo4j
statements the Neo4j backend produces, with a recording fake client and a fake
driver: no Neo4j server is needed. What GDS computes is checked by the contract suite
against the managed Neo4j + GDS in the suite's Neo4j run (tests/test_store_contract.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from neo4j.exceptions import Neo4jError

from pathweave.store.backends import Backend, Capability
from pathweave.store.backends import gds as gds_ops
from pathweave.store.statements import statement
from pathweave.store.backends.arcadedb import ArcadeBackend
from pathweave.store.backends.neo4j import Neo4jBackend
from pathweave.graph.ppr import personalized_pagerank, transition_matrix
from waiting import wait_until

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

PPR_STREAM = dict(relationship_weight_property="weight", max_iterations=100, tolerance=1e-8, log_progress=False)


class FakeGds:
    """Records every client call as ``(endpoint, args, kwargs)``; a graph catalog of names."""

    def __init__(self, catalog=(), database="neo4j", pagerank=None, knn=None, kmeans=None, node_count=3):
        self.calls: list[tuple[str, tuple, dict]] = []
        self.catalog = {name: db for name, db in catalog}
        self._database = database
        self.frames = {"run_cypher": pagerank, "knn.stream": knn, "kmeans.stream": kmeans}
        self.node_count = node_count
        self.fail: dict[str, Exception] = {}
        rec = self._recorder
        self.graph = SimpleNamespace(
            project=SimpleNamespace(cypher=rec("graph.project.cypher", self._project)),
            exists=rec("graph.exists", lambda name: name in self.catalog),
            get=rec("graph.get", lambda name: SimpleNamespace(graph=name)),
            list=rec("graph.list",
                     lambda: [SimpleNamespace(graph_name=n, database=d) for n, d in self.catalog.items()]),
            drop=rec("graph.drop", lambda name, fail_if_missing=True: self.catalog.pop(name, None)),
        )
        self.run_cypher = rec("run_cypher", lambda *a, **k: self.frames["run_cypher"])
        self.page_rank = SimpleNamespace(
            estimate=rec("page_rank.estimate", lambda *a, **k: SimpleNamespace(
                required_memory="[1 KiB ... 2 KiB]", heap_percentage_min=0.1, heap_percentage_max=0.2)),
        )
        self.knn = SimpleNamespace(stream=rec("knn.stream", lambda *a, **k: self.frames["knn.stream"]))
        self.kmeans = SimpleNamespace(stream=rec("kmeans.stream", lambda *a, **k: self.frames["kmeans.stream"]))

    def _recorder(self, endpoint, function):
        def call(*args, **kwargs):
            self.calls.append((endpoint, args, kwargs))
            if endpoint in self.fail:
                raise self.fail[endpoint]
            return function(*args, **kwargs)
        return call

    def _project(self, query, graph_name, **params):
        self.catalog[graph_name] = self._database
        return SimpleNamespace(graph=graph_name), SimpleNamespace(node_count=self.node_count, relationship_count=2)

    def database(self):
        return self._database

    def close(self):
        self.calls.append(("close", (), {}))

    def endpoints(self):
        return [endpoint for endpoint, _, _ in self.calls]

    def call(self, endpoint):
        matches = [(args, kwargs) for name, args, kwargs in self.calls if name == endpoint]
        assert len(matches) == 1, f"{endpoint}: {len(matches)} calls"
        return matches[0]


class FakeRun:
    """A tenant-scoped ``run(name, **params)`` returning canned rows per statement."""

    def __init__(self, rows):
        self.rows = rows
        self.calls: list[tuple[str, dict]] = []

    def __call__(self, name, **params):
        self.calls.append((name, params))
        rows = self.rows.get(name, [])
        return rows(**params) if callable(rows) else rows


NODE_KEYS = [
    {"node": 10, "key": "e1", "passage": False},
    {"node": 11, "key": "e2", "passage": False},
    {"node": 20, "key": "p1", "passage": True},
    {"node": 21, "key": "p2", "passage": True},
]


def ppr_run():
    return FakeRun({
        "neo4j_gds_graph_size": [{"node_count": 4, "relationship_count": 7}],
        "neo4j_gds_node_keys": NODE_KEYS,
    })


def test_project_ppr_graph_estimates_projects_and_drops_older_versions():
    gds = FakeGds(catalog=[
        ("pathweave-ppr-t1-v1", "neo4j"),      # older: dropped
        ("pathweave-ppr-t1-v9", "neo4j"),      # newer (another process): kept
        ("pathweave-ppr-t1-x-v1", "neo4j"),    # tenant "t1-x": kept
        ("pathweave-ppr-t1-v2", "other"),      # another database: kept
    ])
    run = ppr_run()
    graph = gds_ops.project_ppr_graph(gds, run, "t1", 3, damping=0.75)

    assert gds.endpoints() == ["page_rank.estimate", "graph.project.cypher", "graph.list", "graph.drop", "graph.list"]
    assert gds.call("page_rank.estimate") == (
        ({"nodeProjection": "*",
          "relationshipProjection": {"LINK": {"type": "*", "orientation": "UNDIRECTED", "properties": "weight"}},
          "nodeCount": 4, "relationshipCount": 7},),
        {"damping_factor": 0.75, "relationship_weight_property": "weight", "max_iterations": 100, "tolerance": 1e-8},
    )
    assert gds.call("graph.project.cypher") == (
        (statement("neo4j_gds_project_ppr"),), {"graph_name": "pathweave-ppr-t1-v3", "tenant": "t1"})
    assert gds.call("graph.drop") == (("pathweave-ppr-t1-v1",), {"fail_if_missing": False})
    assert sorted(gds.catalog) == ["pathweave-ppr-t1-v2", "pathweave-ppr-t1-v3", "pathweave-ppr-t1-v9",
                                   "pathweave-ppr-t1-x-v1"]
    assert graph.name == "pathweave-ppr-t1-v3" and graph.version == 3
    assert graph.node_ids == {"e1": 10, "e2": 11, "p1": 20, "p2": 21}
    assert graph.passages == {20: "p1", 21: "p2"}
    assert [name for name, _ in run.calls] == ["neo4j_gds_graph_size", "neo4j_gds_node_keys"]


def test_projection_statement_is_the_spec_graph():
    """The projection: undirected weighted LINKs, co-occurrence counts, synonymy score,
    passage-entity 1.0, every entity and passage of the tenant as a node."""
    text = statement("neo4j_gds_project_ppr")
    assert "RETURN gds.graph.project($graph_name, source, target" in text
    assert "relationshipProperties: {weight: weight}" in text
    assert "{undirectedRelationshipTypes: ['LINK']}" in text
    assert "toFloat(count(DISTINCT q)) AS weight" in text
    assert "toFloat(r.score) AS weight" in text
    assert "RETURN DISTINCT p AS source, e AS target, 1.0 AS weight" in text
    assert "RETURN n AS source, null AS target" in text
    assert text.count("$tenant") == 4


def test_empty_tenant_is_not_projected():
    gds = FakeGds()
    run = FakeRun({"neo4j_gds_graph_size": [{"node_count": 0, "relationship_count": 0}]})
    assert gds_ops.project_ppr_graph(gds, run, "t1", 1) is None
    assert gds.calls == []


def test_failed_estimate_is_logged_and_projection_goes_on(caplog):
    gds = FakeGds()
    gds.fail["page_rank.estimate"] = RuntimeError("no estimate")
    graph = gds_ops.project_ppr_graph(gds, ppr_run(), "t1", 1)
    assert graph is not None and "graph.project.cypher" in gds.endpoints()
    assert "GDS memory estimate failed" in caplog.text


def test_projection_race_loads_the_graph_another_process_made():
    gds = FakeGds()

    def project_elsewhere(query, graph_name, **params):
        gds.catalog[graph_name] = "neo4j"  # another process won the race
        raise RuntimeError("graph already exists")

    gds.graph.project.cypher = gds._recorder("graph.project.cypher", project_elsewhere)
    graph = gds_ops.project_ppr_graph(gds, ppr_run(), "t1", 2)
    assert graph.name == "pathweave-ppr-t1-v2"
    assert gds.call("graph.get") == (("pathweave-ppr-t1-v2",), {})


def test_the_catalog_keeps_the_most_recently_projected_ppr_graphs():
    gds = FakeGds()
    for i in range(5):
        gds.catalog[f"pathweave-ppr-t{i}-v1"] = "neo4j"
    gds.catalog["pathweave-entities-t0-x"] = "neo4j"  # not a PPR graph: never evicted
    listed = [SimpleNamespace(graph_name=n, database="neo4j", creation_time=f"2026-01-0{i + 1}")
              for i, n in enumerate(gds.catalog)]
    gds.graph.list = gds._recorder("graph.list", lambda: listed)
    assert gds_ops.evict_least_recent_graphs(gds, 3, keep="pathweave-ppr-t0-v1") == ["pathweave-ppr-t1-v1"]
    assert gds_ops.evict_least_recent_graphs(gds, 10) == []


def test_personalized_pagerank_call_sends_reset_groups():
    frame = pd.DataFrame({"node": [20, 21], "score": [0.3, 0.2]})
    gds = FakeGds(pagerank=frame)
    graph = gds_ops.PprGraph("g", 1, SimpleNamespace(graph="g"), {"e1": 10, "e2": 11, "p1": 20, "p2": 21},
                             {20: "p1", 21: "p2"})
    seeds = {"e1": 1.0, "e2": 0.0, "p1": 0.05, "unknown": 1.0}
    scores = gds_ops.personalized_pagerank(gds, graph, seeds, 0.75)

    args, kwargs = gds.call("run_cypher")
    assert args == (statement("neo4j_gds_personalized_pagerank"),)
    assert kwargs == {"params": {"graph_name": "g", "damping": 0.75, "max_iterations": 100, "tolerance": 1e-8,
                                 "groups": [{"nodes": [10], "weight": 1.0}, {"nodes": [20], "weight": 0.05}]}}
    assert scores == pytest.approx({"p1": 0.3, "p2": 0.2})


def test_reset_groups_exact_up_to_the_level_count_then_binned():
    assert gds_ops.reset_groups({1: 1.0, 2: 1.0, 3: 0.05, 4: 0.0}) == [
        {"nodes": [1, 2], "weight": 1.0}, {"nodes": [3], "weight": 0.05}]
    weights = {0: 1.0, 1: 1.0, **{10 + i: 0.05 * i / 99 for i in range(1, 100)}}
    groups = gds_ops.reset_groups(weights, levels=8)
    assert len(groups) == 8 and groups[0] == {"nodes": [0, 1], "weight": 1.0}
    assert sorted(n for g in groups for n in g["nodes"]) == sorted(weights)
    binned = {n: g["weight"] for g in groups for n in g["nodes"]}
    assert sum(binned.values()) == pytest.approx(sum(weights.values()))  # mass kept
    assert max(abs(binned[n] - w) for n, w in weights.items()) <= 0.05 / 7


def test_personalized_pagerank_without_seeds_in_graph_calls_nothing():
    gds = FakeGds()
    graph = gds_ops.PprGraph("g", 1, None, {"e1": 10}, {})
    assert gds_ops.personalized_pagerank(gds, graph, {"zzz": 1.0, "e1": 0.0}, 0.75) == {}
    assert gds.calls == []


def test_gds_scores_normalized_equal_in_process_ppr():
    """GDS PageRank (isolated nodes pass nothing on) normalized to sum 1 equals
    pathweave.graph.ppr (isolated mass back to the seeds): the claim of pathweave.store.backends.gds."""
    rng = np.random.default_rng(7)
    n = 12
    dense = np.triu(rng.random((n, n)) * (rng.random((n, n)) < 0.35), 1)
    dense[[3, 8], :] = 0
    dense[:, [3, 8]] = 0  # nodes 3 and 8 isolated
    adjacency = sp.csr_matrix(dense + dense.T)
    bias = np.where(rng.random(n) < 0.5, rng.random(n), 0.0)
    bias[3] = 0.7  # a seeded isolated node
    d = 0.75
    transition = transition_matrix(adjacency)
    x = (1 - d) * bias
    for _ in range(500):  # GDS: x = (1 - d) b + d x T
        x = (1 - d) * bias + d * (transition.T @ x)
    expected = personalized_pagerank(transition, bias, d, tol=1e-14, max_iter=1000)
    np.testing.assert_allclose(x / x.sum(), expected, atol=1e-10)


def entity_run(keys):
    return FakeRun({
        "neo4j_gds_entity_keys": [{"node": node, "key": key} for node, key in keys.items()],
        "neo4j_import_synonyms": lambda rows, threshold: [{"written": len(rows) - 1}],
    })


def test_write_synonyms_knn_call_dedup_and_import():
    knn = pd.DataFrame({"node1": [1, 2, 1, 3, 4], "node2": [2, 1, 3, 1, 9], "similarity": [0.9, 0.9, 0.85, 0.85, 0.99]})
    gds = FakeGds(knn=knn)
    run = entity_run({1: "ent:b", 2: "ent:a", 3: "ent:c", 4: "ent:d"})
    written = gds_ops.write_synonyms(gds, run, "t1", threshold=0.8, top_k=100)

    assert gds.endpoints() == ["graph.project.cypher", "knn.stream", "graph.drop"]
    (query,), project = gds.call("graph.project.cypher")
    assert query == statement("neo4j_gds_project_entities")
    assert project["graph_name"].startswith("pathweave-entities-t1-")
    assert project["tenant"] == "t1" and project["ids"] is None
    args, kwargs = gds.call("knn.stream")
    assert args == (SimpleNamespace(graph=project["graph_name"]),)
    assert kwargs == {"node_properties": {"embedding": "COSINE"}, "top_k": 100, "similarity_cutoff": 0.8,
                      "sample_rate": 1.0, "log_progress": False}
    assert gds.call("graph.drop") == ((project["graph_name"],), {"fail_if_missing": False})
    # both directions collapse to one src < dst pair; node 9 (unknown) is skipped
    assert run.calls[-1] == ("neo4j_import_synonyms", {
        "rows": [{"src": "ent:a", "dst": "ent:b"}, {"src": "ent:b", "dst": "ent:c"}], "threshold": 0.8})
    assert written == 1
    assert gds.catalog == {}


def test_entity_graph_is_dropped_when_knn_fails():
    gds = FakeGds()
    gds.fail["knn.stream"] = RuntimeError("out of memory")
    with pytest.raises(RuntimeError):
        gds_ops.write_synonyms(gds, entity_run({}), "t1")
    assert gds.endpoints()[-1] == "graph.drop" and gds.catalog == {}


def test_synonyms_skip_knn_below_two_entities():
    gds = FakeGds(node_count=1)
    assert gds_ops.write_synonyms(gds, entity_run({1: "ent:a"}), "t1") == 0
    assert gds.endpoints() == ["graph.project.cypher", "graph.drop"]


def test_no_qualifying_entity_projects_nothing():
    gds = FakeGds()
    gds.fail["graph.project.cypher"] = ValueError("The Cypher projection query produced no rows")
    assert gds_ops.write_synonyms(gds, entity_run({}), "t1") == 0
    assert gds_ops.kmeans_entities(gds, entity_run({}), "t1", k=3) == {}
    assert gds.endpoints() == ["graph.project.cypher", "graph.project.cypher"]


def test_kmeans_call_keeps_the_run_of_least_inertia():
    worse = pd.DataFrame({"nodeId": [1, 2, 3], "communityId": [0, 0, 1], "distanceFromCentroid": [0.3, 0.3, 0.0]})
    better = pd.DataFrame({"nodeId": [1, 2, 3], "communityId": [0, 1, 0], "distanceFromCentroid": [0.1, 0.0, 0.1]})
    gds = FakeGds(node_count=3)
    runs = iter([worse, better] + [worse] * (gds_ops.KMEANS_RESTARTS - 2))
    gds.kmeans.stream = gds._recorder("kmeans.stream", lambda *a, **k: next(runs))
    run = entity_run({1: "ent:a", 2: "ent:b", 3: "ent:c"})
    clusters = gds_ops.kmeans_entities(gds, run, "t1", k=8, entity_ids=["ent:a", "ent:b", "ent:c"], seed=7)
    (_,), project = gds.call("graph.project.cypher")
    assert project["ids"] == ["ent:a", "ent:b", "ent:c"]
    calls = [kwargs for name, _, kwargs in gds.calls if name == "kmeans.stream"]
    assert calls == [{"node_property": "embedding", "k": 3, "random_seed": 7 + i, "initial_sampler": "kmeans++",
                      "log_progress": False} for i in range(gds_ops.KMEANS_RESTARTS)]
    assert gds.endpoints().count("graph.project.cypher") == 1  # one projection for every run
    assert clusters == {"ent:a": 0, "ent:b": 1, "ent:c": 0}


class FakeStore:
    def __init__(self, tenant="t1", version=1, rows=None):
        self.tenant = tenant
        self.version = version
        self.run = FakeRun(rows if rows is not None else {
            "neo4j_gds_graph_size": [{"node_count": 4, "relationship_count": 7}],
            "neo4j_gds_node_keys": NODE_KEYS,
        })

    def graph_version(self):
        return self.version


def wait_for(condition, what: str, timeout=5.0):
    return wait_until(condition, timeout, what, interval_s=0.01)


def test_projector_debounces_and_never_projects_inside_a_query():
    gds = FakeGds()
    projector = gds_ops.PprProjector(lambda: gds, debounce_s=0.2)
    store = FakeStore(version=1)
    assert projector.graph(store, 1) is None        # scheduled, not projected
    assert "graph.project.cypher" not in gds.endpoints()
    for _ in range(5):                              # queries at the pending version: no restart
        assert projector.graph(store, 1) is None
    assert wait_for(lambda: "graph.project.cypher" in gds.endpoints(), "the debounced projection")
    assert projector.graph(store, 1).name == "pathweave-ppr-t1-v1"

    store.version = 2                               # ingestion batches in a row: one projection
    projector.schedule(store, 2)
    time.sleep(0.05)
    store.version = 3
    projector.schedule(store, 3)
    assert wait_for(lambda: projector.graph(store, 3) is not None, "the projection at version 3")
    projected = [kw["graph_name"] for name, _, kw in gds.calls if name == "graph.project.cypher"]
    assert projected == ["pathweave-ppr-t1-v1", "pathweave-ppr-t1-v3"]
    assert sorted(gds.catalog) == ["pathweave-ppr-t1-v3"]
    projector.cancel()


class FakeDriver:
    """Records ``session(database=…).run(text, params)``, also inside a managed transaction
    (``execute_read`` / ``execute_write`` run the work once); ``fail`` raises on a statement."""

    def __init__(self, fail=None):
        self.runs: list[tuple[str, str, dict]] = []
        self.fail = fail or {}
        self.closed = False

    def session(self, database=None, **options):
        driver = self

        class Session:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def execute_read(self, work):
                return work(self)

            execute_write = execute_read

            def run(self, text, params=None):
                driver.runs.append((database, text, dict(params or {})))
                if text in driver.fail:
                    raise driver.fail[text]
                return []

        return Session()

    def close(self):
        self.closed = True


def test_neo4j_backend_vector_indexes():
    driver = FakeDriver()
    backend = Neo4jBackend(driver, "neo4j")
    backend.create_vector_indexes(384)
    assert driver.runs == [
        ("neo4j", statement("neo4j_vector_index_passage"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_vector_index_proposition"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_vector_index_entity"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_vector_index_relation"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_vector_index_triple"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_vector_index_run"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_vector_index_run_memory"), {"dimensions": 384}),
        ("neo4j", statement("neo4j_await_indexes"), {"timeout_s": 300}),
    ]
    assert "CREATE VECTOR INDEX passage_embedding IF NOT EXISTS" in statement("neo4j_vector_index_passage")
    assert backend.vector_index_name("Passage") == "passage_embedding"
    assert backend.vector_index_name("Entity", "embedding") == "entity_embedding"


def test_neo4j_backend_stage1_ppr_falls_back_until_projected():
    frame = pd.DataFrame({"node": [20, 21], "score": [0.3, 0.2]})
    gds = FakeGds(pagerank=frame)
    backend = Neo4jBackend(FakeDriver(), "neo4j", debounce_s=0.05, gds=gds)
    store = FakeStore(version=4)
    seeds = {"e1": 1.0, "p2": 0.05}
    assert backend.personalized_pagerank(store, seeds, 0.75, 4) is None   # not projected yet: in-process PPR
    assert wait_for(lambda: "graph.project.cypher" in gds.endpoints(), "the projection")
    assert wait_for(lambda: backend.personalized_pagerank(store, seeds, 0.75, 4) is not None, "PPR on the projection")
    assert backend.personalized_pagerank(store, seeds, 0.75, 4) == pytest.approx({"p1": 0.3, "p2": 0.2})
    assert gds.calls[-1][2]["params"]["groups"] == [{"nodes": [10], "weight": 1.0}, {"nodes": [21], "weight": 0.05}]

    gds.fail["run_cypher"] = RuntimeError("graph lost")  # e.g. server restarted
    assert backend.personalized_pagerank(store, seeds, 0.75, 4) is None
    backend.close()
    assert gds.endpoints()[-1] == "close"


def test_neo4j_backend_without_gds_falls_back(monkeypatch):
    import graphdatascience

    def no_gds(*args, **kwargs):
        raise Neo4jError("Unknown function 'gds.version'")

    monkeypatch.setattr(graphdatascience, "GraphDataScience", no_gds)
    backend = Neo4jBackend(FakeDriver(), "neo4j")
    store = FakeStore()
    assert backend.capabilities == frozenset({Capability.VECTOR_SEARCH})
    assert backend.personalized_pagerank(store, {"e1": 1.0}, 0.75, 1) is None
    assert backend.write_synonyms(store, 0.8, 100) is None
    assert backend.kmeans_entities(store, 4) is None
    backend.graph_changed(store)
    backend.close()


def test_arcade_backend_declares_vector_search_only():
    backend = ArcadeBackend("http://127.0.0.1:1", "root", "x", "pathweave")
    assert isinstance(backend, Backend)
    assert backend.capabilities == frozenset({Capability.VECTOR_SEARCH})
    with pytest.raises(NotImplementedError):
        backend.personalized_pagerank(FakeStore(), {"e1": 1.0}, 0.75, 1)
    assert backend.vector_index_name("Passage") == "Passage[embedding]"


def test_neo4j_backend_capabilities_follow_gds():
    assert Neo4jBackend(FakeDriver(), "neo4j", gds=FakeGds()).capabilities == frozenset(Capability)


def test_open_store_neo4j_branch(monkeypatch, tmp_path):
    from pathweave import runtime as store_module
    from pathweave.store.statements import load_all
    from pathweave.settings import Settings

    driver = FakeDriver()
    opened = {}

    def fake_driver(uri, auth, **options):
        opened.update(uri=uri, auth=auth)
        return driver

    monkeypatch.setattr(store_module.GraphDatabase, "driver", fake_driver)
    settings = Settings(data_dir=tmp_path, store={"uri": "neo4j://graph.internal:7687", "user": "neo4j",
                                                  "password": "secret", "database": "neo4j"})
    store = store_module.open_store(settings, tenant="acme", dimensions=384)
    assert opened == {"uri": "neo4j://graph.internal:7687", "auth": ("neo4j", "secret")}
    assert isinstance(store.backend, Neo4jBackend) and store.tenant == "acme" and store.database == "neo4j"
    texts = [text for _, text, _ in driver.runs]
    constraints = [load_all()[name] for name in sorted(load_all()) if name.startswith("constraint_")]
    assert texts[:len(constraints)] == constraints
    assert texts[len(constraints):] == [statement(f"neo4j_vector_index_{label}") for label in
                                        ("passage", "proposition", "entity", "relation", "triple", "run",
                                         "run_memory")] + [
                                           statement("neo4j_await_indexes")] + [
                                           statement(f"neo4j_fulltext_index_{label}") for label in
                                           ("passage", "proposition", "entity")] + [statement("neo4j_await_indexes")]
    assert {database for database, _, _ in driver.runs} == {"neo4j"}
    assert not (tmp_path / "server").exists()  # no managed server for an external store


def test_open_store_neo4j_missing_database(monkeypatch, tmp_path):
    from pathweave import runtime as store_module
    from pathweave.settings import Settings

    missing = Neo4jError._hydrate_neo4j(code="Neo.ClientError.Database.DatabaseNotFound", message="no db")
    driver = FakeDriver(fail={statement("constraint_document"): missing})
    monkeypatch.setattr(store_module.GraphDatabase, "driver", lambda uri, auth, **options: driver)
    settings = Settings(data_dir=tmp_path, store={"uri": "bolt://localhost:7687", "database": "pathweave"})
    with pytest.raises(ValueError, match="PATHWEAVE_STORE_DATABASE=neo4j"):
        store_module.open_store(settings)
    assert driver.closed


# ---- the real graphdatascience client over a recording query runner -------------------------


class RecordingRunner:
    """A graphdatascience QueryRunner that records what the client would send to the server
    (procedure, function and Cypher calls) and answers with canned frames."""

    def __init__(self, answers):
        self.sent: list[tuple[str, str, dict]] = []
        self.answers = answers

    def call_procedure(self, endpoint, query_type=None, params=None, yields=None, database=None, mode=None,
                       logging=False, retryable=False, custom_error=True):
        self.sent.append(("procedure", endpoint, dict(params or {})))
        return self.answers.get(endpoint, pd.DataFrame())

    def call_function(self, endpoint, query_type=None, params=None):
        self.sent.append(("function", endpoint, dict(params or {})))
        return self.answers.get(endpoint)

    def run_cypher(self, query, query_type=None, params=None, database=None, mode=None, custom_error=True):
        self.sent.append(("cypher", query, dict(params or {})))
        return self.answers.get("cypher", pd.DataFrame())

    run_retryable_cypher = run_cypher

    def server_version(self):
        from graphdatascience.versions.server_version import ServerVersion

        return ServerVersion(2, 13, 0)

    def database(self):
        return "neo4j"

    def set_show_progress(self, show_progress):
        pass

    def close(self):
        pass

    def __getattr__(self, name):  # the rest of the QueryRunner interface is not used here
        raise AssertionError(f"unexpected QueryRunner.{name}")


def real_client(answers):
    from graphdatascience import GraphDataScience
    from graphdatascience.query_runner.query_runner import QueryRunner

    runner = RecordingRunner(answers)
    QueryRunner.register(RecordingRunner)
    return GraphDataScience(runner, arrow=False, show_progress=False), runner


def without_job_id(params):
    config = dict(params.get("config", {}))
    config.pop("jobId", None)
    return {**params, "config": config} if "config" in params else params


def test_real_client_sends_the_pinned_procedures():
    """What the installed graphdatascience client sends to the server for our calls."""
    projected = {"graphName": "pathweave-ppr-t1-v3", "nodeCount": 4, "relationshipCount": 6, "projectMillis": 5,
                 "configuration": {}, "query": "q"}
    estimate = {"nodeCount": 4, "relationshipCount": 7, "requiredMemory": "1 KiB", "treeView": "",
                "mapView": {}, "bytesMin": 1, "bytesMax": 2, "heapPercentageMin": 0.1, "heapPercentageMax": 0.2}
    gds, runner = real_client({
        "cypher": pd.DataFrame({"graph": [projected]}),
        "gds.pageRank.stats.estimate": pd.DataFrame([estimate]),
        "gds.graph.exists": False,
        "gds.knn.stream": pd.DataFrame({"node1": [1], "node2": [2], "similarity": [0.9]}),
    })
    graph = gds_ops.project_ppr_graph(gds, ppr_run(), "t1", 3, damping=0.75)
    sent = [(kind, what) for kind, what, _ in runner.sent]
    assert sent == [("procedure", "gds.pageRank.stats.estimate"), ("cypher", statement("neo4j_gds_project_ppr")),
                    ("procedure", "gds.graph.list"), ("procedure", "gds.graph.list")]
    assert runner.sent[0][2] == {
        "graphNameOrConfiguration": {
            "nodeProjection": "*",
            "relationshipProjection": {"LINK": {"type": "*", "orientation": "UNDIRECTED", "properties": "weight"}},
            "nodeCount": 4, "relationshipCount": 7},
        "algoConfig": {"dampingFactor": 0.75, "maxIterations": 100, "relationshipWeightProperty": "weight",
                       "tolerance": 1e-8, "scaler": "NONE", "relationshipTypes": ["*"], "nodeLabels": ["*"]}}
    assert runner.sent[1][2] == {"graph_name": "pathweave-ppr-t1-v3", "tenant": "t1"}
    assert graph.graph.name() == "pathweave-ppr-t1-v3"

    runner.sent.clear()
    runner.answers["cypher"] = pd.DataFrame({"node": [20], "score": [0.5]})
    scores = gds_ops.personalized_pagerank(gds, graph, {"e1": 1.0, "p1": 0.05}, 0.75)
    assert scores == {"p1": 0.5}
    ((kind, endpoint, params),) = runner.sent
    assert (kind, endpoint) == ("cypher", statement("neo4j_gds_personalized_pagerank"))
    assert params["groups"] == [{"nodes": [10], "weight": 1.0}, {"nodes": [20], "weight": 0.05}]

    runner.sent.clear()
    runner.answers["cypher"] = pd.DataFrame({"graph": [{**projected, "graphName": "entities", "nodeCount": 2}]})
    assert gds_ops.synonym_candidates(gds, entity_run({1: "ent:a", 2: "ent:b"}), "t1") == [
        {"src": "ent:a", "dst": "ent:b"}]
    kinds = [(kind, what) for kind, what, _ in runner.sent]
    assert kinds == [("cypher", statement("neo4j_gds_project_entities")), ("procedure", "gds.knn.stream"),
                     ("procedure", "gds.graph.drop")]
    assert without_job_id(runner.sent[1][2]) == {"graph_name": "entities", "config": {
        "nodeProperties": {"embedding": "COSINE"}, "topK": 100, "similarityCutoff": 0.8, "deltaThreshold": 0.001,
        "maxIterations": 100, "sampleRate": 1.0, "perturbationRate": 0.0, "randomJoins": 10,
        "initialSampler": "UNIFORM", "relationshipTypes": ["*"], "nodeLabels": ["*"], "sudo": False,
        "logProgress": False}}
    assert runner.sent[2][2]["failIfMissing"] is False

    runner.sent.clear()
    runner.answers["gds.kmeans.stream"] = pd.DataFrame({"nodeId": [1, 2], "communityId": [0, 1],
                                                        "distanceFromCentroid": [0.0, 0.0]})
    assert gds_ops.kmeans_entities(gds, entity_run({1: "ent:a", 2: "ent:b"}), "t1", k=4, seed=7) == {
        "ent:a": 0, "ent:b": 1}
    kinds = [(kind, what) for kind, what, _ in runner.sent]
    assert kinds[1] == ("procedure", "gds.kmeans.stream")
    config = without_job_id(runner.sent[1][2])["config"]
    assert (config["nodeProperty"], config["k"], config["randomSeed"]) == ("embedding", 2, 7)
