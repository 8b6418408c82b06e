"""What the API's routes share, one per app: the settings, the runtime (store
connections, models, retrievers), the API keys, the rate limiters and the ingestion
dispatcher (Celery when ``PATHWEAVE_WORKER_BROKER_URL`` is set, else the in-process queue);
:func:`services` is the FastAPI dependency that hands it to a route, :func:`guard`
turns transient store errors into 503 problems."""

from __future__ import annotations

import logging
import threading
from typing import Annotated

from fastapi import Depends, Request

from pathweave.access import Access
from pathweave.settings import ApiSettings, Settings, WorkerSettings, get_settings
from pathweave_api import metrics
from pathweave_api.keys import REGISTRY, KeyStore, key_store_for
from pathweave_api.limits import AuthThrottle, Counters, RateLimiter
from pathweave_api.problems import ApiProblem
from pathweave.errors import is_transient
from pathweave_ingest import jobs
from pathweave_ingest.tasks import InProcessQueue, QueueFull
from pathweave_ingest.worker_runtime import Runtime

log = logging.getLogger("pathweave_api")


SWEEP_BATCHES = 16
"""Batches the sweep publishes per tenant and round with a broker (the in-process queue's own
room bounds it without one)."""


class CeleryDispatcher:
    """Publishes batches to the broker by task name (the API does not import task code)."""

    mode = "celery"

    def __init__(self, ws: WorkerSettings) -> None:
        from pathweave_ingest.worker import TASK_NAME, batch_priority, make_celery, queue_keys

        self.ws = ws
        self.task_name = TASK_NAME
        self.app = make_celery(ws)
        self._priority = batch_priority
        self._keys = queue_keys(ws.queue)

    def check(self, batches: int) -> None:
        """Raise when the broker is unreachable (before anything is written)."""
        with self.app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)

    def submit_all(self, tenant: str, job_id: str, batches: list[list[dict]]) -> None:
        """Publish each batch (document references, :func:`pathweave_ingest.jobs.batches_of`)
        at its :func:`~pathweave_ingest.worker.batch_priority`."""
        for index, batch in enumerate(batches):
            self.app.send_task(self.task_name, args=[tenant, job_id, batch], queue=self.ws.queue,
                               priority=self._priority(index))

    def depth(self) -> int | None:
        try:
            with self.app.connection_for_read() as conn:
                client = conn.default_channel.client
                return sum(int(client.llen(key)) for key in self._keys)
        except Exception:  # noqa: BLE001 - metrics only
            return None

    def healthy(self) -> bool:
        try:
            self.check(0)
            return True
        except Exception:  # noqa: BLE001
            return False

    def close(self) -> None:
        pass


class LocalDispatcher:
    """The in-process queue (no broker configured)."""

    mode = "inprocess"

    def __init__(self, runtime: Runtime, ws: WorkerSettings) -> None:
        self.queue = InProcessQueue(runtime, ws.inprocess_queue_size, ws.inprocess_workers)

    def check(self, batches: int) -> None:
        if self.queue.free() < batches:
            raise QueueFull(f"the ingestion queue is full ({self.queue.depth} of {self.queue.maxsize} "
                            f"batches waiting); retry later")

    def submit_all(self, tenant: str, job_id: str, batches: list[list[dict]]) -> None:
        self.queue.submit_all(tenant, job_id, batches)

    def depth(self) -> int | None:
        return self.queue.depth

    def healthy(self) -> bool | None:
        return None

    def close(self) -> None:
        self.queue.close()


class Services:
    """Everything the routes share; one per app."""

    def __init__(self, settings: Settings, api: ApiSettings, ws: WorkerSettings, runtime: Runtime,
                 keys: KeyStore, owns_runtime: bool) -> None:
        self.settings = settings
        self.api = api
        self.ws = ws
        self.runtime = runtime
        self.keys = keys
        self.owns_runtime = owns_runtime
        counters = Counters(api.limits_url(ws.broker_url or ""))  # shared by the replicas when in Redis
        self.limiter = RateLimiter(counters)
        self.auth_throttle = AuthThrottle(api.auth_failures_per_key, api.auth_failures_per_address,
                                          api.auth_failure_window_s, api.auth_max_concurrent_kdf, counters=counters)
        self._dispatcher = None
        self._lock = threading.Lock()
        self.warm_error: str | None = None
        self.warmed = threading.Event()  # the warm-up finished (models, connection, preloaded topologies)
        self._warm_thread: threading.Thread | None = None
        self._reaper: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lifespans = 0  # lifespans running on this app (a test client or server each)

    @property
    def dispatcher(self):
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("the API is stopping: nothing is queued any more")
            if self._dispatcher is None:
                self._dispatcher = CeleryDispatcher(self.ws) if self.ws.broker_url else LocalDispatcher(
                    self.runtime, self.ws)
            return self._dispatcher

    def start(self) -> None:
        """Start the queue, the warm-up and the reaper; when the app's lifespan already runs
        (a second server or test client on the same app), only count it: the last
        :meth:`stop` stops."""
        with self._lock:
            self._lifespans += 1
            if self._lifespans > 1:
                return
        self._stopping.clear()
        self.warmed.clear()  # a new first lifespan warms up (and preloads) again
        _ = self.dispatcher
        if self.api.preload:
            self._warm_thread = threading.Thread(target=self._warm, name="pathweave-warm", daemon=True)
            self._warm_thread.start()
        # the sweep, in every mode: nothing else publishes what the store holds as accepted and
        # whose message is gone (a worker that died with its lease, a publish that never happened)
        self._reaper = threading.Thread(target=self._reap, name="pathweave-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        """The API's sweep, the outbox of the ingestion queue: every ``worker.lease_s``
        seconds, each tenant's documents whose worker died with their lease are queued again
        (their attempts kept), and the versions queued longer than ``worker.requeue_after_s``
        while the queue holds no batch (with a broker, ``worker.requeue_busy_after_s`` while it
        holds some) are published again: their message was never sent
        (the API killed between the accepting commit and the publish, a publish whose failure
        could not be recorded) or was lost (a broker restarted without persistence). The
        first sweep of an in-process queue takes every queued version (the queue of a process
        that exited is gone). A version delivered twice runs once (the task's compare-and-set
        on the version); two replicas sweeping at once queue it once (``doc_requeue``). A
        publish that fails leaves the versions queued for the next sweep. Tenants are those
        of the key store."""
        first = True
        while not self._stopping.wait(0.5 if first else self.ws.lease_s):
            try:
                tenants = sorted({key.tenant for key in self.keys.list(include_revoked=False)})
                size = self.ws.batch_size(self.runtime.device)
                dispatcher = self.dispatcher
                local = dispatcher.mode == "inprocess"
                everything = first and local
                idle = everything or dispatcher.depth() == 0
                # a broker's queue that never empties (constant load) still gives a lost message back,
                # later; the in-process queue of a living process loses nothing
                waited = 0.0 if everything else self.ws.requeue_after_s if idle else self.ws.busy_requeue_s
                republish = idle or not local
                for tenant in tenants:
                    free = dispatcher.queue.free() - 1 if local else SWEEP_BATCHES  # room for the API's own
                    if self._stopping.is_set() or free <= 0:
                        break
                    store = self.runtime.store(tenant)
                    sub = jobs.requeue(store, jobs.new_job_id(), size, dispatcher.mode, failed=False,
                                       queued=republish, limit=free * size, queued_for_s=waited)
                    if sub.to_enqueue:
                        log.warning("sweep: %d document(s) of tenant %r queued again (job %s)",
                                    len(sub.to_enqueue), tenant, sub.job_id)
                        dispatcher.submit_all(tenant, sub.job_id, jobs.batches_of(sub.to_enqueue, size))
                        metrics.REQUEUED.labels(dispatcher.mode).inc(len(sub.to_enqueue))
                first = False
            except Exception as exc:  # noqa: BLE001 - the store or broker is away: the next sweep retries
                log.warning("sweep failed: %s: %s", type(exc).__name__, str(exc)[:300])

    @property
    def needs_extractor(self) -> bool:
        """Ingestion runs in this process (no broker): the extractor must be loaded too."""
        return not self.ws.broker_url

    @property
    def topologies_ready(self) -> bool:
        """The topologies of ``query.preload_tenants`` were loaded by the warm-up (always true
        without any, or without a warm-up: ``api.preload`` off). Only start-up waits for them:
        a topology evicted later (idle) does not make the replica unready."""
        return self.warmed.is_set() or not (self.api.preload and self.settings.query.preload)

    def _warm(self) -> None:
        """Connect and load the models, then the topologies of ``query.preload_tenants``;
        retried with backoff (e.g. while the store starts, or when another process creates
        the schema at the same moment)."""
        delay = 1.0
        while not self._stopping.is_set():
            try:
                self.runtime.warm(extractor=self.needs_extractor)
                self.warm_error = None
                self.warmed.set()
                return
            except Exception as exc:  # noqa: BLE001 - reported by /readyz, retried
                self.warm_error = f"{type(exc).__name__}: {str(exc)[:300]}"
                log.warning("warm-up failed (retrying in %.0f s): %s", delay, self.warm_error)
                self.runtime.reset()
                self._stopping.wait(delay)
                delay = min(30.0, delay * 2)

    def stop(self) -> None:
        with self._lock:
            self._lifespans -= 1
            if self._lifespans > 0:
                return
        self._stopping.set()
        if self._reaper is not None:
            self._reaper.join(30)
        with self._lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()
        if self.owns_runtime:
            self.runtime.close()

    def store(self, tenant: str):
        """The store of ``tenant``; 503 (and a reconnection, :meth:`QueryRuntime.lost`) when
        it cannot be reached."""
        try:
            return self.runtime.store(tenant)
        except Exception as exc:
            self.runtime.lost()
            raise unavailable(exc) from exc

    def reader_store(self, tenant: str, access: Access):
        """:meth:`store` for reads on behalf of ``access``: a restricted caller's reads see
        access lists at least as the leader has them (a revocation another replica committed),
        by one read of the graph version on the leader, whose bookmark then rides every later
        read of this process (a store without bookmarks, ArcadeDB, has one copy: no read).
        Raises the 503 problems of :meth:`store` and :meth:`guard`."""
        store = self.store(tenant)
        if access.restricted and store.bookmarks is not None:
            self.guard(store.run, "graph_version", on_leader=True, meta_id=store.meta_id)
        return store

    def guard(self, fn, *args, **kwargs):
        """:func:`guard`, and on a transient store error the runtime reconnects for the next
        request (the managed store may have been restarted elsewhere)."""
        try:
            return guard(fn, *args, **kwargs)
        except ApiProblem as problem:
            if problem.kind == "store-unavailable":
                self.runtime.lost()
            raise


def unavailable(exc: BaseException) -> ApiProblem:
    log.warning("store unavailable: %s: %s", type(exc).__name__, exc)
    return ApiProblem(503, "the store is unavailable; retry later", "store-unavailable", {"Retry-After": "5"})


def guard(fn, *args, **kwargs):
    """Run a store call; transient store errors become 503 problems."""
    try:
        return fn(*args, **kwargs)
    except ApiProblem:
        raise
    except Exception as exc:
        if is_transient(exc):
            raise unavailable(exc) from exc
        raise


def services(request: Request) -> Services:
    """The app's :class:`Services` (FastAPI dependency)."""
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(services)]


def build_services(settings: Settings | None = None, api_settings: ApiSettings | None = None,
                   worker_settings: WorkerSettings | None = None, runtime: Runtime | None = None,
                   keys: KeyStore | None = None) -> Services:
    """What the API's routes (and the MCP tools) share, from ``settings`` (all arguments
    default to the process settings; a runtime made here is owned, and closed, by the
    services). Nothing starts before :meth:`Services.start`."""
    settings = settings or get_settings()
    api = api_settings or settings.api
    ws = worker_settings or settings.worker
    owns_runtime = runtime is None
    runtime = runtime or Runtime(settings, ws)
    keys = keys or key_store_for(api, lambda: runtime.store(REGISTRY), api.keys_path(settings.data_dir))
    return Services(settings, api, ws, runtime, keys, owns_runtime)
