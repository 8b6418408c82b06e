"""The service under test of ``bench soak`` and ``bench history``: Redis, the API (uvicorn)
and one Celery worker as child processes of the benchmark, in a fresh data dir on loopback,
with the managed store (and model server) they start on demand; and the faults a benchmark
inflicts on them (:meth:`Service.kill`)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

from pathweave.servers.processes import free_port, pid_alive, read_json
from pathweave_bench.common import ChildProcesses, http_ready, wait_for

APPROXIMATE_SLACK = 5
"""SYNONYM and ALIAS_OF edges (from the store's approximate vector index, and alias groups
built on them) of a benchmark's graph may differ from its replay's by 1 % or this many edges
(a short soak's few dozen edges differed by 3 when its batches ran in another order; a long
soak's thousands by 0.2 %: docs/benchmarks-history.md)."""


class Service:
    """The service under test: Redis, the API and the worker as child processes, the managed
    store (and model server) they start on demand in ``workdir``; ``settings``: more
    ``PATHWEAVE_*`` variables of its processes (e.g. a test's shorter sweep)."""

    def __init__(self, workdir: Path, llm: bool, backend: str = "arcadedb", **settings: str) -> None:
        from pathweave.servers import neo4j_server
        from pathweave.settings import Settings

        self.workdir = workdir
        self.backend = backend
        self.store_dir = neo4j_server.server_dir(Settings(data_dir=workdir)) if backend == "neo4j" else workdir / "server"
        self.processes = ChildProcesses()
        self.redis_port = free_port()
        self.api_port = free_port()
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.logs = {"api": workdir / "api.log", "worker": workdir / "worker.log", "redis": workdir / "redis.log",
                     "store": self.store_dir / "server.log", "llm": workdir / "llm" / "server.log"}
        self.exit_before_publish = workdir / "exit-before-publish"  # the API's fault point, armed by kill("api")
        self.env = service_env(workdir, f"redis://127.0.0.1:{self.redis_port}/0",
                               PATHWEAVE_WORKER_QUEUE="pathweave.soak", PATHWEAVE_STORE_BACKEND=backend,
                               PATHWEAVE_TEST_EXIT_BEFORE_PUBLISH=str(self.exit_before_publish), **settings)
        self.redis = self.api = self.worker = None

    def start_redis(self):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found: apt-get install -y redis-server (or tools/start-redis.sh)")
        self.redis = self.processes.start(
            [binary, "--bind", "127.0.0.1", "--port", str(self.redis_port), "--dir", str(self.workdir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""], self.env, self.logs["redis"])
        from pathweave_ingest.worker import broker_answers

        wait_for(lambda: broker_answers(self.env["PATHWEAVE_WORKER_BROKER_URL"]), 30, "redis", self.redis,
                 self.logs["redis"])

    def create_key(self, tenant: str, name: str, scope: str) -> str:
        """A new key of the service (:func:`create_key` in its environment): its token."""
        return create_key(self.env, tenant, name, scope)

    def start_worker(self, wait: bool = True):
        size = self.logs["worker"].stat().st_size if self.logs["worker"].exists() else 0
        self.worker = self.processes.start([sys.executable, "-m", "pathweave_ingest.worker"], self.env,
                                           self.logs["worker"])
        if wait:
            wait_for(lambda: "ready." in self.logs["worker"].read_bytes()[size:].decode(errors="replace"), 300,
                     "worker", self.worker, self.logs["worker"])

    def start_api(self):
        self.api = self.processes.start(
            api_command(self.api_port), self.env, self.logs["api"])
        wait_for(lambda: http_ready(self.url), 300, "API server", self.api, self.logs["api"])

    def pids(self) -> dict[str, int | None]:
        """The current pid of each service process (None: not running)."""
        store = read_json(self.store_dir / "server.json") or {}
        llm = read_json(self.workdir / "llm" / "server.json") or {}
        return {"api": self.api and self.api.pid, "worker": self.worker and self.worker.pid,
                "store": store.get("pid"), "llm": llm.get("pid"), "redis": self.redis and self.redis.pid}

    def _arm(self, doc_id: str | None) -> None:
        """Arm the API's fault point for ``doc_id`` (None: disarm)."""
        if doc_id is None:
            self.exit_before_publish.unlink(missing_ok=True)
        else:
            self.exit_before_publish.write_text(doc_id)

    def kill(self, fault: str, timeout: float = 300, submit=None) -> dict:
        """Inflict ``fault``; returns what was done. ``worker``: SIGKILL, restarted 2 s later;
        ``api``: ``submit(arm)`` (one document's submission: it calls ``arm(doc_id)`` first,
        ``arm(None)`` to disarm, and returns the id) SIGKILLs the API at its fault point between the accepting commit and
        the publish; restarted at once; ``redis``: a clean restart; ``redis-lost``: SIGKILL
        and a restart without its files (every message it held is gone); ``store`` | ``llm``:
        SIGKILL (whoever needs it next starts it again). TimeoutError: the API did not exit
        within ``timeout`` s."""
        pid = self.pids().get(fault.removesuffix("-lost"))
        if fault == "worker":
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(30)
            time.sleep(2.0)  # a supervisor's restart delay
            self.start_worker(wait=False)
            return {"killed": pid, "restarted": self.worker.pid}
        if fault == "api":
            killed = self.api
            doc_id = submit(self._arm)
            wait_for(lambda: killed.poll() is not None, timeout, "the API's exit at its fault point")
            self.processes.items.remove(killed)
            self.start_api()
            return {"killed": pid, "exit": killed.returncode, "doc_id": doc_id, "restarted": self.api.pid}
        if fault in ("redis", "redis-lost"):  # same port; "redis": clean shutdown (the append-only file is flushed)
            if fault == "redis":
                self.redis.terminate()
            else:
                self.redis.kill()
            self.redis.wait(60)
            self.processes.items.remove(self.redis)
            if fault == "redis-lost":
                shutil.rmtree(self.workdir / "appendonlydir", ignore_errors=True)
                for name in ("appendonly.aof", "dump.rdb"):
                    (self.workdir / name).unlink(missing_ok=True)
            self.start_redis()
            return {"killed" if fault == "redis-lost" else "stopped": pid, "restarted": self.redis.pid}
        if pid is None or not pid_alive(pid):
            return {"skipped": f"no {fault} server runs"}
        os.kill(pid, signal.SIGKILL)  # store | llm: whoever needs it next starts it again
        return {"killed": pid}


def service_env(data_dir: Path, broker_url: str, **extra: str) -> dict[str, str]:
    """The environment of a service process of the run: this one's without its ``PATHWEAVE_*``
    settings, then the run's data dir and broker (empty: none), offline models."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PATHWEAVE_")},
            "PATHWEAVE_DATA_DIR": str(data_dir), "PATHWEAVE_WORKER_BROKER_URL": broker_url, "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "passive", **extra}


def create_key(env: dict[str, str], tenant: str, name: str, scope: str, rate_limit: str = "0") -> str:
    """A key for ``tenant`` (``rate_limit`` requests/s, "0": none) made by ``pathweave keys
    create`` (a process of its own, as an operator would run it) with ``env``'s settings: its
    token. Raises RuntimeError with the command's output when it fails."""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pathweave_cli", "keys", "create", "--tenant", tenant, "--name", name,
                           "--scope", scope, "--rate-limit", rate_limit, "--json"], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"pathweave keys create failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["token"]


def api_command(port: int) -> list[str]:
    """The API server of a service (uvicorn on 127.0.0.1:``port``; the client address is the
    app's to read, through ``api.trusted_proxies``, as with ``pathweave serve``)."""
    return [sys.executable, "-m", "uvicorn", "pathweave_api.app:create_app", "--factory", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning", "--no-proxy-headers"]
