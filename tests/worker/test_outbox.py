"""The ingestion queue's outbox (issue 58) in broker mode, on the real Redis and a real Celery
worker: an accepted version whose message was never published (the API killed between the
accepting commit and the publish) and one whose running batch's message the broker lost (a
worker died with its lease, Redis restarted without persistence) are both published again by
the API's sweep from the store's own record, and run once."""

from __future__ import annotations

import pytest

from pathweave_ingest import jobs, lifecycle
from test_worker_kill import _key, _wait

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def test_the_sweep_publishes_what_was_never_sent_and_what_the_broker_lost(
        settings, worker_runtime, broker_url, queue_name, start_worker, tmp_path):
    from fastapi.testclient import TestClient

    from pathweave.settings import ApiSettings, WorkerSettings
    from pathweave_api.app import create_app

    api = ApiSettings(keys_file=tmp_path / "keys.sqlite3", preload=False, argon2_time_cost=1, argon2_memory_kib=1024,
                      argon2_parallelism=1)
    ws = WorkerSettings(broker_url=broker_url, queue=queue_name, ingest_batch_size=6, lease_s=1.0,
                        requeue_after_s=1.0)
    app = create_app(settings, api, ws, runtime=worker_runtime)
    tenant, headers = _key(app.state.services.keys, "outbox")
    store = worker_runtime.store(tenant)
    docs = [jobs.to_source({"title": t, "text": f"{t} is a ferry harbour on the Skarn coast.", "source": "test"})
            for t in ("Ulvik", "Marsund")]
    # accepted and committed, never published: the API died right after the commit
    unsent = jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, docs[:1]), 6, "celery")
    # published, taken by a worker that died with its lease; the message gone with the broker's restart
    lost = jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, docs[1:]), 6, "celery")
    assert lifecycle.claim(store, lost.to_enqueue, (), "dead:1", lease_s=-1.0)
    start_worker()
    with TestClient(app, raise_server_exceptions=False) as client:
        for sub in (unsent, lost):
            job = _wait(client, headers, sub.job_id, timeout=180)
            assert job["status"] == "done", job
            assert job["documents"][0]["version"] == sub.to_enqueue[0]["version"]  # the accepted version, run once
        texts = " ".join(r["text"] for r in store.run("snapshot_passages"))
        assert "Ulvik" in texts and "Marsund" in texts
        assert len(store.run("snapshot_passages")) == 2
        metrics = client.get("/metrics").text
    assert 'pathweave_documents_requeued_total{mode="celery"}' in metrics
