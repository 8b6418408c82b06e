"""The retrieval modes, defined once: :data:`RETRIEVAL_MODES` (name -> what it ranks with).

The retriever dispatches on these names, the command line lists them (``pathweave query
--mode``), the API's request and response models type ``mode`` with :data:`Mode` (the
OpenAPI enum), and ``pathweave bench musique`` runs every one. A new mode is one entry
here plus its branch in :class:`pathweave.retrieval.retriever.Retriever`.
"""

from typing import Literal

RETRIEVAL_MODES: dict[str, str] = {
    "proprag": "PropRAG: two-stage PPR over propositions and beam search over proposition paths (spec §1)",
    "dense": "cosine ranking of the question against the passage embeddings (baseline)",
    "hipporag2": "HippoRAG 2: PPR over entities and passages seeded by filtered facts (spec §2, baseline)",
}

MODES: tuple[str, ...] = tuple(RETRIEVAL_MODES)
"""The mode names, in the order above (the first is the default)."""

Mode = Literal[MODES]  # type: ignore[valid-type]  # Literal["proprag", "dense", "hipporag2"]
