"""Token-budgeted connected-subgraph selection (graph context optimization).

Pipeline: build a :class:`CandidateGraph` from retrieval (optionally set token
costs with :func:`assign_costs`), :func:`select` a connected subgraph around
the query within ``L`` tokens (CP-SAT ILP or greedy), then :func:`linearize`
it into a context string.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from .candidate import CandidateGraph, CandidateNode
from .greedy import solve_greedy
from .ilp import solve_ilp
from .linearize import Context, ContextItem, assign_costs, linearize, render_line
from .result import Selection
from .select import select
from .tokens import TokenCounter

__all__ = [
    "CandidateGraph",
    "CandidateNode",
    "Context",
    "ContextItem",
    "Selection",
    "TokenCounter",
    "assign_costs",
    "linearize",
    "render_line",
    "select",
    "solve_greedy",
    "solve_ilp",
]
