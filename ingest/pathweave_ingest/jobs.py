"""Ingestion jobs, per-document status, document listing and deletion (in the graph).

A job is one submission of documents (``(:Job)``); each document has one
``(:DocumentStatus)`` node with its latest state ``queued | running | done |
failed``, attempts, error, counts and timings (statements in
``cypher/documents.cypher``). Document ids are the pipeline's content hashes
(:func:`pathweave_ingest.documents.document_id`), so the API knows them before anything runs.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pathweave.store import GraphStore
from pathweave_ingest.documents import commit_document_change, content_hash, document_id
from pathweave_ingest.loaders import Segment, SourceDocument

STATUSES = ("queued", "running", "done", "failed")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def new_job_id() -> str:
    return uuid.uuid4().hex


def payloads(tenant: str, documents: list[SourceDocument]) -> list[dict[str, Any]]:
    """JSON-safe task payloads ``{doc_id, source, title, text, key, content_hash, segments:
    [[text, page, section], ...]}``, duplicates (same id) dropped (the last version of a
    source wins). ``doc_id`` is :func:`pathweave_ingest.documents.document_id`."""
    out: dict[str, dict[str, Any]] = {}
    for doc in documents:
        doc_id = document_id(tenant, doc)
        payload = {"doc_id": doc_id, "source": doc.source, "title": doc.title, "text": doc.text,
                   "key": doc.key, "content_hash": content_hash(doc),
                   "segments": [[s.text, s.page, s.section] for s in doc.segments]}
        if doc.key:
            out.pop(doc_id, None)
            out[doc_id] = payload
        else:
            out.setdefault(doc_id, payload)
    return list(out.values())


def to_source(payload: dict[str, Any]) -> SourceDocument:
    """The :class:`SourceDocument` of a task payload (see :func:`payloads`)."""
    segments = tuple(Segment(text, page, section) for text, page, section in payload.get("segments") or ())
    return SourceDocument(payload["source"], payload["title"], payload["text"], segments, payload.get("key"))


def is_current(state: dict[str, Any] | None, payload: dict[str, Any]) -> bool:
    """Does the store hold this payload's version (``state``: a ``document_states`` row)?
    A source whose stored content hash differs is ingested but not current."""
    if not state or not state.get("ingested"):
        return False
    return not payload.get("key") or state.get("content_hash") == payload.get("content_hash")


@dataclass
class Submission:
    """A created job: what must be enqueued, what was ingested already, and what another
    job is ingesting right now (``in_flight``: left as it is; this job waits for it)."""

    job_id: str
    to_enqueue: list[dict[str, str]]
    already_done: list[str]
    in_flight: list[str] = field(default_factory=list)


def create_job(store: GraphStore, job_id: str, docs: list[dict[str, Any]], batch_size: int,
               queue: str) -> Submission:
    """Write the job and the documents' status (queued, or done when this version is
    ingested already) in one transaction. Nothing is enqueued here.

    A document another job is running keeps its status, job and attempts (so a document
    that kills its workers still runs out of attempts): it is not enqueued again, and
    this job reads ``running`` until that run finishes. A document still queued is
    queued again under this job with its attempts kept; a failed one starts over."""
    ids = [d["doc_id"] for d in docs]
    states = {row["doc_id"]: row for row in store.run("document_states", ids=ids)}
    queued_at = now_iso()
    enqueue, done, in_flight = [], [], []
    for doc in docs:
        state = states.get(doc["doc_id"]) or {}
        if is_current(state, doc) and state.get("status") in (None, "done"):
            done.append(doc)
        elif state.get("status") == "running":
            in_flight.append(doc["doc_id"])
        else:
            enqueue.append(doc)
    batches = (len(enqueue) + batch_size - 1) // batch_size if enqueue else 0
    rows = lambda items: [{"doc_id": d["doc_id"], "title": d["title"], "source": d["source"],  # noqa: E731
                           "queued_at": queued_at} for d in items]
    steps: list[tuple[str, dict[str, Any]]] = [
        ("job_create", {"job_id": job_id, "created_at": queued_at, "doc_ids": ids, "total": len(ids),
                        "batches": batches, "queue": queue}),
    ]
    if enqueue:
        steps.append(("doc_status_queue", {"rows": rows(enqueue), "job_id": job_id}))
    if done:
        steps.append(("doc_status_already_done", {"rows": rows(done), "job_id": job_id}))
    store.run_in_transaction(steps)
    return Submission(job_id, enqueue, [d["doc_id"] for d in done], in_flight)


def batches_of(docs: list[dict[str, str]], size: int) -> list[list[dict[str, str]]]:
    return [docs[i:i + size] for i in range(0, len(docs), max(1, size))]


def mark_failed(store: GraphStore, doc_ids: list[str], error: str) -> None:
    """Give up on documents (e.g. the broker refused the batch)."""
    if doc_ids:
        store.run("doc_status_failed", rows=[{"doc_id": d, "error": error, "finished_at": now_iso()}
                                             for d in doc_ids])


def _document_view(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("doc_id", "status", "title", "source", "job_id", "attempts", "error", "queued_at", "started_at",
            "finished_at", "seconds", "passages", "propositions", "entities", "triples")
    return {key: row.get(key) for key in keys}


def job_status(store: GraphStore, job_id: str) -> dict[str, Any] | None:
    """The job with its documents' states and progress, or None (unknown for this tenant)."""
    rows = store.run("job_get", job_id=job_id)
    if not rows:
        return None
    job = rows[0]
    doc_ids = list(job["doc_ids"] or [])
    statuses = {row["doc_id"]: row for row in store.run("doc_status_get", ids=doc_ids)}
    documents = []
    for doc_id in doc_ids:
        row = statuses.get(doc_id)
        documents.append(_document_view(row) if row else {**_document_view({"doc_id": doc_id}), "status": "deleted"})
    counts = Counter(d["status"] for d in documents)
    total = len(documents)
    finished = counts["done"] + counts["failed"] + counts["deleted"]
    if total and finished == total:
        state = "failed" if counts["failed"] == total else ("done_with_errors" if counts["failed"] else "done")
    elif counts["running"] or finished:
        state = "running"
    else:
        state = "queued" if total else "done"
    return {
        "job_id": job["job_id"], "status": state, "created_at": job["created_at"], "total": total,
        "counts": {status: counts[status] for status in (*STATUSES, "deleted")},
        "progress": {
            "documents_finished": finished,
            "fraction": round(finished / total, 4) if total else 1.0,
            "passages": sum(int(d["passages"] or 0) for d in documents if d["status"] == "done"),
        },
        "finished_at": max((d["finished_at"] or "" for d in documents), default=None) if total and finished == total else None,
        "documents": documents,
    }


def list_documents(store: GraphStore, status: str | None = None, limit: int = 50,
                   offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The tenant's documents (ingested and in flight), newest first; ``(page, total)``."""
    merged: dict[str, dict[str, Any]] = {}
    for row in store.run("doc_status_list"):
        merged[row["doc_id"]] = {**_document_view(row), "ingested_at": None}
    for row in store.run("documents_list"):
        item = merged.setdefault(row["doc_id"], {**_document_view({"doc_id": row["doc_id"]}), "status": "done",
                                                 "title": row["title"], "source": row["source"]})
        item["ingested_at"] = row["ingested_at"]
    items = [item for item in merged.values() if status is None or item["status"] == status]
    items.sort(key=lambda d: (d.get("queued_at") or d.get("ingested_at") or "", d["doc_id"]), reverse=True)
    page = items[offset:offset + limit]
    missing = [d["doc_id"] for d in page if d["status"] == "done" and d["passages"] is None]
    if missing:
        counts = {row["doc_id"]: row for row in store.run("document_counts", ids=missing)}
        for item in page:
            found = counts.get(item["doc_id"])
            if found:
                for key in ("passages", "propositions", "entities", "triples"):
                    item[key] = int(found[key])
    return page, len(items)


class DocumentBusy(RuntimeError):
    """The document is queued or running: it cannot be deleted now."""


def delete_document(store: GraphStore, doc_id: str) -> dict[str, Any] | None:
    """Delete a document: its passages (unless shared with another document), the
    propositions and triples only they state/assert (with their RELATES edges), the
    entities nothing else mentions or relates (alias groups that lose one get the medoid
    of their remaining members), relations no triple uses any more, the
    document and its status. One write transaction; the graph version is bumped once
    (both through :func:`pathweave_ingest.documents.commit_document_change`).

    Returns the removed counts, None when the tenant has no such document.
    Raises :class:`DocumentBusy` while the document is queued or running.
    """
    state = store.run("document_states", ids=[doc_id])[0]
    if not state["ingested"] and state["status"] is None:
        return None
    if state["status"] in ("queued", "running"):
        raise DocumentBusy(f"document {doc_id} is {state['status']}; delete it once its job has finished")
    change = commit_document_change(store, [doc_id])
    removed = dict(change.counts)
    return {"doc_id": doc_id, "removed": removed}
