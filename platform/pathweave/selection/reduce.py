"""Exact reduction of zero-cost nodes before the ILP.

A node that costs 0 tokens can be added to any selection it touches without
breaking the budget, and its weight is ``>= 0``, so an optimal selection takes
it whenever it is adjacent to a selected node. In a PropRAG candidate graph
these are the entity connectors and the passage coverage nodes
(:mod:`pathweave.retrieval.context`); as ILP variables they only multiply the
equivalent ways of connecting the same statements (symmetry), which is what
made CP-SAT slow on larger real graphs. The reduction:

* ``root``: free nodes joined to ``Q`` through free nodes; always selected.
* every other connected group of free nodes (a *free component*) is removed
  and replaced by a clique over its costly neighbours (the component connects
  any two of them at no cost), plus a coverage term: its total weight is
  earned when at least one neighbour is selected;
* costly neighbours of the root become neighbours of ``Q``.

Optimal selections of the reduced graph (with coverage terms) expand to
optimal selections of the original graph with the same objective
(:meth:`Reduction.expand`), so the ILP stays exact.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5 (the formulation is unchanged; this only removes free variables).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations

from .candidate import CandidateGraph

MAX_CLIQUE = 40
"""Largest neighbourhood of a free component replaced by a clique."""


@dataclass(frozen=True)
class FreeComponent:
    """A connected group of zero-cost nodes (not joined to ``Q`` through free
    nodes), the costly nodes adjacent to it, and its total weight."""

    nodes: frozenset[str]
    neighbours: frozenset[str]
    weight: float


@dataclass(frozen=True)
class Reduction:
    """The reduced graph ``core`` (``Q`` and the nodes with cost > 0), the free
    nodes always selected with ``Q`` (``root``, total weight ``root_weight``)
    and the removed free components."""

    core: CandidateGraph
    root: frozenset[str]
    root_weight: float
    components: tuple[FreeComponent, ...]

    def expand(self, chosen: Iterable[str]) -> set[str]:
        """Original-graph selection for a connected ``core`` selection ``chosen``:
        it, the root, and every free component touching it (all free)."""
        selected = set(chosen) | self.root
        for component in self.components:
            if component.neighbours & selected:
                selected |= component.nodes
        return selected


def reduce_free_nodes(graph: CandidateGraph, max_clique: int = MAX_CLIQUE) -> Reduction:
    """Reduce ``graph`` as the module doc describes. ``O(|V| + |E| + sum of
    clique sizes)``; a graph without zero-cost nodes comes back unchanged. A free
    component with more than ``max_clique`` costly neighbours stays in the graph
    as it is (its clique would add more edges than the nodes it removes save)."""
    nodes = graph.node_map()
    adj = graph.adjacency()
    q = graph.query_id
    free = {v for v, node in nodes.items() if v != q and node.cost == 0}
    if not free:
        return Reduction(graph, frozenset(), 0.0, ())

    def flood(start: str) -> tuple[set[str], set[str]]:
        group, costly, stack = {start}, set(), [start]
        while stack:
            for v in adj[stack.pop()]:
                if v in free and v not in group:
                    group.add(v)
                    stack.append(v)
                elif v not in free:
                    costly.add(v)
        return group, costly

    root, root_neighbours = set(), set()
    for v in adj[q]:
        if v in free and v not in root:
            group, costly = flood(v)
            root |= group
            root_neighbours |= costly
    root_neighbours.discard(q)
    components: list[FreeComponent] = []
    seen = set(root)
    for v in graph.nodes:
        if v.id in free and v.id not in seen:
            group, costly = flood(v.id)
            seen |= group
            if len(costly) > max_clique:
                free -= group  # kept as ordinary nodes
                continue
            components.append(FreeComponent(frozenset(group), frozenset(costly),
                                            sum(nodes[u].weight for u in group)))
    edges = {(a, b) for a, b in graph.unique_edges() if a not in free and b not in free}
    edges |= {(q, v) for v in root_neighbours}
    for component in components:
        edges |= set(combinations(sorted(component.neighbours), 2))
    kept = [node for node in graph.nodes if node.id not in free]
    core = CandidateGraph(query_id=q, nodes=kept, edges=sorted(edges))
    return Reduction(core, frozenset(root), sum(nodes[v].weight for v in root), tuple(components))
