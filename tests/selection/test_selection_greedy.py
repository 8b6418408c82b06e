"""Greedy heuristics: spec frontier rule, path lookahead, never above the ILP."""

from __future__ import annotations

import pytest

from pathweave.selection import solve_greedy, solve_ilp
from pathweave_bench.selection import random_candidate_graph


def test_frontier_rule_hand_example(helpers):
    g = helpers.hand_graph()
    sel = solve_greedy(g, 80)
    # ratios: p2 .133 > p1 .1; then s2 .3; e1 .5; s1 .3; p1 no longer fits
    assert sel.selected == ["Q", "p2", "s2", "e1", "s1"]
    assert sel.method == "greedy" and sel.status == "HEURISTIC"
    assert sel.objective == pytest.approx(14.0)
    helpers.assert_feasible(g, sel, 80)


def test_path_rule_pays_for_a_connector(helpers):
    # the frontier rule takes f (ratio .2) and then cannot afford p -> s
    g = helpers.build_graph(
        {"f": ("proposition", 2.0, 10), "p": ("passage", 0.5, 100), "s": ("proposition", 40.0, 10)},
        [("Q", "f"), ("Q", "p"), ("p", "s")],
    )
    frontier = solve_greedy(g, 110, "frontier")
    path = solve_greedy(g, 110, "path")
    assert set(frontier.selected) == {"Q", "f", "p"}
    assert frontier.objective == pytest.approx(2.5)
    assert path.selected == ["Q", "p", "s"]
    assert path.objective == pytest.approx(40.5)
    for sel in (frontier, path):
        helpers.assert_feasible(g, sel, 110)


def test_stops_when_nothing_fits_and_q_always_selected(helpers):
    g = helpers.build_graph({"a": ("passage", 9.0, 50)}, [("Q", "a")])
    for rule in ("frontier", "path"):
        sel = solve_greedy(g, 49, rule)
        assert sel.selected == ["Q"] and sel.objective == 0.0


def test_bad_rule_and_budget_raise(helpers):
    g = helpers.build_graph({"a": ("passage", 9.0, 50)}, [("Q", "a")])
    with pytest.raises(ValueError, match="rule"):
        solve_greedy(g, 10, "best")
    with pytest.raises(ValueError):
        solve_greedy(g, -5)


@pytest.mark.parametrize("rule", ["frontier", "path"])
def test_greedy_never_beats_optimal_ilp_on_random_graphs(helpers, rule):
    rng = helpers.rng(11)
    for _ in range(8):
        g = random_candidate_graph(30, rng)
        budget = int(rng.integers(60, 400))
        greedy = solve_greedy(g, budget, rule)
        exact = solve_ilp(g, budget, time_limit_ms=10_000)
        assert exact.status == "OPTIMAL"
        helpers.assert_feasible(g, greedy, budget)
        helpers.assert_feasible(g, exact, budget)
        assert greedy.objective <= exact.objective + 1e-6
        assert exact.objective <= greedy.bound + 1e-6  # the knapsack bound is valid


def test_greedy_on_tiny_random_graphs_is_feasible_and_bounded(helpers):
    rng = helpers.rng(3)
    for _ in range(20):
        g = helpers.random_small_graph(rng, n_others=7)
        budget = int(rng.integers(0, 80))
        best = helpers.brute_force_optimum(g, budget)
        for rule in ("frontier", "path"):
            sel = solve_greedy(g, budget, rule)
            helpers.assert_feasible(g, sel, budget)
            assert sel.objective <= best + 1e-9 <= sel.bound + 1e-6


def test_local_search_swap_hand_example(helpers):
    # path rule: a (ratio .5) first, then b does not fit; the only better answer
    # swaps a for the connector c and the high-weight s behind it
    g = helpers.build_graph(
        {"a": ("proposition", 10.0, 20), "c": ("proposition", 1.0, 20), "s": ("proposition", 12.0, 10)},
        [("Q", "a"), ("Q", "c"), ("c", "s")],
    )
    assert solve_greedy(g, 30, "path").selected == ["Q", "a"]
    sel = solve_greedy(g, 30, "path+ls")
    assert set(sel.selected) == {"Q", "c", "s"}
    assert sel.objective == pytest.approx(13.0) == helpers.brute_force_optimum(g, 30)
    assert sel.note == "rule=path+ls"
    helpers.assert_feasible(g, sel, 30)


@pytest.mark.parametrize("rule", ["frontier", "path"])
def test_local_search_never_worse_and_never_above_brute_force(helpers, rule):
    rng = helpers.rng(7)
    improved = 0
    for _ in range(25):
        g = helpers.random_small_graph(rng, n_others=9, p_edge=0.3)
        budget = int(rng.integers(10, 80))
        base = solve_greedy(g, budget, rule)
        local = solve_greedy(g, budget, f"{rule}+ls")
        best = helpers.brute_force_optimum(g, budget)
        helpers.assert_feasible(g, local, budget)
        assert base.objective - 1e-9 <= local.objective <= best + 1e-9
        improved += local.objective > base.objective + 1e-9
    assert improved > 0  # the local search does find better answers on these graphs


def test_path_rule_extends_a_given_start(helpers):
    from pathweave.selection.greedy import path_greedy_order

    g = helpers.hand_graph()
    # from {Q, p1} with 80 tokens: 30 left; s1 (3/10) then e1 (1/2), then s2 does not fit
    assert path_greedy_order(g, 80, ["Q", "p1"]) == ["Q", "p1", "s1", "e1"]


def test_heavy_start_fixes_the_knapsack_failure_of_the_ratio_rule(helpers):
    # ratios a .3 > h .29 > b .25: the path rule takes a, then h no longer fits,
    # then b (5.5); no single drop-and-refill frees room for h; starting from h gives 5.8
    g = helpers.build_graph(
        {"a": ("proposition", 3.0, 10), "b": ("proposition", 2.5, 10), "h": ("passage", 5.8, 20)},
        [("Q", "a"), ("Q", "b"), ("Q", "h")],
    )
    assert set(solve_greedy(g, 20, "path").selected) == {"Q", "a", "b"}
    sel = solve_greedy(g, 20, "path+ls")
    assert sel.selected == ["Q", "h"]
    assert sel.objective == pytest.approx(5.8) == helpers.brute_force_optimum(g, 20)
