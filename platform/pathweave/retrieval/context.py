"""Token-budgeted context from a retrieval result (graph context optimization
seed; spec §5): candidate graph -> connected selection under L tokens (CP-SAT
ILP or greedy) -> linearized, prompt-ready context.

Candidate graph, built from what retrieval already holds in the snapshot (no
store round trip):

- Q, the query node (weight 0, cost 0), linked to the seeds: the stage-2 seed
  entities (PropRAG) or, in modes without entity seeds, the candidate passages;
- the ranked passages of the result (``context_passages`` of them), the propositions on the top
  paths and the entities of those propositions;
- edges: Passage-STATES-Proposition, Proposition-MENTIONS-Entity,
  Passage-MENTIONS-Entity (entities of its propositions), consecutive path steps.

Weights (documented formula): passage ``w = 0.1 + 0.9 * minmax(score)`` over the
candidate passages; proposition ``w = 0.5 * max(0, best score of a top path
containing it)``; entity ``w = 0.05 * seed weight`` (0 for non-seeds: entities
are connectors). Cost = tokens of the node's rendered line (:func:`assign_costs`).
"""

from __future__ import annotations

import numpy as np

from pathweave.model import BudgetedContext, ContextLine, QueryResult
from pathweave.ppr import min_max
from pathweave.selection import CandidateGraph, CandidateNode, TokenCounter, assign_costs, linearize, select
from pathweave.snapshot import GraphSnapshot

QUERY_NODE = "Q"


def candidate_graph(result: QueryResult, snapshot: GraphSnapshot) -> CandidateGraph:
    """The candidate graph of ``result``: its ranked passages, paths and seeds."""
    p_index = {pid: i for i, pid in enumerate(snapshot.passage_ids)}
    r_index = {rid: i for i, rid in enumerate(snapshot.prop_ids)}
    e_index = {eid: i for i, eid in enumerate(snapshot.entity_ids)}
    passages = [p_index[hit.passage_id] for hit in result.passages if hit.passage_id in p_index]
    passage_w = 0.1 + 0.9 * min_max(np.asarray([hit.score for hit in result.passages], dtype=np.float64))
    nodes = [CandidateNode(id=QUERY_NODE, kind="query", text=result.question, weight=0.0, cost=0)]
    edges: set[tuple[str, str]] = set()
    for i, w in zip(passages, passage_w):
        nodes.append(CandidateNode(id=snapshot.passage_ids[i], kind="passage", text=snapshot.passage_texts[i],
                                   weight=float(w), cost=0, citation=snapshot.passage_titles[i] or None))
    prop_w: dict[int, float] = {}
    for path in result.paths:
        steps = [r_index[s.prop_id] for s in path.steps if s.prop_id in r_index]
        for r in steps:
            prop_w[r] = max(prop_w.get(r, 0.0), 0.5 * max(0.0, path.score))
        for a, b in zip(steps, steps[1:]):
            edges.add((snapshot.prop_ids[a], snapshot.prop_ids[b]))
    seed_w = {e_index[s.entity_id]: 0.05 * s.weight for s in result.seeds if s.entity_id in e_index}
    entities = set(seed_w)
    for r, w in prop_w.items():
        stated_by = snapshot.prop_passages[r].indices
        citation = snapshot.passage_titles[stated_by[0]] if len(stated_by) else None
        nodes.append(CandidateNode(id=snapshot.prop_ids[r], kind="proposition", text=snapshot.prop_texts[r],
                                   weight=w, cost=0, citation=citation or None))
        for p in stated_by:
            if int(p) in passages:
                edges.add((snapshot.passage_ids[p], snapshot.prop_ids[r]))
        for e in snapshot.prop_entities[r].indices:
            entities.add(int(e))
            edges.add((snapshot.prop_ids[r], snapshot.entity_ids[e]))
    for e in sorted(entities):
        nodes.append(CandidateNode(id=snapshot.entity_ids[e], kind="entity", text=snapshot.entity_names[e],
                                   weight=seed_w.get(e, 0.0), cost=0))
    for i in passages:
        for e in snapshot.passage_entities[i].indices:
            if int(e) in entities:
                edges.add((snapshot.passage_ids[i], snapshot.entity_ids[e]))
    if seed_w:
        edges.update((QUERY_NODE, snapshot.entity_ids[e]) for e in seed_w)
    else:
        edges.update((QUERY_NODE, snapshot.passage_ids[i]) for i in passages)
    return CandidateGraph(query_id=QUERY_NODE, nodes=nodes, edges=sorted(edges))


def select_context(graph: CandidateGraph, budget_tokens: int, method: str, counter: TokenCounter,
                   style: str = "bullets", time_limit_ms: float = 50.0) -> BudgetedContext:
    """Select and linearize the best connected evidence within ``budget_tokens`` tokens.

    Raises ValueError for a negative budget or an unknown method/style.
    """
    graph = assign_costs(graph, counter, style)
    selection = select(graph, budget_tokens, method, time_limit_ms)
    context = linearize(graph, selection, style, counter)
    kinds = {node.id: node.kind for node in graph.nodes}
    return BudgetedContext(
        text=context.text, token_count=context.token_count, tokenizer=counter.name, budget=budget_tokens,
        method=selection.method, requested=method, objective=round(selection.objective, 6),
        bound=round(selection.bound, 6), gap=round(selection.gap, 6), optimal=selection.optimal,
        solve_ms=round(selection.solve_ms, 2), candidate_nodes=len(graph.nodes),
        lines=[ContextLine(id=item.id, kind=kinds[item.id], rank=item.rank, weight=round(item.weight, 6),
                           line=item.line) for item in context.items],
    )
