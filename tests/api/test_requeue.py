"""Queueing failed and stuck documents again (issue 42): ``POST /v1/jobs/requeue`` (admin)
runs a failed version again from the payload its head kept; the in-process queue's reaper
queues again what a dead process left queued or running under a lease that ran out."""

from __future__ import annotations

import pytest

from pathweave_ingest import jobs, lifecycle
from waiting import wait_until

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def _key(keys, tenant: str, scope: str) -> dict:
    token, _ = keys.create(tenant, scope, 0, scope=scope)
    return {"Authorization": f"Bearer {token}"}


def test_a_failed_version_is_queued_again_by_an_admin(client, new_tenant, keys, store_for, wait):
    tenant, headers = new_tenant("requeue")
    store = store_for(tenant)
    payload = jobs.payloads(tenant, [jobs.to_source({"title": "Ferrow", "source": "test",
                                                     "text": "Ferrow is a river port on the Lissel."})])
    sub = jobs.create_job(store, jobs.new_job_id(), payload, 4, "inprocess")
    jobs.mark_failed(store, sub.to_enqueue, "not enqueued: the broker was down")  # as the API does
    assert client.post("/v1/jobs/requeue", headers=_key(keys, tenant, "ingest")).status_code == 403
    response = client.post("/v1/jobs/requeue", headers=_key(keys, tenant, "admin"))
    assert response.status_code == 202 and response.json()["enqueued"] == 1, response.text
    job = wait(headers, response.json()["job_id"])
    assert job["status"] == "done" and job["documents"][0]["version"] == sub.to_enqueue[0]["version"]
    assert "Ferrow" in " ".join(r["text"] for r in store.run("snapshot_passages"))
    again = client.post("/v1/jobs/requeue", headers=headers).json()
    assert again["enqueued"] == 0 and again["status"] == "done"  # nothing left to do


def test_the_reaper_takes_over_a_dead_processes_documents(settings, api_settings, worker_settings, runtime, keys,
                                                          tmp_path):
    """A version left queued by a process whose in-process queue is gone and one left running
    by a worker that died (its lease ran out) are both run by a new API's reaper."""
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    tenant = f"reap{__import__('uuid').uuid4().hex[:8]}"
    token, _ = keys.create(tenant, "tests", 0)
    headers = {"Authorization": f"Bearer {token}"}
    store = runtime.store(tenant)
    docs = [jobs.to_source({"title": t, "text": f"{t} is a lighthouse on the Varn coast.", "source": "test"})
            for t in ("Ostra", "Belkin")]
    queued = jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, docs[:1]), 4, "inprocess")
    running = jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, docs[1:]), 4, "inprocess")
    assert lifecycle.claim(store, running.to_enqueue, (), "dead:1", lease_s=-1.0)  # died, its lease ran out
    app = create_app(settings, api_settings, worker_settings.model_copy(update={"lease_s": 1.0}), runtime=runtime)
    with TestClient(app, raise_server_exceptions=False) as client:
        def pending() -> dict | None:
            """The first of the two jobs not done yet (None: both done)."""
            for sub in (queued, running):
                job = client.get(f"/v1/jobs/{sub.job_id}", headers=headers).json()
                if job["status"] != "done":
                    return job
            return None

        wait_until(pending, 120, "both jobs done by the new API's reaper", interval_s=0.2,
                   until=lambda job: job is None)
    texts = " ".join(r["text"] for r in store.run("snapshot_passages"))
    assert "Ostra" in texts and "Belkin" in texts
