"""The query path on the graph store (issue 10), on the real ArcadeDB server: the
incremental topology equals a from-scratch build, the vector search gives each tenant its
k under a shared index, and stage-2 PPR on the Cypher-fetched subgraph equals the
in-process reference on a hand-checkable graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from pathweave.store.backends import vector_search
from pathweave.store.backends.base import ask_wider
from pathweave.graph.ppr import personalized_pagerank, push_pagerank, transition_matrix
from pathweave.graph.subgraph import NodeReader, build_subgraph
from pathweave.graph.topology import Topology
from pathweave.graph.vectors import encode_vector
from pathweave_ingest.jobs import delete_document
from pathweave_ingest.loaders import SourceDocument, load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"
DIM = 384


def unit(*pairs):
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in pairs:
        v[i] = x
    return v / np.linalg.norm(v)


def small_graph(store):
    """3 passages, 3 entities, 2 propositions: p0 states r0 {e0, e1}, p1 states r1 {e1, e2},
    p2 states nothing; SYNONYM e1-e2 0.85."""
    t = store.tenant
    vec = {f"p{i}": unit((i, 1.0)) for i in range(3)} | {f"r{i}": unit((10 + i, 1.0)) for i in range(2)} | \
        {f"e{i}": unit((20 + i, 1.0)) for i in range(3)}
    store.write_all([
        ("upsert_documents", [{"doc_id": f"{t}:doc", "tenant": t, "source": "a", "title": "A",
                               "content_hash": "h", "ingested_at": "2026-01-01T00:00:00Z"}]),
        ("upsert_passages", [{"passage_id": f"{t}:p{i}", "doc_id": f"{t}:doc", "tenant": t, "title": f"P{i}",
                              "text": f"passage {i}", "position": i, "token_count": 2,
                              "embedding": vec[f"p{i}"].tolist(), "vec": encode_vector(vec[f"p{i}"])}
                             for i in range(3)]),
        ("upsert_entities", [{"entity_id": f"{t}:e{i}", "tenant": t, "name": f"Entity {i}", "norm_name": f"entity {i}",
                              "type": "ORG", "embedding": vec[f"e{i}"].tolist(), "vec": encode_vector(vec[f"e{i}"])}
                             for i in range(3)]),
        ("upsert_propositions", [{"prop_id": f"{t}:r{i}", "tenant": t, "text": f"proposition {i}",
                                  "embedding": vec[f"r{i}"].tolist(), "vec": encode_vector(vec[f"r{i}"])}
                                 for i in range(2)]),
        ("link_states", [{"passage_id": f"{t}:p{i}", "prop_id": f"{t}:r{i}"} for i in range(2)]),
        ("link_proposition_mentions", [{"prop_id": f"{t}:r0", "entity_id": f"{t}:e0"},
                                       {"prop_id": f"{t}:r0", "entity_id": f"{t}:e1"},
                                       {"prop_id": f"{t}:r1", "entity_id": f"{t}:e1"},
                                       {"prop_id": f"{t}:r1", "entity_id": f"{t}:e2"}]),
        ("upsert_synonyms", [{"src": f"{t}:e1", "dst": f"{t}:e2", "score": 0.85}]),
    ])
    store.record_change(added=[f"{t}:p{i}" for i in range(3)], entities=[f"{t}:e{i}" for i in range(3)])
    return vec


def test_incremental_topology_equals_a_fresh_build_after_ingests_and_a_delete(pipeline, store, settings, tmp_path):
    documents, errors = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    incremental = Topology(store.tenant)
    incremental.refresh(store)  # empty tenant
    assert incremental.view().n_passages == 0
    half = len(documents) // 2
    pipeline.ingest(documents[:half], errors)
    incremental.refresh(store)
    assert incremental.view().n_passages > 0  # the next view is derived from this one
    pipeline.ingest(documents[half:])
    extra = SourceDocument(str(tmp_path / "krakow.txt"), "Krakow",
                           "Krakow was the capital of Poland before Warsaw. Marie Curie visited Krakow.")
    pipeline.ingest([extra])
    assert incremental.refresh(store) and not incremental.refresh(store)  # two changes applied, then current
    fresh = Topology(store.tenant)
    fresh.refresh(store)
    assert incremental.edges() == fresh.edges() and len(fresh.edges()) > 50
    synonyms = fresh.view().synonyms
    assert synonyms.nnz > 0 and np.allclose(incremental.view().synonyms.sum(), synonyms.sum())

    doc_id = pipeline._doc_id(extra)
    removed = delete_document(store, doc_id)
    assert removed and removed["removed"]["passages"] >= 1
    incremental.refresh(store)
    rebuilt = Topology(store.tenant)
    rebuilt.refresh(store)
    assert incremental.edges() == rebuilt.edges()
    alive = {incremental.passage_ids[i] for i in np.flatnonzero(incremental.view().alive)}
    assert alive == {rebuilt.passage_ids[i] for i in np.flatnonzero(rebuilt.view().alive)}
    assert incremental.edges() != fresh.edges()  # the delete changed the graph


def test_a_topology_behind_the_kept_changes_rebuilds(store):
    small_graph(store)
    behind = Topology(store.tenant)
    behind.refresh(store)
    for _ in range(3):
        store.record_change(keep=1)  # prunes the records `behind` would need
    behind.version = 0  # as if it had missed everything
    assert behind.refresh(store)
    fresh = Topology(store.tenant)
    fresh.refresh(store)
    assert behind.edges() == fresh.edges() and behind.version == store.graph_version()


def test_each_tenant_gets_its_k_under_a_shared_index(store, base_store):
    from pathweave.store.graph_store import GraphStore

    small = store
    large = GraphStore(base_store.driver, base_store.database, base_store.backend, small.tenant + "x",
                       base_store.batch_size, base_store.dimensions)
    query = unit((5, 1.0))
    rows = lambda tenant, n, near: [  # noqa: E731
        {"passage_id": f"{tenant}:q{i}", "doc_id": f"{tenant}:none", "tenant": tenant, "title": "T",
         "text": f"text {i}", "position": i, "token_count": 1,
         "embedding": (unit((5, 1.0), (6 + i % 50, near))).tolist(), "vec": None} for i in range(n)]
    large.write("upsert_passages", rows(large.tenant, 300, 0.2))  # all nearer to the query
    small.write("upsert_passages", rows(small.tenant, 3, 3.0))
    hits = vector_search(small, "Passage", query, 3)
    assert [h[0] for h in hits] and {h[0] for h in hits} == {f"{small.tenant}:q{i}" for i in range(3)}
    assert all(-1.0 <= h[1] <= 1.0 for h in hits) and hits == sorted(hits, key=lambda h: -h[1])
    assert len(vector_search(large, "Passage", query, 10)) == 10


def test_a_shared_index_is_asked_wider_when_full_or_crowded_not_beside_a_twin():
    # all 16 places came back and fewer than needed are mine: more may lie beyond
    assert ask_wider(found=16, mine=5, asked=16, need=11, last=-1, max_k=10_000)
    # fewer came back, other tenants in half the places: crowded, ask while it grows
    assert ask_wider(found=12, mine=4, asked=16, need=11, last=-1, max_k=10_000)
    assert not ask_wider(found=12, mine=4, asked=64, need=11, last=12, max_k=10_000)
    # a twin tenant: as many of theirs as mine, few places: no wider ask
    assert not ask_wider(found=6, mine=3, asked=16, need=11, last=-1, max_k=10_000)
    # enough of mine, or at the ceiling
    assert not ask_wider(found=16, mine=11, asked=16, need=11, last=-1, max_k=10_000)
    assert not ask_wider(found=16, mine=5, asked=10_000, need=11, last=-1, max_k=10_000)


def test_stage2_ppr_on_the_fetched_subgraph_equals_the_hand_built_reference(store):
    vec = small_graph(store)
    topology = Topology(store.tenant)
    topology.refresh(store)
    view = topology.view()
    t = store.tenant
    passages = view.index_of(view.passage_index, [f"{t}:p0", f"{t}:p1"], view.n_passages)
    subgraph = build_subgraph(view, passages, NodeReader(store, topology.nodes, DIM))
    # G_sub's propositions come in the topology's order (the order the store returned them)
    assert subgraph.passage_titles == ["P0", "P1"] and sorted(subgraph.prop_texts) == ["proposition 0", "proposition 1"]
    rows = [subgraph.prop_texts.index(f"proposition {i}") for i in range(2)]
    np.testing.assert_allclose(subgraph.prop_emb[rows], np.stack([vec["r0"], vec["r1"]]), atol=1e-6)
    names = [e.split(":")[1] for e in subgraph.entity_ids]
    assert sorted(names) == ["e0", "e1", "e2"]
    subgraph.ensure_entities([names.index("e1")])
    assert [subgraph.entity_names[names.index(e)] for e in ("e0", "e1", "e2")] == ["", "Entity 1", ""]
    # by hand: e0-e1 co-occur in r0, e1-e2 in r1 (+ synonym 0.85); p0 -> e0, e1; p1 -> e1, e2
    edges = {("e0", "e1"): 1.0, ("e1", "e2"): 1.85, ("p0", "e0"): 1.0, ("p0", "e1"): 1.0,
             ("p1", "e1"): 1.0, ("p1", "e2"): 1.0}
    order = names + ["p0", "p1"]
    reference = np.zeros((5, 5))
    for (a, b), w in edges.items():
        reference[order.index(a), order.index(b)] = reference[order.index(b), order.index(a)] = w
    np.testing.assert_allclose(subgraph.adjacency.toarray(), reference)
    reset = np.zeros(5)
    reset[order.index("e0")], reset[order.index("p0")] = 1.0, 0.05
    expected = personalized_pagerank(transition_matrix(sp.csr_matrix(reference)), reset, 0.45, tol=1e-12)
    np.testing.assert_allclose(personalized_pagerank(subgraph.walk, reset, 0.45, tol=1e-12), expected, atol=1e-12)
    # and stage 1's local push agrees with the power iteration on the whole topology
    whole = np.zeros(view.adjacency.shape[0])
    whole[view.entity_index[f"{t}:e0"]] = 1.0
    exact = personalized_pagerank(transition_matrix(view.adjacency), whole, 0.75, tol=1e-12)
    pushed = push_pagerank(view.adjacency, view.degree, whole, 0.75, epsilon=1e-9)
    np.testing.assert_allclose(pushed, exact, atol=1e-7)
    assert pytest.approx(pushed.sum(), abs=1e-6) == 1.0


def _rows(passages: dict[str, dict[str, list[str]]]) -> tuple[list[dict], list[dict]]:
    props = [{"passage_id": p, "prop_id": r, "entities": e} for p, stated in passages.items() for r, e in stated.items()]
    triples = [{"passage_id": p, "triple_id": f"t:{r}", "subject_id": e[0], "object_id": e[-1]}
               for p, stated in passages.items() for r, e in stated.items() if len(e) > 1]
    return props, triples


def _same_view(a: Topology, b: Topology) -> None:
    va, vb = a.view(), b.view()
    pa = {a.passage_ids[i] for i in np.flatnonzero(va.alive)}
    assert pa == {b.passage_ids[i] for i in np.flatnonzero(vb.alive)}
    assert a.edges() == b.edges()
    for name in ("states", "prop_entities"):
        ma, mb = getattr(va, name).tocoo(), getattr(vb, name).tocoo()
        ids = {"states": (a.passage_ids, a.prop_ids), "prop_entities": (a.prop_ids, a.entity_ids)}[name]
        idb = {"states": (b.passage_ids, b.prop_ids), "prop_entities": (b.prop_ids, b.entity_ids)}[name]
        assert {(ids[0][r], ids[1][c]) for r, c in zip(ma.row, ma.col)} == \
            {(idb[0][r], idb[1][c]) for r, c in zip(mb.row, mb.col)}
    assert {(a.passage_ids[p], a.triple_ids[t]) for p, t in zip(*va.assertions)} == \
        {(b.passage_ids[p], b.triple_ids[t]) for p, t in zip(*vb.assertions)}
    assert {a.triple_ids[t]: tuple(a.entity_ids[e] for e in va.triple_ends[t]) for t in range(len(a.triple_ids))} \
        .items() >= {b.triple_ids[t]: tuple(b.entity_ids[e] for e in vb.triple_ends[t])
                     for t in range(len(b.triple_ids))}.items()


def test_each_view_derived_from_the_last_equals_a_view_built_at_once():
    """Views derived change by change (passages added, removed, re-added; a proposition
    shared by two passages; one that dies and is born again; synonyms replaced; alias
    groups formed and split) equal a topology built at once from the final state."""
    corpus = {
        "p1": {"r1": ["a", "b"], "r2": ["b", "c"]},
        "p2": {"r2": ["b", "c"], "r3": ["c", "d", "e"]},
        "p3": {"r4": ["e", "f"]},
        "p4": {"r5": ["a", "f"], "r1": ["a", "b"]},
    }
    topology = Topology("t")
    steps = [("add", ["p1", "p2"]), ("view", None), ("add", ["p3"]), ("syn", [("a", "d", 0.9), ("c", "f", 0.85)]),
             ("view", None), ("remove", ["p1"]), ("view", None), ("remove", ["p2"]), ("add", ["p1", "p4"]),
             ("view", None), ("alias", {"e": "f", "c": "a"}), ("view", None), ("syn", [("a", "e", 0.95)]),
             ("remove", ["p3"]), ("add", ["p2"]), ("view", None), ("alias", {"c": None, "d": "b"}), ("view", None)]
    alive: set[str] = set()
    synonyms: dict[tuple[str, str], float] = {}
    aliases: dict[str, str] = {}
    for action, arg in steps:
        if action == "add":
            topology.add_passages(*_rows({p: corpus[p] for p in arg}), arg)
            alive |= set(arg)
        elif action == "remove":
            topology.remove_passages(arg)
            alive -= set(arg)
        elif action == "alias":
            topology.set_aliases(sorted(arg), [{"alias": a, "canonical": c} for a, c in arg.items() if c])
            aliases.update(arg)
            aliases = {a: c for a, c in aliases.items() if c}
        elif action == "syn":
            rows = [{"src": x, "dst": y, "score": w} for x, y, w in arg]
            topology.set_synonyms(sorted({x for x, _, _ in arg}), rows)
            touched = {x for x, _, _ in arg}
            synonyms = {pair: w for pair, w in synonyms.items() if not touched & set(pair)}
            synonyms.update({(x, y): w for x, y, w in arg})
        else:
            reference = Topology("t")
            reference.add_passages(*_rows({p: corpus[p] for p in sorted(alive)}), sorted(alive))
            reference.set_synonyms([], [{"src": x, "dst": y, "score": w} for (x, y), w in synonyms.items()])
            reference.set_aliases([], [{"alias": a, "canonical": c} for a, c in aliases.items()])
            _same_view(topology, reference)
            assert {topology.entity_ids[e]: topology.entity_ids[c] for e, c in enumerate(topology.view().canonical)
                    if e != c} == {a: c for a, c in aliases.items() if a in topology.entity_index}
    assert topology.view().adjacency.nnz > 0


def test_node_cache_counts_its_bytes_and_evicts_the_least_recently_used():
    from pathweave.graph.node_cache import NodeCache, row_bytes

    cache = NodeCache(max_entries=2)
    rows = {i: (f"text {i}", "v" * 2048) for i in "abc"}
    assert cache.lookup("passage", ["a", "b", "a"]) == ({}, ["a", "b"])
    cache.put("passage", {i: rows[i] for i in "ab"})
    assert cache.lookup("passage", ["a"]) == ({"a": rows["a"]}, [])  # a is now the most recent
    cache.put("passage", {"c": rows["c"]})  # evicts b
    assert len(cache) == 2 and cache.lookup("passage", ["b"]) == ({}, ["b"])
    expected = sum(row_bytes(("passage", i), rows[i]) for i in "ac")
    assert cache.bytes == expected and expected > 2 * 2048
    cache.evict(["a", "c"])
    assert len(cache) == 0 and cache.bytes == 0


def test_a_topologys_byte_estimate_follows_what_it_allocates():
    """The O(1) estimate against tracemalloc's count of what building a topology of 3,000
    passages (ids of real length, 3 propositions of 3 entities each, SYNONYM edges) and its
    view allocated: within a factor of two."""
    import tracemalloc

    rng = np.random.default_rng(3)
    passages = {f"passage:{i:036d}": {f"prop:{i:036d}:{j}": [f"entity:{int(x):034d}" for x in rng.integers(0, 9000, 3)]
                                      for j in range(3)} for i in range(3000)}
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    topology = Topology("t")
    topology.add_passages(*_rows(passages), list(passages))
    topology.set_synonyms([], [{"src": f"entity:{a:034d}", "dst": f"entity:{a + 1:034d}", "score": 0.9}
                               for a in range(0, 9000, 3)])
    topology.view()
    allocated = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert allocated / 2 <= topology.bytes <= allocated * 2, (topology.bytes, allocated)
    from types import SimpleNamespace

    estimate = topology.bytes
    kept = SimpleNamespace(walk=sp.identity(20_000, format="csr"), scores=np.zeros(20_000))
    topology.view().keep("a query's graph", kept)  # what a query kept for the next ones counts too
    assert topology.bytes - estimate >= 20_000 * (8 + 4 + 8)


def test_the_topology_cache_keeps_to_its_byte_bound_least_recently_used_first(base_store):
    """Three tenants' topologies under a bound that holds about two: asking for the third
    evicts the least recently used, never the one asked for; a bound below one topology
    keeps that one alone."""
    from pathweave.graph.topology import TopologyCache
    from pathweave.store.graph_store import GraphStore

    stores = []
    for n in range(3):
        store = GraphStore(base_store.driver, base_store.database, base_store.backend, f"tb{n}{np.random.randint(1e9)}",
                           base_store.batch_size, base_store.dimensions)
        small_graph(store)
        stores.append(store)
    unbounded = TopologyCache()
    sizes = []
    for store in stores:
        unbounded.get(store).view()
        sizes.append(unbounded.get(store).bytes)
    cache = TopologyCache(max_bytes=int(max(sizes) * 2.5))
    for store in stores[:2]:
        cache.get(store).view()
    cache.get(stores[0])  # the first is used again: the second is now the least recently used
    cache.get(stores[2]).view()  # loaded, then its view built: each checks the bound
    held = {tenant for tenant, _ in cache._topologies}
    assert held <= {stores[0].tenant, stores[2].tenant} and stores[2].tenant in held
    assert cache.stats()["topology_bytes"] <= cache.max_bytes and cache.stats()["evicted"] >= 1
    tiny = TopologyCache(max_bytes=1)
    for store in stores:
        assert tiny.get(store).view().n_passages == 3
        assert [tenant for tenant, _ in tiny._topologies] == [store.tenant]  # the one asked for stays, alone
