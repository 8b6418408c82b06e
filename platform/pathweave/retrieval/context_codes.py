"""Session reuse on the token-budgeted context: APR's "send only what is new" (spec §3,
"Token cost must scale with new evidence"; APR paper §2.5) applied to spec §5's selection.

In a session every line of a budgeted context gets a code (``S1``, ``S2``, ... in the
order the session first sent them). A later context of the same session names a line it
was sent before by its code alone (``- S3``): in the ILP / greedy selection that node costs
the reference's tokens, not its text's, so the budget buys new evidence. The first
context of a session starts with :data:`LEGEND`, which says what a bare code means.

What a session was sent is read from the graph: the ``SELECTED`` edges (with ``code``)
of the session's queries (statement ``session_context_lines``); a session query's record
is written before the query returns, so its next query sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pathweave.selection import CandidateGraph, Selection
from pathweave.records.session_ids import session_key
from pathweave.store.graph_store import GraphStore

LEGEND = "Lines are coded S1, S2, ...; a line that is only a code repeats that earlier line."
"""The first line of a session's first context (about 25 tokens, sent once per session)."""

CODED_KINDS = ("passage", "proposition")
"""The kinds of candidate nodes whose lines get session codes (the rendered evidence)."""


def _number(code: str) -> int:
    return int(code[1:]) if code[:1] == "S" and code[1:].isdigit() else 0


@dataclass
class SessionLines:
    """What a session was sent: ``codes`` maps a passage or proposition id to its code;
    ``session_id`` names the session. ``first``: nothing sent yet (the legend goes first)."""

    session_id: str
    codes: dict[str, str] = field(default_factory=dict)

    @property
    def first(self) -> bool:
        """Whether no line of the session has a code yet (its first context)."""
        return not self.codes

    @property
    def next_number(self) -> int:
        """The number of the next new line's code."""
        return max((_number(code) for code in self.codes.values()), default=0) + 1

    def mark(self, graph: CandidateGraph) -> CandidateGraph:
        """``graph`` with its rendered passage and proposition nodes coded: a node the
        session was sent gets its code and ``sent``; a new one a provisional code (numbered
        after every candidate, so it has at least as many digits as its final code:
        :meth:`renumber`)."""
        number = self.next_number
        nodes = []
        for node in graph.nodes:
            if node.kind in CODED_KINDS and node.rendered:
                if node.id in self.codes:
                    node = node.model_copy(update={"code": self.codes[node.id], "sent": True})
                else:
                    node = node.model_copy(update={"code": f"S{number}"})
                    number += 1
            nodes.append(node)
        return CandidateGraph(query_id=graph.query_id, nodes=nodes, edges=graph.edges)

    def renumber(self, graph: CandidateGraph, selection: Selection) -> CandidateGraph:
        """``graph`` with the selected new lines coded ``S<next>``, ``S<next+1>``, ... by
        weight (the order the context ranks them), and the unselected new ones uncoded."""
        chosen = set(selection.selected)
        new = [n for n in graph.nodes if n.code and not n.sent and n.id in chosen]
        order = sorted(range(len(new)), key=lambda i: -new[i].weight)  # stable: selection order on ties
        final = {new[i].id: f"S{self.next_number + rank}" for rank, i in enumerate(order)}
        nodes = [n.model_copy(update={"code": final.get(n.id)}) if n.code and not n.sent else n
                 for n in graph.nodes]
        return CandidateGraph(query_id=graph.query_id, nodes=nodes, edges=graph.edges)


def read_session_lines(store: GraphStore, session_id: str, principals: list[str] | None = None) -> SessionLines:
    """The lines session ``session_id`` of ``store``'s tenant was sent (one read), to callers
    with ``principals`` (None: unrestricted; :func:`pathweave.records.session_ids.session_key`)."""
    rows = store.run("session_context_lines", session_key=session_key(store.tenant, session_id, principals))
    codes: dict[str, str] = {}
    for row in rows:  # a line referenced again keeps the code it was first sent with
        if row["id"] not in codes or _number(row["code"]) < _number(codes[row["id"]]):
            codes[row["id"]] = row["code"]
    return SessionLines(session_id, codes)
