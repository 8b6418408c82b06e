"""CandidateGraph / CandidateNode validation and graph helpers."""

from __future__ import annotations

import math

import pytest

from pathweave.selection import CandidateGraph, CandidateNode


def node(node_id, kind="proposition", weight=1.0, cost=1, **kw):
    return CandidateNode(id=node_id, kind=kind, text=node_id, weight=weight, cost=cost, **kw)


Q = CandidateNode(id="Q", kind="query", text="q", weight=0.0, cost=0)


def test_valid_graph_adjacency_dedupes_edges():
    g = CandidateGraph(query_id="Q", nodes=[Q, node("a"), node("b")],
                       edges=[("Q", "a"), ("a", "Q"), ("a", "b"), ("Q", "a")])
    adj = g.adjacency()
    assert adj == {"Q": ["a"], "a": ["Q", "b"], "b": ["a"]}
    assert g.unique_edges() == [("Q", "a"), ("a", "b")]
    adj["Q"].append("zzz")  # a copy: the graph is unaffected
    assert g.adjacency()["Q"] == ["a"]
    assert g.query is g.node("Q")


@pytest.mark.parametrize("weight", [-0.1, math.nan, math.inf])
def test_bad_weight_raises_value_error(weight):
    with pytest.raises(ValueError, match="weight"):
        node("a", weight=weight)


def test_negative_cost_raises_value_error():
    with pytest.raises(ValueError, match="cost"):
        node("a", cost=-1)


def test_unknown_edge_id_raises():
    with pytest.raises(ValueError, match="unknown node id"):
        CandidateGraph(query_id="Q", nodes=[Q, node("a")], edges=[("Q", "a"), ("a", "ghost")])


def test_missing_query_node_raises():
    with pytest.raises(ValueError, match="query node 'Q' is not among the nodes"):
        CandidateGraph(query_id="Q", nodes=[node("a")], edges=[])


def test_query_node_wrong_kind_raises():
    with pytest.raises(ValueError, match="must have kind 'query'"):
        CandidateGraph(query_id="a", nodes=[node("a")], edges=[])


def test_second_query_kind_node_raises():
    q2 = CandidateNode(id="Q2", kind="query", text="q", weight=0.0, cost=0)
    with pytest.raises(ValueError, match="only the query node"):
        CandidateGraph(query_id="Q", nodes=[Q, q2], edges=[])


def test_duplicate_ids_and_self_loops_raise():
    with pytest.raises(ValueError, match="duplicate node id"):
        CandidateGraph(query_id="Q", nodes=[Q, node("a"), node("a")], edges=[])
    with pytest.raises(ValueError, match="self loop"):
        CandidateGraph(query_id="Q", nodes=[Q, node("a")], edges=[("a", "a")])


def test_unknown_kind_raises():
    with pytest.raises(ValueError):
        CandidateNode(id="a", kind="table", text="a", weight=1.0, cost=1)


def test_path_costs_and_connectivity():
    g = CandidateGraph(
        query_id="Q",
        nodes=[Q, node("a", cost=5), node("b", cost=1), node("c", cost=2), node("iso")],
        edges=[("Q", "a"), ("Q", "b"), ("b", "a"), ("a", "c")],
    )
    # Q->b->a (1 + 5) is not cheaper than Q->a (5); c via a: 5 + 2
    assert g.path_costs() == {"Q": 0, "a": 5, "b": 1, "c": 7}
    assert g.is_connected(["Q", "a", "c"])
    assert not g.is_connected(["Q", "c"])
    assert not g.is_connected(["a", "c"])  # Q missing
    with pytest.raises(KeyError):
        g.is_connected(["Q", "nope"])
