"""Two API replicas (uvicorn processes) and two Celery workers on one store and one Redis,
on loopback, behave as one service: keys made and revoked by `pathweave keys` hold in both
replicas, the rate limit and the failed-authentication counts are shared, a document
submitted through one replica is found by the next query through the other (after the job's
bookmarks on Neo4j), a reasoning record written by one is read through the other, and clients
behind one trusted proxy are throttled each by their own address."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import httpx
import pytest

from pathlib import Path

from pathweave.servers.processes import free_port, stop_process
from pathweave_bench.common import http_ready, wait_for
from pathweave_bench.service import api_command, create_key
from waiting import wait_until

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

REPO = Path(__file__).resolve().parents[2]


class Replica:
    """One API process (``uvicorn pathweave_api.app:create_app``, what the Docker image runs)."""

    def __init__(self, env: dict, log) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen(api_command(self.port), cwd=REPO, env=env, stdout=out,
                                            stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 240.0) -> None:
        wait_for(lambda: http_ready(self.url), timeout, "API replica", self.process, self.log, interval=0.5)


def _bad_token() -> str:
    return f"pw_{uuid.uuid4().hex[:16]}_{'A' * 43}"


@pytest.fixture()
def replicas(worker_env, tmp_path):
    """Two API replicas on the workers' broker and store; the client address is read from
    X-Forwarded-For when the peer is 127.0.0.1 (the trusted proxy)."""
    env = {**worker_env, "PATHWEAVE_API_TRUSTED_PROXIES": "127.0.0.1", "PATHWEAVE_API_AUTH_FAILURES_PER_ADDRESS": "4",
           "PATHWEAVE_API_AUTH_FAILURES_PER_KEY": "100", "PATHWEAVE_API_AUTH_FAILURE_WINDOW_S": "60",
           "PATHWEAVE_API_ARGON2_TIME_COST": "1", "PATHWEAVE_API_ARGON2_MEMORY_KIB": "1024",
           "PATHWEAVE_API_RATE_LIMIT_BURST": "4"}
    started = [Replica(env, tmp_path / f"api-{n}.log") for n in range(2)]
    try:
        for replica in started:
            replica.wait_ready()
        yield env, started
    finally:
        for replica in started:
            stop_process(replica.process, 30)


def test_two_replicas_and_two_workers_are_one_service(base_store, replicas, start_worker):
    env, (a, b) = replicas
    start_worker(), start_worker()
    tenant = f"r{uuid.uuid4().hex[:10]}"
    token = create_key(env, tenant, "replicas", "ingest")  # `pathweave keys create`, into the store
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=a.url, headers=headers, timeout=120) as via_a, \
            httpx.Client(base_url=b.url, headers=headers, timeout=120) as via_b:
        assert via_a.get("/v1/documents").status_code == 200
        assert via_b.get("/v1/documents").status_code == 200

        # a document submitted through A, its job read through B: the next query through B finds it
        marker = f"Quorvath{uuid.uuid4().hex[:6]}"
        submitted = via_a.post("/v1/documents", json={"documents": [
            {"title": marker, "text": f"{marker} is a lighthouse keeper of the Saltmere coast who guards "
                                      f"the amber lamp."}]}).json()
        job = wait_until(lambda: via_b.get(f"/v1/jobs/{submitted['job_id']}").json(), 180,
                         f"job {submitted['job_id']} finished (read through B)", interval_s=0.3,
                         until=lambda polled: polled["status"] not in ("queued", "running"))
        assert job["status"] == "done", job
        assert bool(job["bookmarks"]) == (base_store.backend.name == "neo4j")  # the worker's commit, on Neo4j
        answer = via_b.post("/v1/query", json={"question": f"Who guards the amber lamp at {marker}?", "k": 3,
                                               "consistency": job["bookmarks"] or None})
        assert answer.status_code == 200, answer.text
        assert answer.json()["passages"][0]["title"] == marker

        # the reasoning record written by B is read through A at once
        record = via_a.get(f"/v1/queries/{answer.json()['query_id']}")
        assert record.status_code == 200, record.text

        # the clients behind one trusted proxy: one client's failures throttle it, not the others
        statuses = [client.get("/v1/documents", headers={"Authorization": f"Bearer {_bad_token()}",
                                                          "X-Forwarded-For": "10.9.9.1"}).status_code
                    for client in (via_a, via_b, via_a, via_b, via_a, via_b)]
        assert statuses == [401, 401, 401, 401, 429, 429], statuses  # 4 failures per address, over both
        assert via_b.get("/v1/documents", headers={"X-Forwarded-For": "10.9.9.2"}).status_code == 200
        assert via_a.get("/v1/documents", headers={"Authorization": f"Bearer {_bad_token()}",
                                                   "X-Forwarded-For": "10.9.9.2"}).status_code == 401

        # a revocation by `pathweave keys revoke` holds in both replicas within 1 s
        key_id = token.split("_")[1]
        done = subprocess.run([sys.executable, "-m", "pathweave_cli", "keys", "revoke", key_id], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        revoked_at = time.monotonic()
        assert via_a.get("/v1/documents").status_code == 401
        assert via_b.get("/v1/documents").status_code == 401
        assert time.monotonic() - revoked_at < 1.0

    # one rate limit over both replicas: 4 requests in any 8 s (0.5/s, burst 4), not 4 per replica
    limited = create_key(env, tenant, "limited", "ingest", rate_limit="0.5")
    statuses = [httpx.get(f"{replica.url}/v1/documents", headers={"Authorization": f"Bearer {limited}"},
                          timeout=60).status_code for replica in (a, b, a, b, a, b)]
    assert statuses == [200, 200, 200, 200, 429, 429], statuses
