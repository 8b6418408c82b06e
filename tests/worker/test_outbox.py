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


def _app(settings, worker_runtime, broker_url, queue_name, tmp_path, **worker):
    """An API app on the session's runtime and broker (a one-second lease: the sweep runs
    every second), with ``worker`` settings besides."""
    from pathweave.settings import ApiSettings, WorkerSettings
    from pathweave_api.app import create_app

    api = ApiSettings(keys_file=tmp_path / "keys.sqlite3", preload=False, argon2_time_cost=1, argon2_memory_kib=1024,
                      argon2_parallelism=1)
    ws = WorkerSettings(broker_url=broker_url, queue=queue_name, ingest_batch_size=6, lease_s=1.0, **worker)
    return create_app(settings, api, ws, runtime=worker_runtime)


def _docs() -> list:
    return [jobs.to_source({"title": t, "text": f"{t} is a ferry harbour on the Skarn coast.", "source": "test"})
            for t in ("Ulvik", "Marsund")]


def test_the_sweep_publishes_what_was_never_sent_and_what_the_broker_lost(
        settings, worker_runtime, broker_url, queue_name, start_worker, tmp_path):
    from fastapi.testclient import TestClient

    app = _app(settings, worker_runtime, broker_url, queue_name, tmp_path, requeue_after_s=1.0)
    tenant, headers = _key(app.state.services.keys, "outbox")
    store = worker_runtime.store(tenant)
    docs = _docs()
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


def test_a_queue_that_never_empties_still_gets_a_lost_message_back_after_the_busy_bound(
        settings, worker_runtime, broker_url, queue_name, start_worker, tmp_path):
    """A batch waits in the broker the whole time (no worker yet: the queue never empties,
    as under constant load) while another accepted version was never published: the sweep
    publishes it once it has waited ``worker.requeue_busy_after_s`` (not the idle bound),
    and the worker then runs each accepted version once."""
    import time

    from fastapi.testclient import TestClient

    from waiting import wait_until

    queue = f"{queue_name}.busy"  # a queue of its own: no worker of an earlier test takes its batch
    app = _app(settings, worker_runtime, broker_url, queue, tmp_path, requeue_after_s=1.0, requeue_busy_after_s=5.0)
    tenant, headers = _key(app.state.services.keys, "busy")
    store = worker_runtime.store(tenant)
    docs = _docs()
    waiting = jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, docs[:1]), 6, "celery")
    app.state.services.dispatcher.submit_all(tenant, waiting.job_id, jobs.batches_of(waiting.to_enqueue, 6))
    accepted = time.monotonic()
    unsent = jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, docs[1:]), 6, "celery")
    doc_id = unsent.to_enqueue[0]["doc_id"]
    with TestClient(app, raise_server_exceptions=False) as client:
        assert app.state.services.dispatcher.depth() >= 1  # the queue holds a batch from the start
        depths = []

        def republished() -> bool:
            depths.append(app.state.services.dispatcher.depth())
            return store.run("doc_status_get", ids=[doc_id])[0]["job_id"] != unsent.job_id
        wait_until(republished, 30, "the never-published version published again by the sweep", interval_s=0.1)
        head, elapsed = store.run("doc_status_get", ids=[doc_id])[0], time.monotonic() - accepted
        seen = f"after {elapsed:.1f} s, queue depths {sorted(set(map(str, depths)))}, head {head}"
        assert elapsed >= 5.0 - 0.5, seen  # after the busy bound, not the idle one (1 s)
        assert app.state.services.dispatcher.depth() >= 2, seen  # the queue never emptied meanwhile
        start_worker(PATHWEAVE_WORKER_QUEUE=queue)
        for sub in (waiting, unsent):
            job = _wait(client, headers, sub.job_id, timeout=180)
            assert job["status"] == "done", job
            assert job["documents"][0]["version"] == sub.to_enqueue[0]["version"]  # the accepted version, run once
        assert len(store.run("snapshot_passages")) == 2
