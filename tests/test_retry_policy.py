"""The store's one retry policy (``pathweave.store.retry``) on the real stores: a transaction
the store rolled back runs again (a reasoning record that met a write conflict is written,
not dropped), and a commit that took effect but answered without its outcome runs again
without counting twice (an accept, a delete and a claim read their own commit back). The
faults are injected around the store's own transactions: the statements, the driver and the
store are the real ones."""

from __future__ import annotations

import threading

import pytest

from pathweave_ingest import jobs, lifecycle

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def _server_error(message: str, code: str = "Neo.DatabaseError.General.UnknownError"):
    from neo4j.exceptions import Neo4jError

    return Neo4jError._hydrate_neo4j(code=code, message=message)


@pytest.fixture()
def faults(monkeypatch):
    """``faults(kind, times, between)``: the next ``times`` store transactions of the test's
    thread (not of the session's background threads, such as an API's sweep) end in an error:
    ``"rolled back"`` raises an ArcadeDB write conflict before the transaction runs,
    ``"transient"`` a retryable server error (ArcadeDB's DeadlockDetected) before it runs,
    ``"bookmark"`` Neo4j's wait for a bookmark that ran out (transient too) before it runs,
    ``"ambiguous"`` raises "Transaction error on commit" after it committed
    (``between()`` runs first: another writer's transaction before the next try). Returns the
    list of faults raised so far."""
    from pathweave.store import graph_store

    real, raised, lock, here = graph_store.GraphStore._transact, [], threading.Lock(), threading.current_thread()
    pending = {"kind": None, "times": 0, "between": None}

    def transact(work, runs_again, moved_back):
        def take(kind: str) -> bool:
            with lock:
                taken = pending["kind"] == kind and pending["times"] > 0 and threading.current_thread() is here
                pending["times"] -= taken
            return taken

        def faulty():
            if take("rolled back"):
                raised.append("rolled back")
                raise _server_error("ConcurrentModificationException: record #12:7 was changed by another transaction")
            if take("transient"):
                raised.append("transient")
                raise _server_error("Record #30:98 was modified by a concurrent transaction between its read and its update",
                                    code="Neo.TransientError.Transaction.DeadlockDetected")
            if take("bookmark"):
                raised.append("bookmark")
                raise _server_error("Database 'neo4j' not up to the requested version: 912",
                                    code="Neo.TransientError.Transaction.BookmarkTimeout")
            out = work()
            if take("ambiguous"):  # armed before this transaction or while it ran
                raised.append("ambiguous")
                if pending["between"] is not None:
                    pending.pop("between")()
                raise _server_error("Transaction error on commit")
            return out
        return real(faulty, runs_again, moved_back)

    monkeypatch.setattr(graph_store.GraphStore, "_transact", staticmethod(transact))

    def arm(kind: str, times: int = 1, between=None) -> list[str]:
        pending.update(kind=kind, times=times, between=between)
        return raised
    return arm


def _payload(store, title="Harbour rules", text="Ferries leave Ulvik harbour at six."):
    return jobs.payloads(store.tenant, [jobs.to_source({"title": title, "text": text, "source": title})])


def test_an_accept_a_claim_and_a_delete_whose_commit_answered_without_its_outcome_count_once(store, faults):
    submitted = _payload(store)
    raised = faults("ambiguous")
    submission = jobs.create_job(store, jobs.new_job_id(), submitted, 8, "celery")
    assert raised == ["ambiguous"]  # the accept committed, its answer lost, its transaction ran again
    doc_id = submitted[0]["doc_id"]
    head = store.run("document_states", ids=[doc_id])[0]
    assert (head["status"], head["version"]) == ("queued", 1) and submission.to_enqueue[0]["version"] == 1

    faults("ambiguous")
    taken = lifecycle.claim(store, submission.to_enqueue, (), "w1", 60.0)
    assert [d["doc_id"] for d in taken] == [doc_id]  # the replay finds its own claim: still taken
    head = store.run("document_states", ids=[doc_id])[0]
    assert (head["status"], head["attempts"], head["worker"]) == ("running", 1, "w1")

    faults("ambiguous")
    deleted = lifecycle.delete(store, doc_id)
    head = store.run("document_states", ids=[doc_id])[0]
    assert deleted["version"] == 2 and (head["status"], head["version"]) == ("deleted", 2)

    # a newer write accepted between the tries: the replay finds its own commit all the same, and
    # the newer write stays the newest (not deleted over)
    def write():
        return jobs.create_job(store, jobs.new_job_id(), submitted, 8, "celery")

    assert write().to_enqueue[0]["version"] == 3
    faults("ambiguous", between=write)
    lifecycle.delete(store, doc_id)
    head = store.run("document_states", ids=[doc_id])[0]
    assert (head["status"], head["version"]) == ("queued", 5)  # 4: the delete, 5: the write after it
    assert len(raised) == 4


def test_a_replayed_accept_reports_what_was_already_done(pipeline, store, faults):
    """An accept whose commit answered ambiguously runs again and finds its job written: a
    document whose stored content it is (nothing to do) is reported done, not enqueued."""
    from pathweave_ingest.loaders import SourceDocument

    doc = SourceDocument("ferry", "Ferry rules", "Ferries leave Ulvik harbour at six every morning.", key="ferry")
    pipeline.ingest([doc])
    again = jobs.payloads(store.tenant, [doc])
    raised = faults("ambiguous")
    submission = jobs.create_job(store, jobs.new_job_id(), again, 8, "celery")
    assert raised == ["ambiguous"]
    assert (submission.to_enqueue, submission.already_done) == ([], [again[0]["doc_id"]])


def test_a_direct_write_whose_commit_answered_without_its_outcome_yields_to_a_newer_delete(
        pipeline, store, faults, monkeypatch):
    """The CLI's direct write (its swap accepts the version): the commit answers ambiguously
    and a DELETE comes before the next try; the try finds the newer write and leaves the
    document to it (deleted, nothing of it in the graph), instead of writing it back."""
    from pathweave_ingest.loaders import SourceDocument

    doc = SourceDocument("ferry", "Ferry rules", "Ferries leave Ulvik harbour at six every morning.", key="ferry")
    pipeline.ingest([doc])
    doc_id = store.run("documents_list")[0]["doc_id"]
    real_applied, armed = lifecycle.applied_in, []

    def applied_in(run, docs, owner):  # inside the swap of the second version: its commit answers ambiguously
        if not armed:
            armed.append(faults("ambiguous", between=lambda: lifecycle.delete(store, doc_id)))
        return real_applied(run, docs, owner)

    monkeypatch.setattr(lifecycle, "applied_in", applied_in)
    pipeline.ingest([SourceDocument("ferry", "Ferry rules", "Ferries leave Ulvik harbour at seven.", key="ferry")])
    head = store.run("document_states", ids=[doc_id])[0]
    assert armed and armed[0] == ["ambiguous"]
    assert (head["status"], head["version"]) == ("deleted", 3)  # 2: the write, 3: the delete after it
    assert store.run("snapshot_passages") == []


def test_a_rolled_back_accept_runs_again_and_a_policy_that_never_clears_gives_up(store, faults):
    from pathweave.store.retry import CONFLICT_RETRIES

    raised = faults("rolled back")
    submitted = _payload(store)
    jobs.create_job(store, jobs.new_job_id(), submitted, 8, "celery")
    assert raised == ["rolled back"]
    assert store.run("document_states", ids=[submitted[0]["doc_id"]])[0]["version"] == 1

    faults("rolled back", times=CONFLICT_RETRIES + 1)
    again = _payload(store, text="Ferries leave Ulvik harbour at seven.")
    with pytest.raises(Exception, match="ConcurrentModification"):
        jobs.create_job(store, jobs.new_job_id(), again, 8, "celery")
    assert len(raised) == 1 + CONFLICT_RETRIES + 1
    head = store.run("document_states", ids=[submitted[0]["doc_id"]])[0]
    assert (head["version"], head["status"]) == (1, "queued")  # nothing of the failed accept


def test_an_auto_commit_statement_the_server_ended_with_a_transient_error_runs_again(store, faults):
    """The driver retries a transient error (a deadlock, a concurrent update) in a managed
    transaction only; an auto-commit one (every statement on ArcadeDB, ``CALL … IN
    TRANSACTIONS`` on Neo4j) is run again by the policy, reading or writing. A managed one's
    transient error that reaches the policy is raised: the driver spent its own retries."""
    from neo4j.exceptions import TransientError

    raised = faults("transient")
    if store._bookmarked:  # Neo4j: managed transactions, and one statement of its own transactions
        assert store.run("neo4j_import_synonyms", rows=[], threshold=0.9) == [{"written": 0}]
        assert raised == ["transient"]
        faults("transient")
        with pytest.raises(TransientError, match="concurrent transaction"):
            store.run("record_embedder", meta_id=store.meta_id, embedder="bge-small", dim=384, identity="bge")
        assert raised == ["transient", "transient"]
        return
    store.run("record_embedder", meta_id=store.meta_id, embedder="bge-small", dim=384, identity="bge")
    assert raised == ["transient"] and store.run("embedder_record", meta_id=store.meta_id)
    faults("transient")
    assert store.run("embedder_record", meta_id=store.meta_id)[0]["name"] == "bge-small"  # a read runs again too
    assert raised == ["transient", "transient"]


def test_a_read_after_bookmarks_the_store_did_not_reach_is_not_run_again(store, faults):
    """A read after another process's bookmarks whose wait ran out raises at once (the API
    answers 503 with Retry-After), though the error is transient: running it again would hold
    the request for the server's wait again and again."""
    from neo4j.exceptions import TransientError

    raised = faults("bookmark", times=2)
    with pytest.raises(TransientError, match="not up to the requested version"):
        store.run("graph_version", read_after=["a-bookmark-of-another-process"], meta_id=store.meta_id)
    assert raised == ["bookmark"]


def test_a_reasoning_record_that_met_a_write_conflict_is_written(pipeline, store, embedder, settings, faults):
    from pathweave.query.retriever import Retriever
    from pathweave_ingest.loaders import SourceDocument

    pipeline.ingest([SourceDocument("a", "Ulvik", "Ferries leave Ulvik harbour at six. Ulvik lies on the Skarn coast.")])
    retriever = Retriever(store, embedder, settings)
    result = retriever.query("When do ferries leave Ulvik?", mode="dense", k=1)
    retriever.flush(60)
    again = result.model_copy(update={"query_id": f"{result.query_id}-again"})
    raised = faults("rolled back")
    retriever.resources.records.write_now(again)  # the record writer's write, on this thread
    assert raised == ["rolled back"] and retriever.resources.records.failures == 0
    assert retriever.read_record(again.query_id)["query_id"] == again.query_id


def test_a_record_not_written_after_the_retries_is_said_in_the_result_and_counted(
        pipeline, store, embedder, settings, faults, monkeypatch):
    from pathweave.query.retriever import Retriever
    from pathweave.records import reasoning
    from pathweave.store.retry import CONFLICT_RETRIES
    from pathweave_ingest.loaders import SourceDocument

    pipeline.ingest([SourceDocument("a", "Ulvik", "Ferries leave Ulvik harbour at six. Ulvik lies on the Skarn coast.")])
    before = settings.model_copy(update={"query": settings.query.model_copy(update={"record_before_answer": True})})
    retriever = Retriever(store, embedder, before)
    written = retriever.query("When do ferries leave Ulvik?", mode="dense", k=1)
    assert written.record == "written" and retriever.read_record(written.query_id)
    real, counted = reasoning.write_reasoning_record, reasoning.FAILED_RECORDS.value

    def conflicting(store_, result):  # every try of this record's write meets a write conflict
        raised = faults("rolled back", times=CONFLICT_RETRIES + 1)
        try:
            return real(store_, result)
        finally:
            assert len(raised) == CONFLICT_RETRIES + 1
    monkeypatch.setattr(reasoning, "write_reasoning_record", conflicting)
    lost = retriever.query("When do ferries leave Ulvik?", mode="dense", k=1)
    assert lost.record == "failed" and lost.passages  # the query's answer stands, and says so
    assert reasoning.FAILED_RECORDS.value == counted + 1 and retriever.resources.records.failures == 1
    with pytest.raises(KeyError):
        retriever.read_record(lost.query_id)
    monkeypatch.setattr(reasoning, "write_reasoning_record", real)
    later = Retriever(store, embedder, settings).query("When do ferries leave Ulvik?", mode="dense", k=1)
    assert later.record == ("written" if settings.query.record_before_answer else "pending")


def test_a_lease_renewal_and_its_own_swap_never_write_one_head_at_once():
    """Pure logic of ``lifecycle.HEAD_WRITERS``: a renewal leaves out the heads a swap holds
    (and renews the others at once); a swap waits for a renewal of its heads in flight."""
    writers = lifecycle._HeadWriters()
    with writers.swapping(["d2"]):
        with writers.renewing(["d1", "d2", "d3"]) as free:
            assert free == {"d1", "d3"}
    with writers.renewing(["d1", "d2"]) as free:
        assert free == {"d1", "d2"}  # no swap open: all of them
    renewal_in_flight, renewal_may_end, swapped = threading.Event(), threading.Event(), []

    def renew():
        with writers.renewing(["d1"]):
            renewal_in_flight.set()
            renewal_may_end.wait(10)
            swapped.append(("swap open while renewing", bool(writers._swapping["d1"])))

    thread = threading.Thread(target=renew)
    thread.start()
    assert renewal_in_flight.wait(10)
    threading.Timer(0.3, renewal_may_end.set).start()
    with writers.swapping(["d1"]):  # waits until the renewal ended
        swapped.append(("renewal ended before the swap", not writers._renewing["d1"]))
    thread.join(10)
    assert swapped == [("swap open while renewing", False), ("renewal ended before the swap", True)]
