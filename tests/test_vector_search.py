"""A tenant's vector search does not pay for the other tenants of the database: on the real
store, a small tenant whose index search a large tenant crowds is scored exactly (its own
nodes, through the tenant index) after one index round instead of widening, with the exact
top k; a tenant over the bound widens as before, and is not asked for the exact search again
for a while; a tenant whose search ended exact starts its next searches there."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from pathweave.graph.vectors import encode_vector
from pathweave.store.backends import base
from pathweave.store.graph_store import GraphStore

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

DIM = 384


def tenant_store(base_store) -> GraphStore:
    return GraphStore(base_store.driver, base_store.database, base_store.backend, f"t{uuid.uuid4().hex[:10]}",
                      base_store.batch_size, base_store.dimensions)


def write_entities(store: GraphStore, vectors: np.ndarray) -> list[str]:
    ids = [f"{store.tenant}:e{i}" for i in range(len(vectors))]
    store.write("upsert_entities", [{"entity_id": ids[i], "tenant": store.tenant, "name": f"entity {i}",
                                     "norm_name": f"entity {i}", "type": "ORG", "embedding": v.tolist(),
                                     "vec": encode_vector(v)} for i, v in enumerate(vectors)])
    return ids


def unit(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture()
def crowded(base_store):
    """A large tenant clustered around the question's vector and a small tenant of random
    vectors in the same database: ``(small store, its ids and vectors, large store, question)``."""
    rng = np.random.default_rng(7)
    question = unit(rng.standard_normal(DIM))
    large, small = tenant_store(base_store), tenant_store(base_store)
    write_entities(large, unit(question + 0.05 * rng.standard_normal((240, DIM))))
    vectors = unit(rng.standard_normal((30, DIM)))
    return small, write_entities(small, vectors), vectors, large, question


def same_hits(found, expected) -> bool:
    """The same ids in the same order with the same cosines to float32 precision: the store's
    cosine of the same vectors may differ in its last bit between two calls (its JIT-compiled
    summation order differs from the interpreted one's)."""
    return [i for i, _ in found] == [i for i, _ in expected] and np.allclose(
        [c for _, c in found], [c for _, c in expected], rtol=1e-6, atol=1e-7)


def counting(store: GraphStore, monkeypatch) -> list[str]:
    names: list[str] = []
    real = store.run

    def run(name, **params):
        names.append(name)
        return real(name, **params)

    monkeypatch.setattr(store, "run", run)
    return names


def test_a_small_tenant_crowded_by_a_large_one_is_scored_exactly(crowded, monkeypatch):
    small, ids, vectors, _, question = crowded
    names = counting(small, monkeypatch)
    hits = base.vector_search(small, "Entity", question, 10)
    # one index round of 10 places, none the tenant's: widening would read about 100 more;
    # its 30 nodes cost less, scored exactly
    assert names == ["vector_search", "vector_exact_entity"]
    cosines = vectors @ question
    best = np.argsort(-cosines)[:10]
    assert [i for i, _ in hits] == [ids[j] for j in best]
    assert np.allclose([c for _, c in hits], cosines[best], atol=1e-5)
    names.clear()  # the next search starts where this one ended: scored exactly, no index round
    assert same_hits(base.vector_search(small, "Entity", question, 10), hits) and names == ["vector_exact_entity"]


def test_a_tenant_over_the_bound_widens_until_the_widening_costs_more(crowded, monkeypatch):
    """One node per expected place, k = 5: after the round of 5 places (none the tenant's) the
    widening is expected to read 25 places, fewer than the tenant's 30 nodes (refused, the
    size remembered); after the round of 20, 100: scored exactly."""
    small, ids, vectors, _, question = crowded
    monkeypatch.setattr(base, "EXACT_PER_PLACE", 1.0)
    names = counting(small, monkeypatch)
    hits = base.vector_search(small, "Entity", question, 5)
    assert names == ["vector_search", "vector_exact_entity", "vector_search", "vector_exact_entity"]
    assert [i for i, _ in hits] == [ids[j] for j in np.argsort(-(vectors @ question))[:5]]
    names.clear()
    assert same_hits(base.vector_search(small, "Entity", question, 5), hits) and names == ["vector_exact_entity"]
    monkeypatch.setattr(base, "_exact_bounds", {})  # the exact start forgotten (its time up)
    names.clear()
    base.vector_search(small, "Entity", question, 5)
    assert names == ["vector_search", "vector_search", "vector_exact_entity"]  # the refused bound is remembered
    monkeypatch.setattr(base, "EXACT_PER_PLACE", 0.0)  # bound 0: never above the remembered 25
    monkeypatch.setattr(base, "_exact_bounds", {})
    names.clear()
    widened = base.vector_search(small, "Entity", question, 5)  # the remembered bound is never exceeded: the index alone
    assert names.count("vector_exact_entity") == 0 and names.count("vector_search") >= 3
    assert {i for i, _ in widened} <= set(ids) and len(widened) == 5


def test_a_tenant_without_nodes_of_the_label_stops_after_the_exact_search(crowded, base_store, monkeypatch):
    _, _, _, _, question = crowded
    empty = tenant_store(base_store)
    names = counting(empty, monkeypatch)
    assert base.vector_search(empty, "Entity", question, 5) == []
    assert names == ["vector_search", "vector_exact_entity"]  # not widened to the whole index


@pytest.mark.parametrize("k,share", [(5, 0.5), (20, 0.3), (100, 0.5), (60, 0.9)])
def test_a_restricted_search_first_asks_enough_places_but_one_time_in_twenty_at_most(k, share):
    asked = base.first_ask(k, share)
    assert k / share < asked < 2 * k / share
    rng = np.random.default_rng(7)
    short = np.mean(rng.binomial(asked, share, size=20_000) < k)  # readable hits among the places asked
    assert short < 0.05
    assert base.first_ask(k, 0.001) == base.first_ask(k, base.MIN_FIRST_SHARE) and base.first_ask(k, 1.0) == k
