"""The protocol every retrieval mode implements (:class:`RetrievalMode`) and the shared
frame of the modes that rank passages on the topology (:class:`RankingMode`: proprag,
dense, hipporag2).

A mode gets a checked :class:`~pathweave.retrieval.request.QueryRequest` and the query
resources (:class:`~pathweave.retrieval.resources.QueryResources`: topology view, node
reader, vector search, passage hits, record writer, LLM client) and returns a
:class:`Retrieval`; it only retrieves. Answering (:meth:`RetrievalMode.answer`) and the
record (:meth:`RetrievalMode.write_record`) are steps a mode may shape, taken by
:meth:`~pathweave.query.retriever.Retriever.run`, with the citations, the timings and the
span: one lifecycle, not a second dispatcher. A new mode is one strategy module and its
registration in :data:`pathweave.query.modes.STRATEGIES`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pathweave.access import UNRESTRICTED, Access
from pathweave.model import MODE_OPTIONS, QueryResult, ReasoningPath, SeedEntity
from pathweave.retrieval.context import candidate_graph, select_context
from pathweave.retrieval.context_codes import read_session_lines
from pathweave.retrieval.request import QueryRequest
from pathweave.retrieval.stopwatch import Stopwatch
from pathweave.graph.subgraph import NodeReader, Subgraph, build_subgraph
from pathweave.graph.frontier import Frontier
from pathweave.graph.topology import TopologyView
from pathweave.graph.visibility import acceptors, visible_view

if TYPE_CHECKING:
    from pathweave.retrieval.resources import QueryResources



@dataclass
class Retrieval:
    """One query's result with what it was computed on: the fetched ``subgraph`` (None for
    a dense or HippoRAG 2 query without a token budget, and for apr), the ``(d,)`` query
    vector, and the mode's own state for its answer and record steps (``state``: APR's
    outcome)."""

    result: QueryResult
    subgraph: Subgraph | None
    query: np.ndarray
    state: Any = None


class RetrievalMode:
    """One retrieval mode (the protocol; spec section in each subclass).

    ``options``: the request options it takes (:data:`pathweave.model.MODE_OPTIONS`; others
    are :class:`~pathweave.errors.NotApplicable`); ``needs_llm``: it cannot search without an
    LLM; ``answers_itself``: its search already answers (PruneRAG's tree); ``has_steps``: its
    search takes ``on_step``, to hear of its steps as they are taken (PruneRAG's tree nodes).
    """

    name: str = ""
    needs_llm: bool = False
    answers_itself: bool = False
    has_steps: bool = False

    @property
    def options(self) -> frozenset[str]:
        """The request options this mode takes (:data:`pathweave.model.MODE_OPTIONS`)."""
        return MODE_OPTIONS[self.name]

    def lexical_searches(self, resources: QueryResources, depth: int) -> dict[str, tuple[str, int]]:
        """The full-text searches :meth:`rank` fuses with its vector hits, ``{name: (label, k)}``
        (asked with the question's terms beside the vector searches, setting
        ``retrieval.lexical``); their hits are ``frame.found[name]``."""
        return {}

    def search(self, resources: QueryResources, request: QueryRequest, access: Access = UNRESTRICTED) -> Retrieval:
        """Retrieve for the checked ``request`` from what ``access`` may read
        (:mod:`pathweave.access`); nothing more (the answer step, the citations and the
        record are :meth:`pathweave.query.retriever.Retriever.run`'s)."""
        raise NotImplementedError

    def answer(self, resources: QueryResources, retrieval: Retrieval, client) -> None:
        """Set ``retrieval.result.answer`` from the LLM ``client`` (one call; an LLM failure
        is an answer with ``error`` set): from the budgeted context, else the top passages."""
        from pathweave.answering import generate_answer

        retrieval.result.answer = generate_answer(client, retrieval.result)

    def write_record(self, resources: QueryResources, retrieval: Retrieval) -> None:
        """Write the reasoning record of the query (its ``ANSWERED`` edge too when answered):
        now or off the query path, as :meth:`QueryResources.submit_record` says."""
        resources.submit_record(retrieval.result)


@dataclass
class Ranking:
    """What a ranking mode found: passage ids best first with their scores (at least the
    frame's ``depth`` when there are as many), and for proprag the G_sub, paths and seeds."""

    ids: list[str]
    scores: list[float]
    subgraph: Subgraph | None = None
    paths: list[ReasoningPath] = field(default_factory=list)
    seeds: list[SeedEntity] = field(default_factory=list)
    view: TopologyView | None = None  # the view it ranked on, when not the frame's (a frontier grown by the push)


@dataclass
class QueryFrame:
    """What a ranking mode works with: the tenant's topology ``view`` and node ``reader``,
    the ``(d,)`` question ``vector``, the query id, how many passages to rank (``depth``),
    a ``clock(stage)`` that records a stage's milliseconds, ``ppr_timings`` (ms, inside
    stage ``stage1``) and the hits of the mode's vector searches (``found``:
    :meth:`RankingMode.searches`)."""

    resources: QueryResources
    request: QueryRequest
    view: TopologyView
    reader: NodeReader
    vector: np.ndarray
    query_id: str
    depth: int
    clock: Callable[[str], None]
    ppr_timings: dict[str, float] = field(default_factory=dict)
    found: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    access: Access = UNRESTRICTED  # what the caller may read; ``view`` is already restricted to it
    frontier: Frontier | None = None  # the query's frontier, when the process holds frontiers


class RankingMode(RetrievalMode):
    """The frame shared by proprag, dense and hipporag2: topology view, question embedding,
    :meth:`rank`, the ranked passages' texts and citations, the token-budgeted context
    (spec §5) and the record. Timings per stage (ms) in ``result.timings_ms``."""

    def rank(self, frame: QueryFrame) -> Ranking:
        """The passages ranked for ``frame`` (subclasses)."""
        raise NotImplementedError

    def searches(self, resources: QueryResources, depth: int) -> dict[str, tuple[str, int]]:
        """The vector searches :meth:`rank` starts from, ``{name: (label, k)}``: run
        concurrently before the topology is refreshed (their statement reads the graph
        version too); their hits are ``frame.found[name]``."""
        return {}

    def search(self, resources: QueryResources, request: QueryRequest, access: Access = UNRESTRICTED) -> Retrieval:
        """Rank, read the ranked passages and (with a token budget) select the context, on
        what ``access`` may read (the topology view restricted to its readable passages,
        :func:`pathweave.graph.visibility.visible_view`, and vector and full-text hits
        accepted only when readable; its session is its own). The
        searches and the passages' texts are separate reads: a passage that a concurrent
        change (a new version swapped in, a deletion) removed between them comes back without
        its text, and the query runs again on the graph as it is now (at most
        :data:`RERUNS` times), so it never answers with a document's passage missing while
        the document is there."""
        for _ in range(RERUNS):
            retrieval = self._search(resources, request, access)
            if all(hit.text for hit in retrieval.result.passages):
                break
        return retrieval

    def _search(self, resources: QueryResources, request: QueryRequest, access: Access) -> Retrieval:
        clock = Stopwatch()
        vector = resources.embedder.encode_query(request.question)
        clock("embed")
        budget = request.token_budget
        depth = request.k if budget is None else max(request.k, resources.settings.selection.context_passages)
        lexical = self.lexical_searches(resources, depth) if resources.settings.retrieval.lexical != "off" else {}
        if access.restricted:  # the readable part first: the searches keep only its hits
            topology = resources.topology(resources.held_version())  # the held one: no read
            applied = topology.version  # (a view is rebuilt only for a change of its graph: its own may be older)
            frontier, accept = _readable(resources, topology, access)
            clock("topology")
            found, version = resources.nearest(self.searches(resources, depth), vector, lexical, request.question,
                                               accept=accept)
            if version is None:  # the searches read no version: ask for it
                version = resources.store.graph_version()
            if version > applied:  # the graph changed since the held topology: again on the new one
                topology = resources.topology(version)
                frontier, accept = _readable(resources, topology, access)
                found, _ = resources.nearest(self.searches(resources, depth), vector, lexical, request.question,
                                             accept=accept)
            view = frontier.view() if frontier is not None else visible_view(topology.view(), access)
            clock("search")
        else:
            found, version = resources.nearest(self.searches(resources, depth), vector, lexical, request.question)
            clock("search")
            topology = resources.topology(version)  # at least the version the searches saw
            frontier = resources.frontier(topology)
            view = topology.view()  # built here on the first query after a change
            clock("topology")
        reader = resources.reader(topology)
        frame = QueryFrame(resources, request, view, reader, vector, uuid.uuid4().hex, depth, clock, found=found,
                           access=access, frontier=frontier)
        ranking = self.rank(frame)
        if ranking.view is not None:
            view = ranking.view
        if frontier is not None and budget is not None and ranking.subgraph is None:
            frontier.read_passages(ranking.ids)  # G_sub of the ranked passages is sliced from what is held
            view = frontier.view()
        result = QueryResult(query_id=frame.query_id, question=request.question, mode=self.name,
                             graph_version=view.version, paths=ranking.paths, seeds=ranking.seeds,
                             passages=resources.passage_hits(reader, ranking.ids, ranking.scores, access, view))
        result._principals = access.stored()
        clock("passages")
        subgraph = ranking.subgraph
        if budget is not None and result.passages:
            if subgraph is None:
                subgraph = build_subgraph(view, view.index_of(view.passage_index, ranking.ids, view.n_passages),
                                          reader)
            session = read_session_lines(resources.store, request.session_id, access.stored()) \
                if request.session_id else None
            graph = candidate_graph(result, subgraph, vector, resources.settings.selection.path_weight,
                                    earlier=session.codes if session is not None else ())
            result.context = select_context(graph, budget, request.method, resources.token_counter(), request.style,
                                            resources.settings.selection.select_time_limit_ms, session)
            clock("select")
        result.passages = result.passages[:request.k]
        cite_steps(result, view)
        result.timings_ms = clock.timings
        result.timings_ms["total"] = round(sum(clock.timings.values()), 2)
        result.timings_ms.update(frame.ppr_timings)
        return Retrieval(result, subgraph, vector)



def _readable(resources: QueryResources, topology, access: Access):
    """``(frontier, acceptors)`` of a restricted caller on ``topology``: its frontier (None
    for a whole topology) and the acceptors its searches keep hits with (a frontier's read
    the hits first)."""
    frontier = resources.frontier(topology, access)
    if frontier is not None:
        return frontier, frontier.acceptors()
    return None, acceptors(visible_view(topology.view(), access), access)


RERUNS = 3
"""How many times a query runs at most when a concurrent change removed passages it had
ranked before it read them (:meth:`RankingMode.search`)."""


def cite_steps(result: QueryResult, view: TopologyView) -> None:
    """Set each path step's ``citations``: the ranks of ``result``'s passages that state its
    proposition, from the topology's passage-proposition incidence (no store read)."""
    if not result.paths:
        return
    rank_of = {view.passage_index[hit.passage_id]: hit.rank for hit in result.passages
               if view.passage_index.get(hit.passage_id, view.states.shape[0]) < view.states.shape[0]}
    rows = sorted(rank_of)
    stating = view.states[rows] if rows else None
    for path in result.paths:
        for step in path.steps:
            r = view.prop_index.get(step.prop_id, -1)
            if stating is None or not 0 <= r < stating.shape[1]:
                continue
            column = stating[:, r]
            step.citations = sorted(rank_of[rows[i]] for i in column.nonzero()[0])
