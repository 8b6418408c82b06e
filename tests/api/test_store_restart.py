"""The API follows its managed store wherever it restarts: the store server is SIGKILLed
under a running API and started again on other ports by another process (as a worker
does), and the API answers 200 again within 30 s without a restart of its own; killed and
left down, the next requests start it again. Its own data dir: the session's store is not
touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from waiting import wait_until

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)



def _start_elsewhere(settings) -> None:
    """Start the managed store from another process (as a worker whose store call found it
    down), which picks free ports; it runs on after that process exits."""
    code = ("import sys; from pathweave.settings import Settings; from pathweave.servers import store_server; "
            "from pathlib import Path; "
            "s = Settings(data_dir=Path(sys.argv[1])); s = s.model_copy(update={'store': s.store.model_copy("
            "update={'backend': sys.argv[2]})}); print(store_server.start(s).bolt_uri)")
    done = subprocess.run([sys.executable, "-c", code, str(settings.data_dir), settings.store.backend],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]


def _kill(settings) -> int:
    from pathweave.servers import store_server

    info = store_server.status(settings)
    assert info is not None and info.pid
    os.kill(info.pid, signal.SIGKILL)
    wait_until(lambda: store_server.status(settings), 30, f"the killed store {info.pid} no longer reported running",
               interval_s=0.2, until=lambda status: status is None)
    return info.pid


def _wait_done(client, headers, job_id: str) -> dict:
    return wait_until(lambda: client.get(f"/v1/jobs/{job_id}", headers=headers).json(), 120,
                      f"job {job_id} finished", interval_s=0.2,
                      until=lambda job: job["status"] not in ("queued", "running"))


def _ready_again(client, headers, question: str, timeout: float = 30.0) -> list[int]:
    statuses = []

    def query() -> list[int]:
        """The last statuses (a 200 last: ready again)."""
        response = client.post("/v1/query", headers=headers, json={"question": question, "k": 2})
        statuses.append(response.status_code)
        if response.status_code != 200:
            assert response.status_code == 503 and response.headers.get("Retry-After"), response.text
        return statuses[-5:]

    wait_until(query, timeout, "a 200 after the restart", interval_s=0.5, until=lambda last: last[-1] == 200)
    return statuses


@pytest.mark.skipif(os.environ.get("PATHWEAVE_STORE_URI"), reason="an external store is not managed by Pathweave")
def test_the_api_follows_the_store_restarted_elsewhere_and_restarts_it_when_down(
        settings, base_store, embedder, extractor, api_settings, worker_settings, docs, tmp_path):
    from fastapi.testclient import TestClient

    from pathweave.servers import store_server
    from pathweave_api.app import create_app
    from pathweave_ingest.worker_runtime import Runtime

    own = settings.model_copy(update={"data_dir": tmp_path / "data"})
    keys = api_settings.model_copy(update={"keys_file": tmp_path / "keys.sqlite3"})
    runtime = Runtime(own, worker_settings, embedder=embedder, extractor=extractor)
    app = create_app(own, keys, worker_settings, runtime=runtime)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            token, _ = app.state.services.keys.create("restart", "tests", 0)
            headers = {"Authorization": f"Bearer {token}"}
            submitted = client.post("/v1/documents", headers=headers, json={"documents": docs["core"]})
            assert submitted.status_code == 202, submitted.text
            assert _wait_done(client, headers, submitted.json()["job_id"])["status"] == "done"
            question = "Where was Marie Curie born?"
            before = client.post("/v1/query", headers=headers, json={"question": question, "k": 2})
            assert before.status_code == 200
            first = store_server.status(own)

            old_pid = _kill(own)
            _start_elsewhere(own)  # new process, new ports
            moved = store_server.status(own)
            assert moved is not None and moved.pid != old_pid
            if own.store.backend == "arcadedb":  # the managed Neo4j keeps its ports across restarts
                assert moved.bolt_uri != first.bolt_uri
            statuses = _ready_again(client, headers, question)
            after = client.post("/v1/query", headers=headers, json={"question": question, "k": 2}).json()
            assert [p["passage_id"] for p in after["passages"]] == [p["passage_id"] for p in before.json()["passages"]]

            _kill(own)  # left down: the API's next requests start it again
            statuses += _ready_again(client, headers, question, timeout=60.0)
            assert store_server.status(own) is not None
    finally:
        runtime.close()
        store_server.stop(own)


def test_a_request_caught_by_the_reconnect_is_transient():
    """bench soak found it: a query in flight when another request dropped the connection
    (QueryRuntime.lost) fails on the closed driver; that is a 503 with Retry-After, not a 500."""
    from neo4j.exceptions import DriverError, ServiceUnavailable

    from pathweave.errors import is_transient

    assert is_transient(DriverError("Driver closed"))
    assert is_transient(ServiceUnavailable("Failed to write to defunct connection IPv4Address(('127.0.0.1', 1))"))
    assert not is_transient(DriverError("Invalid access mode"))
    assert not is_transient(ValueError("bad question"))


@pytest.mark.skipif(os.environ.get("PATHWEAVE_STORE_URI"), reason="an external store is not managed by Pathweave")
def test_killing_the_worker_that_started_the_store_or_the_store_never_answers_500(settings, base_store, tmp_path):
    """`pathweave serve` (uvicorn) and `pathweave worker` on one fresh data dir, the worker
    started first, so the managed store is the worker's: SIGKILL the worker, then the store
    itself. Every request meanwhile answers 200 or 503 with Retry-After, never 500, and 200
    again within 30 s (the store outlives the worker: the API is a registered user)."""
    import httpx

    from pathweave.servers import store_server
    from pathweave.servers.processes import read_json
    from pathweave_bench.service import Service

    own = settings.model_copy(update={"data_dir": tmp_path})
    service = Service(tmp_path, llm=False, backend=own.store.backend)

    def store_pid() -> int | None:
        info = store_server.status(own)
        return info.pid if info else None

    try:
        service.start_redis()
        service.start_worker()  # its warm-up starts the store on demand: the store is the worker's
        assert (read_json(service.store_dir / "owner.json") or {}).get("owner") == service.worker.pid
        token = service.create_key("shared", "tests", "ingest")  # `pathweave keys create`, into the store
        service.start_api()
        client = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        job = client.post("/v1/documents", json={"documents": [
            {"title": "Quillon", "text": "Quillon is a harbour town famous for the Brass Lighthouse."}]}).json()
        wait_until(lambda: client.get(f"/v1/jobs/{job['job_id']}").json(), 180, f"job {job['job_id']} finished",
                   interval_s=0.5, until=lambda polled: polled["status"] not in ("queued", "running"))
        question = {"question": "Which town has the Brass Lighthouse?", "k": 2}

        def through(fault) -> list[int]:
            statuses, began = [], time.monotonic()
            fault()

            def query() -> tuple[bool, list[int]]:
                """(a 200 well past the fault, the last statuses)."""
                response = client.post("/v1/query", json=question)
                statuses.append(response.status_code)
                assert response.status_code in (200, 503), response.text
                if response.status_code == 503:
                    assert response.headers.get("Retry-After"), response.text
                    return False, statuses[-5:]
                return time.monotonic() - began > 8, statuses[-5:]  # 200, and well past the kill

            wait_until(query, 38 - (time.monotonic() - began), "a 200 within 30 s, 8 s past the fault",
                       interval_s=0.25, until=lambda seen: seen[0])
            return statuses

        first = store_pid()
        through(lambda: service.kill("worker"))
        assert store_pid() == first  # the store outlived the worker that started it
        through(lambda: os.kill(first, signal.SIGKILL))
        assert store_pid() not in (None, first)  # started again by whoever needed it
        client.close()
    finally:
        service.processes.stop_all()
        store_server.stop(own)
