"""Neo4j as a cluster member would be used: a ``neo4j://`` routing URI, every statement in a
managed transaction of its access mode (reads through ``execute_read``, writes through
``execute_write``), one bookmark manager per process, and a transient error (a session that
expired under a leader switch) retried by the driver with nothing lost or doubled. A single
Neo4j server answers routing too, so the managed one serves here."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.neo4j_only


@pytest.fixture()
def routed(settings, base_store, monkeypatch):
    """The settings of the managed Neo4j reached as a configured ``neo4j://`` store, and a
    count of the managed transactions by access mode (a spy around the driver's own):
    ``read``/``write`` on every thread, ``write_here`` on the test's own (the process's
    other threads, such as an earlier test's ingestion writers, may write meanwhile)."""
    import threading

    from neo4j import Session

    from pathweave.servers import store_server

    info = store_server.status(settings)
    port = info.bolt_uri.rsplit(":", 1)[1]
    store = settings.store.model_copy(update={"uri": f"neo4j://127.0.0.1:{port}", "user": info.user,
                                              "password": info.password, "database": info.database})
    counts = {"read": 0, "write": 0, "write_here": 0}
    here = threading.current_thread()
    real_read, real_write = Session.execute_read, Session.execute_write

    def read(self, work, *args, **kwargs):
        counts["read"] += 1
        return real_read(self, work, *args, **kwargs)

    def write(self, work, *args, **kwargs):
        counts["write"] += 1
        counts["write_here"] += threading.current_thread() is here
        return real_write(self, work, *args, **kwargs)

    monkeypatch.setattr(Session, "execute_read", read)
    monkeypatch.setattr(Session, "execute_write", write)
    return settings.model_copy(update={"store": store}), counts


def test_ingestion_and_queries_over_a_routing_uri_in_managed_transactions(routed, embedder, extractor):
    from pathweave.query.retriever import Retriever
    from pathweave.runtime import open_store
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.pipeline import Pipeline

    settings, counts = routed
    tenant = f"t{uuid.uuid4().hex[:10]}"
    with open_store(settings, tenant=tenant) as store:
        assert store.driver.__class__.__name__ == "Neo4jDriver"  # neo4j://: the routing driver
        Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": tenant})).ingest([
            SourceDocument("a", "Marie Curie", "Marie Curie was born in Warsaw. She won the Nobel Prize in 1903."),
            SourceDocument("b", "Warsaw", "Warsaw is the capital of Poland. The Vistula flows through Warsaw.")])
        writes, reads = counts["write"], counts["read"]
        assert writes > 0 and store.last_bookmarks()  # the commits' bookmarks, kept for the process
        result = Retriever(store, embedder, settings).query("Which river flows through Marie Curie's birthplace?",
                                                            mode="proprag", k=2)
        assert result.passages[0].title in ("Warsaw", "Marie Curie")
        assert counts["read"] > reads  # the query read through execute_read


def test_a_statement_that_meets_a_leader_switch_is_run_again_once(routed, monkeypatch):
    """``GraphStore.run`` of a writing statement in its managed transaction: the session
    expires on its first try (before the commit); the driver runs it again, and the graph
    holds it once."""
    from neo4j import ManagedTransaction
    from neo4j.exceptions import SessionExpired

    from pathweave.runtime import open_store

    settings, counts = routed
    tenant = f"t{uuid.uuid4().hex[:10]}"
    real_run, tries = ManagedTransaction.run, []

    def run(self, query, parameters=None, **kwargs):
        if "record_graph_change" in str(parameters or {}) or (parameters or {}).get("added") == ["p9"]:
            tries.append(1)
            if len(tries) == 1:
                raise SessionExpired("leader switch (injected)")
        return real_run(self, query, parameters, **kwargs)

    with open_store(settings, tenant=tenant) as store:
        monkeypatch.setattr(ManagedTransaction, "run", run)
        writes = counts["write_here"]
        rows = store.run("record_graph_change", meta_id=store.meta_id, added=["p9"], removed=[], removed_entities=[],
                         entities=[], aliases=[], access=[])
        monkeypatch.setattr(ManagedTransaction, "run", real_run)
        assert len(tries) == 2 and counts["write_here"] == writes + 1  # one execute_write, its work run twice
        assert int(rows[0]["version"]) == 1 and store.graph_version() == 1


def test_a_transient_error_in_a_managed_transaction_is_retried_with_nothing_lost_or_doubled(routed):
    from neo4j.exceptions import SessionExpired

    from pathweave.runtime import open_store

    settings, _ = routed
    tenant = f"t{uuid.uuid4().hex[:10]}"
    attempts = []
    with open_store(settings, tenant=tenant) as store:
        def work(run):
            attempts.append(1)
            version = int(run("record_graph_change", meta_id=store.meta_id, added=["p1"], removed=[],
                              removed_entities=[], entities=[], aliases=[], access=[])[0]["version"])
            if len(attempts) == 1:  # the leader went away before the commit
                raise SessionExpired("leader switch (injected)")
            return version

        assert store.execute_write(work) == 1  # retried once, committed once
        assert len(attempts) == 2
        assert store.graph_version() == 1  # the first attempt's bump was rolled back, not doubled


def test_a_read_waits_for_another_processes_bookmarks(routed, base_store):
    """Bookmarks of one connection (another process's) given to a read of a second: it reads
    at least that state, and the second connection's own bookmark manager keeps them."""
    from pathweave.runtime import open_store

    settings, _ = routed
    tenant = f"t{uuid.uuid4().hex[:10]}"
    with open_store(settings, tenant=tenant) as writer, open_store(settings, tenant=tenant) as reader:
        writer.record_change(added=["p1"])
        bookmarks = writer.last_bookmarks()
        assert bookmarks and not set(bookmarks) <= set(reader.last_bookmarks())
        assert int(reader.run("graph_version", read_after=bookmarks, meta_id=reader.meta_id)[0]["version"]) == 1
        assert reader.last_bookmarks()  # the session's bookmark is the process's now


def test_a_projection_over_the_allowed_heap_share_is_refused_before_it_is_loaded(pipeline, store):
    """GDS's own memory estimate on the real server, against the configured share: refused
    with an error naming the setting, nothing in the catalog; within the share it projects."""
    from pathweave.store.backends import gds as gds_ops
    from pathweave_ingest.loaders import SourceDocument

    pipeline.ingest([SourceDocument("a", "Warsaw", "Warsaw is the capital of Poland. The Vistula flows through it.")])
    gds, version = store.backend._client(), store.graph_version()
    with pytest.raises(gds_ops.ProjectionTooLarge, match="PATHWEAVE_STORE_GDS_MAX_HEAP_PERCENT"):
        gds_ops.project_ppr_graph(gds, store.run, store.tenant, version, max_heap_percent=1e-9)
    name = gds_ops.ppr_graph_name(store.tenant, version)
    assert not gds.graph.exists(name)
    graph = gds_ops.project_ppr_graph(gds, store.run, store.tenant, version, max_heap_percent=100.0)
    assert graph is not None and graph.name == name
    gds.graph.drop(name, fail_if_missing=False)
