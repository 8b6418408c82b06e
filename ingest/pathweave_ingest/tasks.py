"""Ingestion task functions, shared by the Celery worker (:mod:`pathweave_ingest.worker`)
and the API's in-process queue (:class:`InProcessQueue`, used when no broker is set).

One task ingests one batch of documents with the CLI's pipeline (load is done by
the caller; chunk -> extract -> embed -> write here), and keeps each document's
status in the graph (``queued -> running -> done | failed``).

Delivery is at-least-once (Celery ``acks_late``): a batch may run again after
a worker died. That is safe because every write MERGEs on content-hash ids and
a document already in the store is skipped; what a killed attempt could leave
undone (synonymy edges of the documents it had written, the graph version
bump) is repaired when the batch runs again, before any of its documents is
marked ``done``: a job reads ``done`` only when the graph is complete.

Failures:

- transient store errors (connection refused/reset, server restarting,
  transaction conflicts) raise :class:`StoreUnavailable`; the caller retries
  the batch with exponential backoff (``retry_backoff_s * 2**n``, jittered,
  capped at ``retry_backoff_max_s``, at most ``max_retries`` times);
- a document that fails while the store works (extraction error, a value the
  store rejects, ...) is retried with its batch's other failures; after
  ``max_doc_attempts`` attempts it is marked ``failed`` with its error, and the
  rest of the batch continues (the poison-document path);
- a document whose attempts keep killing the worker (a redelivered batch finds
  it ``running``) is retried alone; after ``max_doc_attempts`` such attempts it
  is marked ``failed`` too.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any


from pathweave.errors import PathweaveError, StoreUnavailable, is_transient
from pathweave.store.graph_store import GraphStore
from pathweave.telemetry import TRACER
from pathweave_ingest import lifecycle
from pathweave_ingest.jobs import now_iso, reference, to_source
from pathweave_ingest.profile import IngestProfile
from pathweave_ingest.worker_runtime import Runtime

log = logging.getLogger(__name__)

WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"
_ERROR_CHARS = 2000


def store_ok(store: GraphStore) -> bool:
    """Does the store answer a trivial query?"""
    try:
        store.run("ping")
        return True
    except Exception:  # noqa: BLE001
        return False


def jittered(seconds: float) -> float:
    """``seconds`` scaled by a random factor in [0.5, 1] (spreads retries out)."""
    return seconds * (0.5 + random.random() / 2)


@dataclass
class BatchOutcome:
    """What one run of a batch did. ``retry``: payloads to run again (failed, attempts left)."""

    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)  # a newer version was accepted: not written
    held: list[str] = field(default_factory=list)  # running under another worker's live lease: in retry
    failed: list[str] = field(default_factory=list)
    retry: list[dict[str, str]] = field(default_factory=list)
    passages: int = 0
    seconds: float = 0.0
    repaired: list[str] = field(default_factory=list)
    profile: IngestProfile = field(default_factory=IngestProfile)  # the pipeline's stages, summed

    def merge(self, other: BatchOutcome) -> None:
        """Add ``other`` (a later run of the same batch) to this one; ``retry`` is left as is."""
        for name in ("done", "skipped", "superseded", "held", "failed", "repaired"):
            getattr(self, name).extend(getattr(other, name))
        self.passages += other.passages
        self.seconds += other.seconds
        self.profile.merge(other.profile)

    def summary(self) -> dict[str, Any]:
        """What the batch did, as logged (JSON) after it: counts, seconds and the busy seconds
        per ingestion stage (``stages_s``, :mod:`pathweave_ingest.profile`)."""
        return {"done": len(self.done), "skipped": len(self.skipped), "superseded": len(self.superseded),
                "failed": len(self.failed),
                "retry": len(self.retry), "passages": self.passages, "seconds": round(self.seconds, 3),
                "repaired": len(self.repaired), **self.profile.as_dict()}


def _transient(runtime: Runtime, exc: BaseException) -> StoreUnavailable:
    runtime.reset()
    return StoreUnavailable(f"store unavailable: {type(exc).__name__}: {str(exc)[:300]}")


def run_batch(runtime: Runtime, tenant: str, job_id: str, documents: list[dict[str, str]],
              resumed: Collection[str] = (), redelivered: bool = False) -> BatchOutcome:
    """Ingest one batch of payloads ``{doc_id, source, title, text, key, content_hash, segments}``
    (:func:`pathweave_ingest.jobs.payloads`) for ``tenant``; a payload whose source is stored
    with another content hash replaces that version.

    ``resumed``: ids this task chain itself left ``running`` (a transient retry), so
    they are not taken for a crashed attempt. ``redelivered``: this very message was
    delivered before and its worker died (Celery ``delivery_info``); ``resumed`` is then
    ignored, because the documents left ``running`` were left by the dead delivery, so
    a document that kills its worker still uses up its attempts. Raises
    :class:`StoreUnavailable` when the store is unavailable (nothing is lost: run the
    batch again later). The batch is a span ``pathweave.ingest_batch`` (its stages and store
    round trips its children) when the process traces.
    """
    if redelivered:
        resumed = ()
    started = time.perf_counter()
    outcome = BatchOutcome()
    store: GraphStore | None = None
    with TRACER.start_as_current_span("pathweave.ingest_batch", attributes={
            "pathweave.tenant": tenant, "pathweave.job_id": job_id, "pathweave.documents": len(documents),
            "pathweave.redelivered": redelivered}):
        try:
            store = runtime.store(tenant)
            _run(runtime, store, tenant, documents, set(resumed), outcome)
        except StoreUnavailable:
            runtime.reset()
            raise
        except Exception as exc:
            if is_transient(exc) or store is None or not store_ok(store):
                raise _transient(runtime, exc) from exc
            raise
    outcome.seconds = time.perf_counter() - started
    log.info("batch of %d for %s (job %s): %s", len(documents), tenant, job_id, json.dumps(outcome.summary()))
    return outcome


TEST_BATCH_DELAY_S = float(os.environ.get("PATHWEAVE_TEST_BATCH_DELAY_S") or 0)
"""The test suite's slow batch (s): each batch waits this long under its lease before it
ingests, so the redelivery test's batch outlives the visibility timeout without a large
corpus (tests/worker/test_worker_kill.py). 0 (unset) everywhere else."""


def _run(runtime: Runtime, store: GraphStore, tenant: str, documents: list[dict[str, Any]],
         resumed: set[str], outcome: BatchOutcome) -> None:
    ws = runtime.worker_settings
    ids = [d["doc_id"] for d in documents]
    states = {row["doc_id"]: row for row in store.run("document_states", ids=ids)}
    todo: list[dict[str, Any]] = []
    gave_up: list[dict[str, Any]] = []
    crashed = False
    now = lifecycle.now_ms()
    for doc in documents:
        state = states.get(doc["doc_id"]) or {}
        head = int(state.get("version") or 0)
        doc.setdefault("version", head)  # a batch queued before versions existed: the head's
        status, attempts = state.get("status"), int(state.get("attempts") or 0)
        if head != int(doc["version"]) or status == "deleted":
            outcome.superseded.append(doc["doc_id"])  # a newer version was accepted (or a DELETE)
            continue
        if status is None or status == "failed" or (status == "done" and lifecycle.is_current(state, doc)):
            outcome.skipped.append(doc["doc_id"])  # given up, or done by an earlier delivery
            continue
        if status == "queued" and attempts >= ws.max_doc_attempts:  # requeued after its workers kept dying
            gave_up.append(doc)
            continue
        if status == "running" and doc["doc_id"] not in resumed:
            if int(state.get("lease_until") or 0) >= now:  # a live lease: its worker runs it, or died just now
                outcome.retry.append(doc)  # (a pool child's message comes back at once): later, not never
                outcome.held.append(doc["doc_id"])
                continue
            crashed = True  # an earlier attempt stopped mid-way and its lease ran out (worker killed)
            if attempts >= ws.max_doc_attempts:
                gave_up.append(doc)
                continue
        todo.append(doc)
    if gave_up:
        outcome.failed.extend(lifecycle.fail(store, gave_up, f"gave up after {ws.max_doc_attempts} attempts: the "
                                             "worker stopped while processing this document (crash, kill or "
                                             "out of memory)"))
    taken = lifecycle.claim(store, todo, resumed, WORKER_NAME, ws.lease_s)  # their payloads, from the store
    claimed = {d["doc_id"] for d in taken}
    outcome.skipped.extend(d["doc_id"] for d in todo if d["doc_id"] not in claimed)  # another delivery took it
    todo = taken
    # links (synonymy, aliases) an attempt that died after its swap left undone, whatever version
    # came since (the entities it created are "stored" to the next version, which never links them)
    unlinked = [d["doc_id"] for d in todo if (states.get(d["doc_id"]) or {}).get("links_pending")]
    pre_ingested = [d["doc_id"] for d in todo if lifecycle.is_current(states.get(d["doc_id"]), d)]
    with lifecycle.Lease(store, todo, WORKER_NAME, ws.lease_s):  # every claimed document, until the end
        if TEST_BATCH_DELAY_S and todo:
            time.sleep(TEST_BATCH_DELAY_S)
        repair = sorted(set(unlinked) | set(pre_ingested))
        if repair:  # the graph first, so no document reads done before it is complete
            repair_links(store, runtime.settings, repair)
            outcome.repaired = repair
        groups = [[doc] for doc in todo] if crashed else ([todo] if todo else [])
        for group in groups:  # after a crash, one by one: a poison document only costs itself attempts
            _ingest(runtime, store, tenant, group, states, resumed, outcome)


def _ingest(runtime: Runtime, store: GraphStore, tenant: str, docs: list[dict[str, Any]],
            states: dict[str, dict], resumed: set[str], outcome: BatchOutcome) -> None:
    ws = runtime.worker_settings
    ids = [d["doc_id"] for d in docs]
    started = time.perf_counter()
    errors: dict[str, str] = {}
    batch_error = ""
    superseded: set[str] = set()
    try:
        report = runtime.pipeline(tenant).ingest([to_source(d) for d in docs],
                                                 versions={d["doc_id"]: int(d["version"]) for d in docs})
        outcome.profile.merge(report.profile)
        errors = {e.source: e.reason for e in report.errors}
        superseded = set(report.superseded)
    except Exception as exc:  # noqa: BLE001 - classified below
        if is_transient(exc) or not store_ok(store):
            raise _transient(runtime, exc) from exc
        log.exception("pipeline failed on a batch of %d", len(docs))
        batch_error = f"{type(exc).__name__}: {exc}"
    seconds = round(time.perf_counter() - started, 3)
    outcome.superseded.extend(sorted(superseded))
    docs = [d for d in docs if d["doc_id"] not in superseded]
    after = {row["doc_id"]: row for row in store.run("document_states", ids=ids)}
    stored = {d["doc_id"] for d in docs if lifecycle.is_current(after.get(d["doc_id"]), d, after_write=True)}
    done = [d for d in docs if d["doc_id"] in stored]  # this version is stored
    failed = [d for d in docs if d["doc_id"] not in stored]
    if failed and not store_ok(store):
        raise _transient(runtime, RuntimeError("store stopped answering during the batch"))
    if done and batch_error:  # the pipeline stopped after writing them: its synonymy step may be missing,
        repair_links(store, runtime.settings, [d["doc_id"] for d in done])  # repaired before they read done
    if done:
        counts = {row["doc_id"]: row for row in store.run("document_counts", ids=[d["doc_id"] for d in done])}
        finished = now_iso()
        bookmarks = store.last_bookmarks()  # after the versions' writes and the counts read of them
        rows = []
        for d in done:
            c = counts.get(d["doc_id"], {})
            rows.append({"doc_id": d["doc_id"], "version": int(d["version"]), "finished_at": finished,
                         "seconds": seconds, "bookmarks": bookmarks,
                         **{k: int(c.get(k) or 0) for k in ("passages", "propositions", "entities", "triples")}})
        marked = lifecycle.finish(store, rows)
        outcome.superseded.extend(d["doc_id"] for d in done if d["doc_id"] not in marked)  # a newer one came
        outcome.done.extend(d["doc_id"] for d in done if d["doc_id"] in marked)
        outcome.passages += sum(row["passages"] for row in rows if row["doc_id"] in marked)
    retry_rows, failed_docs = [], []
    for d in failed:
        state = states.get(d["doc_id"]) or {}
        attempts = int(state.get("attempts") or 0) + (0 if d["doc_id"] in resumed else 1)
        error = (errors.get(d["source"]) or batch_error or "not ingested")[:_ERROR_CHARS]
        if attempts >= ws.max_doc_attempts:
            failed_docs.append((d, f"failed after {attempts} attempts: {error}"[:_ERROR_CHARS]))
        else:
            retry_rows.append({"doc_id": d["doc_id"], "version": int(d["version"]), "attempts": attempts,
                               "error": f"attempt {attempts} failed: {error}"[:_ERROR_CHARS]})
        states[d["doc_id"]] = {**state, "attempts": attempts}
    for d, error in failed_docs:
        gone = lifecycle.fail(store, [d], error)
        (outcome.failed if gone else outcome.superseded).append(d["doc_id"])
    if retry_rows:
        again = lifecycle.retry(store, retry_rows, WORKER_NAME)
        outcome.retry.extend(d for d in failed if d["doc_id"] in again)
        outcome.superseded.extend(row["doc_id"] for row in retry_rows if row["doc_id"] not in again)


def repair_links(store: GraphStore, settings, doc_ids: list[str]) -> int:
    """Finish what an attempt that died after writing the documents ``doc_ids`` left undone:
    their entities' links (:func:`pathweave_ingest.linking.link_entities`, the pipeline's own
    step: synonymy edges and alias groups; idempotent) and the graph change (their passages
    as added, so topologies pick them up). Returns the synonym edges written."""
    from pathweave.graph.vectors import decode_vectors
    from pathweave_ingest.linking import Links, link_entities

    rows = store.run("document_entity_embeddings", ids=doc_ids)
    links = Links()
    if rows:
        links = link_entities(store, settings, [row["id"] for row in rows],
                              decode_vectors([row["vec"] for row in rows], store.dimensions),
                              {row["id"]: row["norm_name"] for row in rows})
    passages = [row["id"] for row in store.run("document_passage_ids", ids=doc_ids)]
    store.record_change(added=passages, entities=[row["id"] for row in rows], aliases=links.alias_changes)
    store.run("documents_linked", ids=doc_ids)
    return links.synonym_edges


def fail_unfinished(store: GraphStore, docs: list[dict[str, Any]], error: str) -> list[str]:
    """Mark the versions of ``docs`` still queued or running failed (never a finished one,
    never a newer version); returns their ids."""
    return lifecycle.fail(store, docs, error[:_ERROR_CHARS])


def give_up(runtime: Runtime, tenant: str, docs: list[dict[str, Any]], error: str) -> list[str]:
    """The end of a batch's retries (store down for good, or an unexpected error): mark its
    unfinished documents failed with ``error``, so none stays ``running`` forever. Returns
    them; when even that write fails the statuses stay as they are and the documents'
    leases run out (``jobs requeue`` or the next delivery takes them over)."""
    try:
        return fail_unfinished(runtime.store(tenant), docs, error)
    except Exception as exc:  # noqa: BLE001 - the store is down
        log.error("could not mark %d document(s) failed (%s): their leases will run out", len(docs), exc)
        return []


@dataclass
class Attempt:
    """One run of a batch under the retry policy (:func:`attempt`). ``again``: the payloads
    to run again after ``countdown`` seconds ([] when the batch is finished); ``resumed``:
    the ids that next run leaves running itself (a transient retry resumes its own);
    ``error``: what made the batch retry or give up (None: it ran)."""

    outcome: BatchOutcome
    again: list[dict[str, str]]
    resumed: list[str]
    countdown: float
    error: BaseException | None = None


def attempt(runtime: Runtime, tenant: str, job_id: str, documents: list[dict[str, str]], retries: int,
            resumed: Collection[str] = (), redelivered: bool = False) -> Attempt:
    """The one retry policy of ingestion, for the Celery task and the in-process queue alike:
    run ``documents`` once (:func:`run_batch`) after ``retries`` earlier retries and say what
    comes next.

    - The store is unavailable (:class:`StoreUnavailable`): the whole batch again, resuming
      its own running documents; after ``worker.max_retries`` retries its unfinished
      documents are marked ``failed`` (:func:`give_up`).
    - Some documents failed with attempts left: those again (each document's own attempts
      are counted in the store, ``worker.max_doc_attempts``).
    - An unexpected error: the batch's unfinished documents are marked ``failed`` at once,
      so none stays running forever.

    The countdown is ``worker.backoff(retries)`` (exponential from ``retry_backoff_s``,
    capped at ``retry_backoff_max_s``, seconds) jittered to [0.5, 1] of it; the cap is below
    the broker's visibility timeout (:class:`~pathweave.settings.WorkerSettings`)."""
    ws = runtime.worker_settings
    try:
        outcome = run_batch(runtime, tenant, job_id, documents, resumed=resumed, redelivered=redelivered)
    except StoreUnavailable as exc:
        if retries >= ws.max_retries:
            log.error("giving up on a batch of %d for %s (job %s) after %d retries: %s", len(documents), tenant,
                      job_id, retries, exc)
            failed = give_up(runtime, tenant, documents, f"store unavailable after {retries} retries: {exc}")
            return Attempt(BatchOutcome(failed=failed), [], [], 0.0, exc)
        countdown = jittered(ws.backoff(retries))
        log.warning("batch of %d for %s (job %s): %s; again in %.1f s (retry %d of %d)", len(documents), tenant,
                    job_id, exc, countdown, retries + 1, ws.max_retries)
        return Attempt(BatchOutcome(), documents, [d["doc_id"] for d in documents], countdown, exc)
    except Exception as exc:  # noqa: BLE001 - unexpected: never leave documents running forever
        log.exception("batch of %d for %s (job %s) failed", len(documents), tenant, job_id)
        failed = give_up(runtime, tenant, documents, f"internal error: {type(exc).__name__}: {exc}")
        return Attempt(BatchOutcome(failed=failed), [], [], 0.0, exc)
    again = [reference(d) for d in outcome.retry]  # the texts stay in the store, not in the message
    return Attempt(outcome, again, [], jittered(ws.backoff(retries)) if again else 0.0)


def run_batch_with_retries(runtime: Runtime, tenant: str, job_id: str, documents: list[dict[str, str]],
                           sleep: Callable[[float], Any] = time.sleep) -> BatchOutcome:
    """:func:`attempt` until every document is done, superseded or failed (the in-process
    queue and the CLI), waiting each countdown with ``sleep``; returns every attempt's
    outcome together."""
    total = BatchOutcome()
    retries, resumed, pending = 0, [], documents
    while pending:
        step = attempt(runtime, tenant, job_id, pending, retries, resumed)
        total.merge(step.outcome)
        pending, resumed = step.again, step.resumed
        if pending:
            sleep(step.countdown)
            retries += 1
    return total


class QueueFull(PathweaveError, RuntimeError):
    """The in-process queue has no room for the batches of a submission."""


class InProcessQueue:
    """A bounded queue of batches run by ``workers`` threads of this process with
    :func:`run_batch_with_retries` (the default install: no broker)."""

    def __init__(self, runtime: Runtime, maxsize: int = 256, workers: int = 1) -> None:
        self.runtime = runtime
        self.maxsize = maxsize
        self._queue: queue.Queue = queue.Queue(maxsize=maxsize)
        self._lock = threading.Lock()
        self._running = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, name=f"pathweave-ingest-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    @property
    def depth(self) -> int:
        """Batches waiting (not counting those running)."""
        return self._queue.qsize()

    @property
    def running(self) -> int:
        return self._running

    def free(self) -> int:
        return self.maxsize - self._queue.qsize()

    def submit_all(self, tenant: str, job_id: str, batches: list[list[dict[str, str]]]) -> None:
        """Enqueue every batch, or none (raises :class:`QueueFull`)."""
        with self._lock:
            if self.free() < len(batches):
                raise QueueFull(f"ingestion queue full ({self.depth} of {self.maxsize} batches waiting)")
            for batch in batches:
                self._queue.put_nowait((tenant, job_id, batch))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                break
            tenant, job_id, batch = item
            with self._lock:
                self._running += 1
            try:
                run_batch_with_retries(self.runtime, tenant, job_id, batch, sleep=self._sleep)
            except Exception:  # noqa: BLE001 - keep the thread alive; statuses tell what happened
                log.exception("in-process ingestion of a batch of %d failed", len(batch))
            finally:
                with self._lock:
                    self._running -= 1
                self._queue.task_done()

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def join(self, timeout: float = 60.0) -> bool:
        """Wait until the queue is empty and nothing runs (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.05)
        return False

    def close(self, timeout: float = 10.0) -> None:
        """Stop the threads (waiting batches are dropped and stay ``queued``)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
