"""Result type shared by the ILP and greedy selectors.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .candidate import CandidateGraph

Status = Literal["OPTIMAL", "FEASIBLE", "FALLBACK", "HEURISTIC"]


class Selection(BaseModel):
    """A connected, budget-feasible node selection containing ``Q``.

    Attributes:
        method: Selector that produced it, ``"ilp"`` or ``"greedy"``.
        requested: Method asked of :func:`~pathweave.selection.select.select`
            (``"ilp"``, ``"greedy"`` or ``"auto"``).
        status: ``"OPTIMAL"``/``"FEASIBLE"`` (CP-SAT status), ``"FALLBACK"``
            (CP-SAT found nothing in time; the hint or ``{Q}`` returned) or
            ``"HEURISTIC"`` (greedy).
        selected: Selected node ids in selection order, ``Q`` first; every
            prefix is connected (greedy: insertion order; ILP: best-first
            traversal from ``Q``).
        objective: ``sum w(v)`` over ``selected`` (original weight units).
        bound: Valid upper bound on the optimal objective (same units).
        gap: ``(bound - objective) / max(bound, 1e-9)``, in ``[0, 1]``.
        tokens_used: ``sum l(v)`` over ``selected`` (tokens), ``<= budget``.
        budget: Token budget ``L`` (tokens).
        solve_ms: Wall time of the selector call in milliseconds (model
            building included).
        optimal: True iff the selection is proven optimal (``gap == 0``).
        note: Free text, e.g. why ``auto`` chose its method.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """

    model_config = ConfigDict(frozen=True)

    method: Literal["ilp", "greedy"]
    requested: Literal["ilp", "greedy", "auto"]
    status: Status
    selected: list[str]
    objective: float
    bound: float
    gap: float
    tokens_used: int
    budget: int
    solve_ms: float
    optimal: bool
    note: str = ""


def check_budget(graph: CandidateGraph, budget_tokens: int) -> None:
    """Validate the budget ``L`` (tokens).

    Raises:
        ValueError: ``budget_tokens < 0`` or ``cost(Q) > budget_tokens``
            (no feasible selection exists, since ``Q`` is always selected).

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    if budget_tokens < 0:
        raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
    if graph.query.cost > budget_tokens:
        raise ValueError(
            f"query node cost {graph.query.cost} tokens exceeds the budget of "
            f"{budget_tokens} tokens; no feasible selection exists"
        )


def prune_zero_weight_leaves(graph: CandidateGraph, order: list[str]) -> list[str]:
    """Drop selected zero-weight nodes that are not needed for connectivity.

    ``order`` must start with ``Q`` and be prefix-connected (each node adjacent
    to an earlier one). Each node's parent is its first earlier neighbour; in
    that tree, zero-weight leaves (never ``Q``) are removed repeatedly. The
    objective is unchanged, tokens can only decrease, and the returned list
    keeps the relative order and stays prefix-connected.

    Raises:
        ValueError: ``order`` does not start with ``Q`` or is not
            prefix-connected.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    adj = graph.adjacency()
    position = {v: i for i, v in enumerate(order)}
    parent: dict[str, str | None] = {}
    children = {v: 0 for v in order}
    for i, v in enumerate(order):
        if i == 0:
            if v != graph.query_id:
                raise ValueError(f"order must start with the query node, got {v!r}")
            parent[v] = None
            continue
        earlier = [u for u in adj[v] if position.get(u, i) < i]
        if not earlier:
            raise ValueError(f"order is not prefix-connected at node {v!r}")
        p = min(earlier, key=position.__getitem__)
        parent[v] = p
        children[p] += 1
    kept = set(order)
    stack = [v for v in order if children[v] == 0]
    while stack:
        v = stack.pop()
        if v == graph.query_id or graph.node(v).weight > 0:
            continue
        kept.discard(v)
        p = parent[v]
        children[p] -= 1
        if children[p] == 0:
            stack.append(p)
    return [v for v in order if v in kept]


def connected_order(graph: CandidateGraph, chosen: Iterable[str]) -> list[str]:
    """Order a connected set ``chosen`` (containing ``Q``) best-first from ``Q``.

    Repeatedly takes the highest-weight node adjacent to those already taken
    (ties: lower cost, then id), so every prefix is connected.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    chosen = set(chosen)
    adj = graph.adjacency()
    order: list[str] = []
    seen = {graph.query_id}
    heap = [(0.0, 0, graph.query_id)]
    while heap:
        _, _, u = heapq.heappop(heap)
        order.append(u)
        for v in adj[u]:
            if v in chosen and v not in seen:
                seen.add(v)
                node = graph.node(v)
                heapq.heappush(heap, (-node.weight, node.cost, v))
    return order


def make_selection(
    graph: CandidateGraph,
    order: list[str],
    *,
    method: Literal["ilp", "greedy"],
    status: Status,
    bound: float,
    budget: int,
    solve_ms: float,
    requested: Literal["ilp", "greedy", "auto"] | None = None,
    optimal: bool | None = None,
    note: str = "",
) -> Selection:
    """Assemble a :class:`Selection` from an ordered id list.

    ``objective`` and ``tokens_used`` are recomputed from the graph; ``bound``
    is raised to at least ``objective`` (guards float rounding) and ``gap`` is
    derived from both. ``optimal`` defaults to ``gap <= 1e-9``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    objective = float(sum(graph.node(v).weight for v in order))
    tokens = int(sum(graph.node(v).cost for v in order))
    bound = max(float(bound), objective)
    gap = (bound - objective) / max(bound, 1e-9)
    if gap <= 1e-9:
        gap = 0.0
    return Selection(
        method=method,
        requested=requested or method,
        status=status,
        selected=list(order),
        objective=objective,
        bound=bound,
        gap=gap,
        tokens_used=tokens,
        budget=budget,
        solve_ms=solve_ms,
        optimal=(gap == 0.0) if optimal is None else optimal,
        note=note,
    )
