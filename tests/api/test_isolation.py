"""Tenant isolation: two tenants ingest overlapping documents; each key sees only
its own tenant's documents, jobs, passages, paths and records."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


@pytest.fixture()
def two_tenants(new_tenant, ingest, docs):
    tenant_a, headers_a = new_tenant("iso-a")
    tenant_b, headers_b = new_tenant("iso-b")
    job_a = ingest(headers_a, docs["core"] + [docs["zephyria"]])
    job_b = ingest(headers_b, docs["core"] + [docs["quillon"]])
    assert job_a["status"] == job_b["status"] == "done"
    return (tenant_a, headers_a, job_a), (tenant_b, headers_b, job_b)


def test_each_tenant_sees_only_its_own_results(client, two_tenants, store_for):
    (tenant_a, headers_a, job_a), (tenant_b, headers_b, job_b) = two_tenants
    ids_a = {d["doc_id"] for d in job_a["documents"]}
    ids_b = {d["doc_id"] for d in job_b["documents"]}
    assert not ids_a & ids_b  # the same content has a different id in each tenant

    for headers, own_ids, own_titles in ((headers_a, ids_a, {"Zephyria"}), (headers_b, ids_b, {"Quillon"})):
        listed = client.get("/v1/documents", headers=headers).json()
        assert listed["total"] == 4 and {d["doc_id"] for d in listed["documents"]} == own_ids
        for question in ("What does the Order of Tamsin keep?", "Who built the Brass Lighthouse?",
                         "Where was Marie Curie born?"):
            for mode in ("proprag", "dense", "hipporag2"):
                result = client.post("/v1/query", headers=headers, json={"question": question, "mode": mode,
                                                                         "k": 10}).json()
                assert result["passages"] and {p["doc_id"] for p in result["passages"]} <= own_ids
                assert {c["doc_id"] for c in result["citations"]} <= own_ids
                titles = {p["title"] for p in result["passages"]}
                assert not titles & ({"Zephyria", "Quillon"} - own_titles), (question, mode, titles)

    # the graph itself: every node reached through tenant A's statements is A's
    snapshot_a = {r["id"] for r in store_for(tenant_a).run("snapshot_passages")}
    snapshot_b = {r["id"] for r in store_for(tenant_b).run("snapshot_passages")}
    assert len(snapshot_a) == len(snapshot_b) == 4 and not snapshot_a & snapshot_b


def test_ids_of_another_tenant_are_not_found(client, two_tenants, store_for):
    (tenant_a, headers_a, job_a), (tenant_b, headers_b, _) = two_tenants
    record = client.post("/v1/query", headers=headers_a, json={"question": "Order of Tamsin"}).json()
    doc_a = job_a["documents"][0]["doc_id"]
    assert client.get(f"/v1/jobs/{job_a['job_id']}", headers=headers_b).status_code == 404
    assert client.get(f"/v1/queries/{record['query_id']}", headers=headers_b).status_code == 404
    assert client.delete(f"/v1/documents/{doc_a}", headers=headers_b).status_code == 404
    assert client.get(f"/v1/documents/{doc_a}", headers=headers_b).status_code == 404
    listed_b = client.get("/v1/queries", headers=headers_b).json()["queries"]
    assert record["query_id"] not in {q["query_id"] for q in listed_b}
    # and everything is still there for its owner
    assert client.get(f"/v1/jobs/{job_a['job_id']}", headers=headers_a).status_code == 200
    assert client.get(f"/v1/queries/{record['query_id']}", headers=headers_a).status_code == 200
    assert client.get(f"/v1/documents/{doc_a}", headers=headers_a).status_code == 200
    assert record["query_id"] in {q["query_id"] for q in client.get("/v1/queries", headers=headers_a).json()["queries"]}
    assert doc_a in {d["doc_id"] for d in client.get("/v1/documents", headers=headers_a).json()["documents"]}


def test_deleting_in_one_tenant_leaves_the_other_unchanged(client, two_tenants, store_for):
    (tenant_a, headers_a, job_a), (tenant_b, _, _) = two_tenants
    before_b = store_for(tenant_b).counts()
    warsaw_a = next(d["doc_id"] for d in job_a["documents"] if d["title"] == "Warsaw")
    assert client.delete(f"/v1/documents/{warsaw_a}", headers=headers_a).status_code == 200
    assert store_for(tenant_b).counts() == before_b
    assert store_for(tenant_a).counts()["Document"] == 3
