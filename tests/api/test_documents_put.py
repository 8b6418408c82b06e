"""PUT /v1/documents/{external_id} (source identity, replacement) and PDF upload with page citations."""

import pytest

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

PAGES = [
    "Acme Corporation was founded by Jane Smith in Boston in 1999. Acme builds rockets.",
    "The Denver office of Acme Corporation designs rocket engines for lunar landers.",
    "Paul Martin directs the Lyon office of Acme Corporation since 2005.",
]




def test_api_put_replaces_and_uploads_pdf(client, new_tenant, store_for, wait, tmp_path, make_pdf):
    tenant, headers = new_tenant("put")
    body = {"title": "Travel policy", "text": "Trips to Lyon need the approval of Paul Martin."}
    first = client.put("/v1/documents/policies:travel", headers=headers, json=body)
    assert first.status_code == 202, first.text
    assert wait(headers, first.json()["job_id"])["status"] == "done"
    doc_id = first.json()["documents"][0]["doc_id"]
    store = store_for(tenant)
    version = store.graph_version()
    same = client.put("/v1/documents/policies:travel", headers=headers, json=body).json()
    assert same["already_ingested"] == 1 and store.graph_version() == version
    body2 = {"title": "Travel policy", "text": "Trips to Lyon need the approval of Claire Dubois."}
    second = client.put("/v1/documents/policies:travel", headers=headers, json=body2)
    assert second.status_code == 202 and second.json()["documents"][0]["doc_id"] == doc_id
    assert wait(headers, second.json()["job_id"])["status"] == "done"
    texts = [r["text"] for r in store.run("snapshot_passages")]
    assert texts == [body2["text"]] and store.graph_version() > version
    pdf = make_pdf(tmp_path / "report.pdf", PAGES)
    upload = client.post("/v1/documents", headers=headers,
                         files=[("files", ("report.pdf", pdf.read_bytes(), "application/pdf"))])
    assert upload.status_code == 202, upload.text
    assert wait(headers, upload.json()["job_id"])["status"] == "done"
    # k=3: the page's citation is the subject here, not its rank (the vector index is shared by
    # every tenant of the session, several of which hold this report: an approximate search may
    # rank the tenant's own copy of page 3 below its page 1; the lexical hits still bring it)
    answer = client.post("/v1/query", headers=headers,
                         json={"question": "Who directs the Lyon office of Acme?", "mode": "dense", "k": 3}).json()
    [page3] = [p for p in answer["passages"] if "Paul Martin directs" in p["text"]]
    assert page3["reference"] == "Annual Report, p. 3"
    assert [c["page"] for c in answer["citations"] if c["passage_id"] == page3["passage_id"]] == [3]
    bad = client.post("/v1/documents", headers=headers,
                      files=[("files", ("old.docx", b"not a zip", "application/octet-stream"))])
    assert bad.status_code == 422 and "not a Word .docx file" in bad.text


def test_a_patch_and_a_delete_answer_the_bookmarks_of_their_commit(client, new_tenant, store_for, wait):
    """Read-your-writes across replicas for PATCH and DELETE as for a job: their answers carry
    the bookmarks of their commit (Neo4j; none on ArcadeDB's single server), which a query
    takes as its ``consistency``."""
    tenant, headers = new_tenant("bm")
    put = client.put("/v1/documents/policies:ferry", headers=headers,
                     json={"title": "Ferry rules", "text": "Ferries leave Ulvik harbour at six every morning."})
    assert wait(headers, put.json()["job_id"])["status"] == "done"
    doc_id = put.json()["documents"][0]["doc_id"]
    neo4j = store_for(tenant).backend.name == "neo4j"
    patched = client.patch(f"/v1/documents/{doc_id}/acl", headers=headers, json={"acl": ["group:harbour"]})
    assert patched.status_code == 200, patched.text
    deleted = client.delete(f"/v1/documents/{doc_id}", headers=headers)
    assert deleted.status_code == 200, deleted.text
    for answer in (patched.json(), deleted.json()):
        assert bool(answer["bookmarks"]) == neo4j, answer
    assert set(patched.json()["bookmarks"]) != set(deleted.json()["bookmarks"]) or not neo4j  # each its own commit
    ask = {"question": "When do ferries leave Ulvik?", "mode": "dense", "consistency": deleted.json()["bookmarks"]}
    answer = client.post("/v1/query", headers=headers, json=ask)
    assert answer.status_code == 200 and not answer.json()["passages"], answer.text


def test_a_restricted_query_reads_the_graph_version_on_the_leader_first(client, keys, new_tenant, store_for, wait,
                                                                         monkeypatch):
    """A caller with principals and no ``consistency`` bookmarks: before its query, one read
    of the tenant's graph version on the leader (Neo4j: its bookmark then rides the query's
    reads, so a member that lags cannot serve an access list from before a revocation; on
    ArcadeDB's single server, no such read), and the same before its reads of records,
    documents and jobs. An unrestricted caller's make none."""
    from pathweave.store.graph_store import GraphStore

    tenant, headers = new_tenant("leader")
    put = client.put("/v1/documents/policies:ferry", headers=headers,
                     json={"title": "Ferry rules", "text": "Ferries leave Ulvik harbour at six.", "acl": ["group:harbour"]})
    assert wait(headers, put.json()["job_id"])["status"] == "done"
    token, _ = keys.create(tenant, "harbour", 0, "ingest", ["group:harbour"], False)
    restricted = {"Authorization": f"Bearer {token}"}
    real, leader_reads = GraphStore.run, []

    def run(self, name, *args, **kwargs):
        if self.tenant == tenant and kwargs.get("on_leader"):
            leader_reads.append(name)
        return real(self, name, *args, **kwargs)
    monkeypatch.setattr(GraphStore, "run", run)
    ask = {"question": "When do ferries leave Ulvik?", "mode": "dense", "k": 3}
    assert client.post("/v1/query", headers=headers, json=ask).json()["passages"]
    assert leader_reads == []
    answer = client.post("/v1/query", headers=restricted, json=ask)
    assert answer.status_code == 200 and answer.json()["passages"], answer.text
    neo4j = store_for(tenant).backend.name == "neo4j"
    assert leader_reads == (["graph_version"] if neo4j else []), leader_reads
    # so do its reads of records, documents and jobs, which an access list decides too
    reads = [f"/v1/queries/{answer.json()['query_id']}", "/v1/queries", f"/v1/documents/{put.json()['documents'][0]['doc_id']}",
             "/v1/documents", f"/v1/jobs/{put.json()['job_id']}"]
    for path in reads:
        leader_reads.clear()
        assert client.get(path, headers=restricted).status_code == 200, path
        assert leader_reads == (["graph_version"] if neo4j else []), (path, leader_reads)
        leader_reads.clear()
        assert client.get(path, headers=headers).status_code == 200 and leader_reads == [], path
