"""API fixtures: the real app (in-process queue, real store server from the root
conftest, real embedder and spaCy extractor) behind a TestClient, API keys for
fresh tenants, and helpers to ingest and wait."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from waiting import wait_until

# Small documents written for these tests (multi-hop: Curie -> Warsaw -> Vistula).
CORE_DOCS = [
    {"title": "Marie Curie", "text": "Marie Curie was a physicist who studied radioactivity. She was born in Warsaw. "
                                     "She won the Nobel Prize in Physics in 1903 together with Pierre Curie."},
    {"title": "Warsaw", "text": "Warsaw is the capital of Poland. The Vistula river flows through Warsaw."},
    {"title": "Pierre Curie", "text": "Pierre Curie was a French physicist. He married Marie Curie in 1895."},
]
ZEPHYRIA_DOC = {"title": "Zephyria", "text": "Zephyria is a hidden valley guarded by the Order of Tamsin. "
                                             "The Order of Tamsin keeps the Obsidian Ledger."}
QUILLON_DOC = {"title": "Quillon", "text": "Quillon is a harbour town famous for the Brass Lighthouse. "
                                           "Admiral Verenne built the Brass Lighthouse."}

# Labels a document deletion must leave exactly as a clean ingestion of the rest would
GRAPH_LABELS = ("Document", "Passage", "Proposition", "Entity", "Relation", "Triple")


@pytest.fixture(scope="session")
def api_settings(tmp_path_factory):
    from pathweave.settings import ApiSettings

    keys = tmp_path_factory.mktemp("api") / "keys.sqlite3"
    return ApiSettings(keys_file=keys, max_body_bytes=200_000, max_small_body_bytes=8192,
                       rate_limit_per_s=50.0, rate_limit_burst=200, preload=True,
                       argon2_time_cost=1, argon2_memory_kib=1024, argon2_parallelism=1,
                       # the session's tests send many bad keys from one client: throttling has its own tests
                       auth_failures_per_address=100_000)


@pytest.fixture(scope="session")
def worker_settings():
    from pathweave.settings import WorkerSettings

    return WorkerSettings(broker_url="", ingest_batch_size=4, retry_backoff_s=0.05, retry_backoff_max_s=0.2,
                          inprocess_queue_size=64)


@pytest.fixture(scope="session")
def runtime(settings, base_store, embedder, extractor, worker_settings):
    from pathweave_ingest.worker_runtime import Runtime

    from pathweave.llm.client import LLMClient
    from pathweave.servers.processes import free_port

    # answers (answer: true, mode prunerag) go to a closed port unless a test connects the real
    # model server (tests/api/test_answers.py): generated requests must not start a 1.5B model
    unreachable = LLMClient(f"http://127.0.0.1:{free_port()}/v1", "none", timeout_s=5)
    runtime = Runtime(settings, worker_settings, embedder=embedder, extractor=extractor, llm=unreachable)
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def app(settings, api_settings, worker_settings, runtime):
    from pathweave_api.app import create_app

    return create_app(settings, api_settings, worker_settings, runtime=runtime)


@pytest.fixture(scope="session")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as client:
        def readiness() -> tuple[int, str]:
            response = client.get("/readyz")
            return response.status_code, response.text

        wait_until(readiness, 120, "the API ready (/readyz 200)", interval_s=0.2, until=lambda seen: seen[0] == 200)
        yield client


@pytest.fixture(scope="session")
def keys(app):
    return app.state.services.keys


@pytest.fixture()
def new_tenant(keys):
    """Factory: ``(tenant, headers)`` for a fresh tenant with its own key (no rate limit)."""

    def make(prefix: str = "t", rate_limit: float | None = 0):
        tenant = f"{prefix}{uuid.uuid4().hex[:10]}"
        token, _ = keys.create(tenant, "tests", rate_limit)
        return tenant, {"Authorization": f"Bearer {token}"}

    return make


def wait_job(client, headers, job_id: str, timeout: float = 120.0) -> dict:
    return wait_until(lambda: client.get(f"/v1/jobs/{job_id}", headers=headers).json(), timeout,
                      f"job {job_id} finished", interval_s=0.1,
                      until=lambda job: job["status"] not in ("queued", "running"))


@pytest.fixture()
def ingest(client):
    """``ingest(headers, docs) -> finished job`` through POST /v1/documents."""

    def run(headers, docs):
        response = client.post("/v1/documents", headers=headers, json={"documents": docs})
        assert response.status_code == 202, response.text
        return wait_job(client, headers, response.json()["job_id"])

    return run


@pytest.fixture()
def store_for(runtime):
    """``store_for(tenant)``: a GraphStore bound to ``tenant`` (direct checks of the graph)."""
    return runtime.store


@pytest.fixture()
def wait(client):
    """``wait(headers, job_id) -> finished job``."""
    return lambda headers, job_id, timeout=120.0: wait_job(client, headers, job_id, timeout)


@pytest.fixture()
def docs():
    """The test documents: ``core`` (list), ``zephyria``, ``quillon``."""
    return {"core": [dict(d) for d in CORE_DOCS], "zephyria": dict(ZEPHYRIA_DOC), "quillon": dict(QUILLON_DOC),
            "graph_labels": GRAPH_LABELS}


@contextlib.contextmanager
def served_app(settings, api_settings, worker_settings, runtime, name: str):
    """A new app on the shared runtime, on a real socket (uvicorn in a thread, its lifespan
    running) until the block ends: ``(base_url, the app's key store)``, once ``/readyz``
    answers 200."""
    import threading

    import httpx
    import uvicorn

    from pathweave.servers.processes import free_port
    from pathweave_api.app import create_app

    app = create_app(settings, api_settings, worker_settings, runtime=runtime)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz", timeout=5).status_code, 120, "the API ready (/readyz 200)",
                   interval_s=0.2, until=lambda status: status == 200, errors=(httpx.HTTPError,))
        yield base, app.state.services.keys
    finally:
        server.should_exit = True
        thread.join(30)
