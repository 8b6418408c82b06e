"""A query's frontier: the part of a tenant's graph its Personalized PageRank reaches, read
from the store as the push needs it, never the tenant whole.

Stage 1 of PropRAG (spec §1) is a Personalized PageRank from the query's seeds. By forward
push (Andersen, Chung & Lang 2006) a node's row of the PPR graph is needed only when its
residual exceeds ``epsilon x degree``; the nodes whose rows are needed are the query's
frontier. :class:`FrontierTopology` is a tenant's :class:`~pathweave.graph.topology.Topology`
that holds only what frontiers asked for: passages read by id (statements
``topology_passage_*``), and entities made *complete* — every passage stating a
proposition that mentions the entity or an alias of its group read
(``frontier_entity_passages``), so that its row (co-occurrence counts, SYNONYM scores,
passage edges) is the tenant's row. A passage's row is whole once it is read. The push
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
from pathweave.graph.topology import FETCH_BATCH, Topology, TopologyView
from pathweave.graph.visibility import Acceptor, acceptors, visible_view

if TYPE_CHECKING:
    from pathweave.store.graph_store import GraphStore


def _batched(store: GraphStore, statement: str, ids: list[str]) -> list[dict]:
    rows: list[dict] = []
    for start in range(0, len(ids), FETCH_BATCH):
        rows += store.run(statement, ids=ids[start:start + FETCH_BATCH])
    return rows


class FrontierTopology(Topology):
    """A tenant's topology holding only what queries' frontiers read (see the module's
    text). ``complete``: the entities (indices) whose rows are whole; ``floors``: the passage
    counts of entities a query declined to complete (over its budget), a lower bound of
    their degree; ``max_bytes``: the cap beyond which :meth:`trim` empties it (None: none).
    Reads go to the store outside the topology's lock; what they return is applied under it."""

    def __init__(self, tenant: str, node_cache_entries: int = 50_000, max_bytes: int | None = None) -> None:
        super().__init__(tenant, node_cache_entries)
        self.max_bytes = max_bytes
        self.complete: set[int] = set()
        self.floors: dict[int, int] = {}
        self.synonyms_read: set[int] = set()  # entities whose SYNONYM edges are held
        self.passages_read = 0  # passages read from the store (all queries, since the last trim)

    def fresh(self) -> FrontierTopology:
        return FrontierTopology(self.tenant, self.nodes.max_entries, self.max_bytes)

    def load(self, store: GraphStore) -> None:
        """Nothing is read but the version: a frontier reads what its query needs."""
        self.version = store.graph_version()

    def trim(self) -> bool:
        """Start again empty at the current version (the node cache kept) when over
        ``max_bytes``; returns whether it did. Views already handed out stay valid."""
        with self._lock:
            if self.max_bytes is None or self.bytes <= self.max_bytes:
                return False
            fresh = self.fresh()
            fresh.version, fresh.nodes = self.version, self.nodes
            self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k not in ("_lock", "on_built")})
            return True

    def bounds(self, n_entities: int) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The complete entities below ``n_entities`` (indices) and the floors of the others
        ``(indices, passage counts)``, read under the lock (a concurrent query may add)."""
        with self._lock:
            held = np.fromiter((e for e in self.complete if e < n_entities), dtype=np.int64)
            floors = [(e, c) for e, c in self.floors.items() if e < n_entities]
        ends = np.asarray(floors, dtype=np.int64).reshape(-1, 2)
        return held, (ends[:, 0], ends[:, 1].astype(np.float64))

    # ---- what the change log changes, restricted to what is held -----------------------
    def _loaded(self, passage_id: str) -> bool:
        return self.passage_index.get(passage_id, -1) in self.passage_props

    def apply_added(self, store: GraphStore, passage_ids: list[str]) -> None:
        """Take in the added passages that mention a complete entity (they belong to its row);
        of those already held (another document holds them now), the access is read again."""
        with self._lock:
            held = [p for p in passage_ids if self._loaded(p)]
        if held:
            super()._read_access(store, held)
        if not self.complete or not passage_ids:
            return
        wanted = set()
        for row in _batched(store, "topology_passage_propositions", passage_ids):
            entities = [self.entity_index.get(e, -1) for e in row["entities"] or []]
            if any(self.aliases.get(e, e) in self.complete for e in entities if e >= 0):
                wanted.add(row["passage_id"])
        self.read_passages(store, [p for p in passage_ids if p in wanted])

    def set_synonyms(self, entity_ids: list[str], rows: list[dict]) -> None:
        """The SYNONYM edges of the held entities among ``entity_ids`` (others are read when a
        frontier reaches them)."""
        known = [e for e in entity_ids if e in self.entity_index]
        rows = [r for r in rows if r["src"] in self.entity_index or r["dst"] in self.entity_index]
        if known or rows:
            super().set_synonyms(known, rows)

    def set_aliases(self, entity_ids: list[str], rows: list[dict]) -> None:
        """The alias edges of the held entities; a group whose members changed is no longer
        complete (its new member's passages are not read yet)."""
        rows = [r for r in rows if r["alias"] in self.entity_index or r["canonical"] in self.entity_index]
        known = [e for e in entity_ids if e in self.entity_index]
        if not known and not rows:
            return
        before = {self.entity_index[e]: self.aliases.get(self.entity_index[e]) for e in known}
        super().set_aliases(known, rows)
        for e, old in before.items():
            new = self.aliases.get(e)
            if new != old:  # the groups of both canonicals changed
                self.complete -= {e, old, new}
        for row in rows:  # an alias not listed (held as a canonical's member) moves too
            a = self.entity_index[row["alias"]]
            if a not in before:
                self.complete -= {self.aliases.get(a), a}

    def remove_entities(self, entity_ids: list[str]) -> None:
        gone = {self.entity_index[e] for e in entity_ids if e in self.entity_index}
        self.complete -= gone
        self.synonyms_read -= gone
        super().remove_entities(entity_ids)

    def _read_access(self, store: GraphStore, passage_ids: list[str]) -> None:
        super()._read_access(store, [p for p in passage_ids if self._loaded(p)])

    # ---- reading what a frontier asks for --------------------------------------------
    def read_passages(self, store: GraphStore, passage_ids: Iterable[str]) -> int:
        """Read the passages of ``passage_ids`` not held yet (their propositions, entities,
        triples and access), with the SYNONYM and alias edges of the entities they bring;
        returns how many were read."""
        with self._lock:
            new = [p for p in dict.fromkeys(passage_ids) if not self._loaded(p)]
        if not new:
            return 0
        for start in range(0, len(new), FETCH_BATCH):
            chunk = new[start:start + FETCH_BATCH]
            access = store.run("topology_passage_access", ids=chunk)  # first: no passage without its access
            props = store.run("topology_passage_propositions", ids=chunk)
            triples = store.run("topology_passage_triples", ids=chunk)
            with self._lock:
                self.add_passages(props, triples, chunk)
                self.set_access(chunk, access)
        with self._lock:
            self.passages_read += len(new)
            entities = {e for p in new for r in self.passage_props.get(self.passage_index[p], ())
                        for e in self.prop_entities.get(int(r), ()).tolist()}
            entities = [self.entity_ids[e] for e in sorted(entities - self.synonyms_read)]
        self._read_entity_edges(store, entities)
        return len(new)

    def _read_entity_edges(self, store: GraphStore, entity_ids: list[str]) -> None:
        """The SYNONYM edges of ``entity_ids`` and the alias edges of them and of the
        entities those edges name first."""
        if not entity_ids:
            return
        synonyms = _batched(store, "topology_entity_synonyms", entity_ids)
        named = sorted({r[end] for r in synonyms for end in ("src", "dst")} | set(entity_ids))
        aliases = _batched(store, "topology_entity_aliases", named)
        with self._lock:
            self._entities(named)  # held: their edges apply
            super().set_synonyms(entity_ids, synonyms)
            self.synonyms_read.update(self.entity_index[e] for e in entity_ids)
            self.set_aliases(named, aliases)

    def complete_entities(self, store: GraphStore, entity_ids: list[str], budget: int) -> tuple[set[str], set[str]]:
        """Make the entities of ``entity_ids`` complete, in order, while the passages to read
        stay within ``budget``: ``(completed, declined)`` ids. A declined entity's passage
        count is kept as its degree's floor (:attr:`floors`); an entity the store no longer
        has is declined."""
        rows = {row["id"]: row for row in _batched(store, "frontier_entity_passages", entity_ids)}
        taken: list[dict] = []
        wanted: list[str] = []
        declined: set[str] = set()
        with self._lock:
            for eid in entity_ids:
                row = rows.get(eid)
                missing = [] if row is None else [p for p in row["passages"] if not self._loaded(p)]
                if row is None or (len(wanted) + len(missing) > budget and missing):
                    declined.add(eid)
                    if row is not None:
                        self.floors[self._intern(self.entity_index, self.entity_ids, eid)] = len(row["passages"])
                    continue
                taken.append(row)
                wanted += missing
        self.read_passages(store, wanted)
        members = sorted({m for row in taken for m in row["members"]})
        with self._lock:
            unread = [m for m in members if self.entity_index.get(m, -1) not in self.synonyms_read]
        self._read_entity_edges(store, unread)
        aliases = _batched(store, "topology_entity_aliases", members)
        with self._lock:
            self.set_aliases(members, aliases)
            for row in taken:  # after the alias edges: their change would make the group incomplete again
                for eid in (row["id"], row["canonical"]):
                    self.complete.add(self._intern(self.entity_index, self.entity_ids, eid))
        return {row["id"] for row in taken}, declined


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
        """Hold the passages stating the propositions of ``prop_ids``."""
        self.read_passages(r["passage_id"] for r in _batched(self.store, "frontier_proposition_passages",
                                                               list(prop_ids)))

    def read_triples(self, triple_ids: list[str]) -> None:
        """Hold the passages asserting the triples of ``triple_ids``."""
        self.read_passages(r["passage_id"] for r in _batched(self.store, "frontier_triple_passages",
                                                               list(triple_ids)))

    def complete(self, entity_ids: list[str]) -> None:
        """Make the entities of ``entity_ids`` complete within what is left of the budget."""
        left = max(0, self.budget - self.read)
        before = self.topology.passages_read
        _, declined = self.topology.complete_entities(self.store, list(entity_ids), left)
        self.read += max(0, self.topology.passages_read - before)
        self.declined |= declined

    def pagerank(self, entities: np.ndarray, entity_weights: np.ndarray, passages: np.ndarray,
                 passage_weights: np.ndarray, damping: float, epsilon: float) -> tuple[TopologyView, np.ndarray]:
        """Personalized PageRank by push from the seed ``entities`` and ``passages`` (topology
        indices, stable across the held topology's views) with their weights: the last
        view and its passages' ``(P,)`` scores. Rounds: push the whole rows; read the rows of
        the incomplete entities over the threshold (``epsilon x`` their degree, or their
        floor when larger), most residual per degree first; again, until none is left, the
        budget is spent or nothing more could be read."""
        while True:
            view = self.view()
            n_e, n_p = view.n_entities, view.n_passages
            reset = np.zeros(n_e + n_p)
            reset[entities] = entity_weights
            reset[n_e + passages] = passage_weights
            if reset.sum() <= 0:
                return view, np.zeros(n_p)
            pushable = np.ones(n_e + n_p, dtype=bool)
            pushable[:n_e] = view.canonical[:n_e] != np.arange(n_e)  # an alias has no edges: its row is whole
            held, floors = self.topology.bounds(n_e)
            pushable[held] = True
            estimate, residual = push(view.adjacency, view.degree, reset, damping, epsilon, pushable)
            floor = view.degree.copy()
            floor[floors[0]] = np.maximum(floor[floors[0]], floors[1])
            need = residual / np.maximum(floor, 1.0)
            blocked = np.flatnonzero(~pushable & (need > epsilon))
            ids = [view.entity_ids[i] for i in blocked[np.argsort(-need[blocked], kind="stable")]]
            ids = [i for i in ids if i not in self.declined]
            if not ids or self.read >= self.budget:
                return view, estimate[n_e:]
            completed = len(self.topology.complete)
            declined = len(self.declined)
            self.complete(ids)
            if len(self.topology.complete) == completed and len(self.declined) == declined:
                return view, estimate[n_e:]  # nothing more could be read

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
        """The plain acceptors of the caller's view of what is held now (built once per view)."""
        view = self.view()
        with self._lock:
            if self._accepting is None or self._accepting[0] is not view:
                self._accepting = (view, acceptors(view, self.access))
            return self._accepting[1]
