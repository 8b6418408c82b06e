"""The codebook in the graph (APR, spec §3 "Codebook", §0 APR lines; paper §2.2).

C = (E, R, M, Q, A, F, E_emb, R_emb) lives in the store: entities (E), relations (R) and
triples (the unique edges M) carry a stable per-tenant integer ``code``, assigned once at
ingestion from a per-tenant, per-kind counter node (``(:Codebook {codebook_id, next_code})``;
statements ``apr_code_*``: a node that has a code keeps it, so re-ingesting changes
nothing); the runs of the three channels (F: fact runs of passages, Q: question runs of
queries, A: answer runs) are ``(:Run)`` nodes with ordered ``EDGE`` links to their triples,
and carry codes too (what a session's prompt refers to).

:class:`CodebookView` is the id-indexed view queries read: rows of runs, triples, entities
and relations fetched from the store by id and kept in the tenant's bounded node cache
(:class:`~pathweave.graph.node_cache.NodeCache`, shared with the topology), so the view grows
with what queries touch (incrementally, never a whole-tenant read) and a changed graph only
adds rows under new ids (runs, triples and symbols are immutable under their content ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pathweave.graph.node_cache import NodeCache
from pathweave.store.graph_store import GraphStore
from pathweave.graph.vectors import decode_vectors

KINDS: dict[str, str] = {"entity": "apr_code_entities", "relation": "apr_code_relations",
                         "triple": "apr_code_triples", "run": "apr_code_runs"}
"""Codebook kinds -> the statement assigning their codes."""


def codebook_id(tenant: str, kind: str) -> str:
    """The id of ``tenant``'s counter node for ``kind`` (``codebook:<tenant>:<kind>``)."""
    return f"codebook:{tenant}:{kind}"


def code_steps(tenant: str, ids_by_kind: dict[str, Sequence[str]]) -> list[tuple[str, dict]]:
    """Named statements ``(name, params)`` giving codes to the nodes of ``ids_by_kind``
    (``{"entity": [...], "relation": [...], "triple": [...], "run": [...]}``) that have none;
    run them in the transaction that writes the nodes. Raises KeyError on an unknown kind."""
    return [(KINDS[kind], {"codebook_id": codebook_id(tenant, kind), "ids": list(dict.fromkeys(ids))})
            for kind, ids in ids_by_kind.items() if ids]


@dataclass(frozen=True)
class RunRow:
    """A run: ``channel`` (fact | question | answer), ``code``, ``text`` (its lines), ``vec``
    ``(d,)`` (the run text's embedding), the ids of its entities, relations and triples
    (``triple_ids`` in order) and the passages it stands for."""

    run_id: str
    channel: str
    code: int | None
    text: str
    vec: np.ndarray
    entity_ids: tuple[str, ...]
    relation_ids: tuple[str, ...]
    triple_ids: tuple[str, ...]
    passage_ids: tuple[str, ...]


@dataclass(frozen=True)
class TripleRow:
    """An edge of the codebook: ``code``, its words ``(h, r, t)``, symbol ids and the ``(d,)``
    embedding of its line "h r t"."""

    triple_id: str
    code: int | None
    words: tuple[str, str, str]
    subject_id: str
    relation_id: str
    object_id: str
    line_vec: np.ndarray


@dataclass(frozen=True)
class SymbolRow:
    """An entity or relation: ``code``, ``name`` and ``(d,)`` vector."""

    symbol_id: str
    code: int | None
    name: str
    vec: np.ndarray


class CodebookView:
    """The id-indexed codebook of one tenant, read from the store on demand and cached in
    ``cache`` (bounded LRU, shared with the tenant's topology). ``dim``: vector size."""

    def __init__(self, store: GraphStore, cache: NodeCache, dim: int = 384) -> None:
        self.store = store
        self.cache = cache
        self.dim = dim

    def _rows(self, kind: str, statement: str, ids: Sequence[str], build) -> dict:
        """``{id: build(row)}``: the cached rows, the others read by ``statement`` (1,000 ids
        per round trip) and cached."""
        found, missing = self.cache.lookup(kind, ids)
        fetched = {}
        for start in range(0, len(missing), 1000):
            for row in self.store.run(statement, ids=missing[start:start + 1000]):
                fetched[row["id"]] = build(row)
        self.cache.put(kind, fetched)
        found.update(fetched)
        return found

    def _vec(self, text: str | None) -> np.ndarray:
        return decode_vectors([text], self.dim)[0]

    def runs(self, ids: Sequence[str]) -> dict[str, RunRow]:
        """``{run_id: RunRow}`` of the runs ``ids`` that exist."""
        return self._rows("apr_run", "apr_run_rows", ids, lambda r: RunRow(
            r["id"], r["channel"], r["code"], r["text"] or "", self._vec(r["vec"]), tuple(r["entity_ids"] or ()),
            tuple(r["relation_ids"] or ()), tuple(r["triple_ids"] or ()),
            tuple(dict.fromkeys(r["passage_ids"] or ()))))

    def triples(self, ids: Sequence[str]) -> dict[str, TripleRow]:
        """``{triple_id: TripleRow}`` of the triples ``ids`` that exist."""
        return self._rows("apr_triple", "apr_triple_rows", ids, lambda r: TripleRow(
            r["id"], r["code"], (r["subject"] or "", r["relation"] or "", r["object"] or ""), r["subject_id"],
            r["relation_id"], r["object_id"], self._vec(r["line_vec"])))

    def entities(self, ids: Sequence[str]) -> dict[str, SymbolRow]:
        """``{entity_id: SymbolRow}`` of the entities ``ids`` that exist."""
        return self._rows("apr_entity", "apr_entity_rows", ids,
                          lambda r: SymbolRow(r["id"], r["code"], r["name"] or "", self._vec(r["vec"])))

    def relations(self, ids: Sequence[str]) -> dict[str, SymbolRow]:
        """``{relation_id: SymbolRow}`` of the relations ``ids`` that exist."""
        return self._rows("apr_relation", "apr_relation_rows", ids,
                          lambda r: SymbolRow(r["id"], r["code"], r["name"] or "", self._vec(r["vec"])))

    def matrix(self, rows: dict, ids: Sequence[str], attribute: str = "vec") -> np.ndarray:
        """``(len(ids), dim)`` float32 of the rows' vectors (missing ids: zero rows)."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for i, node_id in enumerate(ids):
            row = rows.get(node_id)
            if row is not None:
                out[i] = getattr(row, attribute)
        return out
