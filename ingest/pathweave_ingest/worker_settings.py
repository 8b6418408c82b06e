"""Settings of the ingestion workers and of the in-process queue (``PATHWEAVE_*``).

Broker: ``PATHWEAVE_BROKER_URL`` (e.g. ``redis://127.0.0.1:6379/0``); empty (the
default) means no broker: the API runs the same task functions in-process on
a bounded queue. The result backend defaults to the broker URL.

Batch sizes left at 0 are chosen from the device (``PATHWEAVE_DEVICE``,
``auto`` picks ``cuda`` when torch sees a GPU): larger on a GPU, where the
embedder and the extractor batch more passages per call.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class WorkerSettings(BaseSettings):
    """Worker, queue and retry settings. Every field is ``PATHWEAVE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="PATHWEAVE_", extra="ignore")

    broker_url: str = ""
    result_backend: str = ""  # empty: the broker URL
    queue: str = "pathweave.ingest"

    # Celery worker process: pool solo|prefork|threads. solo = one task at a time in the
    # worker process (the models load once; torch and spaCy use the cores themselves).
    # Run more worker processes (or prefork with concurrency N) to use more cores or GPUs.
    worker_pool: str = "solo"
    worker_concurrency: int = Field(1, ge=1)
    # Messages a worker process reserves ahead; 1 with acks_late = a killed worker holds
    # back at most the batch it was running.
    worker_prefetch_multiplier: int = Field(1, ge=1)
    worker_max_tasks_per_child: int = Field(0, ge=0)  # prefork only; 0 = unlimited
    # Seconds before an unacknowledged message (its worker died) is delivered again: a
    # killed worker's batch is picked up by another or a restarted worker within about
    # this long (+ unacked_restore_interval_s). A running batch refreshes its message
    # every quarter of it (worker.Heartbeat), so a batch may run longer than this.
    visibility_timeout_s: int = Field(60, ge=2)
    unacked_restore_interval_s: int = Field(10, ge=1)

    # Documents per task (0 = auto: 64 on CPU, 256 on cuda) and per pipeline write
    # transaction (0 = auto: 64 / 256); extractor batch (0 = auto: 64 / 256). Each task
    # also pays the pipeline's synonymy step (it reads all the tenant's entity vectors),
    # so bigger batches ingest faster; smaller ones report progress more finely.
    ingest_batch_size: int = Field(0, ge=0)
    ingest_group_size: int = Field(0, ge=0)
    extract_batch_size: int = Field(0, ge=0)

    # Poison documents: after this many failed attempts a document is marked failed.
    max_doc_attempts: int = Field(3, ge=1)
    # Transient store errors: exponential backoff base * 2**n seconds (capped), n < max.
    retry_backoff_s: float = Field(2.0, ge=0)
    retry_backoff_max_s: float = Field(120.0, ge=0)
    max_retries: int = Field(8, ge=0)

    # In-process mode (no broker): queued batches and threads running them.
    inprocess_queue_size: int = Field(256, ge=1)
    inprocess_workers: int = Field(1, ge=1)

    def batch_size(self, device: str) -> int:
        return self.ingest_batch_size or _by_device(device)

    def group_size(self, device: str) -> int:
        return self.ingest_group_size or _by_device(device)

    def extract_batch(self, device: str) -> int:
        return self.extract_batch_size or _by_device(device)

    def backoff(self, retries: int) -> float:
        """Seconds to wait before retry number ``retries`` (0-based), without jitter."""
        return min(self.retry_backoff_max_s, self.retry_backoff_s * (2 ** retries))

    @property
    def backend_url(self) -> str:
        return self.result_backend or self.broker_url


def _by_device(device: str) -> int:
    """The automatic batch size on ``device``: 256 on a GPU (``cuda``, ``cuda:1``, ...), 64 on CPU."""
    return 256 if device.startswith("cuda") else 64


@lru_cache(maxsize=1)
def get_worker_settings() -> WorkerSettings:
    """The process's worker settings, read once from the environment."""
    return WorkerSettings()
