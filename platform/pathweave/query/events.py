"""The events of a query's life, as :meth:`pathweave.query.retriever.Retriever.run` hands
them to its caller (the API turns them into Server-Sent Events, the CLI prints them).

In order: a ``step`` per settled node of a mode with steps (PruneRAG's tree, spec §4);
``retrieval`` once (the cited result, before any answer); a ``token`` per piece of a
streamed answer as the model writes it; ``answer`` last (the whole result: answered when
asked, its record written or submitted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pathweave.model import QueryResult

EventKind = Literal["step", "retrieval", "token", "answer"]


@dataclass(frozen=True)
class QueryEvent:
    """One event: ``kind``; ``result`` for ``retrieval`` (a copy taken then: no answer yet)
    and ``answer`` (the query's result); ``text`` for ``token``; ``node`` (a
    :class:`~pathweave.model.TreeNode`) and ``parent_id`` (None for the root) for ``step``."""

    kind: EventKind
    result: QueryResult | None = None
    text: str = ""
    node: Any = None
    parent_id: str | None = None


OnEvent = Callable[[QueryEvent], None]
"""Hears each event in the query's thread, as it happens; what it raises ends the query (a
client that left): a streamed answer is closed and the record keeps what was answered."""
