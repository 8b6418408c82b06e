"""Retrieval mode ``dense`` (the baseline): the passages nearest the question in the
store's Passage vector index (cosine), fused with the passages the full-text index finds
for the question's terms when ``retrieval.lexical`` is ``rrf`` (reciprocal rank fusion,
:mod:`pathweave.retrieval.lexical`; the scores are then fused scores, not cosines)."""

from __future__ import annotations

from pathweave.retrieval.lexical import rrf
from pathweave.retrieval.strategy import QueryFrame, Ranking, RankingMode


class DenseMode(RankingMode):
    """Cosine ranking of the question against the passage embeddings: one vector search
    for the frame's ``depth`` passages."""

    name = "dense"

    def searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        """One search of the Passage vector index for ``depth`` passages."""
        return {"passages": ("Passage", depth)}

    def lexical_searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        """One search of the Passage full-text index for ``depth`` passages."""
        return {"passages_text": ("Passage", depth)}

    def rank(self, frame: QueryFrame) -> Ranking:
        """The vector hits by cosine, best first (at most ``frame.depth``); with full-text
        hits, their reciprocal rank fusion (:func:`~pathweave.retrieval.lexical.rrf`, fused
        scores, not cosines). Reads no graph."""
        hits = frame.found["passages"]
        if "passages_text" in frame.found:
            hits = rrf([hits, frame.found["passages_text"]])[:frame.depth]
        return Ranking([h[0] for h in hits], [h[1] for h in hits])
