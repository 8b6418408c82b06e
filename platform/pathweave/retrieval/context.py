"""Token-budgeted context from a retrieval result (graph context optimization
seed; spec §5): candidate graph -> connected selection under L tokens (CP-SAT
ILP or greedy) -> linearized, prompt-ready context.

Candidate graph, built from the query's G_sub (:class:`~pathweave.graph.subgraph.Subgraph`:
what retrieval fetched, plus the names of the entities it links and the texts of its
passages, read on demand). With proposition paths (PropRAG):

- Q, the query node (weight 0, cost 0), linked to the stage-2 seed entities and
  to the candidate statements of the top ``SEED_PASSAGES`` passages (PropRAG's
  stage 2 seeds every passage of its subgraph; a passage here has no text of its
  own, so Q is linked to what it states);
- the ranked passages of the result (``context_passages`` of them) as
  *coverage* nodes: weight, no text of their own (``rendered=False``, cost 0),
  linked only to their propositions, so a passage is selected exactly when at
  least one of its statements is, and its weight is earned once however many
  of its statements are chosen (that is what spreads a small budget over
  several passages instead of spending it on one);
- per passage its ``STATEMENTS_PER_PASSAGE`` most query-similar statements, its
  shortest one (one short statement is enough to cover a passage) and its lead
  statement (:func:`lead_statement`), plus the propositions on the top paths, each
  rendered as its sentence followed by the citation (a title prefix the extractor
  added for decontextualization is dropped there: the citation carries it);
- entities as *connectors*: the seeds, and the entities mentioned by at least
  two of these propositions (one mentioned by a single proposition can never
  connect anything); ``rendered=False``, cost 0 — a statement that uses an
  entity already names it, so its name would only repeat tokens (the spec's
  "entities ~ their name" cost applies where entities are rendered: the
  generic :mod:`pathweave.selection` API);
- in a session, the lines it was sent for its earlier questions that G_sub holds
  (:func:`add_earlier_lines`: APR's answer memory; they cost their code's tokens);
- edges: Passage-STATES-Proposition, Proposition-MENTIONS-Entity,
  consecutive path steps, Q-seed entity, Q-statement of a seed passage, Q-earlier line.

Without paths (dense, hipporag2 modes) the candidate passages are rendered
in full and linked to Q.

Weights (documented formula): passage ``w = 0.1 + 0.9 * minmax(score)`` over
the candidate passages; proposition ``w = PROPOSITION_SCALE * max(0, cos(q, r),
best score of a top path containing r) + LEAD_WEIGHT [r leads its passage]``
(``PROPOSITION_SCALE = 0.1``: covering one more ranked passage outweighs a second statement
of a covered one); entity
``w = 0.05 * seed weight`` (0 for non-seeds: entities are connectors). Cost = tokens
of the node's rendered line (:func:`assign_costs`).

The final statement of each reasoning path (its last hop: where PropRAG's beam ended, the
statement that most often holds the answer) also earns ``path_weight`` x its path's score
(setting ``selection.path_weight``, default 1), so a small budget keeps the answer end of
the chains; their first hops are the query-similar statements of the top passages, which
coverage already buys. With ``path_weight``
0 (coverage first), under a small budget the selection is about one short, query-relevant
statement from each of the best passages (reached directly from Q for the top
``SEED_PASSAGES``, through shared entities and path steps for the others), then
more statements as the budget grows. This reaches the context recall of the top-5 passages
with a fraction of their tokens, and the ILP proves optimality on these small candidate
graphs (some tens of nodes) within the solver's time limit; figures from ``pathweave bench
musique --budget 200,400,800`` in docs/benchmarks-history.md, section "Figures moved from the code's
docstrings".
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pathweave.model import BudgetedContext, ContextLine, QueryResult
from pathweave.graph.ppr import min_max
from pathweave.retrieval.context_codes import LEGEND, SessionLines
from pathweave.selection import (CandidateGraph, CandidateNode, TokenCounter, assign_costs, linearize, render_line,
                                 select)
from pathweave.graph.subgraph import Subgraph

QUERY_NODE = "Q"

SEED_PASSAGES = 10
"""The statements of the top ``SEED_PASSAGES`` ranked passages are linked to Q (the
passages themselves are coverage nodes without text, so Q links to what they state).
PropRAG's stage 2 seeds every passage of its subgraph; 10 = the default
``context_passages``, so by default every candidate passage is a seed and only path
statements from further passages need entities or path steps to connect. Fewer seed passages
did not give a clearly better context recall on MuSiQue (figures in docs/benchmarks-history.md)."""

STATEMENTS_PER_PASSAGE = 3
"""Candidate statements per passage: its ``STATEMENTS_PER_PASSAGE`` most query-similar
statements plus its shortest and its lead one (statements on the top paths are always kept)."""

PROPOSITION_SCALE = 0.1
"""Proposition weight scale against the passage coverage weight (0.1 to 1): covering one
more good passage is worth more than a second statement of a covered one. The smallest
scale tried gave the best context recall on MuSiQue (figures in docs/benchmarks-history.md)."""


LEAD_WEIGHT = 0.05
"""Extra weight of a passage's lead statement (:func:`lead_statement`), on the scale of a
passage's coverage weight (0.1 to 1): when a small budget covers a passage with one
statement, the lead statement wins over a shorter one unless the shorter one is clearly
more query-similar. An encyclopedic passage defines its subject in its first sentence, and
that is where a hop's answer most often stands in MuSiQue's answer passages. The value was
chosen on MuSiQue with a small reader: with it, the answer is in a small-budget context more
often and the answer F1 is higher than without the extra weight (figures in
docs/benchmarks-history.md, section "Figures moved from the code's docstrings")."""


def _without_title(text: str, title: str | None) -> str:
    """``text`` without the ``"{title}: "`` prefix the extractor adds for decontextualization."""
    return text[len(title) + 2:] if title and text.startswith(f"{title}: ") else text


def lead_statement(passage_text: str, statements: dict[int, str], title: str | None = None) -> int | None:
    """The key of the statement that occurs earliest in ``passage_text`` (its first 40
    characters, after the ``"{title}: "`` prefix the extractor adds for decontextualization),
    or None when none occurs verbatim (e.g. an LLM's rewritten propositions); ties to the
    lowest key. Pure function, no I/O."""
    best, where = None, len(passage_text) + 1
    for key in sorted(statements):
        text = _without_title(statements[key], title)
        at = passage_text.find(text[:40]) if text else -1
        if 0 <= at < where:
            best, where = key, at
    return best


def candidate_graph(result: QueryResult, subgraph: Subgraph, query: np.ndarray | None = None,
                    path_weight: float = 0.0, earlier: Iterable[str] = ()) -> CandidateGraph:
    """The candidate graph of ``result`` (see the module doc): its ranked passages, the
    propositions they state and those on its paths, and the seeds; plus the session's
    ``earlier`` lines (:func:`add_earlier_lines`).

    ``query``: the L2-normalized ``(d,)`` query vector for the propositions' cosine
    weights (None: path scores only). ``path_weight``: the final statement of a path also
    earns ``path_weight`` x the best score of a path ending there, on the scale of a
    passage's coverage weight (0.1 to 1), so a small budget keeps the answer ends of the
    reasoning chains before spreading over more passages (setting
    ``selection.path_weight``; its comment has the measurements).
    """
    p_index = {pid: i for i, pid in enumerate(subgraph.passage_ids)}
    r_index = {rid: i for i, rid in enumerate(subgraph.prop_ids)}
    e_index = {eid: i for i, eid in enumerate(subgraph.entity_ids)}
    hits = [hit for hit in result.passages if hit.passage_id in p_index]
    passages = [p_index[hit.passage_id] for hit in hits]
    passage_w = 0.1 + 0.9 * min_max(np.asarray([hit.score for hit in hits], dtype=np.float64))
    subgraph.ensure_texts(passages)
    with_paths = bool(result.paths or result.seeds)
    nodes = [CandidateNode(id=QUERY_NODE, kind="query", text=result.question, weight=0.0, cost=0)]
    edges: set[tuple[str, str]] = set()
    for i, w in zip(passages, passage_w):
        nodes.append(CandidateNode(id=subgraph.passage_ids[i], kind="passage", text=subgraph.passage_texts[i],
                                   weight=float(w), cost=0, citation=subgraph.passage_titles[i] or None,
                                   rendered=not with_paths))
    if not with_paths:
        edges.update((QUERY_NODE, subgraph.passage_ids[i]) for i in passages)
        add_earlier_lines(nodes, edges, subgraph, earlier, query, set(passages), with_paths)
        return CandidateGraph(query_id=QUERY_NODE, nodes=nodes, edges=sorted(edges))

    prop_w: dict[int, float] = {}
    chain_w: dict[int, float] = {}  # final statements of the paths: their best path score
    for path in result.paths:
        steps = [r_index[s.prop_id] for s in path.steps if s.prop_id in r_index]
        for r in steps:
            prop_w[r] = max(prop_w.get(r, 0.0), path.score)
        if steps and path.steps[-1].prop_id in r_index:
            chain_w[steps[-1]] = max(chain_w.get(steps[-1], 0.0), path.score)
        for a, b in zip(steps, steps[1:]):
            edges.add((subgraph.prop_ids[a], subgraph.prop_ids[b]))
    stated = subgraph.states[passages].indices if passages else np.zeros(0, dtype=np.int64)
    stated = np.unique(stated)
    cos_all = subgraph.prop_emb[stated] @ query if query is not None else np.zeros(len(stated))
    cos_of = dict(zip(stated.tolist(), cos_all.tolist()))
    keep: set[int] = set(prop_w)
    leads: set[int] = set()  # each candidate passage's lead statement
    seeded: set[int] = set()  # statements of the seed passages, linked to Q
    for rank, i in enumerate(passages):
        own = subgraph.states[i].indices.tolist()
        by_cos = sorted(own, key=lambda r: (-cos_of[r], len(subgraph.prop_texts[r]), r))
        shortest = min(own, key=lambda r: (len(subgraph.prop_texts[r]), -cos_of[r], r)) if own else None
        lead = lead_statement(subgraph.passage_texts[i], {r: subgraph.prop_texts[r] for r in own},
                              subgraph.passage_titles[i])
        leads |= {lead} if lead is not None else set()
        chosen = set(by_cos[:STATEMENTS_PER_PASSAGE]) | {r for r in (shortest, lead) if r is not None}
        keep |= chosen
        if rank < SEED_PASSAGES:
            seeded |= chosen | (set(own) & set(prop_w))
    props = np.asarray(sorted(keep), dtype=np.int64)
    cosine = subgraph.prop_emb[props] @ query if query is not None else np.zeros(len(props))
    candidate_passages = set(passages)
    mentions = subgraph.prop_entities[props]
    seed_w = {e_index[s.entity_id]: 0.05 * s.weight for s in result.seeds if s.entity_id in e_index}
    counts = np.bincount(mentions.indices, minlength=subgraph.n_entities)
    entities = set(seed_w) | set(np.flatnonzero(counts >= 2).tolist())
    for row, (r, cos) in enumerate(zip(props.tolist(), cosine.tolist())):
        stated_by = subgraph.prop_passages[r].indices
        citation = subgraph.passage_titles[stated_by[0]] if len(stated_by) else None
        nodes.append(CandidateNode(id=subgraph.prop_ids[r], kind="proposition",
                                   text=_without_title(subgraph.prop_texts[r], citation),
                                   weight=PROPOSITION_SCALE * max(0.0, cos, prop_w.get(r, 0.0))
                                   + path_weight * chain_w.get(r, 0.0) + LEAD_WEIGHT * (r in leads), cost=0,
                                   citation=citation or None))
        if r in seeded:
            edges.add((QUERY_NODE, subgraph.prop_ids[r]))
        edges.update((subgraph.passage_ids[p], subgraph.prop_ids[r]) for p in stated_by if int(p) in candidate_passages)
        edges.update((subgraph.prop_ids[r], subgraph.entity_ids[e])
                     for e in mentions.indices[mentions.indptr[row]:mentions.indptr[row + 1]] if int(e) in entities)
    subgraph.ensure_entities(sorted(entities))
    for e in sorted(entities):
        nodes.append(CandidateNode(id=subgraph.entity_ids[e], kind="entity", text=subgraph.entity_names[e],
                                   weight=seed_w.get(e, 0.0), cost=0, rendered=False))
    edges.update((QUERY_NODE, subgraph.entity_ids[e]) for e in seed_w)
    add_earlier_lines(nodes, edges, subgraph, earlier, query, candidate_passages, with_paths)
    return CandidateGraph(query_id=QUERY_NODE, nodes=nodes, edges=sorted(edges))


def add_earlier_lines(nodes: list[CandidateNode], edges: set[tuple[str, str]], subgraph: Subgraph,
                      earlier: Iterable[str], query: np.ndarray | None, candidate_passages: set[int],
                      with_paths: bool) -> int:
    """Add to ``nodes``/``edges`` the lines the query's session was sent before (``earlier``:
    passage and proposition ids) that this query's G_sub holds but its candidates do not:
    APR's answer memory (spec §3, the evidence that answered the session's earlier questions)
    as candidates of the budgeted context. A session references such a line by its code for a
    few tokens (:mod:`pathweave.retrieval.context_codes`), so the evidence of earlier hops stays in
    reach of a later question that PropRAG's ranking no longer puts in its top passages.
    Each is linked to Q (and a proposition to its candidate passages, whose coverage it then
    earns) and weighted as a candidate of its kind by its cosine to ``query``: a proposition
    ``PROPOSITION_SCALE * max(0, cos)``, a passage (modes without paths) ``0.1 + 0.9 * max(0, cos)``.
    Returns how many were added; lines outside G_sub are not (nothing is read)."""
    present = {node.id for node in nodes}
    wanted = [i for i in earlier if i not in present]
    if not wanted:
        return 0
    added = 0
    r_index = {rid: i for i, rid in enumerate(subgraph.prop_ids)}
    p_index = {pid: i for i, pid in enumerate(subgraph.passage_ids)}
    for line_id in wanted:
        if with_paths and line_id in r_index:
            r = r_index[line_id]
            cos = float(subgraph.prop_emb[r] @ query) if query is not None else 0.0
            stated_by = subgraph.prop_passages[r].indices
            citation = subgraph.passage_titles[stated_by[0]] if len(stated_by) else None
            nodes.append(CandidateNode(id=line_id, kind="proposition",
                                       text=_without_title(subgraph.prop_texts[r], citation),
                                       weight=PROPOSITION_SCALE * max(0.0, cos), cost=0, citation=citation or None))
            edges.update((subgraph.passage_ids[p], line_id) for p in stated_by if int(p) in candidate_passages)
        elif not with_paths and line_id in p_index:
            i = p_index[line_id]
            subgraph.ensure_texts([i])
            cos = float(subgraph.passage_emb[i] @ query) if query is not None else 0.0
            nodes.append(CandidateNode(id=line_id, kind="passage", text=subgraph.passage_texts[i],
                                       weight=0.1 + 0.9 * max(0.0, cos), cost=0,
                                       citation=subgraph.passage_titles[i] or None))
        else:
            continue
        edges.add((QUERY_NODE, line_id))
        added += 1
    return added


def select_context(graph: CandidateGraph, budget_tokens: int, method: str, counter: TokenCounter,
                   style: str = "bullets", time_limit_ms: float = 50.0,
                   session: SessionLines | None = None) -> BudgetedContext:
    """Select and linearize the best connected evidence within ``budget_tokens`` tokens.

    ``session``: what the query's session was sent before (:mod:`pathweave.retrieval.context_codes`):
    those lines cost their code's tokens, new lines carry a code, and the session's first
    context starts with the legend (its tokens come out of the budget).

    Raises ValueError for a negative budget or an unknown method/style.
    """
    legend = ""
    if session is not None:
        graph = session.mark(graph)
        legend = LEGEND if session.first else ""
    graph = assign_costs(graph, counter, style)
    legend_tokens = counter.count(legend) if legend else 0
    selection = select(graph, max(0, budget_tokens - legend_tokens) if legend else budget_tokens, method,
                       time_limit_ms)
    if session is not None:
        graph = session.renumber(graph, selection)
    context = linearize(graph, selection, style, counter)
    text = f"{legend}\n{context.text}" if legend and context.text else context.text
    kinds = {node.id: node.kind for node in graph.nodes}
    expanded = None
    if session is not None:
        chosen = set(selection.selected)
        full = {node.id: render_line(node.model_copy(update={"sent": False}), style) for node in graph.nodes
                if node.sent and node.id in chosen}
        expanded = "\n".join(full.get(item.id, item.line) for item in context.items)
    return BudgetedContext(
        text=text, token_count=counter.count(text) if legend else context.token_count, tokenizer=counter.name,
        budget=budget_tokens,
        method=selection.method, requested=method, objective=round(selection.objective, 6),
        bound=round(selection.bound, 6), gap=round(selection.gap, 6), optimal=selection.optimal,
        solve_ms=round(selection.solve_ms, 2), candidate_nodes=len(graph.nodes),
        lines=[ContextLine(id=item.id, kind=kinds[item.id], rank=item.rank, weight=round(item.weight, 6),
                           line=item.line, citation=item.citation, code=item.code, referenced=item.referenced)
               for item in context.items],
        session_id=session.session_id if session is not None else None, expanded=expanded,
    )
