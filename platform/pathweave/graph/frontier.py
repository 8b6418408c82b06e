"""A query's frontier: the part of a tenant's graph its Personalized PageRank reaches, read
from the store as the push needs it, never the tenant whole.

Stage 1 of PropRAG (spec §1) is a Personalized PageRank from the query's seeds. By forward
push (Andersen, Chung & Lang 2006) a node's row of the PPR graph is needed only when its
residual exceeds ``epsilon x degree``; the nodes whose rows are needed are the query's
frontier. :class:`FrontierTopology` is a tenant's :class:`~pathweave.graph.topology.Topology`
that holds only what frontiers asked for: passages read by id (statements
``topology_passage_*``, with their entities' alias edges), and entities made *complete* —
every passage stating a proposition that mentions the entity or an alias of its group read
(``frontier_entity_passages``) and the group's SYNONYM edges, so that its row
(co-occurrence counts, SYNONYM scores, passage edges) is the tenant's row. A passage's row
is whole once it is read. SYNONYM edges are read for complete entities and for the
entities of G_sub (:meth:`Frontier.with_synonyms`: stage 2's graph), not for every entity
a read passage mentions: an incomplete entity is never pushed, and the degree its
threshold uses is then a lower bound (it asks to be completed sooner, never later). The push
(:func:`pathweave.graph.ppr.push`) pushes whole rows only; the incomplete nodes whose
residual exceeds the threshold are read in one batched round and the push runs again,
until no such node is left or the query's row budget (passages read) is spent. Every push
being exact on the whole graph, the scores meet the local push's error bound where the
budget was not reached, whatever the tenant's size.

What a frontier topology holds is kept current from the graph-change log like a whole
topology (:meth:`Topology.refresh`), restricted to what it holds: a change's added
passages are taken in only when they mention a complete entity (else the entity is
complete no more), and an alias edge that changes makes its group incomplete. Its memory
is bounded: beyond ``max_bytes`` (:attr:`Topology.bytes`) it starts again empty at its
version (:meth:`FrontierTopology.trim`), so a process holds a tenant's hot neighbourhoods,
never more than its cap plus one query's reads.

A restricted caller (:mod:`pathweave.access`) works on the same frontier: the rows read are
those of the tenant, the caller's view of them is
:func:`pathweave.graph.visibility.visible_view` of what is held, and a search's hits are
read into the frontier before they are accepted (:meth:`Frontier.acceptors`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from pathweave.access import UNRESTRICTED, Access
from pathweave.graph.ppr import push
from pathweave.graph.topology import FrontierTopology, TopologyView, batched_read
from pathweave.graph.visibility import Acceptor, acceptors, visible_view
from pathweave.errors import PathweaveError

if TYPE_CHECKING:
    from pathweave.store.graph_store import GraphStore


MAX_ROUNDS = 64
"""The most rounds of reads one push takes (each reads every row over the threshold at once,
so a push needs about as many as its paths have steps)."""


class Frontier:
    """One query's work on a tenant's :class:`FrontierTopology`: what ``access`` sees of it
    (:meth:`view`), the seeds and hits it reads, and stage 1's push (:meth:`pagerank`),
    reading at most ``budget`` passages for the push."""

    def __init__(self, topology: FrontierTopology, store: GraphStore, access: Access = UNRESTRICTED,
                 budget: int = 4000) -> None:
        self.topology = topology
        self.store = store
        self.access = access
        self.budget = budget
        self.read = 0  # passages this query's push read
        self.declined: set[str] = set()
        self._accepting: tuple[TopologyView, dict] | None = None
        self._lock = threading.Lock()
        topology.trim()

    def view(self) -> TopologyView:
        """What the caller sees of what is held now (the held view itself, unrestricted)."""
        return visible_view(self.topology.view(), self.access)

    def read_passages(self, passage_ids: Iterable[str]) -> None:
        """Hold the passages of ``passage_ids`` (a search's hits, a result's passages)."""
        self.topology.read_passages(self.store, passage_ids)

    def read_propositions(self, prop_ids: list[str]) -> None:
        """Hold the passages stating the propositions of ``prop_ids`` (a proposition a held
        passage states is held already: no read)."""
        unheld = self.topology.unheld_propositions(prop_ids)
        if unheld:
            self.read_passages([r["passage_id"] for r in batched_read(self.store, "frontier_proposition_passages",
                                                                       unheld)])

    def read_triples(self, triple_ids: list[str]) -> None:
        """Hold the passages asserting the triples of ``triple_ids``."""
        self.read_passages([r["passage_id"] for r in batched_read(self.store, "frontier_triple_passages",
                                                                   list(triple_ids))])

    def with_synonyms(self, view: TopologyView, passages: np.ndarray) -> TopologyView:
        """``view`` with the SYNONYM edges held of the entities the passages ``passages``
        (indices of ``view``: G_sub's, whose stage-2 graph and beam use them) mention and of
        their alias groups' held members: a newer view of the same generation and graph version
        when any had to be read, else ``view`` itself (also when the frontier started again,
        or a refresh moved it to another version, meanwhile: stage 2 stays on stage 1's version)."""
        if not len(passages):
            return view
        props = np.unique(view.states[passages].indices)
        mentioned = np.unique(view.extras["raw_prop_entities"][props].indices)
        groups = np.unique(view.canonical[mentioned[mentioned < len(view.canonical)]])
        members = np.union1d(mentioned, np.flatnonzero(np.isin(view.canonical[:view.n_entities], groups)))
        if not self.topology.read_synonyms(self.store, [view.entity_ids[e] for e in members.tolist()]):
            return view
        newer = self.view()
        same = newer.extras["generation"] == view.extras["generation"] and newer.version == view.version
        return newer if same else view

    def complete(self, entity_ids: list[str]) -> int:
        """Make the entities of ``entity_ids`` complete within what is left of the budget;
        returns how many were made complete or declined (1 when the topology moved meanwhile:
        the push asks again)."""
        completed, declined, read, moved = self.topology.complete_entities(self.store, list(entity_ids),
                                                                           max(0, self.budget - self.read))
        self.read += read
        self.declined |= declined
        return len(completed) + len(declined) or int(moved)

    def pagerank(self, seeds: TopologyView, entities: np.ndarray, entity_weights: np.ndarray, passages: np.ndarray,
                 passage_weights: np.ndarray, damping: float, epsilon: float) -> tuple[TopologyView, np.ndarray]:
        """Personalized PageRank by push from the seed ``entities`` and ``passages`` (indices
        of the view ``seeds``, stable across the views of its generation) with their weights:
        the last view and its passages' ``(P,)`` scores. Rounds: push the whole rows (the
        complete entities the view itself carries: what it holds of them is whole); read the
        rows of the incomplete entities over the threshold (``epsilon x`` their degree, or
        their floor when larger), most residual per degree first; again, until none is left,
        the budget is spent or nothing more could be read (or after :data:`MAX_ROUNDS`).
        When the topology starts again empty meanwhile (:meth:`FrontierTopology.trim`, a
        rebuild), the last round's view and scores are the answer; raises
        :class:`FrontierMoved` when that happens before the first."""
        generation, last, rounds = seeds.extras["generation"], None, 0
        while True:
            view = self.view()
            if view.extras["generation"] != generation:
                if last is None:
                    raise FrontierMoved("the tenant's frontier started again while the query read it")
                return last
            n_e, n_p = view.n_entities, view.n_passages
            reset = np.zeros(n_e + n_p)
            reset[entities] = entity_weights
            reset[n_e + passages] = passage_weights
            if reset.sum() <= 0:
                return view, np.zeros(n_p)
            pushable = np.ones(n_e + n_p, dtype=bool)
            pushable[:n_e] = view.canonical[:n_e] != np.arange(n_e)  # an alias has no edges: its row is whole
            held = view.extras["complete"]
            pushable[held[held < n_e]] = True
            estimate, residual = push(view.adjacency, view.degree, reset, damping, epsilon, pushable)
            last = (view, estimate[n_e:])
            floor, larger = view.degree.copy(), np.zeros(n_e + n_p, dtype=bool)
            ends, counts = view.extras["floors"]
            inside = ends < n_e
            floor[ends[inside]] = np.maximum(floor[ends[inside]], counts[inside])
            larger[ends[inside]] = counts[inside] > self.budget  # more passages than a query may read
            need = residual / np.maximum(floor, 1.0)
            blocked = np.flatnonzero(~pushable & ~larger & (need > epsilon))
            ids = [view.entity_ids[i] for i in blocked[np.argsort(-need[blocked], kind="stable")]]
            ids = [i for i in ids if i not in self.declined]
            if not ids or self.read >= self.budget:
                return last
            if not self.complete(ids) or rounds >= MAX_ROUNDS:
                return last  # nothing more could be read
            rounds += 1

    def acceptors(self) -> dict[str, Acceptor] | None:
        """A restricted caller's acceptors (:func:`pathweave.graph.visibility.acceptors`) on
        the frontier: a search's hits are read into it first (``prepare``: passages by id,
        propositions' and triples' passages, entities made complete within the budget), then
        accepted when the caller's view of what is held has them. None when unrestricted."""
        if not self.access.restricted:
            return None
        share = self._accepting_now()["Passage"].share if self.topology.passage_props else 1.0
        readers = {"Passage": self.read_passages, "Proposition": self.read_propositions,
                   "Entity": self.complete, "Triple": self.read_triples}

        def acceptor(label: str) -> Acceptor:
            return Acceptor(lambda node_id: self._accepting_now()[label].accepts(node_id), share,
                            lambda ids: readers[label](list(ids)))
        return {label: acceptor(label) for label in readers}

    def _accepting_now(self) -> dict[str, Acceptor]:
        """The plain acceptors of the caller's view of what is held now (built once per held
        view: a hit asked again costs a lookup)."""
        held = self.topology.view()
        with self._lock:
            if self._accepting is not None and self._accepting[0] is held:
                return self._accepting[1]
        found = acceptors(visible_view(held, self.access), self.access)
        with self._lock:
            self._accepting = (held, found)
        return found


class FrontierMoved(PathweaveError, RuntimeError):
    """The tenant's frontier started again empty (over its cap, or rebuilt) while a query's
    push read it: the push's indices mean nothing in the new one (:meth:`Frontier.pagerank`)."""
