"""Greedy connected selection heuristics.

``"frontier"`` (spec §5): start from ``Q``; repeatedly add the frontier node
(a neighbour of the selected set) with the best ``w(v) / max(l(v), 1)`` that
fits the remaining budget; stop when no frontier node fits.

``"path"`` (lookahead extension): the frontier rule never pays for a
low-ratio connector (e.g. a long passage) to reach good nodes behind it. The
path rule instead considers, for every unselected node ``v``, the cheapest
connecting path from the selected set to ``v`` (node costs, Dijkstra) and adds
the whole path with the best ``gain / max(cost, 1)`` that fits, where gain and
cost are summed over the path's new nodes. A one-node path is a frontier
node, so the rule generalizes the frontier rule.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Literal

from .bound import knapsack_bound
from .candidate import CandidateGraph
from .result import Selection, check_budget, make_selection, prune_zero_weight_leaves

GreedyRule = Literal["frontier", "path"]


def greedy_order(graph: CandidateGraph, budget_tokens: int) -> list[str]:
    """Ids picked by the frontier rule, in insertion order (``Q`` first).

    Ratio ties are broken by higher weight, then lower cost, then id. Because
    the remaining budget only shrinks, a frontier node that does not fit now
    never fits later and is discarded, so a lazy max-heap gives
    ``O(|E| log |V|)``. Assumes ``l(Q) <= budget_tokens``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    adj = graph.adjacency()
    nodes = graph.node_map()
    remaining = budget_tokens - graph.query.cost
    order = [graph.query_id]
    seen = {graph.query_id}
    heap: list[tuple[float, float, int, str]] = []

    def push_neighbours(u: str) -> None:
        for v in adj[u]:
            if v not in seen:
                seen.add(v)
                node = nodes[v]
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


def path_greedy_order(graph: CandidateGraph, budget_tokens: int) -> list[str]:
    """Ids picked by the path rule, in insertion order (``Q`` first).

    Keeps, for every unselected node, the cheapest path cost (tokens) from
    the selected set and that path's weight; distances only shrink as the set
    grows, so they are updated incrementally (Dijkstra from newly selected
    nodes, pruned at the remaining budget). Each step scans ``O(|V|)``
    candidates; ratio ties go to the larger gain, then the earlier node.
    Assumes ``l(Q) <= budget_tokens``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    ids = [n.id for n in graph.nodes]
    index = {v: i for i, v in enumerate(ids)}
    cost = [n.cost for n in graph.nodes]
    weight = [n.weight for n in graph.nodes]
    adjacency = graph.adjacency()
    adj = [[index[u] for u in adjacency[v]] for v in ids]
    n = len(ids)
    dist = [math.inf] * n
    gain = [0.0] * n
    prev = [-1] * n
    selected = [False] * n
    q = index[graph.query_id]
    remaining = budget_tokens - cost[q]
    order = [q]

    def add_sources(new: list[int]) -> None:
        heap = []
        for s in new:
            selected[s] = True
            dist[s], gain[s], prev[s] = 0, 0.0, -1
            heap.append((0, s))
        heapq.heapify(heap)
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for v in adj[u]:
                if selected[v]:
                    continue
                nd = d + cost[v]
                if nd <= remaining and nd < dist[v]:
                    dist[v], gain[v], prev[v] = nd, gain[u] + weight[v], u
                    heapq.heappush(heap, (nd, v))

    add_sources([q])
    while True:
        best, best_key = -1, (-1.0, -1.0)
        for v in range(n):
            if not selected[v] and dist[v] <= remaining:
                key = (gain[v] / max(dist[v], 1), gain[v])
                if key > best_key:
                    best, best_key = v, key
        if best < 0:
            break
        path = []
        u = best
        while not selected[u]:
            path.append(u)
            u = prev[u]
        path.reverse()
        remaining -= dist[best]
        order.extend(path)
        add_sources(path)
    return [ids[i] for i in order]


def solve_greedy(
    graph: CandidateGraph, budget_tokens: int, rule: GreedyRule = "frontier"
) -> Selection:
    """Greedy token-budgeted connected selection.

    Args:
        graph: Validated candidate graph.
        budget_tokens: Budget ``L`` in tokens.
        rule: ``"frontier"`` (spec §5) or ``"path"`` (lookahead extension);
            see the module doc.

    Returns:
        :class:`Selection` with ``method="greedy"``, ``status="HEURISTIC"``,
        ids in insertion order (zero-weight leaves that were added only because
        budget was left are pruned), ``bound`` = reachability fractional
        knapsack bound (:func:`~pathweave.selection.bound.knapsack_bound`),
        ``solve_ms`` = wall time in ms, ``note`` = ``"rule=<rule>"``.

    Raises:
        ValueError: ``budget_tokens < 0``, ``l(Q) > budget_tokens`` or an
            unknown ``rule``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """
    start = time.perf_counter()
    check_budget(graph, budget_tokens)
    if rule == "frontier":
        order = greedy_order(graph, budget_tokens)
    elif rule == "path":
        order = path_greedy_order(graph, budget_tokens)
    else:
        raise ValueError(f"rule must be 'frontier' or 'path', got {rule!r}")
    order = prune_zero_weight_leaves(graph, order)
    return make_selection(
        graph,
        order,
        method="greedy",
        status="HEURISTIC",
        bound=knapsack_bound(graph, budget_tokens),
        budget=budget_tokens,
        solve_ms=(time.perf_counter() - start) * 1000.0,
        note=f"rule={rule}",
    )
