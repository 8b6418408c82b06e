"""Putting a created job's batches on the queue (the in-process queue or the Celery broker):
shared by the document routes, ``POST /v1/jobs/requeue`` and the in-process queue's reaper
(:class:`pathweave_api.services.Services`, the ``svc`` of each function)."""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

from pathweave_api import metrics
from pathweave_api.limits import too_many
from pathweave_api.problems import ApiProblem
from pathweave_ingest import jobs
from pathweave_ingest.tasks import QueueFull

log = logging.getLogger(__name__)

TEST_EXIT_BEFORE_PUBLISH = os.environ.get("PATHWEAVE_TEST_EXIT_BEFORE_PUBLISH")
"""The benchmarks' fault point (a file's path; unset everywhere else): while that file holds
a document id, the next submission of that document removes it and SIGKILLs this process
between the accepting commit and the publish, as a crash there would (``bench history``: the
sweep must publish the accepted version)."""


def check_queue(svc, batches: int) -> None:
    """429 when the queue has no room for ``batches``, 503 when the broker is unreachable."""
    try:
        svc.dispatcher.check(batches)
    except QueueFull as exc:
        raise too_many(str(exc).removesuffix("; retry later"), "queue-full", 10.0) from None
    except Exception as exc:  # noqa: BLE001
        log.warning("broker unavailable: %s", exc)
        raise ApiProblem(503, "the job queue (broker) is unavailable; retry later", "broker-unavailable",
                         {"Retry-After": "10"}) from None


def dispatch(svc, tenant: str, store, sub: jobs.Submission, payloads: list[dict]) -> dict[str, Any]:
    """Enqueue the batches of a created job ``sub`` (``payloads``: every document it names);
    the ``SubmitResponse`` body. When the queue refuses them their versions are marked failed
    (``jobs requeue`` runs them again) and 429 / 503 is raised."""
    batch_size = svc.ws.batch_size(svc.runtime.device)
    dispatcher = svc.dispatcher
    batches = jobs.batches_of(sub.to_enqueue, batch_size)
    if TEST_EXIT_BEFORE_PUBLISH and sub.to_enqueue:
        _exit_if_armed(TEST_EXIT_BEFORE_PUBLISH, {d["doc_id"] for d in sub.to_enqueue})
    try:
        dispatcher.submit_all(tenant, sub.job_id, batches)
    except Exception as exc:  # noqa: BLE001
        full = isinstance(exc, QueueFull)
        reason = str(exc) if full else "the job queue (broker) is unavailable"
        svc.guard(jobs.mark_failed, store, sub.to_enqueue, f"not enqueued: {reason}")
        if full:
            raise too_many(reason, "queue-full", 10.0) from None
        raise ApiProblem(503, f"{reason}; retry later", "broker-unavailable", {"Retry-After": "10"}) from None
    metrics.BATCHES_ENQUEUED.labels(dispatcher.mode).inc(len(batches))
    done = set(sub.already_done)
    versions = {d["doc_id"]: d["version"] for d in sub.to_enqueue}
    return {
        "job_id": sub.job_id, "status": "queued" if sub.to_enqueue else "done", "total": len(payloads),
        "enqueued": len(sub.to_enqueue), "already_ingested": len(done),
        "batches": len(batches), "queue": dispatcher.mode,
        "documents": [{"doc_id": p["doc_id"], "title": p["title"], "source": p["source"],
                       "version": versions.get(p["doc_id"]),
                       "status": "done" if p["doc_id"] in done else "queued"} for p in payloads],
        "links": {"job": f"/v1/jobs/{sub.job_id}"},
    }


def _exit_if_armed(path: str, doc_ids: set[str]) -> None:
    """SIGKILL this process if file ``path`` names one of ``doc_ids`` (removed first)."""
    try:
        with open(path, encoding="utf-8") as armed:
            if armed.read().strip() not in doc_ids:
                return
        os.unlink(path)
    except FileNotFoundError:
        return
    log.warning("fault point: exiting between the accepting commit and the publish")
    os.kill(os.getpid(), signal.SIGKILL)
