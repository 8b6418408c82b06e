"""Exact CP-SAT selection: hand-computed optima, true connectivity, budgets."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from pathweave.selection import solve_ilp
from pathweave.selection import ilp as ilp_module

FORMULATIONS = ["order", "flow", "cuts"]


def pair_graph(helpers):
    """Q - a (cost 100, w 0) - b (w 10) - c (w 10); Q - d (w 3, cost 5).

    b and c are adjacent to each other (and b to a); with budget 25 the seed
    paper's rule (every selected v != Q has a selected neighbour) accepts the
    disconnected pair {b, c} (objective 20); truly connected optimum is {Q, d}.
    """
    spec = {
        "a": ("entity", 0.0, 100),
        "b": ("proposition", 10.0, 10),
        "c": ("proposition", 10.0, 10),
        "d": ("passage", 3.0, 5),
    }
    return helpers.build_graph(spec, [("Q", "a"), ("a", "b"), ("b", "c"), ("Q", "d")])


def seed_paper_model_choice(graph, budget):
    """The seed paper's model (neighbour rule only), solved with CP-SAT."""
    model = cp_model.CpModel()
    x = {n.id: model.new_bool_var(n.id) for n in graph.nodes}
    model.add(x[graph.query_id] == 1)
    model.add(sum(n.cost * x[n.id] for n in graph.nodes) <= budget)
    adj = graph.adjacency()
    for v in x:
        if v != graph.query_id:
            model.add(sum(x[u] for u in adj[v]) >= x[v])
    model.maximize(sum(round(n.weight * 1e6) * x[n.id] for n in graph.nodes))
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL
    return {v for v in x if solver.boolean_value(x[v])}


@pytest.mark.parametrize("connectivity", FORMULATIONS)
def test_true_connectivity_rejects_disconnected_pair(helpers, connectivity):
    g = pair_graph(helpers)
    seed_choice = seed_paper_model_choice(g, 25)
    assert {"b", "c"} <= seed_choice and not g.is_connected(seed_choice)

    sel = solve_ilp(g, 25, time_limit_ms=5000, connectivity=connectivity)
    assert sel.status == "OPTIMAL" and sel.optimal
    assert set(sel.selected) == {"Q", "d"}
    assert sel.objective == pytest.approx(3.0)
    assert sel.gap == 0.0
    helpers.assert_feasible(g, sel, 25)

    # with room for the connector the pair becomes reachable: a + b + c + d
    sel = solve_ilp(g, 125, time_limit_ms=5000, connectivity=connectivity)
    assert set(sel.selected) == {"Q", "a", "b", "c", "d"}
    assert sel.objective == pytest.approx(23.0)
    assert sel.tokens_used == 125


def hand_graph(helpers):
    return helpers.hand_graph()


@pytest.mark.parametrize("connectivity", FORMULATIONS)
@pytest.mark.parametrize(
    ("budget", "expected", "objective"),
    [
        (0, {"Q"}, 0.0),
        (29, {"Q"}, 0.0),  # nothing reachable fits
        (30, {"Q", "p2"}, 4.0),
        (52, {"Q", "p2", "s2", "e1"}, 11.0),
        (80, {"Q", "p2", "s2", "e1", "s1"}, 14.0),  # s1 reached through e1, not p1
        (112, {"Q", "p1", "p2", "s1", "s2", "e1"}, 19.0),
    ],
)
def test_hand_computed_optima(helpers, connectivity, budget, expected, objective):
    g = hand_graph(helpers)
    sel = solve_ilp(g, budget, time_limit_ms=5000, connectivity=connectivity)
    assert sel.status == "OPTIMAL"
    assert set(sel.selected) == expected
    assert sel.objective == pytest.approx(objective)
    assert sel.budget == budget
    helpers.assert_feasible(g, sel, budget)


@pytest.mark.parametrize("connectivity", FORMULATIONS)
def test_matches_brute_force_on_random_small_graphs(helpers, connectivity):
    rng = helpers.rng(7)
    for _ in range(15):
        g = helpers.random_small_graph(rng, n_others=8)
        budget = int(rng.integers(10, 90))
        sel = solve_ilp(g, budget, time_limit_ms=5000, connectivity=connectivity)
        assert sel.status == "OPTIMAL"
        helpers.assert_feasible(g, sel, budget)
        assert sel.objective == pytest.approx(helpers.brute_force_optimum(g, budget), abs=1e-5)


def test_zero_weight_connectors_not_wasted(helpers):
    # z0 is a useless zero-weight leaf; it must not be returned even if it fits
    g = helpers.build_graph(
        {"a": ("proposition", 2.0, 5), "z0": ("entity", 0.0, 3)}, [("Q", "a"), ("a", "z0")]
    )
    sel = solve_ilp(g, 100, time_limit_ms=5000)
    assert set(sel.selected) == {"Q", "a"}


def test_query_cost_over_budget_and_negative_budget_raise(helpers):
    g = helpers.build_graph({"Q": ("query", 0.0, 12), "a": ("entity", 1.0, 1)}, [("Q", "a")])
    with pytest.raises(ValueError, match="exceeds the budget"):
        solve_ilp(g, 11)
    with pytest.raises(ValueError, match=">= 0"):
        solve_ilp(g, -1)
    sel = solve_ilp(g, 12)  # exactly Q's cost: {Q}
    assert sel.selected == ["Q"] and sel.tokens_used == 12


def test_bad_connectivity_and_infeasible_hint_raise(helpers):
    g = hand_graph(helpers)
    with pytest.raises(ValueError, match="connectivity"):
        solve_ilp(g, 80, connectivity="tree")
    with pytest.raises(ValueError, match="connected"):
        solve_ilp(g, 80, hint=["Q", "s1"])
    with pytest.raises(ValueError, match="budget"):
        solve_ilp(g, 70, hint=["Q", "p1", "p2"])


@pytest.mark.parametrize("connectivity", FORMULATIONS)
def test_hint_is_used_and_solution_not_worse(helpers, connectivity):
    g = hand_graph(helpers)
    sel = solve_ilp(g, 80, time_limit_ms=5000, hint=["Q", "p1", "s1"], connectivity=connectivity)
    assert sel.status == "OPTIMAL" and sel.objective == pytest.approx(14.0)


def test_fallback_when_cp_sat_finds_nothing(helpers, monkeypatch):
    """CP-SAT returning UNKNOWN (time limit hit in presolve) yields {Q} or the hint."""
    g = hand_graph(helpers)
    monkeypatch.setattr(ilp_module.cp_model.CpSolver, "solve",
                        lambda self, model, *a, **k: cp_model.UNKNOWN)
    sel = solve_ilp(g, 80)
    assert sel.status == "FALLBACK" and sel.selected == ["Q"] and not sel.optimal
    assert sel.bound >= 14.0  # knapsack bound stays valid
    sel = solve_ilp(g, 80, hint=["Q", "p2", "s2"])
    assert sel.status == "FALLBACK" and set(sel.selected) == {"Q", "p2", "s2"}
    helpers.assert_feasible(g, sel, 80)


@pytest.mark.parametrize("connectivity", FORMULATIONS)
def test_zero_cost_nodes_are_reduced_exactly(helpers, connectivity):
    """Free nodes (cost 0: entity connectors, passage coverage nodes) are folded into
    Q, cliques and coverage terms before CP-SAT; the optimum must not change."""
    from pathweave.selection.reduce import reduce_free_nodes

    rng = helpers.rng(11)
    for trial in range(12):
        g = helpers.random_small_graph(rng, n_others=9, p_edge=0.3)
        free = {n.id for n in g.nodes[1:] if n.kind == "entity" or (trial % 2 and n.kind == "passage")}
        g = g.model_copy(update={"nodes": [n.model_copy(update={"cost": 0}) if n.id in free else n
                                           for n in g.nodes]})
        g = type(g)(query_id=g.query_id, nodes=g.nodes, edges=g.edges)
        reduction = reduce_free_nodes(g)
        assert all(n.cost > 0 for n in reduction.core.nodes if n.id != "Q")
        for budget in (15, 40):
            sel = solve_ilp(g, budget, time_limit_ms=5000, connectivity=connectivity)
            assert sel.status == "OPTIMAL"
            helpers.assert_feasible(g, sel, budget)
            assert sel.objective == pytest.approx(helpers.brute_force_optimum(g, budget), abs=1e-5)


def hub_graph(helpers):
    """A statement group far from Q behind a free passage hub.

    ``P`` (passage coverage node, cost 0, weight 2) states ``s1`` and ``s2``
    (weight 4 each, cost 10); the only way to Q is ``s1 - c - Q`` through the
    connector statement ``c`` (weight 0.5, cost 12); ``d`` (weight 3, cost 9)
    hangs off Q. The reduction turns ``P`` into the clique ``s1 - s2`` plus a
    coverage term, so ``s1`` and ``s2`` satisfy the seed rule through each other.
    """
    spec = {
        "P": ("passage", 2.0, 0),
        "s1": ("proposition", 4.0, 10),
        "s2": ("proposition", 4.0, 10),
        "c": ("proposition", 0.5, 12),
        "d": ("proposition", 3.0, 9),
    }
    return helpers.build_graph(spec, [("P", "s1"), ("P", "s2"), ("s1", "c"), ("c", "Q"), ("Q", "d")])


@pytest.mark.parametrize("connectivity", FORMULATIONS)
@pytest.mark.parametrize("budget, expected, objective", [
    (20, {"Q", "d"}, 3.0),  # {s1, s2} (10 + coverage 2) fits but cannot reach Q
    (31, {"Q", "c", "s1", "P", "d"}, 9.5),  # 12 + 10 + 9 tokens; s2 would make 41
    (40, {"Q", "c", "s1", "s2", "P"}, 10.5),  # 32 tokens; d on top would make 41
    (41, {"Q", "c", "s1", "s2", "P", "d"}, 13.5),
])
def test_far_statement_group_needs_its_connector(helpers, connectivity, budget, expected, objective):
    g = hub_graph(helpers)
    sel = solve_ilp(g, budget, time_limit_ms=5000, connectivity=connectivity)
    assert sel.status == "OPTIMAL"
    assert sel.objective == pytest.approx(objective) == pytest.approx(helpers.brute_force_optimum(g, budget))
    assert set(sel.selected) == expected
    helpers.assert_feasible(g, sel, budget)


def test_group_separator_cut_demands_a_boundary_node(helpers):
    """The cut for the far group {s1, s2} of hub_graph: a selected s1 needs c (its
    only way out of the group); the cut must not forbid s1 when c is selected."""
    from pathweave.selection.reduce import reduce_free_nodes

    reduction = reduce_free_nodes(hub_graph(helpers))
    adj = reduction.core.adjacency()
    for c_value, feasible in ((0, False), (1, True)):
        model = cp_model.CpModel()
        x = {v: model.new_bool_var(v) for v in adj}
        ilp_module._add_group_separator_cuts(model, x, "Q", adj, reduction)
        model.add(x["s1"] == 1)
        model.add(x["s2"] == 1)
        model.add(x["c"] == c_value)
        status = cp_model.CpSolver().solve(model)
        assert (status in (cp_model.OPTIMAL, cp_model.FEASIBLE)) is feasible
