"""One document's lifecycle: every status transition of a document, and nothing else.

The head of a document, ``(:DocumentStatus)`` per (tenant, doc_id) (``cypher/documents.cypher``),
holds its newest accepted **version** and that version's state. Every accepted write (POST,
PUT, DELETE, the CLI's adds, replacements and a folder sync's removals) takes the next
version in the transaction that accepts it (:func:`accept_in`, :func:`delete`,
:func:`applied_in`), with the head locked first (``doc_lock``),
so concurrent writes of one document are serialized and the last accepted one wins::

    accept            (none) | any(v)       -> queued(v+1)      new content; v (if unfinished) is superseded
    accept            done(v), same content -> done(v)          unchanged: nothing to do
    apply             any(v)                -> done(v+1)        the CLI's add or replacement, accepted in its swap
    claim             queued(v)             -> running(v)       compare-and-set on v; lease = now + lease_s
    claim             running(v), lease out -> running(v)       its worker died: taken over (attempts + 1)
    renew             running(v)            -> running(v)       the worker extends its lease (Lease)
    fence + swap      running(v)            -> running(v)       the pipeline makes v visible, one transaction
    finish            running(v)            -> done(v)          only if v is still the newest
    retry             running(v)            -> queued(v)        a failed attempt, attempts left
    fail              queued|running(v)     -> failed(v)        attempts used up (the old version stays visible)
    requeue           failed(v) | running(v), lease out -> queued(v)   jobs requeue, the in-process reaper
    delete            any(v)                -> deleted(v+1)     the graph removed in the same transaction

A batch carries the version each document was accepted at. A worker whose version is no
longer the newest skips it as **superseded**; the pipeline's write transaction starts with
:func:`fence` (the version must still be the newest, and the head stays locked until the
swap commits), so an older version can never overwrite a newer one, and a version that
fails leaves the old one visible. A job reads each of its documents through
:func:`job_view_status`: a version older than the head's is ``superseded``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pathweave.access import UNRESTRICTED, Access
from pathweave.store.graph_store import GraphStore
from pathweave.store.retry import WriteConflict
from pathweave_ingest.documents import DocumentChange, record_change, remove_documents
from pathweave.errors import PathweaveError

log = logging.getLogger(__name__)

Run = Callable[..., list[dict[str, Any]]]

STATUSES = ("queued", "running", "done", "failed", "superseded", "deleted")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def now_ms() -> int:
    """Milliseconds since the epoch (the unit of ``lease_until``)."""
    return int(time.time() * 1000)


class Superseded(PathweaveError, RuntimeError):
    """A newer version of these documents was accepted: the write transaction that would
    have made an older one visible is rolled back (:func:`fence`)."""

    def __init__(self, doc_ids: Collection[str]) -> None:
        super().__init__(f"a newer version was accepted for {len(doc_ids)} document(s)")
        self.doc_ids = set(doc_ids)


class NoSuchDocument(PathweaveError, LookupError):
    """DELETE of a document the tenant never had (nothing written)."""


class NotPermitted(PathweaveError, PermissionError):
    """A restricted caller's write of documents it may not read, stored or only accepted (a
    version queued or running): the accepting transaction is rolled back, nothing written."""

    def __init__(self, doc_ids: Collection[str]) -> None:
        super().__init__(f"{len(doc_ids)} document(s) of this write have an access list the caller is not on")
        self.doc_ids = sorted(doc_ids)


def head_readable(head: dict[str, Any], access: Access) -> bool:
    """Whether ``access`` reads the document of ``head`` (a ``doc_lock`` row) as its newest
    accepted access list has it: the head's, when a write or a PATCH set one, else the stored
    document's. A head with neither: anybody when nothing was ever accepted for it, else (a
    first version in flight that named no list, whose stored list is not known yet) only an
    unrestricted caller, as a job's view of it (:func:`pathweave_ingest.jobs.job_status`)."""
    if head.get("head_acl_set"):
        return access.reads(head.get("head_acl"))
    if head.get("ingested"):
        return access.reads(head.get("acl"))
    return not head.get("status") or not access.restricted


def is_current(state: dict[str, Any] | None, payload: dict[str, Any], after_write: bool = False) -> bool:
    """Does the graph hold this payload's content (``state``: a ``document_states`` or
    ``doc_lock`` row)? A source whose stored content hash differs is ingested but not current,
    and so is a document stored with another access list than the newest accepted one: the
    payload's when it names one (a write being accepted), else the head's (after a write:
    ``after_write``, the head's first, since a PATCH accepted later wins). A write that names
    no access list keeps the stored one."""
    if not state or not state.get("ingested"):
        return False
    expected = _UNSET
    if after_write and state.get("head_acl_set"):
        expected = state.get("head_acl")
    elif payload.get("acl") is not None:
        expected = payload["acl"]
    elif state.get("head_acl_set"):
        expected = state.get("head_acl")
    if expected is not _UNSET and _acl_key(state.get("acl")) != _acl_key(expected):
        return False
    return not payload.get("key") or state.get("content_hash") == payload.get("content_hash")


_UNSET = object()


def _acl_key(acl: Collection[str] | None) -> tuple[str, ...] | None:
    return None if acl is None else tuple(sorted(acl))


def _versions_of_locked(run: Run, name: str, doc_ids: Collection[str], **params: Any) -> dict[str, int]:
    """Run statement ``name`` that gives each head ``doc_lock`` holds in this transaction its
    next version; returns ``{doc_id: version}``. Raises
    :class:`pathweave.store.retry.WriteConflict` (the transaction runs again) when a head is not
    found again: a concurrent first write of the same new id committed its copy first."""
    versions = {row["doc_id"]: int(row["version"]) for row in run(name, **params)}
    if lost := set(doc_ids) - set(versions):
        raise WriteConflict(f"{len(lost)} locked document head(s) not found again in this transaction")
    return versions


def _status_rows(items: Iterable[dict[str, Any]], queued_at: str, payload: bool = False) -> list[dict[str, Any]]:
    """Rows of ``doc_accept`` (``payload``: with the task payload as JSON, kept until done)
    and ``doc_status_already_done``."""
    return [{"doc_id": d["doc_id"], "title": d["title"], "source": d["source"], "queued_at": queued_at,
             "acl": d.get("acl"), "acl_given": d.get("acl") is not None,
             **({"payload": json.dumps(d, ensure_ascii=False)} if payload else {})} for d in items]


def accept_in(run: Run, job_id: str, docs: list[dict[str, Any]], queued_at: str,
              access: Access = UNRESTRICTED) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Accept ``docs`` (task payloads, :func:`pathweave_ingest.jobs.payloads`) inside the
    caller's write transaction, under ``job_id``: each head is locked, then a document whose
    stored content is this one with nothing pending reads ``done`` (no new version), any
    other takes the next version, ``queued``. Returns ``(to_enqueue, already_done)``: the
    payloads with their ``version`` added. Raises :class:`NotPermitted` when ``access`` may
    not read one of them (:func:`head_readable`, under the lock: a PATCH or a write committed
    meanwhile is seen)."""
    heads = {row["doc_id"]: row for row in run("doc_lock", ids=[d["doc_id"] for d in docs], owner=job_id)}
    missing = [d["doc_id"] for d in docs if d["doc_id"] not in heads]
    if missing:  # ids are hashes of the tenant: only a forged payload names another tenant's document
        raise ValueError(f"document ids of another tenant: {missing[:3]}")
    refused = [doc_id for doc_id, head in heads.items() if not head_readable(head, access)]
    if refused:
        raise NotPermitted(refused)
    enqueue, done = [], []
    for doc in docs:
        head = heads[doc["doc_id"]]
        if is_current(head, doc) and head.get("status") in (None, "done"):
            done.append({**doc, "version": int(head["version"])})
        else:
            enqueue.append(doc)
    if done:
        marked = run("doc_status_already_done", rows=_status_rows(done, queued_at), job_id=job_id)[0]["n"]
        if marked < sum(1 for doc in done if heads[doc["doc_id"]].get("status") is None):
            raise WriteConflict("a locked document head was not found again in this transaction")
    versions = _versions_of_locked(run, "doc_accept", [d["doc_id"] for d in enqueue],
                                  rows=_status_rows(enqueue, queued_at, payload=True), job_id=job_id) if enqueue else {}
    return [{**doc, "version": versions[doc["doc_id"]]} for doc in enqueue], done


def job_view_status(row: dict[str, Any] | None, version: int | None) -> tuple[str, int | None]:
    """A job's view of one of its documents: ``(status, superseded_by)`` from the head
    ``row`` (``doc_status_get``; None: no head) and the ``version`` the job stands for
    (None: a job from before versions, which follows the head)."""
    if row is None:
        return "deleted", None
    head = int(row.get("version") or 0)
    if version is not None and head > int(version):
        return "superseded", head
    return row["status"] or "queued", None


def delete(store: GraphStore, doc_id: str, access: Access = UNRESTRICTED) -> dict[str, Any]:
    """DELETE as one compare-and-set (:func:`remove`): the head takes the next version as a
    tombstone, the stored version's graph is removed and the change recorded, in ONE
    transaction; a version queued or running is superseded by it (its swap's :func:`fence`
    fails). Returns ``{doc_id, version, removed: counts}``; raises :class:`NoSuchDocument`
    (nothing written) when the tenant never had the document, :class:`NotPermitted` when
    ``access`` may not read it (:func:`head_readable`, under the lock)."""
    versions, change = remove(store, [doc_id], "delete", must_exist=True, access=access)
    return {"doc_id": doc_id, "version": versions[doc_id], "removed": dict(change.counts)}


def set_acl(store: GraphStore, doc_id: str, acl: list[str] | None) -> dict[str, Any]:
    """Set the access list of the stored document ``doc_id`` without re-ingesting it
    (:mod:`pathweave.access`; None: the whole tenant may read it, ``[]``: only unrestricted
    callers), in ONE write transaction: the head is locked and takes the list as the newest
    accepted one (a version still queued or running stores it, not its own), the stored
    document gets it, and the graph change makes every query process's topology re-read its
    passages' access (effective for the next query). Returns ``{doc_id, acl, version}`` (the
    graph version); raises :class:`NoSuchDocument` (nothing written) when the tenant has
    neither a stored document ``doc_id`` nor a version of it in flight."""
    return _set_acl(store, doc_id, None if acl is None else sorted(acl), from_head=False)


def apply_head_acl(store: GraphStore, doc_id: str) -> dict[str, Any]:
    """Give the stored document ``doc_id`` its head's access list, the newest accepted one (a
    worker's write of unchanged content under a new list: a PATCH accepted since wins), as
    :func:`set_acl` does; nothing changes when the head names none."""
    return _set_acl(store, doc_id, None, from_head=True)


def transaction_token(kind: str) -> str:
    """A token of one accepting transaction (``doc_lock``'s ``$owner``): the same on each of its
    tries, so a try finds the heads an earlier try of it committed (``replayed``)."""
    return f"{kind}:{uuid.uuid4().hex}"


def _set_acl(store: GraphStore, doc_id: str, value: list[str] | None, from_head: bool) -> dict[str, Any]:
    owner = transaction_token("acl")

    def work(run: Run) -> DocumentChange:
        nonlocal value
        heads = run("doc_lock", ids=[doc_id], owner=owner)
        if heads and heads[0]["replayed"] and not heads[0]["latest"]:
            return DocumentChange()  # an earlier try committed, a newer write came since: it wins
        if not heads or (not heads[0]["ingested"] and heads[0]["status"] in (None, "deleted")):
            raise NoSuchDocument(doc_id)  # rolls the lock's MERGE back
        if from_head:
            if not heads[0]["head_acl_set"]:
                return DocumentChange()
            value = heads[0]["head_acl"]
        else:
            run("doc_head_set_acl", doc_id=doc_id, acl=value)  # a version still queued or running stores it
        rows = run("document_set_acl", doc_id=doc_id, acl=value) if heads[0]["ingested"] else []
        change = DocumentChange(access_passage_ids=[p for p in rows[0]["passage_ids"] if p] if rows else [])
        record_change(run, store, change)
        return change

    change = store.execute_write(work)
    store.backend.graph_changed(store)
    return {"doc_id": doc_id, "acl": value,
            "version": change.version if change.version is not None else store.graph_version()}


def head_acls(run: Run, doc_ids: list[str]) -> dict[str, list[str] | None]:
    """Inside a transaction that locked the heads of ``doc_ids``: the newest accepted access
    list of each document that has one (a write or PATCH named it), ``{doc_id: acl}``."""
    return {row["doc_id"]: row["acl"] for row in run("doc_head_acl", ids=doc_ids) if row["acl_set"]}


def remove(store: GraphStore, doc_ids: list[str], owner: str, must_exist: bool = False,
           access: Access = UNRESTRICTED) -> tuple[dict[str, int], DocumentChange]:
    """Remove documents as new versions, in ONE write transaction: each head is locked (an id
    of another tenant is left alone) and takes the next version as a tombstone, the stored
    graph is removed (:func:`pathweave_ingest.documents.remove_documents`) and the change
    recorded. ``must_exist``: raise :class:`NoSuchDocument` (nothing written) when the tenant
    never had a document of ``doc_ids`` (a DELETE; a folder sync's removals need not), and
    :class:`NotPermitted` when ``access`` may not read one (:func:`head_readable`).
    Returns ``({doc_id: version}, change)``."""
    token = transaction_token(owner)

    def work(run: Run) -> tuple[dict[str, int], DocumentChange]:
        heads = run("doc_lock", ids=doc_ids, owner=token) if doc_ids else []
        if must_exist and (len(heads) < len(doc_ids) or any(
                not h["ingested"] and h["status"] in (None, "deleted") and not h["replayed"] for h in heads)):
            raise NoSuchDocument(", ".join(doc_ids))  # rolls the lock's MERGE back
        refused = [h["doc_id"] for h in heads if not h["replayed"] and not head_readable(h, access)]
        if refused:
            raise NotPermitted(refused)
        # a replayed head keeps the tombstone it took; one a newer write locked since is that write's now
        locked = [h["doc_id"] for h in heads if not h["replayed"] or h["latest"]]
        fresh = [h["doc_id"] for h in heads if not h["replayed"]]
        versions = {h["doc_id"]: int(h["version"]) for h in heads if h["replayed"]}
        versions |= _versions_of_locked(run, "doc_mark_deleted", fresh, ids=fresh,
                                       finished_at=now_iso()) if fresh else {}
        change = DocumentChange()
        remove_documents(run, locked, change, store.dimensions)
        if change.removed_doc_ids:
            record_change(run, store, change)
        return versions, change

    versions, change = store.execute_write(work)
    if change.version is not None:
        store.backend.graph_changed(store)
    return versions, change


def applied_in(run: Run, docs: list[dict[str, Any]], owner: str) -> list[str]:
    """Inside the write transaction that makes ``docs`` visible without a queue (the CLI's
    ingest; ``{doc_id, title, source, acl}``, ``acl`` None when the write names none): each
    head is locked and takes the next version (and the access list the write names),
    ``done`` (a version queued or running meanwhile is superseded by this write). Returns the
    ids stored at that moment (the caller cuts their old version off: another writer may
    have stored one since the caller looked). ``owner``: the transaction's token
    (:func:`transaction_token`). Raises ValueError (nothing written) for an id of another
    tenant, :class:`Superseded` for documents an earlier try of this transaction stored and a
    newer write locked since (the caller writes the group again without them)."""
    if not docs:
        return []
    heads = run("doc_lock", ids=[d["doc_id"] for d in docs], owner=owner)
    others = sorted({d["doc_id"] for d in docs} - {h["doc_id"] for h in heads})
    if others:  # ids are hashes of the tenant: only a forged id names another tenant's document
        raise ValueError(f"document ids of another tenant: {others[:3]}")
    finished_at = now_iso()
    if superseded := {h["doc_id"] for h in heads if h["replayed"] and not h["latest"]}:
        raise Superseded(superseded)  # an earlier try committed, a newer write came since: it wins
    replayed = {h["doc_id"] for h in heads if h["replayed"]}  # the version an earlier try took stands
    fresh = [d for d in docs if d["doc_id"] not in replayed]
    if fresh:
        _versions_of_locked(run, "doc_applied", [d["doc_id"] for d in fresh],
                           rows=[{"doc_id": d["doc_id"], "title": d["title"], "source": d["source"],
                                  "finished_at": finished_at, "acl": d.get("acl"),
                                  "acl_given": d.get("acl") is not None} for d in fresh])
    return [h["doc_id"] for h in heads if h["ingested"]]


def fence(run: Run, versions: dict[str, int]) -> None:
    """First step of the transaction that makes these versions visible (``{doc_id:
    version}``): each must still be its document's newest accepted version, and its head
    stays locked until the transaction commits. Raises :class:`Superseded` (the transaction
    rolls back, nothing of it is written) for those that are not."""
    if not versions:
        return
    rows = [{"doc_id": d, "version": int(v)} for d, v in versions.items()]
    held = {row["doc_id"] for row in run("doc_version_fence", rows=rows)}
    if held != set(versions):
        raise Superseded(set(versions) - held)


def claim(store: GraphStore, docs: list[dict[str, Any]], resumed: Collection[str], worker: str,
          lease_s: float) -> list[dict[str, Any]]:
    """Take ``docs`` (references or payloads with their ``version``) for ``worker``
    (compare-and-set): queued at that version, or running under an expired lease or under
    this task chain (``resumed``). Attempts grow by one unless resumed. Returns the payloads
    taken, in ``docs``' order: the one kept on the head, read in the same transaction, with
    the reference's fields over it (a batch queued by an earlier version carries the whole
    payload itself)."""
    if not docs:
        return []
    now = now_ms()
    rows = [{"doc_id": d["doc_id"], "version": int(d["version"]), "count": 0 if d["doc_id"] in resumed else 1,
             "resumed": d["doc_id"] in resumed} for d in docs]
    taken = {row["doc_id"]: row["payload"] for row in store.run(
        "doc_claim", rows=rows, now=now, started_at=now_iso(), worker=worker, lease_until=now + int(lease_s * 1000))}
    claimed = [{**(json.loads(taken[d["doc_id"]]) if taken[d["doc_id"]] else {}), **d}
               for d in docs if d["doc_id"] in taken]
    textless = [d for d in claimed if "text" not in d]  # accepted by a release that kept no payload
    if textless:
        fail(store, textless, "the text of this version is not in the store (accepted before payloads were kept): "
                              "send the document again")
    return [d for d in claimed if "text" in d]


def finish(store: GraphStore, rows: list[dict[str, Any]]) -> set[str]:
    """``done`` for each row ``{doc_id, version, finished_at, seconds, passages, propositions,
    entities, triples}`` whose version is still the newest; returns those."""
    return {row["doc_id"] for row in store.run("doc_status_done", rows=rows)} if rows else set()


def retry(store: GraphStore, rows: list[dict[str, Any]], worker: str) -> set[str]:
    """Back to ``queued`` with the error for rows ``{doc_id, version, attempts, error}``
    whose version is still the newest and still running under ``worker``; returns those."""
    return {row["doc_id"] for row in store.run("doc_status_retry", rows=rows, worker=worker)} if rows else set()


def fail(store: GraphStore, docs: Iterable[dict[str, Any]], error: str) -> list[str]:
    """``failed`` with ``error`` for the payloads ``docs`` whose version is still the newest
    and unfinished (queued or running); returns those ids."""
    rows = [{"doc_id": d["doc_id"], "version": int(d.get("version") or 0), "error": error,
             "finished_at": now_iso()} for d in docs]
    return [row["doc_id"] for row in store.run("doc_status_failed", rows=rows)] if rows else []


def requeue_in(run: Run, job_id: str, failed: bool, queued: bool, limit: int = 10_000,
               queued_for_s: float = 0.0) -> list[dict[str, Any]]:
    """Inside the caller's write transaction: the versions to run again (``failed`` ones when
    asked, always those running under a lease that ran out, ``queued`` ones when asked that
    have been queued for at least ``queued_for_s`` seconds: their message was lost or their
    queue is gone) back to ``queued`` under ``job_id`` (compare-and-set on the version).
    Returns their payloads (kept since acceptance) with their ``version``."""
    now, queued_at = now_ms(), now_iso()
    queued_before = (datetime.now(timezone.utc) - timedelta(seconds=queued_for_s)).isoformat()
    statuses = ["running"] + ["failed"] * failed + ["queued"] * queued
    found = run("doc_requeue_candidates", statuses=statuses, now=now, limit=limit, queued_before=queued_before)
    if not found:
        return []
    taken = {row["doc_id"] for row in run("doc_requeue", job_id=job_id, now=now, queued_at=queued_at,
                                          failed=failed, queued=queued, queued_before=queued_before,
                                          rows=[{"doc_id": r["doc_id"], "version": r["version"]} for r in found])}
    return [{**json.loads(r["payload"]), "version": int(r["version"])} for r in found if r["doc_id"] in taken]


class _HeadWriters:
    """The document heads this process is writing, so that a worker's lease renewal and its
    own swap never contend on one head: on ArcadeDB's optimistic transactions a renewal
    committed while the swap's transaction (which locks the head from its fence on) is open
    makes the swap's commit fail, and a swap longer than a third of the lease would fail on
    every retry. A swap waits for a renewal in flight (one statement); a renewal leaves out
    the heads a swap holds (their next renewal follows the swap). So a swap, retries
    included, must end within two thirds of the lease (``worker.lease_s``): a longer one
    lets a redelivery take its documents over (run twice, never lost)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._swapping: Counter[str] = Counter()
        self._renewing: Counter[str] = Counter()

    def _release(self, ids: set[str], held: Counter[str]) -> None:
        with self._changed:
            held.subtract(ids)
            held += Counter()  # drops the heads no longer held
            self._changed.notify_all()

    @contextmanager
    def swapping(self, ids: Collection[str]) -> Iterator[None]:
        """Held while a swap's transaction over the heads ``ids`` runs (retries included),
        after the renewals of any of them in flight."""
        ids = set(ids)
        with self._changed:
            self._changed.wait_for(lambda: not any(self._renewing[i] for i in ids))
            self._swapping.update(ids)
        try:
            yield
        finally:
            self._release(ids, self._swapping)

    @contextmanager
    def renewing(self, ids: Collection[str]) -> Iterator[set[str]]:
        """Held while a lease renewal runs; gives the heads of ``ids`` no swap holds (those
        the renewal writes), at once."""
        with self._changed:
            free = {i for i in ids if not self._swapping[i]}
            self._renewing.update(free)
        try:
            yield free
        finally:
            self._release(free, self._renewing)


HEAD_WRITERS = _HeadWriters()
"""The process's one record of the heads its swaps and lease renewals write."""


@dataclass
class Lease:
    """Keeps a worker's lease on the documents it runs (``docs``: payloads with their
    version) while the ``with`` block runs: renewed every third of ``lease_s`` by a thread.
    Once the worker dies the renewals stop, and the next delivery of the batch takes the
    documents over after at most ``lease_s`` (:func:`claim`). ``lost``: ids whose lease was
    taken over or superseded (the pipeline's fence has the last word)."""

    store: GraphStore
    docs: list[dict[str, Any]]
    worker: str
    lease_s: float
    lost: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def renew(self, ids: Collection[str] | None = None) -> None:
        """Extend the lease of the documents (those of ``ids`` only, when given)."""
        docs = [d for d in self.docs if ids is None or d["doc_id"] in ids]
        if not docs:
            return
        rows = [{"doc_id": d["doc_id"], "version": int(d["version"])} for d in docs]
        held = {row["doc_id"] for row in self.store.run(
            "doc_lease_renew", rows=rows, worker=self.worker, lease_until=now_ms() + int(self.lease_s * 1000))}
        self.lost |= {d["doc_id"] for d in docs} - held

    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                with HEAD_WRITERS.renewing([d["doc_id"] for d in self.docs]) as free:
                    self.renew(free)
            except Exception as exc:  # noqa: BLE001 - the store is away; the next renewal retries
                log.warning("lease renewal of %d document(s) failed: %s", len(self.docs), exc)

    def __enter__(self) -> "Lease":
        if self.docs:
            self._thread = threading.Thread(target=self._run, name="pathweave-lease", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
