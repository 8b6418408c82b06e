"""bench.py: generator shape and a tiny stats run."""

from __future__ import annotations

import pytest

from pathweave_bench.selection import random_candidate_graph, synthetic_solve_stats


def test_random_candidate_graph_shape(helpers):
    g = random_candidate_graph(120, helpers.rng(0))
    assert len(g.nodes) == 120
    kinds = [n.kind for n in g.nodes]
    assert kinds.count("query") == 1 and kinds.count("passage") > 0
    assert len(g.adjacency()["Q"]) == 5  # query linked to 5 seed entities
    for n in g.nodes:
        lo, hi = {"query": (0, 0), "passage": (80, 200), "proposition": (15, 40),
                  "entity": (2, 6)}[n.kind]
        assert lo <= n.cost <= hi
    for u, v in g.edges:
        pair = {g.node(u).kind, g.node(v).kind}
        assert pair in ({"passage", "proposition"}, {"proposition", "entity"},
                        {"passage", "entity"}, {"query", "entity"})


def test_synthetic_solve_stats_smoke():
    out = synthetic_solve_stats(sizes=(20,), trials=2, reference_limit_ms=500)
    stats = out["sizes"][20]
    assert out["config"]["trials"] == 2
    for key in ("ilp_ms_p50", "ilp_ms_p95", "ilp_optimal_frac", "ilp_found_frac", "greedy_over_ilp_mean",
                "path_over_ilp_mean", "ls_over_ilp_mean", "ref_optimal_frac"):
        assert key in stats
    assert 0 < stats["greedy_over_ilp_mean"] <= 1.0 + 1e-9
    assert 0 < stats["path_over_ilp_mean"] <= 1.0 + 1e-9
    assert stats["path_over_ilp_mean"] <= stats["ls_over_ilp_mean"] + 1e-9 <= 1.0 + 2e-9


def test_coverage_style_graph_prices_only_statements(helpers):
    g = random_candidate_graph(120, helpers.rng(0), style="coverage")
    skeleton = random_candidate_graph(120, helpers.rng(0))
    assert [n.id for n in g.nodes] == [n.id for n in skeleton.nodes]
    for n in g.nodes:
        if n.kind in ("passage", "entity"):
            assert n.cost == 0 and not n.rendered
        if n.kind == "proposition":
            assert n.cost == skeleton.node(n.id).cost > 0
    seeds = set(g.adjacency()["Q"])
    assert all(n.weight == 0 for n in g.nodes if n.kind == "entity" and n.id not in seeds)
    kinds = {n.id: n.kind for n in g.nodes}
    assert not any({kinds[u], kinds[v]} == {"passage", "entity"} for u, v in g.edges)
    with pytest.raises(ValueError, match="style"):
        random_candidate_graph(20, helpers.rng(0), style="other")
