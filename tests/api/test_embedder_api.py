"""An index knows its embedder, through the API (issue 41): a tenant built with another
embedder answers 409 ``embedder-mismatch`` naming both, and an ingestion into it fails with
that reason, writing nothing."""

from __future__ import annotations


def test_a_tenant_of_another_embedder_is_refused_with_both_names(client, new_tenant, base_store, extractor, settings,
                                                                    ingest, docs):
    from pathweave.embedding.embedders import get_embedder
    from pathweave.store.graph_store import GraphStore
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.pipeline import Pipeline

    tenant, headers = new_tenant()
    store = GraphStore(base_store.driver, base_store.database, base_store.backend, tenant, base_store.batch_size,
                       base_store.dimensions)
    minilm = settings.with_embedder("minilm").model_copy(update={"tenant": tenant})
    Pipeline(store, get_embedder(minilm), extractor, minilm).ingest(
        [SourceDocument(d["title"], d["title"], d["text"]) for d in docs["core"]])
    before = store.document_counts()

    reply = client.post("/v1/query", headers=headers, json={"question": "Where was Marie Curie born?"})
    assert reply.status_code == 409, reply.text
    problem = reply.json()
    assert problem["type"].endswith("embedder-mismatch")
    assert "minilm" in problem["detail"] and settings.models.embedder in problem["detail"]
    assert "pathweave reembed" in problem["detail"]

    job = ingest(headers, [docs["zephyria"]])
    assert job["status"] == "failed"
    assert "minilm" in str(job) and settings.models.embedder in str(job)
    assert store.document_counts() == before
