"""What a restricted caller sees of a tenant's topology: the view rebuilt from its readable
passages only (:func:`visible_view`), so that no forbidden passage, proposition, entity,
triple, co-occurrence, SYNONYM or ALIAS_OF link takes part in its query.

A passage is readable when its access class reads for the caller
(:class:`pathweave.access.Access`); a proposition when a readable passage states it; an
entity when a readable proposition mentions it or a readable passage's triple names it; a
triple when a readable passage asserts it. The restricted view is built from the view's raw
incidence (the propositions' entities as stated, the stored SYNONYM pairs, the triples'
ends) exactly as a topology holding only the readable passages would be: co-occurrence
counts over readable propositions only, SYNONYM edges between readable entities only, and
an alias mapped onto its canonical entity only when the canonical is readable too (else it
stands for itself). So PPR, beam search and the HippoRAG 2 graph never flow through a
forbidden node. What differs from a tenant holding only the readable documents: the stored
SYNONYM edges were chosen among all the tenant's entities (an entity's nearest neighbours
may be forbidden ones, which are dropped, not replaced), and alias groups were clustered
over all of them.

Cost: the restricted view is built once per graph version and set of readable access
classes (sparse products over the tenant's edges) and kept with the view
(:data:`MAX_VISIBLE_VIEWS` per version); a query then costs what an unrestricted one does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from pathweave.access import Access
from pathweave.graph.topology import TopologyView, synonym_matrix

CARRIED = ("complete", "floors", "generation", "partial")
"""What a frontier's view carries for its push (:meth:`pathweave.graph.topology.FrontierTopology._build`),
kept in the restricted view built from it."""

MAX_VISIBLE_VIEWS = 32
"""Restricted views kept per topology version (distinct sets of readable access classes);
the oldest is dropped beyond it."""


def _binary(matrix: sp.spmatrix) -> sp.csr_matrix:
    matrix = matrix.tocsr()
    matrix.eliminate_zeros()
    matrix.data[:] = 1.0
    return matrix


def readable_passages(view: TopologyView, access: Access) -> np.ndarray:
    """``(P,)`` bool: the alive passages of ``view`` that ``access`` reads."""
    classes = np.fromiter((access.reads(acl) for acl in view.access_classes), dtype=bool,
                          count=len(view.access_classes))
    if len(view.access) != view.n_passages:  # never the case for a built view: fail closed
        return np.zeros(view.n_passages, dtype=bool)
    return view.alive & classes[view.access]


def _masks(view: TopologyView, alive: np.ndarray, states: sp.csr_matrix, raw: sp.csr_matrix,
           triple_rows: np.ndarray) -> dict:
    """The readable ``passages``, ``props``, ``entities`` and ``triples`` masks of ``view`` for
    the ``alive`` passages, with their ``states`` and ``raw`` proposition-entity incidence, and
    the ``triple_rows`` they assert; ``share``: the readable fraction of the view's alive passages."""
    n_e = view.n_entities
    props = np.asarray(states.sum(axis=0)).ravel() > 0
    entities = np.asarray(raw.sum(axis=0)).ravel() > 0
    raw_ends = view.extras["raw_triple_ends"]
    ends = raw_ends[np.unique(triple_rows)] if len(triple_rows) else np.zeros((0, 2), np.int64)
    entities[ends[(ends < n_e).all(axis=1)].ravel()] = True
    triples = np.zeros(len(raw_ends), dtype=bool)
    triples[triple_rows] = True
    return {"passages": alive, "props": props, "entities": entities, "triples": triples,
            "share": float(alive.sum()) / max(1, int(view.alive.sum()))}


def restrict(view: TopologyView, passages: np.ndarray) -> TopologyView:
    """``view`` as a topology holding only the alive passages where ``passages (P,)`` is
    true would be (see the module's text): same ids and indices, every matrix rebuilt from
    the raw incidence of what those passages state. Its ``extras["visible"]`` holds the
    readable ``passages (P,)``, ``props (R,)``, ``entities (E,)`` and ``triples (T,)`` masks
    and their ``share`` of the alive passages."""
    n_e, n_p = view.n_entities, view.n_passages
    alive = view.alive & passages[:n_p]
    states = _binary(sp.diags(alive.astype(np.float64)) @ view.states)
    props = np.asarray(states.sum(axis=0)).ravel() > 0
    raw = _binary(sp.diags(props.astype(np.float64)) @ view.extras["raw_prop_entities"])
    triple_passages, triple_rows = view.assertions
    asserted = alive[triple_passages] if len(triple_passages) else np.zeros(0, bool)
    triple_passages, triple_rows = triple_passages[asserted], triple_rows[asserted]
    raw_ends = view.extras["raw_triple_ends"]
    visible = _masks(view, alive, states, raw, triple_rows)
    entities = visible["entities"]
    canonical = np.arange(n_e, dtype=np.int64)
    canonical[:len(view.canonical)] = view.canonical[:n_e]
    canonical = np.where(entities[canonical], canonical, np.arange(n_e, dtype=np.int64))
    to_canonical = sp.csr_matrix((np.ones(n_e), (np.arange(n_e), canonical)), shape=(n_e, n_e))
    prop_entities = _binary(raw @ to_canonical)
    cooccurrence = (prop_entities.T @ prop_entities).tocsr()
    cooccurrence = (cooccurrence - sp.diags(cooccurrence.diagonal())).tocsr()
    pairs, scores = view.extras["synonym_pairs"], view.extras["synonym_scores"]
    inside = (pairs < n_e).all(axis=1)
    inside[inside] = entities[pairs[inside]].all(axis=1)
    pairs, scores = pairs[inside], scores[inside]
    synonyms = synonym_matrix(pairs, scores, canonical)
    passage_entities = _binary(states @ prop_entities)
    adjacency = sp.bmat([[cooccurrence + synonyms, passage_entities.T], [passage_entities, None]], format="csr")
    adjacency.eliminate_zeros()
    return replace(
        view, states=states, prop_entities=prop_entities, synonyms=synonyms, adjacency=adjacency,
        degree=np.asarray(adjacency.sum(axis=1)).ravel(), alive=alive, triple_ends=canonical[raw_ends],
        assertions=(triple_passages, triple_rows), canonical=canonical,
        extras={"passage_entities": passage_entities, "raw_prop_entities": raw, "raw_triple_ends": raw_ends,
                "synonym_pairs": pairs, "synonym_scores": scores,
                "shared_passages": view.extras.get("shared_passages", frozenset()), "visible": visible,
                **{key: view.extras[key] for key in CARRIED if key in view.extras}})


def visible_view(view: TopologyView, access: Access) -> TopologyView:
    """What ``access`` sees of ``view``: the view itself when it reads every alive passage
    (an unrestricted caller always), else :func:`restrict` to its readable passages, built
    once per version and set of readable access classes (kept with ``view``, at most
    :data:`MAX_VISIBLE_VIEWS`)."""
    if not access.restricted:
        return view
    passages = readable_passages(view, access)
    if passages.sum() == view.alive.sum() and not view.extras.get("partial"):
        return view  # (a frontier's may name entities no held passage mentions: always rebuilt)
    classes = tuple(i for i, acl in enumerate(view.access_classes) if access.reads(acl))
    kept = view.extras.get("visible_views")
    if kept is None:
        kept = view.keep("visible_views", {})
    building = view.extras.get("visible_lock") or view.keep("visible_lock", threading.Lock())
    with building:  # concurrent queries of one caller build its view once
        with view._lock:
            found = kept.get(classes)
        if found is not None:
            return found
        restricted = restrict(view, passages)
        with view._lock:
            if len(kept) >= MAX_VISIBLE_VIEWS:
                kept.pop(next(iter(kept)))
            kept[classes] = restricted
        return restricted


def _nothing(ids: list[str]) -> None:
    return None


@dataclass(frozen=True)
class Acceptor:
    """Which of an index's hits a restricted caller may see: ``accepts(id)``, and ``share``,
    the readable fraction of the tenant's alive passages (a search asks for about ``k /
    share`` places at once instead of widening). ``prepare(ids)``: called with a round's
    ids before they are asked (a frontier reads them first,
    :meth:`pathweave.graph.frontier.Frontier.acceptors`)."""

    accepts: Callable[[str], bool]
    share: float
    prepare: Callable[[list[str]], None] = _nothing


def acceptors(view: TopologyView, access: Access) -> dict[str, Acceptor] | None:
    """The :class:`Acceptor` per searched label (``Passage``, ``Proposition``, ``Entity``,
    ``Triple``) of what ``access`` sees, ``view`` being :func:`visible_view`'s for it; None
    for an unrestricted caller (every hit of the tenant is visible). A restricted caller that
    reads every passage of ``view`` still accepts only what ``view`` holds: a document
    written since (whatever its access list) is not taken before its topology knows it."""
    if not access.restricted:
        return None
    visible = view.extras.get("visible")
    if visible is None:  # the whole view is readable: its own masks, computed once per view
        visible = view.extras.get("visible_all")
        if visible is None:
            passages, triples = view.assertions
            asserted = view.alive[passages] if len(passages) else np.zeros(0, bool)
            visible = view.keep("visible_all", _masks(view, view.alive, view.states,
                                                      view.extras["raw_prop_entities"], triples[asserted]))
    share = max(visible["share"], 1e-3)

    def member(index: dict[str, int], mask: np.ndarray) -> Callable[[str], bool]:
        def accepts(node_id: str) -> bool:
            i = index.get(node_id, -1)
            return 0 <= i < len(mask) and bool(mask[i])
        return accepts

    return {"Passage": Acceptor(member(view.passage_index, visible["passages"]), share),
            "Proposition": Acceptor(member(view.prop_index, visible["props"]), share),
            "Entity": Acceptor(member(view.entity_index, visible["entities"]), share),
            "Triple": Acceptor(member(view.triple_index, visible["triples"]), share)}
