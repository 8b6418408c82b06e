"""Worker fixtures: a real Redis (the one CI starts with tools/start-redis.sh, else a
private redis-server on a free port), real Celery worker processes on the
session's store server, and the API publishing to them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pathweave.servers.processes import stop_process
from waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def queue_name():
    return f"pathweave.test.{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def worker_env(broker_url, queue_name, settings):
    """Environment of worker processes: the session's data dir (same store server), a
    short visibility timeout so a killed worker's batch is redelivered within seconds (and a
    lease below it, so the redelivery finds the dead worker's lease run out),
    one document per write transaction so a kill lands mid-batch."""
    return {**os.environ, "PATHWEAVE_DATA_DIR": str(settings.data_dir), "PATHWEAVE_WORKER_BROKER_URL": broker_url,
            "PATHWEAVE_WORKER_QUEUE": queue_name, "PATHWEAVE_WORKER_VISIBILITY_TIMEOUT_S": "6",
            "PATHWEAVE_WORKER_UNACKED_RESTORE_INTERVAL_S": "1", "PATHWEAVE_WORKER_INGEST_GROUP_SIZE": "1",
            "PATHWEAVE_WORKER_RETRY_BACKOFF_S": "0.2", "PATHWEAVE_WORKER_RETRY_BACKOFF_MAX_S": "2",
            "PATHWEAVE_WORKER_LEASE_S": "3",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


class WorkerProcess:
    """``python -m pathweave_ingest.worker`` (what ``pathweave worker`` runs) as a child process."""

    def __init__(self, env: dict, log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen([sys.executable, "-m", "pathweave_ingest.worker"], cwd=REPO, env=env,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 180.0) -> None:
        def ready() -> bool:
            if "ready." in self.log.read_text(errors="replace"):
                return True
            assert self.process.poll() is None, f"the worker exited ({self.process.returncode}) before it was ready"
            return False

        try:
            wait_until(ready, timeout, f"worker {self.pid} ready (\"ready.\" in {self.log})", interval_s=0.2)
        except AssertionError as failed:  # exited or timed out: with the end of its log
            raise AssertionError(f"{failed}\n{self.log.read_text(errors='replace')[-4000:]}") from None

    def kill(self) -> None:
        """SIGKILL: no warm shutdown, nothing acknowledged, nothing cleaned up."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        stop_process(self.process, 30)


@pytest.fixture()
def start_worker(worker_env, tmp_path):
    """``start_worker(**extra_env) -> WorkerProcess`` (ready); all are stopped after the test."""
    started: list[WorkerProcess] = []

    def start(**env: str) -> WorkerProcess:
        worker = WorkerProcess({**worker_env, **env}, tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def worker_runtime(settings, base_store, embedder, extractor):
    from pathweave_ingest.worker_runtime import Runtime
    from pathweave.settings import WorkerSettings

    runtime = Runtime(settings, WorkerSettings(broker_url=""), embedder=embedder, extractor=extractor)
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def celery_api(settings, worker_runtime, broker_url, queue_name, tmp_path_factory):
    """The API app publishing to the broker (TestClient), and a key factory."""
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app
    from pathweave.settings import ApiSettings, WorkerSettings

    api = ApiSettings(keys_file=tmp_path_factory.mktemp("keys") / "keys.sqlite3", preload=False,
                      argon2_time_cost=1, argon2_memory_kib=1024, argon2_parallelism=1)
    ws = WorkerSettings(broker_url=broker_url, queue=queue_name, ingest_batch_size=6)
    app = create_app(settings, api, ws, runtime=worker_runtime)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, app.state.services.keys
