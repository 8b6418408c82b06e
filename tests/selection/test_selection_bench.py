"""bench.py: generator shape and a tiny stats run."""

from __future__ import annotations

from pathweave.selection.bench import random_candidate_graph, synthetic_solve_stats


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
    for key in ("ilp_ms_p50", "ilp_ms_p95", "ilp_optimal_frac", "greedy_over_ilp_mean",
                "path_over_ilp_mean", "ref_optimal_frac"):
        assert key in stats
    assert 0 < stats["greedy_over_ilp_mean"] <= 1.0 + 1e-9
    assert 0 < stats["path_over_ilp_mean"] <= 1.0 + 1e-9
