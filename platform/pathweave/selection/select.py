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
from .reduce import reduce_free_nodes
from .result import Selection, check_budget, make_selection

Method = Literal["ilp", "greedy", "auto"]

AUTO_MAX_NODES = 80
"""``auto`` runs CP-SAT only when the graph reduced by
:func:`~pathweave.selection.reduce.reduce_free_nodes` has at most this many
nodes. On real PropRAG candidate graphs of the MuSiQue sample, CP-SAT proves
optimality within the time limit for graphs of the default size, and ever more
rarely as the graph grows, while the greedy answer stays close to the best known
(figures in docs/benchmarks-history.md). Above the threshold the limit is mostly spent
without beating the greedy rules."""

AUTO_MAX_EDGES = 320
"""``auto`` runs CP-SAT only up to this many edges after reduction (the
20-passage graphs above have ~300)."""


def select(
    graph: CandidateGraph,
    budget_tokens: int,
    method: Method = "auto",
    time_limit_ms: float = 50.0,
    *,
    num_workers: int = 1,
) -> Selection:
    """Select a connected, token-budgeted subgraph containing the query node.

    Args:
        graph: Validated candidate graph (costs in tokens, weights ``>= 0``).
        budget_tokens: Budget ``L`` in tokens.
        method: ``"greedy"``: the better of the spec's frontier rule and
            the path rule (its lookahead generalization; the frontier rule
            alone cannot see the weight of a zero-cost node, e.g. a passage
            coverage node, behind a statement) improved by drop-and-refill
            local search (``"path+ls"``), a few ms to a few tens of ms.
            ``"ilp"``: CP-SAT, warm-started with that greedy answer
            (:mod:`~pathweave.selection.greedy`).
            ``"auto"``: both greedy rules, then CP-SAT when the graph, reduced
            by :func:`~pathweave.selection.reduce.reduce_free_nodes`, has at
            most ``AUTO_MAX_NODES`` nodes and ``AUTO_MAX_EDGES`` edges;
            returns the best of them (greedy when CP-SAT ends without a
            solution or with a worse time-limited incumbent).
        time_limit_ms: Time limit in ms for the CP-SAT call; the time the
            greedy passes took is deducted (the greedy passes themselves are
            not limited; a few ms at 200 nodes).
        num_workers: CP-SAT worker threads.

    Returns:
        :class:`Selection`; ``requested`` records ``method``, ``method`` the
        selector whose answer is returned, ``note`` which one and why,
        ``solve_ms`` the wall time of this call in ms and ``bound`` the
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
    frontier = solve_greedy(graph, budget_tokens, "frontier")
    path = solve_greedy(graph, budget_tokens, "path+ls")
    heuristic = path if path.objective > frontier.objective else frontier
    rule = heuristic.note  # "rule=..."
    if method == "greedy":
        return _finish(graph, heuristic, heuristic.bound, start, "greedy", f"greedy: {rule}")

    core = reduce_free_nodes(graph).core if method == "auto" else graph
    n_core, e_core = len(core.nodes), len(core.unique_edges())
    if method == "auto" and (n_core > AUTO_MAX_NODES or e_core > AUTO_MAX_EDGES):
        return _finish(
            graph, heuristic, heuristic.bound, start, "auto",
            f"greedy: {rule}; graph above auto threshold ({n_core} nodes, {e_core} edges after "
            f"reduction; limits {AUTO_MAX_NODES}/{AUTO_MAX_EDGES})",
        )

    remaining_ms = max(1.0, time_limit_ms - (time.perf_counter() - start) * 1000.0)
    ilp = solve_ilp(
        graph,
        budget_tokens,
        time_limit_ms=remaining_ms,
        num_workers=num_workers,
        hint=heuristic.selected,
    )
    bound = min(ilp.bound, heuristic.bound)
    if method == "ilp":
        return _finish(graph, ilp, bound, start, "ilp", f"ilp: {ilp.status.lower()}")
    if ilp.status not in ("OPTIMAL", "FEASIBLE"):
        return _finish(graph, heuristic, bound, start, "auto",
                       f"greedy: {rule}; ilp status {ilp.status}")
    if heuristic.objective > ilp.objective:
        return _finish(graph, heuristic, bound, start, "auto",
                       f"greedy: {rule}; better than the ilp incumbent")
    return _finish(graph, ilp, bound, start, "auto", f"ilp: {ilp.status.lower()}")


def _finish(
    graph: CandidateGraph,
    chosen: Selection,
    bound: float,
    start: float,
    requested: Method,
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
