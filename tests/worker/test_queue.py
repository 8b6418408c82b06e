"""The ingestion queue on the real Redis broker: a batch carries references, not texts (the
worker reads the accepted version's payload from the store when it claims it), and a job's
later batches wait behind every job's first one, so a single PUT is not held up by another
tenant's bulk import queued before it."""

from __future__ import annotations

import base64
import json
import uuid

from test_worker_kill import DOCS, _key, _wait


def _messages(broker_url: str, queue: str) -> dict[int, list[list]]:
    """The queued task messages by priority: each one's ``[tenant, job_id, batch]``."""
    import redis

    from pathweave_ingest.worker import queue_keys

    client = redis.Redis.from_url(broker_url)
    out = {}
    for priority, key in enumerate(queue_keys(queue)):
        bodies = [json.loads(raw) for raw in client.lrange(key, 0, -1)]
        out[priority] = [json.loads(base64.b64decode(body["body"]))[0] for body in reversed(bodies)]  # FIFO
    return out


def test_batches_carry_references_and_a_single_put_goes_before_an_earlier_import(celery_api, broker_url, queue_name,
                                                                                   start_worker):
    client, keys = celery_api
    bulk_tenant, bulk = _key(keys, "bulk")
    single_tenant, single = _key(keys, "single")
    marker, external_id = f"Velmorra{uuid.uuid4().hex[:6]}", f"policies:{uuid.uuid4().hex[:6]}"
    imported = client.post("/v1/documents", headers=bulk, json={"documents": DOCS}).json()
    assert imported["batches"] == 3
    put = client.put(f"/v1/documents/{external_id}", headers=single,
                     json={"title": marker, "text": f"{marker} is a glassworks town. " * 200}).json()

    queued = _messages(broker_url, queue_name)
    batches = [(tenant, job, priority, batch) for priority, messages in queued.items()
               for tenant, job, batch in messages]
    assert all(set(doc) <= {"doc_id", "version", "key", "content_hash"} for *_, batch in batches
               for doc in batch)  # references: no title, no text
    assert marker not in json.dumps(queued) and DOCS[0]["text"] not in json.dumps(queued)
    assert sorted(p for tenant, _, p, _ in batches if tenant == bulk_tenant) == [0, 1, 2]  # the first one first
    assert [p for tenant, job, p, _ in batches if job == put["job_id"]] == [0]
    # priority 0 is drained first: the import's first batch, then the single PUT, then the rest
    assert [args[0] for args in queued[0]] == [bulk_tenant, single_tenant]

    start_worker()
    put_job = _wait(client, single, put["job_id"])
    bulk_job = _wait(client, bulk, imported["job_id"])
    assert put_job["status"] == bulk_job["status"] == "done", (put_job, bulk_job)
    assert put_job["finished_at"] < bulk_job["finished_at"]  # it did not wait for the whole import
    stored = client.get(f"/v1/documents/{put['documents'][0]['doc_id']}", headers=single).json()
    assert marker in json.dumps(stored["passages"])  # ingested from the payload kept in the store
