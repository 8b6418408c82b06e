"""The Celery ingestion worker (Redis broker and result backend, ``PATHWEAVE_WORKER_BROKER_URL``).

Start it with ``pathweave worker`` or ``python -m pathweave_ingest.worker``
(or ``celery -A pathweave_ingest.worker:celery_app worker``). Each message is
one batch of documents (:func:`pathweave_ingest.tasks.run_batch`).

Delivery: ``acks_late`` (a message is acknowledged after its batch ran) with
``worker_prefetch_multiplier=1`` and ``task_reject_on_worker_lost``: a batch
whose worker died is delivered again, to a restarted or another worker, after
``visibility_timeout_s`` (Redis; 60 s by default). A running batch's message is
kept alive by a :class:`Heartbeat`, so batches may run longer than that.
Writes are idempotent, so a batch that runs twice leaves the graph as one clean run.

Concurrency: the default pool is ``solo`` (one batch at a time per worker
process; the embedder and spaCy use the cores themselves, the models load
once). For more throughput start more worker processes (each loads the models;
one per GPU on a multi-GPU machine), or ``PATHWEAVE_WORKER_POOL=prefork`` with
``PATHWEAVE_WORKER_CONCURRENCY=N`` (N processes under one worker).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from celery import Celery, signals

from pathweave.settings import WorkerSettings, get_settings

if __name__ == "__main__":  # `python -m pathweave_ingest.worker`: one module object, one app
    sys.modules.setdefault("pathweave_ingest.worker", sys.modules[__name__])

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

log = logging.getLogger(__name__)


def broker_answers(url: str) -> bool:
    """Does the Redis broker at ``url`` answer PING (within ~2 s)?"""
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except Exception:  # noqa: BLE001 - any failure means "not answering"
        return False

TASK_NAME = "pathweave.ingest_batch"


PRIORITIES = 10
"""Message priorities of the ingestion queue (0 is served first)."""


def batch_priority(index: int) -> int:
    """The priority of a job's ``index``-th batch (0-based): 0 for its first, then one step
    lower each time the index doubles (1, 2-3, 4-7, ... 256 and on: 9). A job of one batch
    (a single PUT) is served before the 2nd to last batches of every bulk import already
    queued, by whatever tenant, so one tenant's 10,000 documents do not hold up another's
    one; a bulk import still runs whenever nothing smaller waits."""
    return min(PRIORITIES - 1, max(0, index).bit_length())


def queue_keys(queue: str) -> list[str]:
    """The Redis lists of ``queue``, one per priority, in the order they are drained (the
    transport's naming: priority 0 is the queue's own name, the others the name, the
    transport's separator and the priority)."""
    from kombu.transport.redis import Channel

    return [queue] + [f"{queue}{Channel.sep}{priority}" for priority in range(1, PRIORITIES)]


def celery_config(ws: WorkerSettings) -> dict:
    """The Celery configuration for ``ws`` (shared by the worker and the API's producer)."""
    return {
        "broker_url": ws.broker_url or "memory://",
        "result_backend": ws.backend_url or None,
        "task_default_queue": ws.queue,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": ws.prefetch_multiplier,
        "worker_concurrency": ws.concurrency,
        "worker_max_tasks_per_child": ws.max_tasks_per_child or None,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,  # a job's state is in the store; nothing reads task results
        "result_expires": 3600,
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": 5,
        "broker_transport_options": {
            "visibility_timeout": ws.visibility_timeout_s,
            "unacked_restore_interval": ws.unacked_restore_interval_s,
            "unacked_restore_throttle": 1,
            "socket_timeout": 30,
            "socket_connect_timeout": 5,
            # priorities 0 (first) .. 9 as one Redis list each, the lower drained first: a job's
            # later batches go behind every job's first ones (:func:`batch_priority`); the lists'
            # names keep the transport's own separator, which the exchange's bindings in Redis use
            "priority_steps": list(range(PRIORITIES)),
        },
        "result_backend_transport_options": {"socket_timeout": 30, "socket_connect_timeout": 5},
        "task_publish_retry_policy": {"max_retries": 3, "interval_start": 0, "interval_step": 0.5,
                                      "interval_max": 2},
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
    }


def make_celery(ws: WorkerSettings | None = None) -> Celery:
    """A Celery app for ``ws`` (the API uses one to publish batches by task name)."""
    app = Celery("pathweave")
    app.conf.update(celery_config(ws or get_settings().worker))
    return app


celery_app = make_celery()
_runtime = None


def runtime():
    """This worker process's :class:`~pathweave_ingest.worker_runtime.Runtime` (created once)."""
    global _runtime
    if _runtime is None:
        from pathweave_ingest.worker_runtime import Runtime

        _runtime = Runtime(get_settings(), get_settings().worker)
    return _runtime


class Heartbeat:
    """Keeps the message of a running batch unacknowledged-but-alive on Redis.

    Redis redelivers a message whose delivery tag has sat in the unacknowledged index
    (``unacked_index``) longer than the visibility timeout. While its batch runs, this
    thread refreshes the tag's timestamp every quarter of that timeout, so a batch may
    run far longer than the timeout without a second delivery; once the worker dies the
    refreshes stop and the batch is redelivered after one timeout (60 s by default).
    """

    def __init__(self, app: Celery, delivery_tag: str | None, visibility_timeout_s: float) -> None:
        self.app = app
        self.tag = delivery_tag
        self.interval = max(0.5, visibility_timeout_s / 4)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0

    def beat(self) -> None:
        """Refresh the tag's timestamp (only while it is still unacknowledged: ``XX``)."""
        with self.app.connection_for_write() as conn:
            channel = conn.default_channel
            key = getattr(channel, "unacked_index_key", None)
            if key is None:  # not the Redis transport: nothing to refresh
                return
            channel.client.zadd(key, {self.tag: time.time()}, xx=True)
            self.beats += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - the broker is away; the next beat retries
                log.warning("heartbeat of batch %s failed: %s", self.tag, exc)

    def __enter__(self) -> "Heartbeat":
        if self.tag and str(self.app.conf.broker_url or "").startswith(("redis://", "rediss://")):
            self._thread = threading.Thread(target=self._run, name="pathweave-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


@celery_app.task(bind=True, name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def ingest_batch(self, tenant: str, job_id: str, documents: list[dict], resumed: list[str] | None = None) -> dict:
    """Ingest one batch under the retry policy of :func:`pathweave_ingest.tasks.attempt`: what
    it says to run again is retried by Celery with its countdown; a batch given up on (its
    documents marked failed) ends the task with its error."""
    from pathweave_ingest.tasks import attempt

    delivery = self.request.delivery_info or {}
    with Heartbeat(self.app, delivery.get("delivery_tag"), get_settings().worker.visibility_timeout_s):
        step = attempt(runtime(), tenant, job_id, documents, self.request.retries, resumed=resumed or [],
                       redelivered=bool(delivery.get("redelivered")))
    if step.again:
        raise self.retry(args=(tenant, job_id, step.again), kwargs={"resumed": step.resumed},
                         countdown=step.countdown, exc=step.error)
    if step.error is not None:
        raise step.error
    return step.outcome.summary()


@signals.worker_ready.connect
def _warm_main(**_: object) -> None:
    """solo/threads pools run tasks in this process: trace (when asked) and load the models
    before the first batch."""
    if get_settings().worker.pool in ("solo", "threads"):
        _trace()
        runtime().warm(queries=False)


@signals.worker_process_init.connect
def _warm_child(**_: object) -> None:
    """prefork children: trace (when asked), connect and load the models after the fork."""
    _trace()
    runtime().warm(queries=False)


def _trace() -> None:
    """Export this process's spans when the standard ``OTEL_*`` variables ask for it
    (:func:`pathweave.telemetry.setup.configure_tracing`), its tasks instrumented by the
    maintained Celery instrumentation (a batch's span continues the trace that published it)."""
    from pathweave.telemetry.setup import configure_tracing

    if configure_tracing("pathweave-worker"):
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        CeleryInstrumentor().instrument()


def worker_argv(ws: WorkerSettings, loglevel: str = "INFO", hostname: str | None = None) -> list[str]:
    argv = ["worker", f"--pool={ws.pool}", f"--concurrency={ws.concurrency}",
            f"--prefetch-multiplier={ws.prefetch_multiplier}", f"--queues={ws.queue}",
            f"--loglevel={loglevel}", "--without-gossip", "--without-mingle"]
    if hostname:
        argv.append(f"--hostname={hostname}")
    return argv


def main(argv: list[str] | None = None, loglevel: str = "INFO", hostname: str | None = None) -> None:
    """Run a worker in this process (blocks). Exits with status 2 when no broker is set."""
    ws = get_settings().worker
    if not ws.broker_url:
        sys.stderr.write("error: no broker configured; set PATHWEAVE_WORKER_BROKER_URL (e.g. redis://127.0.0.1:6379/0)\n")
        raise SystemExit(2)
    logging.basicConfig(level=getattr(logging, loglevel.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    celery_app.worker_main(argv or worker_argv(ws, loglevel, hostname))


if __name__ == "__main__":
    main(sys.argv[1:] or None)
