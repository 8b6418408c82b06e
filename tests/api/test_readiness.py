"""Readiness: /readyz answers 503 with the reason until the store answers and the
models are loaded; a failed warm-up is retried."""

from __future__ import annotations

import time

from pathweave_ingest.worker_runtime import Runtime
from waiting import wait_until


class SlowToStart(Runtime):
    """The first two warm-ups fail (e.g. the store still starting)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attempts = 0

    def warm(self, extractor: bool = True) -> None:
        self.attempts += 1
        if self.attempts <= 2:
            raise ConnectionError("connection refused")
        super().warm(extractor)


def test_readyz_waits_for_a_retried_warm_up(settings, base_store, embedder, extractor, api_settings,
                                            worker_settings):
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    runtime = SlowToStart(settings, worker_settings, embedder=embedder, extractor=extractor)
    app = create_app(settings, api_settings, worker_settings, runtime=runtime)
    with TestClient(app) as client:
        first = client.get("/readyz")
        assert first.status_code == 503 and first.json()["status"] == "unavailable" and first.json()["detail"]
        assert client.get("/healthz").status_code == 200  # alive while not ready
        def readiness() -> tuple[int, dict]:
            ready = client.get("/readyz")
            return ready.status_code, ready.json()

        _, ready = wait_until(readiness, 30, "/readyz 200", interval_s=0.2, until=lambda seen: seen[0] == 200)
        assert ready == {"status": "ready", "store": True, "models": True, "queue": "inprocess",
                         "broker": None, "detail": None}
        assert runtime.attempts == 3
    runtime.close()


def test_a_second_lifespan_on_the_app_leaves_the_first_serving(app, client, new_tenant, wait, docs):
    """Two servers (or test clients) on one app object: when the second's lifespan ends, the
    first still queues documents (only the last lifespan stops the queue and the reaper)."""
    from fastapi.testclient import TestClient

    _, headers = new_tenant("lifespan")
    with TestClient(app) as second:
        assert second.get("/readyz").status_code == 200
    response = client.post("/v1/documents", headers=headers, json={"documents": [docs["zephyria"]]})
    assert response.status_code == 202, response.text
    assert wait(headers, response.json()["job_id"])["status"] == "done"


class GatedTopologies(Runtime):
    """Loading a tenant's topology waits until the test opens the gate."""

    def __init__(self, *args, **kwargs):
        import threading

        super().__init__(*args, **kwargs)
        self.gate = threading.Event()

    def retriever(self, tenant: str):
        assert self.gate.wait(30), "the test never opened the gate"
        return super().retriever(tenant)


def test_readyz_waits_for_the_preloaded_topologies(settings, base_store, embedder, extractor, api_settings,
                                                   worker_settings):
    """With ``query.preload_tenants`` a replica is ready only once those tenants' topologies are
    in memory: its first query there reads no topology from the store."""
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    tenant = settings.tenant
    preloading = settings.model_copy(update={"query": settings.query.model_copy(
        update={"preload_tenants": f" {tenant}, ,{tenant}"})})
    assert preloading.query.preload == [tenant]
    runtime = GatedTopologies(preloading, worker_settings, embedder=embedder, extractor=extractor)
    app = create_app(preloading, api_settings, worker_settings, runtime=runtime)
    with TestClient(app) as client:
        deadline = time.monotonic() + 30  # for both waits together
        loading = wait_until(lambda: client.get("/readyz").json(), 30, "/readyz loading the preloaded topologies",
                             interval_s=0.1,
                             until=lambda body: body["detail"] == "starting: loading the topologies of "
                                                                 "query.preload_tenants")
        assert loading["status"] == "unavailable" and loading["models"] and loading["store"]
        assert runtime.cache_stats()["tenants"] == 0
        runtime.gate.set()

        def readiness() -> tuple[int, dict]:
            ready = client.get("/readyz")
            return ready.status_code, ready.json()

        wait_until(readiness, deadline - time.monotonic(), "/readyz 200 once the topologies are loaded",
                   interval_s=0.1, until=lambda seen: seen[0] == 200)
        assert runtime.cache_stats()["tenants"] == 1
    runtime.close()
