"""Retrieval mode ``dense`` (the baseline): the passages nearest the question in the
store's Passage vector index (cosine)."""

from __future__ import annotations

from pathweave.retrieval.strategy import QueryFrame, Ranking, RankingMode


class DenseMode(RankingMode):
    """Cosine ranking of the question against the passage embeddings: one vector search
    for the frame's ``depth`` passages."""

    name = "dense"

    def searches(self, resources, depth: int) -> dict[str, tuple[str, int]]:
        return {"passages": ("Passage", depth)}

    def rank(self, frame: QueryFrame) -> Ranking:
        hits = frame.found["passages"]
        return Ranking([h[0] for h in hits], [h[1] for h in hits])
