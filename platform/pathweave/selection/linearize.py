"""Render a selection as an LLM context string.

Ordering counters "lost in the middle": the highest-weight evidence sits at
both ends. With items ranked by weight (rank 1 = heaviest), positions are
rank 1 first, rank 2 last, rank 3 second, rank 4 second-to-last, and so on.

Rendering, one line per item, joined by ``"\\n"``:

* ``"bullets"``: passages/propositions as ``"- {text} [{citation}]"``;
  entities as ``"- Entity: {name}"``.
* ``"triples"``: propositions/passages as ``"({s}; {r}; {o}) [{citation}]"``
  when the node has a ``triple``, else ``"({text}) [{citation}]"``; entities
  as ``"(Entity: {name})"``.

In a session (APR's "send only what is new", spec §3) a node with a ``code`` is
written ``"- S3: {text} [{citation}]"`` (``"S3: (...) [...]"``), and a node the session
sent before (``sent``) only as its code, ``"- S3"`` (``"(S3)"``): it costs the reference's
tokens, not its text's.

The citation is ``node.citation``, or the passage's own id for a passage
without one; ``" [..]"`` is omitted when there is none. An entity is rendered
only if no selected passage/proposition mentions it (case-insensitive,
whole-word match of its name); otherwise it merely connected evidence and is
left out. The query node and nodes with ``rendered=False`` (cost 0) are
never rendered.

One line per item, not one per cited passage: grouping a context's statements under one
label per passage (groups in the same ends-first order) saves a few prompt tokens but
lowered a small reader's answer F1 on MuSiQue (figures in docs/benchmarks-history.md).

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .candidate import CandidateGraph, CandidateNode
from .result import Selection
from .tokens import TokenCounter

Style = Literal["bullets", "triples"]


class ContextItem(BaseModel):
    """One rendered item of a :class:`Context`.

    Attributes:
        id: Node id.
        kind: Node kind.
        rank: Weight rank among rendered items (1 = highest weight; ties by
            selection order).
        weight: Node weight ``w(v)``.
        line: The rendered line.
        citation: The label ending the line (``" [citation]"``; :func:`line_citation`), or
            None when the line has none.
        code: The line's session code (``"S3"``), None outside a session.
        referenced: Sent earlier in the session: the line is the code alone.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    rank: int
    weight: float
    line: str
    citation: str | None = None
    code: str | None = None
    referenced: bool = False


class Context(BaseModel):
    """Linearized context.

    Attributes:
        text: Context string (lines joined by ``"\\n"``; ``""`` if empty).
        token_count: ``counter.count(text)``, tokens (no special tokens).
        tokenizer: ``counter.name``.
        style: Rendering style used.
        items: Rendered items in output order (position ``i`` = line ``i``).
        omitted: Selected ids left out: entities a selected statement
            mentions, and nodes with ``rendered=False``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    token_count: int
    tokenizer: str
    style: Style
    items: list[ContextItem]
    omitted: list[str] = []


def citation_of(node: CandidateNode) -> str | None:
    """Citation for ``node``: its ``citation``, or its own id for a passage.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    if node.citation:
        return node.citation
    return node.id if node.kind == "passage" else None


def line_citation(node: CandidateNode) -> str | None:
    """The citation a rendered line of ``node`` ends with: :func:`citation_of`, none for an
    entity."""
    return citation_of(node) if node.kind != "entity" else None


def render_line(node: CandidateNode, style: Style = "bullets") -> str:
    """Render one node as a context line (see module doc for the formats).

    Raises:
        ValueError: unknown ``style`` or a query node.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    if node.kind == "query":
        raise ValueError("the query node is not rendered into the context")
    if node.sent and node.code:
        if style not in ("bullets", "triples"):
            raise ValueError(f"style must be 'bullets' or 'triples', got {style!r}")
        return f"- {node.code}" if style == "bullets" else f"({node.code})"
    if node.code:
        line = render_line(node.model_copy(update={"code": None}), style)
        return f"- {node.code}: {line[2:]}" if style == "bullets" else f"{node.code}: {line}"
    if style == "bullets":
        body = f"- Entity: {node.text}" if node.kind == "entity" else f"- {node.text}"
    elif style == "triples":
        if node.kind == "entity":
            body = f"(Entity: {node.text})"
        elif node.triple is not None:
            body = "(" + "; ".join(node.triple) + ")"
        else:
            body = f"({node.text})"
    else:
        raise ValueError(f"style must be 'bullets' or 'triples', got {style!r}")
    cite = line_citation(node)
    return f"{body} [{cite}]" if cite else body


def assign_costs(
    graph: CandidateGraph, counter: TokenCounter, style: Style = "bullets"
) -> CandidateGraph:
    """Copy of ``graph`` with ``cost`` = tokens of each node's rendered line.

    The query node and nodes with ``rendered=False`` get cost 0. Counts are batched (one tokenizer call). For
    whitespace-pre-tokenized tokenizers such as the default BERT WordPiece,
    token counts add up over newline-joined lines, so a context linearized
    from a selection within budget ``L`` stays within ``L`` tokens.

    Raises:
        ValueError: unknown ``style``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    others = [n for n in graph.nodes if n.kind != "query" and n.rendered]
    counts = counter.count_many([render_line(n, style) for n in others])
    cost = dict(zip((n.id for n in others), counts))
    nodes = [n.model_copy(update={"cost": cost.get(n.id, 0)}) for n in graph.nodes]
    return CandidateGraph(query_id=graph.query_id, nodes=nodes, edges=graph.edges)


def ends_first_order(n: int) -> list[int]:
    """Positions for ranks ``0..n-1``: rank 0 first, 1 last, 2 second, ...

    Returns ``pos`` with ``pos[r]`` the output position of the rank-``r`` item.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    pos = []
    front, back = 0, n - 1
    for r in range(n):
        if r % 2 == 0:
            pos.append(front)
            front += 1
        else:
            pos.append(back)
            back -= 1
    return pos


def _mentions(name: str, texts: list[str]) -> bool:
    """True iff ``name`` occurs in a text as a whole word (case-insensitive)."""
    pattern = re.compile(r"(?<!\w)" + re.escape(name.strip()) + r"(?!\w)", re.IGNORECASE)
    return bool(name.strip()) and any(pattern.search(t) for t in texts)


def linearize(
    graph: CandidateGraph,
    selection: Selection,
    style: Style = "bullets",
    counter: TokenCounter | None = None,
) -> Context:
    """Linearize the selected evidence into a context string.

    Args:
        graph: Candidate graph the selection was made on.
        selection: Selection (ids must be nodes of ``graph``).
        style: ``"bullets"`` or ``"triples"``.
        counter: Token counter; ``None`` = default :class:`TokenCounter`.

    Returns:
        :class:`Context` whose ``token_count`` is ``counter.count(text)``.

    Raises:
        ValueError: unknown ``style``.
        KeyError: a selected id is not in ``graph``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """
    if style not in ("bullets", "triples"):
        raise ValueError(f"style must be 'bullets' or 'triples', got {style!r}")
    counter = counter or TokenCounter()
    nodes = [graph.node(v) for v in selection.selected if v != graph.query_id]
    statements = [n.text for n in nodes if n.rendered and n.kind in ("passage", "proposition")]
    shown = [n for n in nodes if n.rendered and (n.kind != "entity" or not _mentions(n.text, statements))]
    shown_ids = {n.id for n in shown}
    # Stable sort keeps selection order among equal weights.
    ranked = sorted(shown, key=lambda n: -n.weight)
    slots: list[ContextItem | None] = [None] * len(ranked)
    for r, pos in enumerate(ends_first_order(len(ranked))):
        node = ranked[r]
        slots[pos] = ContextItem(
            id=node.id, kind=node.kind, rank=r + 1, weight=node.weight,
            line=render_line(node, style), citation=line_citation(node), code=node.code,
            referenced=node.sent,
        )
    items = [item for item in slots if item is not None]
    text = "\n".join(item.line for item in items)
    return Context(
        text=text,
        token_count=counter.count(text),
        tokenizer=counter.name,
        style=style,
        items=items,
        omitted=[n.id for n in nodes if n.id not in shown_ids],
    )
