"""Greedy connected selection heuristic.

Start from ``Q``; repeatedly add the frontier node (a neighbour of the
selected set) with the best ``w(v) / max(l(v), 1)`` that fits the remaining
budget; stop when no frontier node fits.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import heapq
import time

from .bound import knapsack_bound
from .candidate import CandidateGraph
from .result import Selection, check_budget, make_selection, prune_zero_weight_leaves


def greedy_order(graph: CandidateGraph, budget_tokens: int) -> list[str]:
    """Ids picked by the greedy rule, in insertion order (``Q`` first).

    Ratio ties are broken by higher weight, then lower cost, then id. Because
    the remaining budget only shrinks, a frontier node that does not fit now
    never fits later and is discarded, so a lazy max-heap gives
    ``O(|E| log |V|)``. Assumes ``l(Q) <= budget_tokens``.
    """
    adj = graph.adjacency()
    remaining = budget_tokens - graph.query.cost
    order = [graph.query_id]
    seen = {graph.query_id}
    heap: list[tuple[float, float, int, str]] = []

    def push_neighbours(u: str) -> None:
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                node = graph.node(v)
                ratio = node.weight / max(node.cost, 1)
                heapq.heappush(heap, (-ratio, -node.weight, node.cost, v))

    push_neighbours(graph.query_id)
    while heap:
        _, _, cost, v = heapq.heappop(heap)
        if cost > remaining:
            continue
        remaining -= cost
        order.append(v)
        push_neighbours(v)
    return order


def solve_greedy(graph: CandidateGraph, budget_tokens: int) -> Selection:
    """Greedy token-budgeted connected selection.

    Args:
        graph: Validated candidate graph.
        budget_tokens: Budget ``L`` in tokens.

    Returns:
        :class:`Selection` with ``method="greedy"``, ``status="HEURISTIC"``,
        ids in insertion order (zero-weight leaves that were added only because
        budget was left are pruned), ``bound`` = reachability fractional
        knapsack bound (:func:`~pathweave.selection.bound.knapsack_bound`),
        ``solve_ms`` = wall time in ms.

    Raises:
        ValueError: ``budget_tokens < 0`` or ``l(Q) > budget_tokens``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """
    start = time.perf_counter()
    check_budget(graph, budget_tokens)
    order = greedy_order(graph, budget_tokens)
    order = prune_zero_weight_leaves(graph, order)
    bound = knapsack_bound(graph, budget_tokens)
    return make_selection(
        graph,
        order,
        method="greedy",
        status="HEURISTIC",
        bound=bound,
        budget=budget_tokens,
        solve_ms=(time.perf_counter() - start) * 1000.0,
    )
