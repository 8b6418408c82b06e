"""Shared fixtures for the pathweave.selection tests (real OR-Tools, real tokenizer)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathweave.selection import CandidateGraph, CandidateNode, TokenCounter  # noqa: E402


def build_graph(spec, edges, query="Q"):
    """Graph from ``{id: (kind, weight, cost)}`` or ``(kind, weight, cost, text)``;
    the query node is added with weight 0 and cost 0 when absent."""
    nodes = []
    if query not in spec:
        nodes.append(CandidateNode(id=query, kind="query", text="query", weight=0.0, cost=0))
    for node_id, item in spec.items():
        kind, weight, cost, *rest = item
        nodes.append(CandidateNode(
            id=node_id, kind=kind, weight=weight, cost=cost, text=rest[0] if rest else node_id
        ))
    return CandidateGraph(query_id=query, nodes=nodes, edges=edges)


def hand_graph():
    """Two passages, two propositions, one shared entity: Q-p1-s1-e1-s2-p2-Q."""
    spec = {
        "p1": ("passage", 5.0, 50),
        "p2": ("passage", 4.0, 30),
        "s1": ("proposition", 3.0, 10),
        "s2": ("proposition", 6.0, 20),
        "e1": ("entity", 1.0, 2),
    }
    edges = [("Q", "p1"), ("Q", "p2"), ("p1", "s1"), ("p2", "s2"), ("s1", "e1"), ("s2", "e1")]
    return build_graph(spec, edges)


def brute_force_optimum(graph, budget):
    """Best objective over all connected, budget-feasible sets containing Q."""
    others = [n.id for n in graph.nodes if n.id != graph.query_id]
    best = graph.query.weight
    for r in range(1, len(others) + 1):
        for combo in itertools.combinations(others, r):
            chosen = {graph.query_id, *combo}
            if sum(graph.node(v).cost for v in chosen) > budget:
                continue
            if graph.is_connected(chosen):
                best = max(best, sum(graph.node(v).weight for v in chosen))
    return best


def random_small_graph(rng, n_others=8, p_edge=0.3):
    """Random connected-ish small graph: Q plus ``n_others`` nodes."""
    kinds = ["passage", "proposition", "entity"]
    spec = {
        f"v{i}": (kinds[i % 3], float(rng.exponential(1.0)), int(rng.integers(1, 30)))
        for i in range(n_others)
    }
    ids = ["Q", *spec]
    edges = [
        (a, b) for a, b in itertools.combinations(ids, 2) if rng.random() < p_edge
    ]
    return build_graph(spec, edges)


def assert_feasible(graph, selection, budget):
    """Q selected, within budget, connected, ids unique, tokens consistent."""
    assert selection.selected[0] == graph.query_id
    assert len(set(selection.selected)) == len(selection.selected)
    assert selection.tokens_used == sum(graph.node(v).cost for v in selection.selected)
    assert selection.tokens_used <= budget
    assert graph.is_connected(selection.selected)
    # every prefix is connected (selection order is a growth order)
    for k in range(1, len(selection.selected) + 1):
        assert graph.is_connected(selection.selected[:k])
    assert selection.objective == pytest.approx(
        sum(graph.node(v).weight for v in selection.selected)
    )
    assert selection.bound >= selection.objective - 1e-9
    assert 0.0 <= selection.gap <= 1.0


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TokenCounter()


@pytest.fixture
def make_graph():
    return build_graph


@pytest.fixture
def helpers():
    class H:
        build_graph = staticmethod(build_graph)
        brute_force_optimum = staticmethod(brute_force_optimum)
        hand_graph = staticmethod(hand_graph)
        random_small_graph = staticmethod(random_small_graph)
        assert_feasible = staticmethod(assert_feasible)

        @staticmethod
        def rng(seed):
            return np.random.default_rng(seed)

    return H
