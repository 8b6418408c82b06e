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
        return {"passages": ("Passage", depth)}

    def lexical_searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        return {"passages_text": ("Passage", depth)}

    def rank(self, frame: QueryFrame) -> Ranking:
        hits = frame.found["passages"]
        if "passages_text" in frame.found:
            hits = rrf([hits, frame.found["passages_text"]])[:frame.depth]
        return Ranking([h[0] for h in hits], [h[1] for h in hits])
