"""Exact token-budgeted connected selection with OR-Tools CP-SAT.

Common part (spec §5), over the nodes that can fit at all (cheapest path from
``Q`` within budget; all others are left out, i.e. fixed to 0):

* binary ``x_v``; maximize ``sum W(v) x_v`` with ``W(v) = round(w(v) * 1e6)``;
* budget: ``sum l(v) x_v <= L`` (tokens); ``x_Q = 1``;
* the seed paper's rule (a selected ``v != Q`` has a selected neighbour)
  admits disconnected pairs (two adjacent nodes far from ``Q``), so true
  connectivity to ``Q`` is enforced by one of two formulations
  (``connectivity=``); both imply the seed rule:

``"flow"`` (spec §5): single-commodity flow. Each undirected edge ``{u, v}``
gives arcs ``u->v`` and ``v->u`` with integer flow ``y in [0, M]``,
``y_uv <= M x_u`` and ``y_uv <= M x_v``; ``Q`` sends ``sum_{v != Q} x_v``
units and every other node keeps one (inflow - outflow = ``x_v``). The seed
rule is added as a redundant cut.

``"order"`` (default, faster in CP-SAT, see bench.py): every selected
``v != Q`` picks at least one selected parent arc ``z_uv`` (``z_uv => x_u``,
``x_v => OR_u z_uv``) and parents are strictly earlier in an integer order
``d`` (``z_uv => d_v >= d_u + 1``, ``Q`` is the root), which rules out
parent cycles, so every selected node has a path back to ``Q``
(Miller-Tucker-Zemlin-style ordering). A neighbour of ``Q`` is connected
whenever it is selected (``Q`` can be its parent), so it gets ``d_v = 1`` and
no parent arcs; only nodes two or more hops from ``Q`` choose parents.

Group separator cuts, used by both: a free component (a passage coverage node,
a shared entity; :mod:`~pathweave.selection.reduce`) becomes a clique over its
statements, so two of its statements away from ``Q`` satisfy the seed rule
through each other. For the members ``S`` of such a clique that are not
neighbours of ``Q``, every path from ``Q`` to a selected ``v in S`` leaves
``S`` through its boundary ``N(S)``, so ``x_v <= sum_{u in N(S)} x_u`` (the
node-separator inequality of the maximum-weight connected subgraph ILPs,
Alvarez-Miranda, Ljubic and Mutzel 2013). Redundant for integer solutions, these
strengthen CP-SAT's LP, which shortens the time to prove optimality on large candidate
graphs and lets more of them be proved within the time limit (figures in
docs/benchmarks-history.md, section "Figures moved from the code's docstrings").

Tightening used by both: ``M`` (flow capacity / largest order) is the most
non-query nodes that fit the budget (cheapest-first count), not ``|V| - 1``;
arcs into ``Q`` are omitted; ``d_v`` starts at the hop distance of ``v``; a
hint (e.g. the greedy selection) is completed to all variables (BFS tree of
the hint: flows = subtree sizes, order = depth) so CP-SAT starts from a full
feasible solution; presolve is kept light (:data:`SOLVER_PARAMS`).

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Literal

from ortools.sat.python import cp_model

from .bound import knapsack_bound, selectable_nodes
from .candidate import CandidateGraph
from .reduce import reduce_free_nodes
from .result import (
    Selection,
    check_budget,
    connected_order,
    make_selection,
    prune_zero_weight_leaves,
)

WEIGHT_SCALE = 1_000_000
"""Integer scale for weights in the CP-SAT objective (``round(w * 1e6)``)."""

Connectivity = Literal["flow", "order", "cuts"]

_MIN_SOLVER_SECONDS = 0.001

FINISH_RESERVE_MS = 4.0
"""Milliseconds of the time limit kept back from CP-SAT for mapping the solution
back (expansion, ordering, pruning), so the whole call stays within the limit."""

SOLVER_PARAMS: dict[str, int] = {
    "linearization_level": 2,
    "max_presolve_iterations": 1,
    "cp_model_probing_level": 0,
    "symmetry_level": 0,
}
"""Light presolve: on these small models the default presolve (3 rounds with
probing and symmetry detection) takes a large share of the default time limit, and
the light one reaches optimality sooner (``pathweave bench select``; docs/benchmarks-history.md)."""


def max_selectable_count(costs: Sequence[int], capacity: int) -> int:
    """Most items that fit ``capacity`` tokens (take cheapest first).

    Upper bound on how many non-query nodes any feasible selection holds,
    used as the flow capacity / order range ``M``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    count = 0
    for cost in sorted(costs):
        if cost > capacity:
            break
        capacity -= cost
        count += 1
    return count


def _hops(adj: dict[str, list[str]], root: str, allowed: set[str]) -> dict[str, int]:
    """BFS hop distance from ``root`` inside ``allowed``."""
    hops = {root: 0}
    queue = [root]
    for u in queue:
        for v in adj[u]:
            if v in allowed and v not in hops:
                hops[v] = hops[u] + 1
                queue.append(v)
    return hops


def _hint_tree(
    graph: CandidateGraph, hint: Sequence[str], budget_tokens: int
) -> tuple[dict[str, str], dict[str, int], dict[str, int]]:
    """BFS tree of a hint selection: ``(parent, depth, subtree_size)``.

    Raises:
        ValueError: the hint is not a connected selection containing ``Q``
            within the budget.
    """
    chosen = set(hint)
    if not graph.is_connected(chosen):
        raise ValueError("hint must be a connected selection containing the query node")
    if sum(graph.node(v).cost for v in chosen) > budget_tokens:
        raise ValueError("hint exceeds the token budget")
    adj = graph.adjacency()
    parent: dict[str, str] = {}
    depth = {graph.query_id: 0}
    queue = [graph.query_id]
    for u in queue:
        for v in adj[u]:
            if v in chosen and v not in depth:
                depth[v] = depth[u] + 1
                parent[v] = u
                queue.append(v)
    size = {v: 1 for v in queue}
    for v in reversed(queue[1:]):
        size[parent[v]] += size[v]
    return parent, depth, size


def solve_ilp(
    graph: CandidateGraph,
    budget_tokens: int,
    *,
    time_limit_ms: float = 50.0,
    num_workers: int = 1,
    hint: Sequence[str] | None = None,
    connectivity: Connectivity = "order",
    seed: int = 0,
) -> Selection:
    """Maximum-weight connected selection within a token budget via CP-SAT.

    Args:
        graph: Validated candidate graph.
        budget_tokens: Budget ``L`` in tokens.
        time_limit_ms: Wall-time limit in ms for the whole call; model building
            time is deducted from the CP-SAT ``max_time_in_seconds`` (which is
            at least 1 ms).
        num_workers: CP-SAT ``num_workers``. 1 by default: on a small machine
            a single LP-based worker proved optimality faster than several
            workers on graphs of a few hundred nodes (bench.py; figures in
            docs/benchmarks-history.md).
        hint: Optional feasible selection (e.g. greedy's ``selected``), given
            to CP-SAT as a complete solution hint (``AddHint``, warm start).
        connectivity: ``"order"`` (default) or ``"flow"`` (see module doc);
            both enforce true connectivity to ``Q``.
        seed: CP-SAT ``random_seed``.

    Returns:
        :class:`Selection` with ``method="ilp"``; ``status`` is
        ``"OPTIMAL"``/``"FEASIBLE"`` (best incumbent found in the limit) or
        ``"FALLBACK"`` (no solution in the limit, typically because presolve
        did not finish: the hint if given, else ``{Q}`` alone).
        ``objective``/``bound`` are in original weight units, ``bound`` is the
        smaller of the CP-SAT bound and the knapsack bound, ``solve_ms`` is
        the wall time of the call in ms. Zero-weight leaves the solver left
        in are pruned (objective unchanged).

    Raises:
        ValueError: ``budget_tokens < 0``, ``l(Q) > budget_tokens``, an
            unknown ``connectivity``, or an infeasible ``hint``.
        RuntimeError: CP-SAT reports an invalid model (a bug).

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """
    start = time.perf_counter()
    check_budget(graph, budget_tokens)
    if connectivity not in ("flow", "order", "cuts"):
        raise ValueError(f"connectivity must be 'flow', 'order' or 'cuts', got {connectivity!r}")
    original = graph
    reduction = reduce_free_nodes(graph)
    graph = reduction.core  # zero-cost nodes folded into Q, cliques and coverage terms
    tree = None
    if hint is not None:
        _hint_tree(original, hint, budget_tokens)  # validates the hint on the caller's graph
        core_ids = graph.node_map()
        tree = _hint_tree(graph, [v for v in hint if v in core_ids], budget_tokens)
        hint = [v for v in hint if v in core_ids]
    nodes = graph.node_map()
    q = graph.query_id
    allowed = selectable_nodes(graph, budget_tokens)
    ids = [n.id for n in graph.nodes if n.id in allowed]
    others = [v for v in ids if v != q]
    big_m = max(1, max_selectable_count(
        [nodes[v].cost for v in others], budget_tokens - graph.query.cost
    ))
    adj = graph.adjacency()
    arcs = [
        (a, b)
        for u, v in graph.unique_edges()
        if u in allowed and v in allowed
        for a, b in ((u, v), (v, u))
        if b != q  # arcs into Q can only close cycles
    ]

    model = cp_model.CpModel()
    x = {v: model.new_bool_var(f"x[{v}]") for v in ids}
    xs = [x[v] for v in ids]
    model.add(x[q] == 1)
    model.add(cp_model.LinearExpr.weighted_sum(xs, [nodes[v].cost for v in ids]) <= budget_tokens)
    hint_vars: list = []
    hint_values: list[int] = []
    if tree is not None:
        hinted = set(hint)
        hint_vars += xs
        hint_values += [int(v in hinted) for v in ids]
    _add_group_separator_cuts(model, x, q, adj, reduction)
    if connectivity == "flow":
        for v in others:  # seed paper's neighbour rule; redundant with the flow
            _add_separator_cut(model, x, adj, {v})
        _add_flow(model, x, q, others, arcs, big_m, tree, hint_vars, hint_values)
    elif connectivity == "order":  # parent arcs imply the neighbour rule
        hops = _hops(adj, q, allowed)
        _add_order(model, x, q, others, arcs, big_m, hops, tree, hint_vars, hint_values)
    else:  # "cuts": the neighbour rule now, connectivity cuts when a solution needs them
        for v in others:
            _add_separator_cut(model, x, adj, {v})
    terms, coefficients = list(xs), [round(nodes[v].weight * WEIGHT_SCALE) for v in ids]
    for component in reduction.components:  # earned when a neighbour is selected
        touching = [x[u] for u in component.neighbours if u in x]
        if touching and component.weight > 0:
            covered = model.new_bool_var(f"c[{min(component.nodes)}]")
            model.add_bool_or(touching).only_enforce_if(covered)
            terms.append(covered)
            coefficients.append(round(component.weight * WEIGHT_SCALE))
            if tree is not None:
                hint_vars.append(covered)
                hint_values.append(int(any(u in tree[1] for u in component.neighbours)))
    model.maximize(cp_model.LinearExpr.weighted_sum(terms, coefficients))
    if hint_vars:  # bulk form of model.add_hint(var, value)
        model.model_proto.solution_hint.vars.extend([var.index for var in hint_vars])
        model.model_proto.solution_hint.values.extend(hint_values)

    def solve_once(hinted: set[str] | None = None) -> tuple[cp_model.CpSolver, int]:
        if hinted is not None:
            model.clear_hints()
            for v in ids:
                model.add_hint(x[v], v in hinted)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(
            _MIN_SOLVER_SECONDS, (time_limit_ms - FINISH_RESERVE_MS) / 1000.0 - (time.perf_counter() - start)
        )
        solver.parameters.num_workers = num_workers
        solver.parameters.random_seed = seed
        for name, value in SOLVER_PARAMS.items():
            setattr(solver.parameters, name, value)
        return solver, solver.solve(model)

    if connectivity == "cuts":
        chosen_core, code, upper = _solve_with_cuts(model, x, graph, solve_once, start, time_limit_ms,
                                                    set(hint) if hint is not None else None)
    else:
        solver, code = solve_once()
        chosen_core = [v for v in ids if solver.boolean_value(x[v])] if code in (
            cp_model.OPTIMAL, cp_model.FEASIBLE) else None
        upper = solver.best_objective_bound if chosen_core is not None else math.inf

    graph = original
    knap = knapsack_bound(graph, budget_tokens, selectable_nodes(graph, budget_tokens))
    if code == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the selection model: {model.validate()}")
    if chosen_core is not None:
        chosen = reduction.expand(chosen_core)
        order = prune_zero_weight_leaves(graph, connected_order(graph, chosen))
        if code == cp_model.OPTIMAL:
            status, bound, optimal = "OPTIMAL", 0.0, True  # bound lifted to objective
        else:
            status, optimal = "FEASIBLE", None
            bound = min(upper / WEIGHT_SCALE + reduction.root_weight, knap)
    else:  # UNKNOWN in the limit (INFEASIBLE is impossible once l(Q) <= L)
        status, bound, optimal = "FALLBACK", knap, None
        order = [q]
        if hint is not None:
            order = prune_zero_weight_leaves(graph, connected_order(graph, reduction.expand(hint)))
    return make_selection(
        graph,
        order,
        method="ilp",
        status=status,
        bound=bound,
        budget=budget_tokens,
        solve_ms=(time.perf_counter() - start) * 1000.0,
        optimal=optimal,
    )


def _add_flow(model, x, q, others, arcs, big_m, tree, hint_vars, hint_values) -> None:
    """Single-commodity flow connectivity (see module doc); hints flows."""
    inflow: dict[str, list] = {v: [] for v in x}
    outflow: dict[str, list] = {v: [] for v in x}
    for a, b in arcs:
        y = model.new_int_var(0, big_m, f"y[{a}->{b}]")
        model.add(y <= big_m * x[a])
        model.add(y <= big_m * x[b])
        outflow[a].append(y)
        inflow[b].append(y)
        if tree is not None:
            parent, _, size = tree
            hint_vars.append(y)
            hint_values.append(size[b] if parent.get(b) == a else 0)
    total = cp_model.LinearExpr.sum([x[v] for v in others])
    model.add(cp_model.LinearExpr.sum(outflow[q]) == total)
    for v in others:
        model.add(
            cp_model.LinearExpr.sum(inflow[v]) - cp_model.LinearExpr.sum(outflow[v]) == x[v]
        )


def _add_separator_cut(model, x, adj, group: set[str]) -> None:
    """Node-separator inequality for a node set ``S`` without ``Q``: a selected
    ``v in S`` reaches ``Q`` through the boundary ``N(S)``, so ``x_v => OR(x_u : u in
    N(S))`` (only nodes in the model). ``S = {v}`` is the seed paper's neighbour rule."""
    boundary = [x[u] for u in sorted({u for v in group for u in adj[v]} - group) if u in x]
    for v in sorted(group):
        model.add_bool_or(boundary).only_enforce_if(x[v])


def _add_group_separator_cuts(model, x, q, adj, reduction) -> None:
    """Separator cuts for the cliques of free components (see module doc): ``S`` =
    the clique's members in the model that are not neighbours of ``Q`` (at least two)."""
    near = set(adj[q])
    for component in reduction.components:
        group = {u for u in component.neighbours if u in x and u not in near}
        if len(group) >= 2:
            _add_separator_cut(model, x, adj, group)


def _add_order(model, x, q, others, arcs, big_m, hops, tree, hint_vars, hint_values) -> None:
    """Parent-arc + MTZ order connectivity (see module doc); hints z and d.
    Neighbours of ``Q`` (``hops == 1``) get ``d = 1`` and no parent arcs."""
    d = {v: model.new_int_var(min(hops[v], big_m), big_m if hops[v] > 1 else 1, f"d[{v}]") for v in others}
    parents: dict[str, list] = {v: [] for v in others if hops[v] > 1}
    for a, b in arcs:
        if b not in parents:  # b is a neighbour of Q: Q is its parent
            continue
        z = model.new_bool_var(f"z[{a}->{b}]")
        model.add_implication(z, x[a])
        if a != q:
            model.add(d[b] >= d[a] + 1).only_enforce_if(z)
        parents[b].append(z)
        if tree is not None:
            hint_vars.append(z)
            hint_values.append(int(tree[0].get(b) == a))
    for v in others:
        if v in parents:
            model.add_bool_or(parents[v]).only_enforce_if(x[v])
        if tree is not None:
            hint_vars.append(d[v])
            hint_values.append(min(max(tree[1].get(v, hops[v]), hops[v]), big_m))


def _components(chosen: set[str], adj: dict[str, list[str]]) -> list[set[str]]:
    """Connected components of the subgraph induced by ``chosen``."""
    left, parts = set(chosen), []
    while left:
        part = {left.pop()}
        stack = list(part)
        while stack:
            for v in adj[stack.pop()]:
                if v in left:
                    left.discard(v)
                    part.add(v)
                    stack.append(v)
        parts.append(part)
    return parts


def _solve_with_cuts(
    model: cp_model.CpModel, x: dict, graph: CandidateGraph,
    solve_once: Callable[[set[str] | None], tuple[cp_model.CpSolver, int]],
    start: float, time_limit_ms: float, hint: set[str] | None,
) -> tuple[list[str] | None, int, float]:
    """Connectivity by cut generation: solve without it; while the solution has a
    component ``S`` away from ``Q``, add ``x_v => OR(x_u : u in N(S) \\ S)`` for every
    ``v`` in ``S`` (a selected ``v`` must reach ``Q`` through ``S``'s boundary), and solve
    again, warm-started from the best connected selection so far.

    An optimal relaxed solution that is connected is optimal; each relaxed optimum
    is an upper bound. Returns ``(core selection or None, CP-SAT status, upper
    bound in scaled units)``; on time-out the best connected selection found (the
    ``Q`` component of each relaxed solution, or the hint) with status FEASIBLE.
    """
    adj, q = graph.adjacency(), graph.query_id
    scaled = {v: round(graph.node(v).weight * WEIGHT_SCALE) for v in x}
    best, best_value = (sorted(hint), sum(scaled[v] for v in hint)) if hint else (None, -1)
    upper = math.inf
    hinted = set(hint) if hint else None
    while True:
        solver, code = solve_once(hinted)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return best, (cp_model.FEASIBLE if best is not None else code), upper
        upper = min(upper, solver.best_objective_bound)
        chosen = {v for v in x if solver.boolean_value(x[v])}
        parts = _components(chosen, adj)
        main = next(part for part in parts if q in part)
        if len(parts) == 1:
            if code == cp_model.OPTIMAL:
                return sorted(chosen), code, upper
            return sorted(chosen), cp_model.FEASIBLE, upper
        value = sum(scaled[v] for v in main)  # (coverage terms aside: a lower estimate)
        if value > best_value:
            best, best_value = sorted(main), value
        for part in parts:
            if part is not main:
                _add_separator_cut(model, x, adj, part)
        hinted = set(best) if best is not None else None
        if (time.perf_counter() - start) * 1000.0 >= time_limit_ms:
            return best, (cp_model.FEASIBLE if best is not None else cp_model.UNKNOWN), upper
