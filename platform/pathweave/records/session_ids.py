"""Sessions (spec §0, §3): a session is ``(:Session {session_key})-[:IN_SESSION]->(:Query)``,
shared by every mode that takes a ``session_id``. What the model was sent in a session is
read from its queries: APR's runs (:mod:`pathweave.apr.memory`) and the lines of the
token-budgeted contexts (:mod:`pathweave.retrieval.context_codes`)."""

from __future__ import annotations

from pathweave.store.graph_store import GraphStore
from pathweave.text import stable_id


def session_key(tenant: str, session_id: str, principals: list[str] | None = None) -> str:
    """The key of ``tenant``'s session ``session_id`` (a content hash: ``session:<24 hex>``),
    of the callers with ``principals`` (None: unrestricted callers): callers who read other
    documents never share a session, so what one was sent is never referenced for another
    (:mod:`pathweave.access`)."""
    if principals is None:
        return stable_id("session", tenant, session_id)
    return stable_id("session", tenant, session_id, "\x1eprincipals", *sorted(principals))


def check_session_id(session_id: str | None) -> str | None:
    """``session_id`` stripped (None stays None). Raises ValueError when it is empty or
    longer than 200 characters."""
    if session_id is None:
        return None
    session_id = session_id.strip()
    if not session_id or len(session_id) > 200:
        raise ValueError("session_id must be 1 to 200 characters")
    return session_id


def session_steps(store: GraphStore, query_id: str, session_id: str, created_at: str,
                  principals: list[str] | None = None) -> list[tuple[str, dict]]:
    """The statement linking query ``query_id`` to its session (the reasoning record's part;
    ``principals``: the caller's, :func:`session_key`)."""
    return [("write_query_session", {"query_id": query_id, "session_id": session_id, "created_at": created_at,
                                     "session_key": session_key(store.tenant, session_id, principals)})]
