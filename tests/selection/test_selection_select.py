"""select(): method dispatch, auto policy, time limit on a large graph."""

from __future__ import annotations

import importlib
import time

import pytest

from pathweave.selection import select
from pathweave_bench.selection import random_candidate_graph
from pathweave.selection.result import make_selection
from pathweave.selection.select import AUTO_MAX_NODES

# the package re-exports the function ``select``, which shadows the module name
select_module = importlib.import_module("pathweave.selection.select")


@pytest.mark.parametrize("method", ["ilp", "greedy", "auto"])
def test_methods_feasible_on_small_graph(helpers, method):
    rng = helpers.rng(5)
    g = random_candidate_graph(40, rng)
    sel = select(g, 300, method=method, time_limit_ms=2000)
    helpers.assert_feasible(g, sel, 300)
    assert sel.requested == method
    assert sel.budget == 300
    assert sel.solve_ms > 0
    if method == "greedy":
        assert sel.method == "greedy" and sel.note in ("greedy: rule=frontier", "greedy: rule=path+ls")
        both = [select_module.solve_greedy(g, 300, rule).objective for rule in ("frontier", "path")]
        assert sel.objective == pytest.approx(max(both))
    if method == "ilp":
        assert sel.method == "ilp" and sel.status == "OPTIMAL" and sel.optimal


def test_auto_is_at_least_as_good_as_greedy_and_ilp_on_small_graphs(helpers):
    rng = helpers.rng(9)
    for _ in range(5):
        g = random_candidate_graph(40, rng)
        auto = select(g, 400, time_limit_ms=2000)
        greedy = select(g, 400, method="greedy")
        exact = select(g, 400, method="ilp", time_limit_ms=2000)
        assert auto.objective >= greedy.objective - 1e-9
        assert auto.objective == pytest.approx(exact.objective)
        assert auto.note.startswith(("ilp:", "greedy:"))


def test_auto_uses_greedy_above_threshold(helpers):
    g = random_candidate_graph(AUTO_MAX_NODES + 50, helpers.rng(1))
    sel = select(g, 400)
    assert sel.method == "greedy" and sel.requested == "auto"
    assert "above auto threshold" in sel.note
    helpers.assert_feasible(g, sel, 400)


def test_auto_prefers_greedy_over_worse_ilp_incumbent(helpers, monkeypatch):
    g = random_candidate_graph(30, helpers.rng(2))

    def weak_ilp(graph, budget, **kwargs):  # a time-limited incumbent worse than greedy
        return make_selection(graph, [graph.query_id], method="ilp", status="FEASIBLE",
                              bound=1e9, budget=budget, solve_ms=1.0)

    monkeypatch.setattr(select_module, "solve_ilp", weak_ilp)
    sel = select(g, 400)
    assert sel.method == "greedy" and "better than the ilp incumbent" in sel.note
    assert sel.objective > 0
    helpers.assert_feasible(g, sel, 400)

    def no_solution(graph, budget, **kwargs):
        return make_selection(graph, [graph.query_id], method="ilp", status="FALLBACK",
                              bound=1e9, budget=budget, solve_ms=1.0)

    monkeypatch.setattr(select_module, "solve_ilp", no_solution)
    sel = select(g, 400)
    assert sel.method == "greedy" and "FALLBACK" in sel.note


def test_time_limit_respected_on_large_graph(helpers):
    g = random_candidate_graph(400, helpers.rng(4))
    for method in ("ilp", "auto"):
        start = time.perf_counter()
        sel = select(g, 400, method=method, time_limit_ms=20)
        wall_ms = (time.perf_counter() - start) * 1000
        assert wall_ms < 20 + 1000  # generous slack: no tight timing asserts
        assert sel.status in ("OPTIMAL", "FEASIBLE", "FALLBACK", "HEURISTIC")
        helpers.assert_feasible(g, sel, 400)
        assert sel.objective > 0


def test_invalid_arguments_raise(helpers):
    g = helpers.build_graph({"Q": ("query", 0.0, 10), "a": ("entity", 1.0, 1)}, [("Q", "a")])
    with pytest.raises(ValueError, match="method"):
        select(g, 100, method="lp")
    with pytest.raises(ValueError, match="exceeds the budget"):
        select(g, 5)
