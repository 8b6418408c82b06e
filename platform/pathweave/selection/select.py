"""Entry point: choose and run a selector for one candidate graph.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import time
from typing import Literal

from .candidate import CandidateGraph
from .greedy import solve_greedy
from .ilp import solve_ilp
from .result import Selection, check_budget, make_selection

Method = Literal["ilp", "greedy", "auto"]

AUTO_MAX_NODES = 250
"""``auto`` runs CP-SAT only up to this many candidate nodes (see bench.py)."""

AUTO_MAX_EDGES = 1000
"""``auto`` runs CP-SAT only up to this many candidate edges (see bench.py)."""


def select(
    graph: CandidateGraph,
    budget_tokens: int,
    method: Method = "auto",
    time_limit_ms: float = 50.0,
    *,
    num_workers: int = 2,
) -> Selection:
    """Select a connected, token-budgeted subgraph containing the query node.

    Args:
        graph: Validated candidate graph (costs in tokens, weights ``>= 0``).
        budget_tokens: Budget ``L`` in tokens.
        method: ``"ilp"`` (CP-SAT, warm-started with the greedy solution),
            ``"greedy"``, or ``"auto"``: CP-SAT when the graph has at most
            ``AUTO_MAX_NODES`` nodes and ``AUTO_MAX_EDGES`` edges, greedy
            otherwise; ``auto`` also returns the greedy result when CP-SAT
            ends without a solution or with a worse time-limited incumbent.
        time_limit_ms: Time limit in ms for the CP-SAT call (greedy time is
            deducted in ``auto``/``ilp``; greedy itself is not limited).
        num_workers: CP-SAT worker threads.

    Returns:
        :class:`Selection`; ``requested`` records ``method``, ``method`` the
        selector whose answer is returned, ``note`` why (for ``auto``),
        ``solve_ms`` the wall time of this call in ms, and ``bound`` the
        tightest valid bound seen.

    Raises:
        ValueError: unknown ``method``, ``budget_tokens < 0`` or
            ``l(Q) > budget_tokens``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """
    start = time.perf_counter()
    if method not in ("ilp", "greedy", "auto"):
        raise ValueError(f"method must be 'ilp', 'greedy' or 'auto', got {method!r}")
    check_budget(graph, budget_tokens)
    greedy = solve_greedy(graph, budget_tokens)
    if method == "greedy":
        return greedy.model_copy(update={"requested": "greedy"})

    small = len(graph.nodes) <= AUTO_MAX_NODES and len(graph.edges) <= AUTO_MAX_EDGES
    if method == "auto" and not small:
        return _finish(
            graph, greedy, greedy.bound, start,
            note=f"greedy: graph above auto threshold ({len(graph.nodes)} nodes, "
            f"{len(graph.edges)} edges; limits {AUTO_MAX_NODES}/{AUTO_MAX_EDGES})",
        )

    remaining_ms = max(1.0, time_limit_ms - (time.perf_counter() - start) * 1000.0)
    ilp = solve_ilp(
        graph,
        budget_tokens,
        time_limit_ms=remaining_ms,
        num_workers=num_workers,
        hint=greedy.selected,
    )
    bound = min(ilp.bound, greedy.bound)
    if method == "ilp":
        return _finish(graph, ilp, bound, start, requested="ilp", note="ilp requested")
    if ilp.status not in ("OPTIMAL", "FEASIBLE"):
        return _finish(graph, greedy, bound, start, note=f"greedy: ilp status {ilp.status}")
    if greedy.objective > ilp.objective:
        return _finish(
            graph, greedy, bound, start, note="greedy: better than the ilp incumbent"
        )
    return _finish(graph, ilp, bound, start, note=f"ilp: {ilp.status.lower()}")


def _finish(
    graph: CandidateGraph,
    chosen: Selection,
    bound: float,
    start: float,
    *,
    requested: Method = "auto",
    note: str,
) -> Selection:
    """Re-stamp ``chosen`` with the shared bound, total wall time and note."""
    return make_selection(
        graph,
        chosen.selected,
        method=chosen.method,
        status=chosen.status,
        bound=bound,
        budget=chosen.budget,
        solve_ms=(time.perf_counter() - start) * 1000.0,
        requested=requested,
        optimal=True if chosen.status == "OPTIMAL" else None,
        note=note,
    )
