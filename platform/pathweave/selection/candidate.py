"""Candidate graph model for token-budgeted context selection.

The candidate graph ``G = (V, E)`` is produced by retrieval: passages,
propositions and entities, plus one query node ``Q`` linked to the seeds.
Each node carries a retrieval weight ``w(v) >= 0`` and a token cost
``l(v) >= 0`` (tokens of its linearized text; entities cost about their
name). Edges are undirected.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

NodeKind = Literal["query", "passage", "proposition", "entity"]


class CandidateNode(BaseModel):
    """One candidate evidence node.

    Attributes:
        id: Unique node id within the graph.
        kind: ``"query"`` (only the query node), ``"passage"``,
            ``"proposition"`` or ``"entity"``.
        text: Text rendered into the context (entity: its name).
        weight: Retrieval weight ``w(v)``, finite and ``>= 0`` (unitless).
        cost: Token cost ``l(v)`` in tokens, ``>= 0`` (see
            :func:`pathweave.selection.linearize.assign_costs`).
        citation: Passage id the text comes from (``None`` = no citation;
            passages default to citing their own id when linearized).
        triple: Optional ``(subject, relation, object)`` for the "triples"
            linearization style.
        rendered: False for a node that carries weight and connects but
            contributes no text of its own: cost 0, never a context line
            (e.g. a passage whose evidence is its selected propositions, each
            of which cites it).
        code: The line's code in a session (``"S3"``; APR's "send only what is
            new" on a budgeted context): a new line is written with it, so a
            later context of the session can name the line by its code alone.
        sent: The line was sent earlier in the session: only its ``code`` is
            rendered, and it costs that reference's tokens, not its text's.

    Raises:
        ValueError (pydantic ``ValidationError``): negative or non-finite
            weight, negative cost, empty id.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    kind: NodeKind
    text: str
    weight: float = Field(ge=0.0, allow_inf_nan=False)
    cost: int = Field(ge=0)
    citation: str | None = None
    triple: tuple[str, str, str] | None = None
    rendered: bool = True
    code: str | None = None
    sent: bool = False


class CandidateGraph(BaseModel):
    """Undirected candidate graph around one query node.

    Attributes:
        query_id: Id of the query node ``Q`` (must exist, kind ``"query"``).
        nodes: Candidate nodes, ids unique; only ``Q`` may have kind "query".
        edges: Undirected edges ``(u, v)`` between existing ids; self loops
            are rejected, duplicate edges (either direction) are merged.

    Raises:
        ValueError (pydantic ``ValidationError``, a ``ValueError`` subclass):
            duplicate node ids, missing query node, query node of the wrong
            kind, extra query-kind nodes, edges with unknown ids, self loops,
            or invalid nodes (e.g. negative weights).

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """

    model_config = ConfigDict(frozen=True)

    query_id: str
    nodes: list[CandidateNode]
    edges: list[tuple[str, str]] = Field(default_factory=list)

    _by_id: dict[str, CandidateNode] = PrivateAttr(default_factory=dict)
    _adj: dict[str, list[str]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> CandidateGraph:
        by_id: dict[str, CandidateNode] = {}
        for node in self.nodes:
            if node.id in by_id:
                raise ValueError(f"duplicate node id {node.id!r}")
            by_id[node.id] = node
        query = by_id.get(self.query_id)
        if query is None:
            raise ValueError(f"query node {self.query_id!r} is not among the nodes")
        if query.kind != "query":
            raise ValueError(
                f"query node {self.query_id!r} must have kind 'query', got {query.kind!r}"
            )
        extra = [n.id for n in self.nodes if n.kind == "query" and n.id != self.query_id]
        if extra:
            raise ValueError(f"only the query node may have kind 'query'; also found {extra}")
        adj: dict[str, list[str]] = {node.id: [] for node in self.nodes}
        seen: set[frozenset[str]] = set()
        for u, v in self.edges:
            unknown = [x for x in (u, v) if x not in by_id]
            if unknown:
                raise ValueError(f"edge ({u!r}, {v!r}) references unknown node id(s) {unknown}")
            if u == v:
                raise ValueError(f"self loop on node {u!r} is not allowed")
            key = frozenset((u, v))
            if key in seen:
                continue
            seen.add(key)
            adj[u].append(v)
            adj[v].append(u)
        self._by_id = by_id
        self._adj = adj
        return self

    @property
    def query(self) -> CandidateNode:
        """The query node ``Q``.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        return self._by_id[self.query_id]

    def node(self, node_id: str) -> CandidateNode:
        """Return the node with id ``node_id``; raises ``KeyError`` if absent.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        return self._by_id[node_id]

    def node_map(self) -> Mapping[str, CandidateNode]:
        """Read-only ``{id: node}`` view (fast lookups in hot loops).

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        return MappingProxyType(self._by_id)

    def adjacency(self) -> dict[str, list[str]]:
        """Undirected adjacency ``{id: [neighbour ids]}`` (deduplicated, every
        node present, insertion order of ``edges``). Returns a fresh copy.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        return {k: list(v) for k, v in self._adj.items()}

    def unique_edges(self) -> list[tuple[str, str]]:
        """Deduplicated undirected edges, each once, in first-seen order.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        out: list[tuple[str, str]] = []
        seen: set[frozenset[str]] = set()
        for u, v in self.edges:
            key = frozenset((u, v))
            if key not in seen:
                seen.add(key)
                out.append((u, v))
        return out

    def path_costs(self) -> dict[str, int]:
        """Cheapest node-weighted path cost from ``Q`` to every reachable node.

        The cost of a path is the sum of ``cost`` (tokens) over all its nodes,
        ``Q`` and the endpoint included, so a node ``v`` can only be part of a
        connected selection within budget ``L`` if ``path_costs()[v] <= L``.
        Unreachable nodes are absent. Dijkstra, ``O(|E| log |V|)``.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        by_id, adj = self._by_id, self._adj  # private attrs are slow to access
        dist = {self.query_id: self.query.cost}
        heap = [(self.query.cost, self.query_id)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for v in adj[u]:
                nd = d + by_id[v].cost
                if nd < dist.get(v, math.inf):
                    dist[v] = nd
                    heapq.heappush(heap, (nd, v))
        return dist

    def is_connected(self, ids: Iterable[str]) -> bool:
        """True iff ``ids`` contains ``Q`` and induces a connected subgraph.

        Raises:
            KeyError: an id is not a node of the graph.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        chosen = set(ids)
        adj = self._adj
        for node_id in chosen:
            if node_id not in adj:
                raise KeyError(node_id)
        if self.query_id not in chosen:
            return False
        seen = {self.query_id}
        stack = [self.query_id]
        while stack:
            u = stack.pop()
            for v in adj[u]:
                if v in chosen and v not in seen:
                    seen.add(v)
                    stack.append(v)
        return seen == chosen
