"""The Cypher-fetched neighbourhood of one query: G_sub (spec §1 stage 2).

Stage 1 ranks passages on the tenant's integer topology; the top K passages, their
propositions and the entities those mention form G_sub. Its structure comes from the
topology (sliced, local indices); texts and embeddings come from the store by id
(statements ``subgraph_*``, through the tenant's bounded :class:`~pathweave.graph.node_cache.NodeCache`).
Beam search, stage-2 PPR and the token-budgeted candidate graph run on it. Entity names
and embeddings are read only for the entities a step needs (:meth:`Subgraph.ensure_entities`),
passage texts only for the passages a result returns (:meth:`Subgraph.ensure_texts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from pathweave.graph.ppr import Walk, transition_matrix
from pathweave.graph.vectors import decode_vectors

if TYPE_CHECKING:
    from pathweave.graph.node_cache import NodeCache
    from pathweave.store.graph_store import GraphStore
    from pathweave.graph.topology import TopologyView


@dataclass
class NodeReader:
    """Reads node rows of one tenant by id through its cache: ``dim``-d vectors."""

    store: GraphStore
    cache: NodeCache
    dim: int = 384

    def _read(self, kind: str, statement: str, ids: Sequence[str], fields: tuple[str, ...]) -> dict[str, tuple]:
        """``{id: (fields...)}``: the cached rows, the others read by ``statement`` (1,000 ids
        per round trip) and cached."""
        found, missing = self.cache.lookup(kind, ids)
        fetched: dict[str, tuple] = {}
        for start in range(0, len(missing), 1000):
            for row in self.store.run(statement, ids=missing[start:start + 1000]):
                fetched[row["id"]] = tuple(row[f] for f in fields)
        self.cache.put(kind, fetched)
        found.update(fetched)
        return found

    def passages(self, ids: Sequence[str]) -> dict[str, tuple]:
        """``{id: (title, doc_id, vec)}`` of passages."""
        return self._read("passage", "subgraph_passages", ids, ("title", "doc_id", "vec"))

    def passage_texts(self, ids: Sequence[str]) -> dict[str, tuple]:
        """``{id: (text, page, section, cited_title, source)}`` of passages (the last four
        for citations: :func:`pathweave.records.citations.format_citation` and the document's source)."""
        return self._read("passage_text", "subgraph_passage_texts", ids,
                          ("text", "page", "section", "cited_title", "source"))

    def propositions(self, ids: Sequence[str]) -> dict[str, tuple]:
        """``{id: (text, vec)}`` of propositions."""
        return self._read("proposition", "subgraph_propositions", ids, ("text", "vec"))

    def entities(self, ids: Sequence[str]) -> dict[str, tuple]:
        """``{id: (name, vec)}`` of entities."""
        return self._read("entity", "subgraph_entities", ids, ("name", "vec"))

    def vectors(self, rows: Sequence[tuple | None], at: int) -> np.ndarray:
        """``(n, dim)`` float32 from the ``vec`` field ``at`` of ``rows`` (missing: zeros)."""
        return decode_vectors([row[at] if row else None for row in rows], self.dim)


@dataclass
class Subgraph:
    """G_sub of one query, with local indices.

    Shapes: ``passage_emb (P, d)``, ``prop_emb (R, d)``, ``entity_emb (E, d)`` float32
    L2-normalized (entity rows zero until :meth:`ensure_entities`); ``states (P, R)``,
    ``prop_entities (R, E)``, ``passage_entities (P, E)`` binary CSR; ``synonyms (E, E)``
    cosine scores; ``adjacency (E + P, E + P)`` the PPR graph restricted to G_sub
    (entities first). ``passages`` / ``entities``: the topology indices of the local rows.
    """

    version: int
    passage_ids: list[str]
    passage_titles: list[str]
    passage_texts: list[str]
    passage_docs: list[str]
    passage_emb: np.ndarray
    prop_ids: list[str]
    prop_texts: list[str]
    prop_emb: np.ndarray
    entity_ids: list[str]
    entity_names: list[str]
    entity_emb: np.ndarray
    states: sp.csr_matrix
    prop_entities: sp.csr_matrix
    synonyms: sp.csr_matrix
    adjacency: sp.csr_matrix
    passages: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    entities: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    reader: NodeReader | None = None
    extras: dict = field(default_factory=dict)
    _entities_read: set = field(default_factory=set)

    def derived(self, key, build):
        """``build()``'s result, computed once for this subgraph and kept in ``extras[key]``."""
        if key not in self.extras:
            self.extras[key] = build()
        return self.extras[key]

    @property
    def n_entities(self) -> int:
        """E: the entities G_sub holds (its matrices' entity dimension)."""
        return len(self.entity_ids)

    @property
    def passage_entities(self) -> sp.csr_matrix:
        """``(P, E)``: the entities of each passage's propositions."""
        def build():
            matrix = (self.states @ self.prop_entities).tocsr()
            matrix.data[:] = 1.0
            return matrix
        return self.derived("passage_entities", build)

    @property
    def prop_passages(self) -> sp.csr_matrix:
        """``(R, P)`` transpose of ``states``."""
        return self.derived("prop_passages", lambda: self.states.T.tocsr())

    @property
    def walk(self) -> Walk:
        """``adjacency``'s walk prepared for power iteration."""
        return self.derived("walk", lambda: Walk.of(transition_matrix(self.adjacency)))

    def ensure_entities(self, local: Sequence[int] | np.ndarray) -> None:
        """Read the names and embeddings of the local entities ``local`` (once each)."""
        todo = [int(e) for e in local if int(e) not in self._entities_read]
        if not todo or self.reader is None:
            return
        rows = self.reader.entities([self.entity_ids[e] for e in todo])
        found = [rows.get(self.entity_ids[e]) for e in todo]
        vectors = self.reader.vectors(found, 1)
        for e, row, vector in zip(todo, found, vectors):
            self.entity_names[e] = row[0] if row else ""
            self.entity_emb[e] = vector
        self._entities_read.update(todo)

    def ensure_texts(self, local: Sequence[int] | np.ndarray) -> None:
        """Read the texts of the local passages ``local``."""
        todo = [int(p) for p in local if not self.passage_texts[int(p)]]
        if not todo or self.reader is None:
            return
        rows = self.reader.passage_texts([self.passage_ids[p] for p in todo])
        for p in todo:
            row = rows.get(self.passage_ids[p])
            self.passage_texts[p] = row[0] if row else ""


def build_subgraph(view: TopologyView, passages: np.ndarray, reader: NodeReader | None,
                   extra_entities: np.ndarray | None = None) -> Subgraph:
    """G_sub of the topology passages ``passages`` (indices into ``view``): their
    propositions (texts and embeddings read through ``reader``), the entities those
    mention (plus ``extra_entities``; names and embeddings on demand) and the PPR graph
    between them. Raises KeyError when the store lacks a passage the topology has."""
    passages = np.asarray(passages, dtype=np.int64)
    states_rows = view.states[passages]
    props = np.unique(states_rows.indices)
    mentions = view.prop_entities[props]
    entities = np.unique(mentions.indices)
    if extra_entities is not None and len(extra_entities):
        entities = np.union1d(entities, np.asarray(extra_entities, dtype=np.int64))
    nodes = np.concatenate([entities, view.n_entities + passages])
    passage_ids = [view.passage_ids[p] for p in passages]
    prop_ids = [view.prop_ids[r] for r in props]
    passage_rows = reader.passages(passage_ids) if reader else {}
    prop_rows = reader.propositions(prop_ids) if reader else {}
    passage_found = [passage_rows.get(p) for p in passage_ids]
    prop_found = [prop_rows.get(r) for r in prop_ids]
    dim = reader.dim if reader else 384
    return Subgraph(
        version=view.version,
        passage_ids=passage_ids,
        passage_titles=[(row[0] or "") if row else "" for row in passage_found],
        passage_texts=[""] * len(passages),
        passage_docs=[(row[1] or "") if row else "" for row in passage_found],
        passage_emb=reader.vectors(passage_found, 2) if reader else np.zeros((len(passages), dim), np.float32),
        prop_ids=prop_ids,
        prop_texts=[(row[0] or "") if row else "" for row in prop_found],
        prop_emb=reader.vectors(prop_found, 1) if reader else np.zeros((len(props), dim), np.float32),
        entity_ids=[view.entity_ids[e] for e in entities],
        entity_names=[""] * len(entities),
        entity_emb=np.zeros((len(entities), dim), dtype=np.float32),
        states=states_rows[:, props].tocsr(),
        prop_entities=mentions[:, entities].tocsr(),
        synonyms=view.synonyms[entities][:, entities].tocsr(),
        adjacency=view.adjacency[nodes][:, nodes].tocsr(),
        passages=passages, entities=entities, reader=reader,
    )
