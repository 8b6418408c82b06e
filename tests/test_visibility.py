"""What a restricted caller sees of a topology (pure logic: topologies built from rows, as
the store's statements return them): the restricted view equals the view of a topology that
holds only the readable passages, so PPR, beam search and the HippoRAG 2 graph never pass
through a forbidden node, alias or SYNONYM link."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from pathweave.access import UNRESTRICTED, Access, check_principals, passage_acl
from pathweave.errors import BadRequest
from pathweave.graph.topology import Topology, TopologyView
from pathweave.graph.visibility import acceptors, visible_view
from pathweave.retrieval.hipporag import build_hippo_graph

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

# passage -> (document access lists, {proposition: entities}, [(triple, subject, object)])
PASSAGES = {
    "p0": ([None], {"r0": ["e0", "e1"]}, [("t0", "e0", "e1")]),
    "p1": ([["group:a"]], {"r1": ["e1", "e2"], "r2": ["e2", "e3"]}, [("t1", "e2", "e3")]),
    "p2": ([["group:b"]], {"r3": ["e3", "e4"], "r1": ["e1", "e2"]}, [("t2", "e3", "e4")]),
    "p3": ([["group:b"], ["group:a", "user:7"]], {"r4": ["e5", "e0"]}, []),
    "p4": ([["user:9"]], {"r5": ["e6", "e1"], "r6": ["e6", "e3"]}, [("t3", "e6", "e1")]),
    "p5": ([[]], {"r7": ["e7", "e0"]}, []),
}
SYNONYMS = [("e1", "e4", 0.9), ("e2", "e3", 0.8), ("e0", "e5", 0.7), ("e3", "e6", 0.85), ("e5", "e7", 0.75)]
ALIASES = [("e4", "e3"), ("e5", "e6")]  # alias -> canonical


def topology(passages: dict, entities_seen: set[str] | None = None) -> Topology:
    """A topology holding ``passages`` (ids of :data:`PASSAGES`), with the SYNONYM and alias
    edges between ``entities_seen`` (None: all)."""
    topo = Topology("t")
    prop_rows = [{"passage_id": p, "prop_id": r, "entities": es} for p in passages for r, es in PASSAGES[p][1].items()]
    triple_rows = [{"passage_id": p, "triple_id": t, "subject_id": s, "object_id": o}
                   for p in passages for t, s, o in PASSAGES[p][2]]
    topo.add_passages(prop_rows, triple_rows, list(passages))
    topo.set_access(list(passages), [{"passage_id": p, "acl": acl} for p in passages for acl in PASSAGES[p][0]])
    keep = (lambda *ids: True) if entities_seen is None else (lambda *ids: all(i in entities_seen for i in ids))
    topo.set_synonyms([], [{"src": a, "dst": b, "score": s} for a, b, s in SYNONYMS if keep(a, b)])
    topo.set_aliases([], [{"alias": a, "canonical": c} for a, c in ALIASES if keep(a, c)])
    return topo


def edges(view: TopologyView, matrix: sp.spmatrix | None = None) -> dict[tuple[str, str], float]:
    """The nonzero edges of ``matrix`` (default the PPR graph) by id pairs."""
    names = view.entity_ids[:view.n_entities] + view.passage_ids[:view.n_passages]
    upper = sp.triu(view.adjacency if matrix is None else matrix, k=1).tocoo()
    return {tuple(sorted((names[a], names[b]))): round(float(w), 6) for a, b, w in zip(upper.row, upper.col, upper.data)
            if w != 0}


def walk(view: TopologyView) -> dict[tuple[str, str], float]:
    """The HippoRAG 2 graph's transition probabilities of ``view`` by id pairs."""
    names = view.entity_ids[:view.n_entities] + view.passage_ids[:view.n_passages]
    matrix = build_hippo_graph(view).walk.transposed.tocoo()
    return {(names[a], names[b]): round(float(w), 6) for a, b, w in zip(matrix.row, matrix.col, matrix.data) if w}


def readable(access: Access) -> list[str]:
    return [p for p, (acls, _, _) in PASSAGES.items() if access.reads(passage_acl(acls))]


@pytest.mark.parametrize("principals", [["group:a"], ["group:b"], ["user:9"], ["group:a", "user:9"], ["user:7"], []])
def test_the_restricted_view_equals_a_topology_of_the_readable_passages_alone(principals):
    access = Access.of(principals)
    full = topology(PASSAGES).view()
    seen = visible_view(full, access)
    mine = readable(access)
    alone = topology({p: PASSAGES[p] for p in mine},
                     {e for p in mine for es in PASSAGES[p][1].values() for e in es}
                     | {e for p in mine for _, s, o in PASSAGES[p][2] for e in (s, o)}).view()
    assert edges(seen) == edges(alone)
    assert walk(seen) == walk(alone)  # the HippoRAG 2 graph too
    assert sorted(seen.passage_ids[i] for i in np.flatnonzero(seen.alive)) == sorted(mine)
    assert {seen.prop_ids[r] for r in np.flatnonzero(np.asarray(seen.states.sum(axis=0)).ravel())} == \
        {r for p in mine for r in PASSAGES[p][1]}
    triples = {seen.triple_ids[t] for t in seen.assertions[1]}
    assert triples == {t for p in mine for t, _, _ in PASSAGES[p][2]}
    accept = acceptors(seen, access)
    if accept is not None:  # every hit it accepts is readable, and every readable one is accepted
        assert {p for p in PASSAGES if accept["Passage"].accepts(p)} == set(mine)
        assert {r for r in full.prop_index if accept["Proposition"].accepts(r)} == \
            {r for p in mine for r in PASSAGES[p][1]}
        assert not accept["Passage"].accepts("unknown") and 0 < accept["Passage"].share < 1


def test_a_forbidden_alias_canonical_or_synonym_link_leads_nowhere():
    full = topology(PASSAGES).view()
    seen = visible_view(full, Access.of(["group:a"]))  # p0, p1, p3: e5 readable, its canonical e6 is not
    e5, e6 = full.entity_index["e5"], full.entity_index["e6"]
    assert full.canonical[e5] == e6 and seen.canonical[e5] == e5
    assert ("e3", "e6") not in edges(seen) and ("e1", "e4") not in edges(seen)
    assert edges(seen)[("e0", "e5")] > 0  # a readable pair keeps its synonymy


def test_an_unrestricted_caller_or_one_reading_everything_gets_the_view_itself():
    full = topology(PASSAGES).view()
    assert visible_view(full, UNRESTRICTED) is full and acceptors(full, UNRESTRICTED) is None
    everyone = Access.of(["group:a", "group:b", "user:9"])
    assert visible_view(full, everyone) is not full  # p5 (empty list) is for unrestricted callers only
    assert visible_view(full, Access.of(["group:a"])) is visible_view(full, Access.of(["group:a", "user:7"]))


def test_access_lists_and_principals():
    assert passage_acl([None, ["group:a"]]) is None and passage_acl([["b:x"], ["a:y", "b:x"]]) == ("a:y", "b:x")
    assert Access.of("group:a, user:7").principals == frozenset({"group:a", "user:7"})
    assert Access.of(None) == UNRESTRICTED and not UNRESTRICTED.restricted
    for bad in ("finance", "group: a", "Group:a", "group:a,b c"):
        with pytest.raises(BadRequest):
            check_principals(bad)
    a, ab = Access.of(["group:a"]), Access.of(["group:a", "group:b"])
    assert ab.covers(a) and not a.covers(ab) and UNRESTRICTED.covers(a) and not a.covers(UNRESTRICTED)
    assert a.reads(None) and a.reads(["group:a"]) and not a.reads([]) and UNRESTRICTED.reads([])


def test_a_passage_a_second_document_comes_to_hold_is_shared_in_the_next_view():
    """A public document's passage that a red document then also holds keeps its access class
    (the whole tenant), yet the next view names it shared: a red caller is cited by the first
    readable of its documents, not by the one the node cache names."""
    topo = topology({"p0": PASSAGES["p0"]})
    assert topo.passage_index["p0"] not in topo.view().extras["shared_passages"]
    topo.set_access(["p0"], [{"passage_id": "p0", "acl": None}, {"passage_id": "p0", "acl": ["group:red"]}])
    assert topo.view().extras["shared_passages"] == {topo.passage_index["p0"]}
    topo.set_access(["p0"], [{"passage_id": "p0", "acl": None}])
    assert not topo.view().extras["shared_passages"]
