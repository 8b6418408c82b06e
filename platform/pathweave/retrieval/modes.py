"""The retrieval modes, defined once: :data:`RETRIEVAL_MODES` (name -> what it ranks with).

The retriever dispatches on these names, the command line lists them (``pathweave query
--mode``), the API's request and response models type ``mode`` with :data:`Mode` (the
OpenAPI enum), and ``pathweave bench musique`` runs every mode of :data:`RETRIEVAL_ONLY`
(the modes in :data:`LLM_MODES` need an LLM: ``pathweave bench qa`` measures those). A new
mode is one entry here plus its branch in :class:`pathweave.retrieval.retriever.Retriever`.
"""

from typing import Literal

RETRIEVAL_MODES: dict[str, str] = {
    "proprag": "PropRAG: two-stage PPR over propositions and beam search over proposition paths (spec §1)",
    "dense": "cosine ranking of the question against the passage embeddings (baseline)",
    "hipporag2": "HippoRAG 2: PPR over entities and passages seeded by filtered facts (spec §2, baseline)",
    "apr": "AutoPrunedRetriever: coarse-to-fine retrieval of triple runs over facts, earlier questions "
           "and earlier answers, sent as a compact prompt that reuses what a session already sent (spec §3)",
    "prunerag": "PruneRAG: an LLM decomposes the question into a tree of sub-questions answered "
                "over PropRAG passages, pruned by answer confidence (spec §4; needs an LLM)",
}

MODES: tuple[str, ...] = tuple(RETRIEVAL_MODES)
"""The mode names, in the order above (the first is the default)."""

LLM_MODES: tuple[str, ...] = ("prunerag",)
"""Modes that need an LLM (:mod:`pathweave.retrieval.prunerag`)."""

RETRIEVAL_ONLY: tuple[str, ...] = tuple(m for m in MODES if m not in LLM_MODES)
"""Modes that rank with the store and the embedder alone (``pathweave bench musique``)."""

Mode = Literal[MODES]  # type: ignore[valid-type]  # Literal["proprag", "dense", "hipporag2", "apr", "prunerag"]
