"""Linearization: lost-in-the-middle order, rendering, exact token counts."""

from __future__ import annotations

import pytest

from pathweave.selection import CandidateGraph, CandidateNode, assign_costs, linearize, select
from pathweave.selection.linearize import ends_first_order, render_line
from pathweave.selection.result import make_selection


def star_graph():
    """Q linked to five propositions of weights 5..1 citing passage P."""
    nodes = [CandidateNode(id="Q", kind="query", text="q", weight=0.0, cost=0)]
    for i, w in enumerate([3.0, 5.0, 1.0, 4.0, 2.0]):
        nodes.append(CandidateNode(id=f"s{i}", kind="proposition", text=f"fact number {w:g}",
                                   weight=w, cost=5, citation="P"))
    return CandidateGraph(query_id="Q", nodes=nodes, edges=[("Q", n.id) for n in nodes[1:]])


def selection_of(graph, ids):
    return make_selection(graph, ["Q", *ids], method="greedy", status="HEURISTIC",
                          bound=0.0, budget=1000, solve_ms=0.0)


def test_ends_first_positions():
    assert ends_first_order(0) == []
    assert ends_first_order(1) == [0]
    assert ends_first_order(5) == [0, 4, 1, 3, 2]
    assert ends_first_order(6) == [0, 5, 1, 4, 2, 3]


def test_highest_weights_at_both_ends(counter):
    g = star_graph()
    ctx = linearize(g, selection_of(g, ["s0", "s1", "s2", "s3", "s4"]), counter=counter)
    ranks = [item.rank for item in ctx.items]
    assert ranks == [1, 3, 5, 4, 2]  # rank 1 first, 2 last, 3 second, 4 second-to-last
    assert [item.weight for item in ctx.items] == [5.0, 3.0, 1.0, 2.0, 4.0]
    assert ctx.text.splitlines()[0] == "- fact number 5 [P]"
    assert ctx.text.splitlines()[-1] == "- fact number 4 [P]"
    assert "Q" not in [item.id for item in ctx.items]
    assert ctx.token_count == counter.count(ctx.text)
    assert ctx.tokenizer == counter.name
    assert ctx.style == "bullets"


def test_entities_only_when_not_mentioned(counter):
    nodes = [
        CandidateNode(id="Q", kind="query", text="q", weight=0.0, cost=0),
        CandidateNode(id="e_curie", kind="entity", text="Marie Curie", weight=0.9, cost=2),
        CandidateNode(id="e_paris", kind="entity", text="Paris", weight=0.5, cost=1),
        CandidateNode(id="s", kind="proposition", text="marie curie won the Nobel Prize.",
                      weight=2.0, cost=8, citation="P7"),
        CandidateNode(id="P7", kind="passage", text="Curie moved to France in 1891.",
                      weight=1.0, cost=9),
    ]
    g = CandidateGraph(query_id="Q", nodes=nodes,
                       edges=[("Q", "e_curie"), ("e_curie", "s"), ("s", "P7"), ("P7", "e_paris")])
    ctx = linearize(g, selection_of(g, ["e_curie", "s", "P7", "e_paris"]), counter=counter)
    assert [item.id for item in ctx.items] == ["s", "e_paris", "P7"]
    assert ctx.omitted == ["e_curie"]
    assert ctx.text == (
        "- marie curie won the Nobel Prize. [P7]\n"
        "- Entity: Paris\n"
        "- Curie moved to France in 1891. [P7]"  # a passage cites itself
    )
    assert [item.citation for item in ctx.items] == ["P7", None, "P7"]  # what an answer may cite
    assert ctx.token_count == counter.count(ctx.text)


def test_triples_style(counter):
    nodes = [
        CandidateNode(id="Q", kind="query", text="q", weight=0.0, cost=0),
        CandidateNode(id="s1", kind="proposition", text="Curie won the Nobel Prize",
                      weight=2.0, cost=5, citation="P1",
                      triple=("Curie", "won", "Nobel Prize")),
        CandidateNode(id="s2", kind="proposition", text="Curie was born in Warsaw",
                      weight=1.0, cost=5, citation="P2"),
        CandidateNode(id="e", kind="entity", text="Sorbonne", weight=0.5, cost=2),
    ]
    g = CandidateGraph(query_id="Q", nodes=nodes, edges=[("Q", "s1"), ("Q", "s2"), ("Q", "e")])
    ctx = linearize(g, selection_of(g, ["s1", "s2", "e"]), style="triples", counter=counter)
    assert ctx.text.splitlines() == [
        "(Curie; won; Nobel Prize) [P1]",
        "(Entity: Sorbonne)",
        "(Curie was born in Warsaw) [P2]",
    ]
    assert ctx.token_count == counter.count(ctx.text)


def test_empty_selection_and_bad_style(counter):
    g = star_graph()
    ctx = linearize(g, selection_of(g, []), counter=counter)
    assert ctx.text == "" and ctx.token_count == 0 and ctx.items == []
    with pytest.raises(ValueError, match="style"):
        linearize(g, selection_of(g, []), style="json", counter=counter)
    with pytest.raises(ValueError, match="query"):
        render_line(g.query)


def test_assign_costs_keeps_context_within_budget(counter):
    texts = ["Marie Curie won the Nobel Prize in Physics in 1903.",
             "She was the first woman to win a Nobel Prize.",
             "Pierre Curie shared the prize.",
             "The Sorbonne appointed her professor in 1906."]
    nodes = [CandidateNode(id="Q", kind="query", text="q", weight=0.0, cost=99)]
    nodes += [CandidateNode(id=f"s{i}", kind="proposition", text=t, weight=float(4 - i),
                            cost=0, citation="P1") for i, t in enumerate(texts)]
    nodes.append(CandidateNode(id="e", kind="entity", text="Warsaw", weight=0.1, cost=0))
    raw = CandidateGraph(query_id="Q", nodes=nodes,
                         edges=[("Q", "s0"), ("s0", "s1"), ("s1", "s2"), ("s2", "s3"), ("Q", "e")])
    g = assign_costs(raw, counter)
    assert g.query.cost == 0
    for n in g.nodes[1:]:
        assert n.cost == counter.count(render_line(n)) > 0
    for budget in (20, 35, 60, 200):
        sel = select(g, budget, method="ilp", time_limit_ms=2000)
        ctx = linearize(g, sel, counter=counter)
        assert ctx.token_count == counter.count(ctx.text)
        # WordPiece counts add up over newline-joined lines
        assert ctx.token_count == sum(g.node(i.id).cost for i in ctx.items) <= budget
