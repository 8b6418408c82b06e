"""The strategy of each retrieval mode (:data:`STRATEGIES`), one object per mode.

Every mode is one class behind the protocol
:class:`pathweave.retrieval.strategy.RetrievalMode` (``options``, ``search``, ``answer``,
``write_record``); the names, descriptions and options are the vocabulary in
:mod:`pathweave.model`, which the request and result models use.
"""

from __future__ import annotations

from pathweave.apr.retrieval import APRMode
from pathweave.retrieval.dense import DenseMode
from pathweave.retrieval.hipporag import HippoRAG2Mode
from pathweave.retrieval.proprag import PropRAGMode
from pathweave.retrieval.prunerag import PruneRAGMode
from pathweave.retrieval.strategy import RetrievalMode

STRATEGIES: dict[str, RetrievalMode] = {
    strategy.name: strategy for strategy in (PropRAGMode(), DenseMode(), HippoRAG2Mode(), APRMode(), PruneRAGMode())
}
"""Mode name -> its strategy (stateless, shared by every query of the process)."""


def strategy(mode: str) -> RetrievalMode:
    """The strategy of ``mode``; KeyError for an unknown name (requests are checked before)."""
    return STRATEGIES[mode]


def needs_llm(request) -> bool:
    """Whether the checked ``request`` needs an LLM: it asks for an answer, or its mode cannot
    search without one (PruneRAG)."""
    return bool(request.answer) or STRATEGIES[request.mode].needs_llm
