"""The task functions' failure paths with the real store, embedder and extractor:
poison documents (failing, and killing their worker), transient store errors
retried with exponential backoff, and at-least-once delivery being harmless."""

from __future__ import annotations

import uuid

import pytest
from neo4j.exceptions import ServiceUnavailable

from pathweave_ingest import jobs, lifecycle
from pathweave_ingest.loaders import SourceDocument
from pathweave.errors import StoreUnavailable
from pathweave_ingest.tasks import run_batch, run_batch_with_retries
from pathweave_ingest.worker_runtime import Runtime
from pathweave.settings import WorkerSettings

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

GOOD = [SourceDocument("t#0", "Lyra", "Lyra is a constellation. Vega is the brightest star in Lyra."),
        SourceDocument("t#1", "Vega", "Vega was the northern pole star around 12000 BC.")]
POISON = SourceDocument("t#2", "Poison", "POISON: this document breaks the extractor.")


class PoisonAwareExtractor:
    """The real extractor, except that it raises on texts containing POISON."""

    def __init__(self, inner):
        self.inner = inner
        self.name = "poison-aware"
        self.batch_size = getattr(inner, "batch_size", 64)

    def extract(self, passages):
        if any("POISON" in p.text for p in passages):
            raise RuntimeError("extractor exploded on this text")
        return self.inner.extract(passages)


class FlakyRuntime(Runtime):
    """``store()`` fails ``failures`` times with a connection error first (a store restart)."""

    def __init__(self, *args, failures: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.failures = failures
        self.resets = 0

    def store(self, tenant):
        if self.failures > 0:
            self.failures -= 1
            raise ServiceUnavailable("Couldn't connect to 127.0.0.1:7687 (connection refused)")
        return super().store(tenant)

    def reset(self):
        self.resets += 1
        super().reset()


@pytest.fixture()
def ws():
    return WorkerSettings(broker_url="", max_doc_attempts=3, retry_backoff_s=1.0, retry_backoff_max_s=4.0,
                          max_retries=5)


def died_while_running(store, batch, crashed_ids):
    """A delivery that died mid-batch: every document of ``batch`` running under a lease
    that has run out, the attempts of ``crashed_ids`` counted (the others resumed)."""
    resumed = [d["doc_id"] for d in batch if d["doc_id"] not in crashed_ids]
    assert {d["doc_id"] for d in lifecycle.claim(store, batch, resumed, "dead:1", lease_s=-1.0)} == {d["doc_id"] for d in batch}


def _submit(store, documents, batch_size=8):
    docs = jobs.payloads(store.tenant, documents)
    job_id = jobs.new_job_id()
    submission = jobs.create_job(store, job_id, docs, batch_size, "inprocess")
    return job_id, submission.to_enqueue


def test_poison_document_fails_after_n_attempts_and_the_batch_continues(settings, base_store, embedder, extractor,
                                                                        ws):
    tenant = f"poison{uuid.uuid4().hex[:8]}"
    runtime = Runtime(settings, ws, embedder=embedder, extractor=PoisonAwareExtractor(extractor))
    store = runtime.store(tenant)
    job_id, batch = _submit(store, [GOOD[0], POISON, GOOD[1]])
    sleeps = []
    outcome = run_batch_with_retries(runtime, tenant, job_id, batch, sleep=sleeps.append)
    assert len(outcome.done) == 2 and len(outcome.failed) == 1
    assert len(sleeps) == 2  # attempts 1 and 2 were retried, attempt 3 gave up
    job = jobs.job_status(store, job_id)
    assert job["status"] == "done_with_errors" and job["counts"] == {"queued": 0, "running": 0, "done": 2,
                                                                     "failed": 1, "deleted": 0, "superseded": 0}
    poison = next(d for d in job["documents"] if d["status"] == "failed")
    assert poison["title"] == "Poison" and poison["attempts"] == 3
    assert "failed after 3 attempts" in poison["error"] and "extractor exploded" in poison["error"]
    assert store.counts()["Document"] == 2
    runtime.close()


def test_a_document_that_keeps_killing_its_worker_is_given_up(settings, base_store, embedder, extractor, ws):
    tenant = f"crash{uuid.uuid4().hex[:8]}"
    runtime = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    store = runtime.store(tenant)
    job_id, batch = _submit(store, GOOD + [POISON])
    poison_id = batch[2]["doc_id"]
    # three deliveries each died while running (the status says running, the attempts count them)
    for _ in range(3):
        died_while_running(store, batch, {poison_id})
    outcome = run_batch(runtime, tenant, job_id, batch)
    assert outcome.failed == [poison_id] and sorted(outcome.done) == sorted(d["doc_id"] for d in batch[:2])
    status = {d["doc_id"]: d for d in jobs.job_status(store, job_id)["documents"]}
    assert status[poison_id]["status"] == "failed" and "worker stopped" in status[poison_id]["error"]
    # redelivered again (at-least-once): nothing changes, nothing is duplicated
    counts = store.counts()
    again = run_batch(runtime, tenant, job_id, batch)
    assert again.done == [] and len(again.skipped) == 3 and store.counts() == counts
    runtime.close()


def test_transient_store_errors_are_retried_with_exponential_backoff(settings, base_store, embedder, extractor, ws):
    tenant = f"flaky{uuid.uuid4().hex[:8]}"
    plain = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    job_id, batch = _submit(plain.store(tenant), GOOD)
    runtime = FlakyRuntime(settings, ws, embedder=embedder, extractor=extractor, failures=3)
    with pytest.raises(StoreUnavailable):
        run_batch(runtime, tenant, job_id, batch)
    runtime.failures = 3
    sleeps: list[float] = []
    outcome = run_batch_with_retries(runtime, tenant, job_id, batch, sleep=sleeps.append)
    assert len(outcome.done) == 2 and runtime.resets >= 3
    # base 1 s, doubling, jittered into [0.5, 1] x: 1, 2, 4 (capped at 4)
    assert len(sleeps) == 3
    for n, seconds in enumerate(sleeps):
        nominal = min(4.0, 1.0 * 2 ** n)
        assert 0.5 * nominal <= seconds <= nominal
    assert jobs.job_status(plain.store(tenant), job_id)["status"] == "done"
    runtime.close()
    plain.close()


def test_store_down_for_good_marks_documents_failed_after_max_retries(settings, base_store, embedder, extractor):
    ws = WorkerSettings(broker_url="", retry_backoff_s=0.0, max_retries=2)
    tenant = f"down{uuid.uuid4().hex[:8]}"
    plain = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    job_id, batch = _submit(plain.store(tenant), GOOD)

    class Down(FlakyRuntime):
        def store(self, tenant):
            if self.failures > 0:  # every call during the retries fails; the last-ditch status write works
                self.failures -= 1
                raise ServiceUnavailable("connection refused")
            return super().store(tenant)

    runtime = Down(settings, ws, embedder=embedder, extractor=extractor, failures=3)
    outcome = run_batch_with_retries(runtime, tenant, job_id, batch, sleep=lambda s: None)
    assert len(outcome.failed) == 2
    job = jobs.job_status(plain.store(tenant), job_id)
    assert job["status"] == "failed" and all("store unavailable after 2 retries" in d["error"] for d in job["documents"])
    plain.close()
    runtime.close()


def test_a_redelivered_message_counts_its_running_documents_as_crashed(settings, base_store, embedder, extractor,
                                                                      ws):
    """A transient retry carries ``resumed`` (its own documents left running are not a crash).
    When the worker running that retry dies, the broker redelivers the same message: the
    running documents were left by the dead delivery and must use up their attempts, else
    a document that kills its worker is retried forever."""
    runtime = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    outcomes = {}
    for redelivered in (False, True):
        store = runtime.store(f"redeliver{uuid.uuid4().hex[:8]}")
        job_id, batch = _submit(store, GOOD + [POISON])
        poison_id, ids = batch[2]["doc_id"], [d["doc_id"] for d in batch]
        for _ in range(3):  # three deliveries died while running the poison document
            died_while_running(store, batch, {poison_id})
        outcomes[redelivered] = (poison_id, run_batch(runtime, store.tenant, job_id, batch, resumed=ids,
                                                      redelivered=redelivered))
    poison_id, resumed_run = outcomes[False]
    assert resumed_run.failed == [] and poison_id in resumed_run.done  # a resumed transient retry: no crash
    poison_id, redelivered_run = outcomes[True]
    assert redelivered_run.failed == [poison_id] and len(redelivered_run.done) == 2
    runtime.close()


def test_the_pipeline_kept_between_batches_writes_what_a_fresh_one_writes(settings, base_store, embedder,
                                                                         extractor, ws):
    """The runtime keeps one pipeline per thread between the batches of a tenant: two
    batches through it give the graph of one clean run (synonyms across the batches
    included, through the vector index); a thread keeps only its latest tenant's pipeline."""
    import threading

    runtime = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    documents = GOOD + [SourceDocument("t#3", "Deneb", "Deneb is the brightest star in Cygnus. Deneb and Vega "
                                                      "belong to the Summer Triangle.")]
    tenant = f"kept{uuid.uuid4().hex[:8]}"
    store = runtime.store(tenant)
    kept = runtime.pipeline(tenant)
    for part in (documents[:2], documents[2:]):
        job_id, batch = _submit(store, part)
        assert len(run_batch(runtime, tenant, job_id, batch).done) == len(part)
    assert runtime.pipeline(tenant) is kept  # reused

    clean = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    clean_store = clean.store(f"fresh{uuid.uuid4().hex[:8]}")
    job_id, batch = _submit(clean_store, documents)
    assert len(run_batch(clean, clean_store.tenant, job_id, batch).done) == 3
    graph = lambda counts: {k: v for k, v in counts.items() if k != "Job"}  # noqa: E731 - two jobs vs one
    assert graph(store.counts()) == graph(clean_store.counts())

    other = runtime.pipeline("another-tenant")
    assert runtime.pipeline(tenant) is not kept  # replaced by the other tenant's
    assert runtime.pipeline("another-tenant") is not other
    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(runtime.pipeline(tenant)))
    thread.start()
    thread.join()
    assert elsewhere[0] is not runtime.pipeline(tenant)  # never shared between threads
    runtime.close()
    clean.close()


def test_batch_sizes_grow_on_any_cuda_device():
    ws = WorkerSettings(broker_url="")
    for device in ("cuda", "cuda:0", "cuda:1"):
        assert (ws.batch_size(device), ws.group_size(device), ws.extract_batch(device)) == (1024, 256, 256)
    assert (ws.batch_size("cpu"), ws.group_size("cpu"), ws.extract_batch("cpu")) == (256, 64, 64)
    assert WorkerSettings(broker_url="", ingest_batch_size=8).batch_size("cuda:1") == 8


def test_a_redelivered_batch_marks_documents_done_only_after_the_graph_is_repaired(settings, base_store, embedder,
                                                                                   extractor, ws):
    """A worker killed after writing its documents, before its synonymy step: the redelivered
    batch must not report any document (so the job) ``done`` while the tenant still lacks
    those SYNONYM edges and the graph-version bump."""
    from pathweave_ingest.pipeline import Pipeline

    docs = [SourceDocument("s#0", "Marie Curie", "Marie Curie was born in Warsaw. Maria Curie won a Nobel Prize."),
            SourceDocument("s#1", "Maria Sklodowska Curie", "Maria Sklodowska Curie studied in Paris with Marie "
                                                            "Curie's husband Pierre Curie.")]
    clean_tenant = f"clean{uuid.uuid4().hex[:8]}"
    clean = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    clean_store = clean.store(clean_tenant)
    job_id, batch = _submit(clean_store, docs)
    assert len(run_batch(clean, clean_tenant, job_id, batch).done) == 2
    synonyms = clean_store.counts().get("rel:SYNONYM", 0)
    assert synonyms > 0

    tenant = f"killed{uuid.uuid4().hex[:8]}"
    runtime = Runtime(settings, ws, embedder=embedder, extractor=extractor)
    store = runtime.store(tenant)
    job_id, batch = _submit(store, docs)
    # the killed attempt: documents running, written in full, no synonymy step (threshold above 1)
    died_while_running(store, batch, {d["doc_id"] for d in batch})
    no_synonyms = settings.ingest.model_copy(update={"synonym_threshold": 2.0})
    killed = Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": tenant,
                                                                             "ingest": no_synonyms}))
    killed.ingest(docs, versions={d["doc_id"]: d["version"] for d in batch})  # as its worker did
    assert store.counts().get("rel:SYNONYM", 0) == 0
    version_after_kill = store.graph_version()

    seen_at_done: list[tuple[int, int]] = []
    real_run = type(store).run

    def watching_run(self, name, **params):
        if name == "doc_status_done":  # the moment documents (and so maybe the job) read done
            seen_at_done.append((self.counts().get("rel:SYNONYM", 0), self.graph_version()))
        return real_run(self, name, **params)

    runtime_store = runtime.store(tenant)
    runtime_store.run = watching_run.__get__(runtime_store)
    runtime.store = lambda _tenant: runtime_store
    outcome = run_batch(runtime, tenant, job_id, batch, redelivered=True)
    assert sorted(outcome.done) == sorted(d["doc_id"] for d in batch) and outcome.repaired
    assert seen_at_done, "no document was marked done"
    for edges, version in seen_at_done:
        assert edges == synonyms and version > version_after_kill, (seen_at_done, synonyms, version_after_kill)
    assert jobs.job_status(store, job_id)["status"] == "done"
    assert store.counts() == clean_store.counts()
    runtime.close()
    clean.close()


def test_a_worker_whose_lease_ran_out_cannot_requeue_what_another_finished(store):
    """Worker A's lease ran out, worker B took the version over and finished it; A's late
    retry finds the version no longer running under A and changes nothing (the head keeps
    ``done``, nothing is queued without its text)."""
    _, batch = _submit(store, GOOD[:1])
    doc = batch[0]
    assert lifecycle.claim(store, [jobs.reference(doc)], (), "a:1", lease_s=-1.0)  # A runs it; its lease runs out
    taken = lifecycle.claim(store, [jobs.reference(doc)], (), "b:2", lease_s=600)  # B takes it over
    assert [d["text"] for d in taken] == [GOOD[0].text]  # the text, read from the store in the claim
    assert lifecycle.finish(store, [{"doc_id": doc["doc_id"], "version": doc["version"], "finished_at": jobs.now_iso(),
                                     "seconds": 0.0, "passages": 1, "propositions": 0, "entities": 0, "triples": 0,
                                     "bookmarks": []}]) == {doc["doc_id"]}
    late = [{"doc_id": doc["doc_id"], "version": doc["version"], "attempts": 1, "error": "late"}]
    assert lifecycle.retry(store, late, "a:1") == set()
    [row] = store.run("doc_status_get", ids=[doc["doc_id"]])
    assert row["status"] == "done"



def test_the_drivers_own_failure_on_a_connection_torn_down_under_it_is_transient():
    """The driver closed under a request (a reconnect) fails inside its I/O code with an
    AttributeError or a BufferError: a 503 to retry, not a 500; the same errors anywhere
    else are bugs."""
    from pathweave.errors import is_transient

    def raised(kind, filename: str) -> BaseException:
        code = compile(f"raise {kind}('torn down')", filename, "exec")
        try:
            exec(code, {})
        except BaseException as exc:  # noqa: BLE001 - the exception is the subject
            return exc
        raise AssertionError("nothing raised")

    inside = "/venv/lib/python3.11/site-packages/neo4j/_sync/io/_bolt5.py"
    assert is_transient(raised("AttributeError", inside)) and is_transient(raised("BufferError", inside))
    assert not is_transient(raised("AttributeError", "/repo/platform/pathweave/retrieval/proprag.py"))
    assert not is_transient(raised("KeyError", inside))
