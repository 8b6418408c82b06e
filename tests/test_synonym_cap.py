"""The synonym cap (spec §1: at most ``synonym_max`` SYNONYM edges per entity) held at both ends:
the pure rule choosing the edges beyond it, and on the real store a common entity that a batch's
new entities all found keeping its strongest edges, with the topology of a query process
following the removal through the change log."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pathweave.graph.topology import Topology
from pathweave.graph.vectors import encode_vector
from pathweave_ingest.synonyms import beyond_cap, cap_synonyms, over_cap

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def edge(a: str, b: str, score: float) -> dict:
    return {"src": a, "dst": b, "score": score}


def test_the_cap_keeps_the_k_strongest_edges_at_each_end_whatever_the_row_order():
    # hub h: five edges; x: three edges (one to h); k = 2
    rows = [edge("h", f"n{i}", 0.80 + i / 100) for i in range(5)] + [edge("x", "h", 0.99), edge("x", "y", 0.95),
                                                                      edge("x", "z", 0.90)]
    cut = beyond_cap({"h", "x"}, rows, 2)
    # h keeps x (0.99) and n4 (0.84); x keeps h and y; each pair once, a < b
    assert cut == [("h", "n0"), ("h", "n1"), ("h", "n2"), ("h", "n3"), ("x", "z")]
    both_ways = rows + [edge(r["dst"], r["src"], r["score"]) for r in rows]
    random.Random(3).shuffle(both_ways)
    assert beyond_cap({"h", "x"}, both_ways, 2) == cut
    assert beyond_cap({"n0"}, rows, 2) == []  # an end not asked for is not cut from
    assert beyond_cap({"h"}, [edge("h", "b", 0.9), edge("h", "a", 0.9)], 1) == [("b", "h")]  # a tie: the smaller id stays
    assert beyond_cap({"h"}, rows, 6) == []  # h has six


def write_entities(store, names: list[str]) -> list[str]:
    ids = [f"{store.tenant}:{name}" for name in names]
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
    store.write("upsert_entities", [{"entity_id": i, "tenant": store.tenant, "name": n, "norm_name": n, "type": "ORG",
                                     "embedding": vector.tolist(), "vec": encode_vector(vector)}
                                    for i, n in zip(ids, names)])
    return ids


def stored_edges(store, ids: list[str]) -> dict[tuple[str, str], float]:
    return {tuple(sorted((r["src"], r["dst"]))): round(float(r["score"]), 6)
            for r in store.run("topology_entity_synonyms", ids=ids)}


def topology_edges(topology: Topology) -> dict[tuple[str, str], float]:
    names = topology.entity_ids
    return {tuple(sorted((names[a], names[b]))): round(float(s), 6)
            for (a, b), s in zip(topology.synonym_pairs.tolist(), topology.synonym_scores.tolist())}


def test_a_common_entity_keeps_its_k_strongest_synonyms_and_the_topology_follows(store):
    hub, *old = write_entities(store, ["hub", "old a", "old b", "lonely"])
    new = write_entities(store, [f"new {i}" for i in range(6)])
    store.write("upsert_synonyms", [{"src": hub, "dst": old[0], "score": 0.97}, {"src": hub, "dst": old[1], "score": 0.81},
                                    {"src": old[0], "dst": old[2], "score": 0.85}])
    topology = Topology(store.tenant)
    topology.refresh(store)
    # a batch of six new entities, each found the hub (and new 0 found new 1)
    store.write("upsert_synonyms", [{"src": n, "dst": hub, "score": 0.82 + i / 100} for i, n in enumerate(new)]
                + [{"src": new[0], "dst": new[1], "score": 0.9}])
    store.record_change(entities=new)  # as ingestion records the edges it wrote
    version = store.graph_version()
    assert over_cap(store, 3) == [hub] and over_cap(store, 0) == []  # eight edges; the others at most two
    assert cap_synonyms(store, new, 3) == 5
    assert over_cap(store, 3) == []
    kept = stored_edges(store, [hub])
    # the hub keeps old a (0.97), new 5 (0.87) and new 4 (0.86); old b's older, weaker edge went too
    assert set(kept) == {tuple(sorted((hub, old[0]))), tuple(sorted((hub, new[5]))), tuple(sorted((hub, new[4])))}
    assert stored_edges(store, [new[0]]) == {tuple(sorted((new[0], new[1]))): 0.9}
    assert stored_edges(store, [old[0]])[tuple(sorted((old[0], old[2])))] == 0.85  # an entity the batch never reached
    assert store.graph_version() == version + 1  # one change recorded for the removal
    assert cap_synonyms(store, new, 3) == 0 and store.graph_version() == version + 1  # within the cap: nothing
    topology.refresh(store)  # through the change log
    fresh = Topology(store.tenant)
    fresh.refresh(store)
    assert topology_edges(topology) == topology_edges(fresh) == stored_edges(store, [hub, *old, *new])
    assert cap_synonyms(store, new, 0) == 0 and stored_edges(store, [hub]) == kept  # k < 1: no cap
