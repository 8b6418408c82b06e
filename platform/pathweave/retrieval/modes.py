"""The retrieval modes, defined once: :data:`RETRIEVAL_MODES` (name -> what it ranks with)
and the class that runs each (:func:`strategy`).

Every mode is one class in its own module behind the small protocol
:class:`pathweave.retrieval.strategy.RetrievalMode` (``options`` it takes, ``search``,
``answer``, ``write_record``). The command line lists the names (``pathweave query
--mode``), the request model types ``mode`` with :data:`Mode` (the OpenAPI enum), and
``pathweave bench musique`` runs every mode of :data:`RETRIEVAL_ONLY` (the modes in
:data:`LLM_MODES` need an LLM: ``pathweave bench qa`` measures those). A new mode is one
entry in :data:`RETRIEVAL_MODES` and one in :data:`STRATEGIES`.
"""

from __future__ import annotations

import importlib
from functools import cache
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

STRATEGIES: dict[str, str] = {
    "proprag": "pathweave.retrieval.proprag:PropRAGMode",
    "dense": "pathweave.retrieval.dense:DenseMode",
    "hipporag2": "pathweave.retrieval.hipporag:HippoRAG2Mode",
    "apr": "pathweave.apr.retrieval:APRMode",
    "prunerag": "pathweave.retrieval.prunerag:PruneRAGMode",
}
"""Mode name -> ``module:Class`` of its strategy (imported on first use: the modes' modules
import the model, which imports :data:`Mode` from here)."""

MODES: tuple[str, ...] = tuple(RETRIEVAL_MODES)
"""The mode names, in the order above (the first is the default)."""

LLM_MODES: tuple[str, ...] = ("prunerag",)
"""Modes that need an LLM (:mod:`pathweave.retrieval.prunerag`)."""

RETRIEVAL_ONLY: tuple[str, ...] = tuple(m for m in MODES if m not in LLM_MODES)
"""Modes that rank with the store and the embedder alone (``pathweave bench musique``)."""

Mode = Literal[MODES]  # type: ignore[valid-type]  # Literal["proprag", "dense", "hipporag2", "apr", "prunerag"]


@cache
def strategy(mode: str):
    """The strategy object (:class:`~pathweave.retrieval.strategy.RetrievalMode`) of
    ``mode``; KeyError for an unknown name (requests are checked before)."""
    module, name = STRATEGIES[mode].split(":")
    return getattr(importlib.import_module(module), name)()
