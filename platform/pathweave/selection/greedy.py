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

``"+ls"`` (either rule): a local search then drops one costly selected node
(with whatever loses its connection to ``Q`` without it) and refills the
freed budget with the path rule, keeping the first improving move, until no
move improves (:func:`improve_order`). ``"path+ls"`` first also restarts the
path rule from the cheapest path to each of the 5 heaviest nodes it left out
(:func:`path_multistart_order`; a ratio greedy can fill the budget with small
items and leave no room for one heavy node). On the synthetic benchmark
(:mod:`pathweave_bench.selection`, budget 400, 50-200 nodes) ``"path+ls"`` is
within 0.5-1.5 % of the optimum on average, the frontier rule 10-30 % below it.

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

GreedyRule = Literal["frontier", "path", "frontier+ls", "path+ls"]


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


def path_greedy_order(
    graph: CandidateGraph, budget_tokens: int, start: list[str] | None = None
) -> list[str]:
    """Ids picked by the path rule, in insertion order (``Q`` first).

    Keeps, for every unselected node, the cheapest path cost (tokens) from
    the selected set and that path's weight; distances only shrink as the set
    grows, so they are updated incrementally (Dijkstra from newly selected
    nodes, pruned at the remaining budget). Each step scans ``O(|V|)``
    candidates; ratio ties go to the larger gain, then the earlier node.

    ``start``: an initial connected selection containing ``Q`` (default
    ``[Q]``) that is extended (it is returned first, in its order). Assumes
    it fits ``budget_tokens``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    arrays = _arrays(graph)
    ids, index = arrays[0], arrays[1]
    start_ids = [index[v] for v in (start or [graph.query_id])]
    return [ids[i] for i in _path_extend(arrays, budget_tokens, start_ids)]


def _arrays(graph: CandidateGraph) -> tuple:
    """``(ids, index, cost, weight, adj)`` of ``graph`` as lists (hot loops)."""
    ids = [n.id for n in graph.nodes]
    index = {v: i for i, v in enumerate(ids)}
    adjacency = graph.adjacency()
    adj = [[index[u] for u in adjacency[v]] for v in ids]
    return ids, index, [n.cost for n in graph.nodes], [n.weight for n in graph.nodes], adj


def _path_extend(arrays: tuple, budget_tokens: int, start: list[int], banned: int = -1) -> list[int]:
    """Path rule on index arrays from the connected selection ``start``; node
    ``banned`` is never added."""
    _, _, cost, weight, adj = arrays
    n = len(cost)
    dist = [math.inf] * n
    gain = [0.0] * n
    prev = [-1] * n
    selected = [False] * n
    order = list(start)
    remaining = budget_tokens - sum(cost[i] for i in order)

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
                if selected[v] or v == banned:
                    continue
                nd = d + cost[v]
                if nd <= remaining and nd < dist[v]:
                    dist[v], gain[v], prev[v] = nd, gain[u] + weight[v], u
                    heapq.heappush(heap, (nd, v))

    add_sources(list(order))
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
    return order


HEAVY_STARTS = 5
"""Extra starts of the ``"path+ls"`` rule: the heaviest nodes the plain path rule left out."""


def path_multistart_order(graph: CandidateGraph, budget_tokens: int, heavy: int = HEAVY_STARTS) -> list[str]:
    """Best of the path rule from ``{Q}`` and from the cheapest ``Q``-path to each of
    the ``heavy`` highest-weight nodes the first answer left out (that fit).

    The ratio rule fills the budget with small items first and may leave no room
    for a heavy, slightly lower-ratio node (the classic knapsack greedy failure);
    starting from it repairs that. ``heavy + 1`` path-rule runs, ids in
    insertion order (``Q`` first); ties keep the earlier start.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    arrays = _arrays(graph)
    ids, index, cost, weight, adj = arrays
    q = index[graph.query_id]
    best = _path_extend(arrays, budget_tokens, [q])
    best_value = sum(weight[i] for i in best)
    taken = set(best)
    # cheapest path (node costs, Q included) from Q to every node within the budget
    dist, prev = {q: cost[q]}, {}
    heap = [(cost[q], q)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v in adj[u]:
            nd = d + cost[v]
            if nd <= budget_tokens and nd < dist.get(v, math.inf):
                dist[v], prev[v] = nd, u
                heapq.heappush(heap, (nd, v))
    targets = sorted((v for v in dist if v not in taken), key=lambda v: (-weight[v], v))[:heavy]
    for target in targets:
        path = [target]
        while path[-1] != q:
            path.append(prev[path[-1]])
        order = _path_extend(arrays, budget_tokens, path[::-1])
        value = sum(weight[i] for i in order)
        if value > best_value + 1e-9:
            best, best_value = order, value
    return [ids[i] for i in best]


def improve_order(
    graph: CandidateGraph, budget_tokens: int, order: list[str], max_rounds: int = 50
) -> list[str]:
    """Drop-and-refill local search on a connected selection (``"+ls"`` rules).

    A move drops one selected node ``r`` with ``l(r) > 0`` together with every
    selected node that loses its connection to ``Q`` without it, then refills
    the freed budget with the path rule (:func:`path_greedy_order` started from
    what is left, ``r`` excluded: a swap). The first move (nodes tried in increasing ``w/l`` order)
    that raises ``sum w`` by more than ``1e-9`` is applied, up to
    ``max_rounds`` times; the result is never worse than ``order``. One round
    costs at most ``|S|`` refills (``S`` the selection).

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    arrays = _arrays(graph)
    ids, index, cost, weight, adj = arrays
    q = index[graph.query_id]
    best = [index[v] for v in order]
    best_value = sum(weight[i] for i in best)
    for _ in range(max_rounds):
        chosen = set(best)
        movable = sorted((v for v in best if v != q and cost[v] > 0),
                         key=lambda v: (weight[v] / cost[v], ids[v]))
        for r in movable:
            kept, stack = [q], [q]  # Q's component once r is dropped, in BFS order
            seen = {q, r}
            while stack:
                for v in adj[stack.pop()]:
                    if v in chosen and v not in seen:
                        seen.add(v)
                        kept.append(v)
                        stack.append(v)
            candidate = _path_extend(arrays, budget_tokens, kept, banned=r)
            candidate_value = sum(weight[i] for i in candidate)
            if candidate_value > best_value + 1e-9:
                best, best_value = candidate, candidate_value
                break
        else:
            break
    return [ids[i] for i in best]


def solve_greedy(
    graph: CandidateGraph, budget_tokens: int, rule: GreedyRule = "frontier"
) -> Selection:
    """Greedy token-budgeted connected selection.

    Args:
        graph: Validated candidate graph.
        budget_tokens: Budget ``L`` in tokens.
        rule: ``"frontier"`` (spec §5) or ``"path"`` (lookahead extension),
            optionally followed by drop-and-refill local search
            (``"frontier+ls"``, ``"path+ls"``, :func:`improve_order`); see the
            module doc.

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
    base, _, search = rule.partition("+")
    if base not in ("frontier", "path") or search not in ("", "ls"):
        raise ValueError(f"rule must be 'frontier', 'path', 'frontier+ls' or 'path+ls', got {rule!r}")
    if base == "frontier":
        order = greedy_order(graph, budget_tokens)
    elif search:
        order = path_multistart_order(graph, budget_tokens)
    else:
        order = path_greedy_order(graph, budget_tokens)
    if search:
        order = improve_order(graph, budget_tokens, order)
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
