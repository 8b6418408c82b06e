"""Ingestion jobs, document listing and deletion (in the graph).

A job is one submission of documents (``(:Job)``) with the version of each that it stands
for; each document's head (``(:DocumentStatus)``) and its transitions are
:mod:`pathweave_ingest.lifecycle`'s (statements in ``cypher/documents.cypher``). Document
ids are the pipeline's content hashes (:func:`pathweave_ingest.documents.document_id`), so
the API knows them before anything runs.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pathweave.access import UNRESTRICTED, Access
from pathweave.store.graph_store import GraphStore
from pathweave_ingest import lifecycle
from pathweave_ingest.documents import content_hash, document_id
from pathweave_ingest.lifecycle import now_iso
from pathweave_ingest.loaders import Segment, SourceDocument

__all__ = ["Submission", "batches_of", "create_job", "delete_document", "job_status", "list_documents",
           "mark_failed", "new_job_id", "now_iso", "payloads", "requeue", "to_source"]


def new_job_id() -> str:
    return uuid.uuid4().hex


def payloads(tenant: str, documents: list[SourceDocument]) -> list[dict[str, Any]]:
    """JSON-safe task payloads ``{doc_id, source, title, text, key, content_hash, segments:
    [[text, page, section], ...], acl}`` (``acl``: the document's, None when it has none), duplicates
    (same id) dropped (the last version of a source wins). ``doc_id`` is
    :func:`pathweave_ingest.documents.document_id`."""
    out: dict[str, dict[str, Any]] = {}
    for doc in documents:
        doc_id = document_id(tenant, doc)
        payload = {"doc_id": doc_id, "source": doc.source, "title": doc.title, "text": doc.text,
                   "key": doc.key, "content_hash": content_hash(doc),
                   "segments": [[s.text, s.page, s.section] for s in doc.segments],
                   "acl": None if doc.acl is None else sorted(doc.acl)}
        if doc.key:
            out.pop(doc_id, None)
            out[doc_id] = payload
        else:
            out.setdefault(doc_id, payload)
    return list(out.values())


def to_source(payload: dict[str, Any]) -> SourceDocument:
    """The :class:`SourceDocument` of a task payload (see :func:`payloads`)."""
    segments = tuple(Segment(text, page, section) for text, page, section in payload.get("segments") or ())
    acl = payload.get("acl")
    return SourceDocument(payload["source"], payload["title"], payload["text"], segments, payload.get("key"),
                          acl=None if acl is None else tuple(acl))


@dataclass
class Submission:
    """A created job: the payloads (with their new ``version``) to enqueue, and the ids
    whose stored content this job's already is (nothing to do)."""

    job_id: str
    to_enqueue: list[dict[str, Any]]
    already_done: list[str]


def _write_job(run, job_id: str, created_at: str, docs: list[dict[str, Any]], versions: dict[str, int],
               enqueued: int, batch_size: int, queue: str) -> None:
    """The job node (statement ``job_create``): its documents, the version of each it stands for."""
    run("job_create", job_id=job_id, created_at=created_at, doc_ids=[d["doc_id"] for d in docs],
        versions=[versions[d["doc_id"]] for d in docs], total=len(docs),
        batches=(enqueued + batch_size - 1) // batch_size, queue=queue)


def _done_at(head: dict[str, Any] | None, version: int) -> bool:
    """Whether the head (``doc_status_get``) shows ``version`` done."""
    return head is not None and head.get("status") == "done" and int(head.get("version") or 0) == version


def create_job(store: GraphStore, job_id: str, docs: list[dict[str, Any]], batch_size: int,
               queue: str, access: Access = UNRESTRICTED) -> Submission:
    """Accept the documents (:func:`pathweave_ingest.lifecycle.accept_in`: a new version
    each, queued, unless this content is stored with nothing pending) and write the job, in
    ONE transaction. Nothing is enqueued here. A document another job is running gets a
    newer version all the same: the running one is superseded when it tries to swap. A try
    that finds the job written (an earlier try committed without its answer) returns it as
    written: its documents whose version is done (already, or since) as done, the others to
    enqueue. Raises
    :class:`~pathweave_ingest.lifecycle.NotPermitted` (nothing written) when ``access`` may
    not read a document it names, stored or accepted."""
    queued_at = now_iso()

    def work(run):
        if committed := run("job_get", job_id=job_id):  # an earlier try committed, its answer lost: it stands
            versions = dict(zip(committed[0]["doc_ids"], committed[0]["versions"]))
            heads = {row["doc_id"]: row for row in run("doc_status_get", ids=[d["doc_id"] for d in docs])}
            stood = [{**doc, "version": int(versions[doc["doc_id"]])} for doc in docs]
            done = [doc for doc in stood if _done_at(heads.get(doc["doc_id"]), doc["version"])]
            return [doc for doc in stood if doc not in done], done
        enqueue, done = lifecycle.accept_in(run, job_id, docs, queued_at, access)
        versions = {d["doc_id"]: d["version"] for d in enqueue + done}
        _write_job(run, job_id, queued_at, docs, versions, len(enqueue), batch_size, queue)
        return enqueue, done

    enqueue, done = store.execute_write(work)
    return Submission(job_id, enqueue, [d["doc_id"] for d in done])


def requeue(store: GraphStore, job_id: str, batch_size: int, queue: str, failed: bool = True,
            queued: bool = False, limit: int = 10_000, queued_for_s: float = 0.0) -> Submission:
    """Queue again, under a new job ``job_id``, the versions that need it
    (:func:`pathweave_ingest.lifecycle.requeue_in`: failed ones when ``failed``, those whose
    worker died with their lease, queued ones when ``queued``, queued for ``queued_for_s`` s or more),
    in ONE transaction with the job, at most ``limit`` of them. Nothing is enqueued here:
    ``to_enqueue`` holds their payloads."""
    def work(run):
        docs = lifecycle.requeue_in(run, job_id, failed, queued, limit, queued_for_s)
        if docs:
            _write_job(run, job_id, now_iso(), docs, {d["doc_id"]: d["version"] for d in docs}, len(docs),
                       batch_size, queue)
        return docs

    return Submission(job_id, store.execute_write(work), [])


REFERENCE_KEYS = ("doc_id", "version", "key", "content_hash")
"""What a queued batch carries of each document: its id and accepted version, and what tells
whether the graph already holds that content. The text is read from the store by the worker
that claims the version (the payload kept on the document's head since it was accepted), so
messages stay small however large the documents are."""


def reference(payload: dict[str, Any]) -> dict[str, Any]:
    """A document's reference in a queued batch (:data:`REFERENCE_KEYS` of its payload)."""
    return {key: payload[key] for key in REFERENCE_KEYS if key in payload}


def batches_of(docs: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """``docs`` (payloads with their ``version``) as batches of at most ``size`` references."""
    refs = [reference(doc) for doc in docs]
    return [refs[i:i + size] for i in range(0, len(refs), max(1, size))]


def mark_failed(store: GraphStore, docs: list[dict[str, Any]], error: str) -> None:
    """Give up on the versions of ``docs`` (e.g. the broker refused the batch)."""
    lifecycle.fail(store, docs, error)


def _document_view(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("doc_id", "status", "version", "title", "source", "job_id", "attempts", "error", "queued_at",
            "started_at", "finished_at", "seconds", "passages", "propositions", "entities", "triples")
    return {key: row.get(key) for key in keys}


def job_status(store: GraphStore, job_id: str, access: Access = UNRESTRICTED) -> dict[str, Any] | None:
    """The job with its documents' states and progress, or None (unknown for this tenant). A
    document ``access`` may not read (:mod:`pathweave.access`, by the newest accepted access
    list, else the stored one; for a restricted caller, also one whose list is not known yet,
    as :func:`list_documents` leaves out the documents in flight) counts in the job's state
    and progress but is not listed (no id, title, source or error of it)."""
    rows = store.run("job_get", job_id=job_id)
    if not rows:
        return None
    job = rows[0]
    doc_ids = list(job["doc_ids"] or [])
    versions = list(job.get("versions") or [None] * len(doc_ids))
    statuses = {row["doc_id"]: row for row in store.run("doc_status_get", ids=doc_ids)}
    unreadable = {doc_id for doc_id, row in statuses.items()  # one whose list is not known yet, too
                  if access.restricted and not (row["acl_known"] and access.reads(row["acl"]))}
    documents = []
    for doc_id, version in zip(doc_ids, versions):
        row = statuses.get(doc_id)
        status, newer = lifecycle.job_view_status(row, version)
        view = {**_document_view(row or {"doc_id": doc_id}), "status": status, "version": version}
        if newer is not None:  # the head's state and counts are the newer version's, not this job's
            view = {**_document_view({"doc_id": doc_id, "title": view["title"], "source": view["source"]}),
                    "status": status, "version": version, "superseded_by": newer}
        documents.append(view)
    counts = Counter(d["status"] for d in documents)
    total = len(documents)
    finished = counts["done"] + counts["failed"] + counts["deleted"] + counts["superseded"]
    if total and finished == total:
        state = "failed" if counts["failed"] == total else ("done_with_errors" if counts["failed"] else "done")
    elif counts["running"] or finished:
        state = "running"
    else:
        state = "queued" if total else "done"
    return {
        "job_id": job["job_id"], "status": state, "created_at": job["created_at"], "total": total,
        "counts": {status: counts[status] for status in lifecycle.STATUSES},
        "progress": {
            "documents_finished": finished,
            "fraction": round(finished / total, 4) if total else 1.0,
            "passages": sum(int(d["passages"] or 0) for d in documents if d["status"] == "done"),
        },
        "finished_at": max((d["finished_at"] or "" for d in documents), default=None) if total and finished == total else None,
        "documents": [d for d in documents if d["doc_id"] not in unreadable],
        "bookmarks": job_bookmarks([statuses[d] for d in doc_ids if d in statuses]),
    }


def job_bookmarks(rows: list[dict[str, Any]]) -> list[str]:
    """What a reader elsewhere passes to see a job's documents (Neo4j): of each worker, the
    bookmarks it held when it finished its last document of the job (they cover its earlier
    commits), so a job of any size gives one or two per worker. Empty on ArcadeDB."""
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("status") == "done" and row.get("bookmarks"):
            worker = row.get("worker") or ""
            if worker not in latest or (row.get("finished_at") or "") > (latest[worker].get("finished_at") or ""):
                latest[worker] = row
    return sorted({bookmark for row in latest.values() for bookmark in row["bookmarks"]})


def list_documents(store: GraphStore, status: str | None = None, limit: int = 50,
                   offset: int = 0, access: Access = UNRESTRICTED) -> tuple[list[dict[str, Any]], int]:
    """The tenant's documents (ingested and in flight), newest first; ``(page, total)``. A
    restricted ``access`` (:mod:`pathweave.access`) lists only the ingested documents it may
    read (not those in flight, whose access list is not stored yet)."""
    merged: dict[str, dict[str, Any]] = {}
    if not access.restricted:
        for row in store.run("doc_status_list"):
            merged[row["doc_id"]] = {**_document_view(row), "ingested_at": None}
    for row in store.run("documents_list"):
        if not access.reads(row["acl"]):
            merged.pop(row["doc_id"], None)
            continue
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


def delete_document(store: GraphStore, doc_id: str, access: Access = UNRESTRICTED) -> dict[str, Any] | None:
    """Delete a document (:func:`pathweave_ingest.lifecycle.delete`: a new version that is a
    tombstone, the graph removed in the same transaction; a version queued or running is
    superseded). Returns ``{doc_id, version, removed}``, None when the tenant never had it or
    ``access`` may not read it (nothing written either way)."""
    try:
        return lifecycle.delete(store, doc_id, access)
    except (lifecycle.NoSuchDocument, lifecycle.NotPermitted):
        return None
