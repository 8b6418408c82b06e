"""Sessions and reuse (APR, spec §3 "Token cost must scale with new evidence", §0 sessions).

A session is ``(:Session {session_key})-[:IN_SESSION]->(:Query {session_id})``. What the
model has seen in a session is every run its queries carried in full (``SENT``), asked
(``ASKED``: their question runs) or referenced (``REUSED``); a later query of the session
references those runs by code instead of re-sending them, and records them as ``REUSED``.
Question and answer runs of every query of the tenant stay in the store, so later
questions (in any session) retrieve them through the questions and answers channels.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pathweave.records.session_ids import session_key
from pathweave.store.graph_store import GraphStore


def seen_runs(store: GraphStore, session_id: str | None) -> dict[str, int | None]:
    """``{run_id: code}`` of the runs the session's earlier queries sent, asked or reused,
    and their answer runs (empty without a session)."""
    if not session_id:
        return {}
    rows = store.run("apr_session_runs", session_key=session_key(store.tenant, session_id))
    return {row["id"]: row["code"] for row in rows}


def query_steps(store: GraphStore, query_id: str, question: str, session_id: str | None) -> list[tuple[str, dict]]:
    """The statement writing the APR query node (mode ``apr``) and its session link."""
    return [("apr_write_query", {
        "query_id": query_id, "text": question, "mode": "apr",
        "created_at": datetime.now(timezone.utc).isoformat(), "session_id": session_id,
        "session_key": session_key(store.tenant, session_id) if session_id else None})]


def link_steps(query_id: str, asked: list[str], sent: list[dict], reused: list[dict]) -> list[tuple[str, dict]]:
    """``ASKED``/``SENT``/``REUSED`` links of a query: run ids, and rows ``{run_id, rank, channel}``."""
    steps = [("apr_link_asked", {"query_id": query_id, "rows": [{"run_id": r} for r in asked]}),
             ("apr_link_sent", {"query_id": query_id, "rows": sent}),
             ("apr_link_reused", {"query_id": query_id, "rows": reused})]
    return [(name, params) for name, params in steps if params["rows"]]
