"""Sessions (spec §0, §3): a session is ``(:Session {session_key})-[:IN_SESSION]->(:Query)``,
shared by every mode that takes a ``session_id``. What the model was sent in a session is
read from its queries: APR's runs (:mod:`pathweave.apr.memory`) and the lines of the
token-budgeted contexts (:mod:`pathweave.retrieval.context_codes`)."""

from __future__ import annotations

from pathweave.store.graph_store import GraphStore
from pathweave.text import stable_id


def session_key(tenant: str, session_id: str) -> str:
    """The key of ``tenant``'s session ``session_id`` (a content hash: ``session:<24 hex>``)."""
    return stable_id("session", tenant, session_id)


def check_session_id(session_id: str | None) -> str | None:
    """``session_id`` stripped (None stays None). Raises ValueError when it is empty or
    longer than 200 characters."""
    if session_id is None:
        return None
    session_id = session_id.strip()
    if not session_id or len(session_id) > 200:
        raise ValueError("session_id must be 1 to 200 characters")
    return session_id


def session_steps(store: GraphStore, query_id: str, session_id: str, created_at: str) -> list[tuple[str, dict]]:
    """The statement linking query ``query_id`` to its session (the reasoning record's part)."""
    return [("write_query_session", {"query_id": query_id, "session_id": session_id, "created_at": created_at,
                                     "session_key": session_key(store.tenant, session_id)})]
