"""Cheap upper bound on the optimal selection objective.

Relaxes connectivity to reachability: a node ``v`` can only be selected if the
cheapest path from ``Q`` to ``v`` fits the budget (``path_costs()[v] <= L``).
Over those nodes, the fractional knapsack with capacity ``L - l(Q)`` is an
upper bound on ``max sum w(v) x_v``. Used as the greedy's bound and to cap
the CP-SAT bound.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

from .candidate import CandidateGraph


def selectable_nodes(graph: CandidateGraph, budget_tokens: int) -> set[str]:
    """Ids (``Q`` included) whose cheapest path from ``Q`` costs ``<= budget_tokens``.

    Any other node cannot belong to a connected selection within the budget.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    return {v for v, d in graph.path_costs().items() if d <= budget_tokens}


def knapsack_bound(
    graph: CandidateGraph, budget_tokens: int, selectable: set[str] | None = None
) -> float:
    """Upper bound on the optimal objective (original weight units).

    ``w(Q)`` plus the fractional-knapsack value of the selectable non-query
    nodes with capacity ``budget_tokens - l(Q)`` tokens. ``O(|V| log |V|)``.
    Returns ``w(Q)`` alone when nothing else is selectable; assumes
    ``l(Q) <= budget_tokens`` (checked by the callers). ``selectable`` may pass
    a precomputed :func:`selectable_nodes` result.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    capacity = float(budget_tokens - graph.query.cost)
    total = graph.query.weight
    items = []
    if selectable is None:
        selectable = selectable_nodes(graph, budget_tokens)
    for v in selectable:
        if v == graph.query_id:
            continue
        node = graph.node(v)
        if node.weight <= 0:
            continue
        if node.cost == 0:
            total += node.weight
        else:
            items.append((node.weight / node.cost, node.weight, node.cost))
    items.sort(reverse=True)
    for ratio, weight, cost in items:
        if capacity <= 0:
            break
        if cost <= capacity:
            total += weight
            capacity -= cost
        else:
            total += ratio * capacity
            capacity = 0.0
    return total
