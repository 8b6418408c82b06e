"""End to end through the API (real store, models and in-process queue): submit,
poll, list, query with citations and records, re-submit, upload files, delete."""

from __future__ import annotations

import json

from pathweave_ingest.documents import document_id
from pathweave_ingest.loaders import SourceDocument


def doc_id_for(tenant: str, title: str, text: str) -> str:
    """The id the pipeline gives a posted document without an external id."""
    return document_id(tenant, SourceDocument(source="", title=title, text=text))


def test_submit_poll_list_query_and_record(client, new_tenant, docs, wait):
    tenant, headers = new_tenant()
    response = client.post("/v1/documents", headers=headers, json={"documents": docs["core"]})
    assert response.status_code == 202
    body = response.json()
    assert response.headers["location"] == f"/v1/jobs/{body['job_id']}"
    assert body["total"] == 3 and body["enqueued"] == 3 and body["queue"] == "inprocess"
    assert [d["doc_id"] for d in body["documents"]] == [doc_id_for(tenant, d["title"], d["text"]) for d in docs["core"]]
    job = wait(headers, body["job_id"])
    assert job["status"] == "done", job
    assert job["counts"]["done"] == 3 and job["progress"]["fraction"] == 1.0 and job["progress"]["passages"] == 3
    for document in job["documents"]:
        assert document["status"] == "done" and document["attempts"] == 1 and document["error"] is None
        assert document["passages"] == 1 and document["propositions"] >= 1 and document["seconds"] > 0
        assert document["started_at"] >= document["queued_at"] and document["finished_at"] >= document["started_at"]

    listed = client.get("/v1/documents", headers=headers).json()
    assert listed["total"] == 3 and {d["title"] for d in listed["documents"]} == {"Marie Curie", "Warsaw", "Pierre Curie"}
    assert client.get("/v1/documents?status=failed", headers=headers).json()["total"] == 0
    page = client.get("/v1/documents?limit=2&offset=2", headers=headers).json()
    assert page["total"] == 3 and len(page["documents"]) == 1

    answer = client.post("/v1/query", headers=headers, json={
        "question": "Which river flows through the city where the 1903 Nobel laureate was born?", "k": 3})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["record_id"] == result["query_id"] and result["links"]["record"] == f"/v1/queries/{result['query_id']}"
    assert len(result["passages"]) == 3 and result["paths"]
    assert {c["marker"] for c in result["citations"]} == {1, 2, 3}
    assert all(c["source"].startswith("api:") for c in result["citations"])
    assert {p["doc_id"] for p in result["passages"]} <= {d["doc_id"] for d in body["documents"]}
    cited = [m for path in result["paths"] for step in path["steps"] for m in step["citations"]]
    assert cited and set(cited) <= {1, 2, 3}

    record = client.get(result["links"]["record"], headers=headers)
    assert record.status_code == 200
    record = record.json()
    assert record["text"] == result["question"] and record["mode"] == "proprag"
    assert [p["path_id"] for p in record["paths"]] == [p["path_id"] for p in result["paths"]]
    assert {s["id"] for s in record["selected"] if s["label"] == "Passage"} == {p["passage_id"] for p in result["passages"]}
    # what the explorer draws: each selected node's text, the passages stating the path steps with their documents
    texts = {p["passage_id"]: p["text"] for p in result["passages"]}
    assert all(s["text"] for s in record["selected"])
    assert all(s["text"] == texts[s["id"]] for s in record["selected"] if s["label"] == "Passage")
    stated = {prop for p in record["passages"] for prop in p["states"]}
    assert stated == {step["prop_id"] for path in record["paths"] for step in path["steps"]}
    passage = record["passages"][0]
    assert passage["doc_id"] and passage["doc_title"] and passage["text"]
    document = client.get(f"/v1/documents/{passage['doc_id']}", headers=headers)
    assert document.status_code == 200 and document.json()["title"] == passage["doc_title"]
    assert passage["text"] in [p["text"] for p in document.json()["passages"]]
    listed = client.get("/v1/queries?limit=1", headers=headers).json()
    assert listed == {"queries": [{"query_id": result["query_id"], "text": result["question"], "mode": "proprag",
                                   "created_at": record["created_at"]}], "limit": 1}

    for mode in ("dense", "hipporag2"):
        other = client.post("/v1/query", headers=headers, json={"question": "Who married Marie Curie?", "mode": mode,
                                                                "k": 2})
        assert other.status_code == 200 and other.json()["mode"] == mode and len(other.json()["passages"]) == 2

    again = client.post("/v1/documents", headers=headers, json={"documents": docs["core"]}).json()
    assert again["status"] == "done" and again["already_ingested"] == 3 and again["enqueued"] == 0
    assert wait(headers, again["job_id"])["status"] == "done"


def test_token_budget_context(client, new_tenant, docs, ingest):
    _, headers = new_tenant()
    ingest(headers, docs["core"])
    for method in ("greedy", "ilp"):
        result = client.post("/v1/query", headers=headers, json={
            "question": "Where was Marie Curie born?", "token_budget": 60, "selection_method": method})
        assert result.status_code == 200, result.text
        context = result.json()["context"]
        assert context["budget"] == 60 and 0 < context["token_count"] <= 60 and context["lines"]
        assert context["requested"] == method and context["text"]
    plain = client.post("/v1/query", headers=headers, json={"question": "Where was Marie Curie born?"}).json()
    assert plain["context"] is None and plain["note"] is None
    empty_tenant, empty_headers = new_tenant()
    empty = client.post("/v1/query", headers=empty_headers, json={"question": "anything", "token_budget": 100}).json()
    assert empty["context"] is None and "no context" in empty["note"]


def test_multipart_files(client, new_tenant, wait):
    _, headers = new_tenant()
    files = [
        ("files", ("notes.txt", b"Ada Lovelace wrote the first program for the Analytical Engine.", "text/plain")),
        ("files", ("guide.md", b"# Babbage\n\nCharles Babbage designed the Analytical Engine.", "text/markdown")),
        ("files", ("more.json", json.dumps([{"title": "Turing", "text": "Alan Turing worked at Bletchley Park."}]).encode(),
                   "application/json")),
        ("files", ("lines.jsonl", b'{"title": "Hopper", "text": "Grace Hopper wrote the first compiler."}\n', "x/y")),
    ]
    response = client.post("/v1/documents", headers=headers, files=files)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["total"] == 4
    assert {d["source"] for d in body["documents"]} == {"upload:notes.txt", "upload:guide.md", "upload:more.json#0",
                                                         "upload:lines.jsonl#0"}
    assert {d["title"] for d in body["documents"]} == {"notes", "Babbage", "Turing", "Hopper"}
    assert wait(headers, body["job_id"])["status"] == "done"


def test_delete_removes_only_what_the_document_owns(client, new_tenant, docs, ingest, store_for):
    warsaw, curie = docs["core"][1], docs["core"][0]
    clean_tenant, clean_headers = new_tenant("clean")
    ingest(clean_headers, [warsaw])
    tenant, headers = new_tenant("del")
    ingest(headers, [warsaw, curie])
    store = store_for(tenant)
    before = store.counts()
    curie_id = doc_id_for(tenant, curie["title"], curie["text"])

    # An alias group: Curie's 'Pierre Curie' entity (only in this document) ALIAS_OF an entity that stays
    entity = {row["norm_name"]: row["id"] for row in store.run("entity_embeddings")}
    stays, alias = entity["warsaw"], entity["pierre curie"]
    rows = [{"alias": alias, "canonical": stays, "score": 0.95, "method": "knn"}]
    assert store.run("alias_link", rows=rows)[0]["n"] == 1
    version = store.graph_version()

    response = client.delete(f"/v1/documents/{curie_id}", headers=headers)
    assert response.status_code == 200, response.text
    removed = response.json()["removed"]
    assert removed["passages"] == 1 and removed["propositions"] >= 2 and removed["alias_groups_repaired"] == 1
    assert store.graph_version() == version + 1

    after = store.counts()
    clean = store_for(clean_tenant).counts()
    for label in ("Document", "Passage", "Proposition", "Triple", "Relation"):
        assert after.get(label, 0) == clean.get(label, 0), (label, after, clean)
    # every entity of the clean run stays; the alias went with its document, its group with it
    assert after["Entity"] == clean["Entity"] and after["Entity"] < before["Entity"]
    assert after.get("rel:ALIAS_OF", 0) == clean.get("rel:ALIAS_OF", 0)

    listed = client.get("/v1/documents", headers=headers).json()
    assert [d["title"] for d in listed["documents"]] == ["Warsaw"]
    hits = client.post("/v1/query", headers=headers, json={"question": "Nobel Prize 1903 physicist", "k": 5}).json()
    assert {p["title"] for p in hits["passages"]} == {"Warsaw"}
    assert client.delete(f"/v1/documents/{curie_id}", headers=headers).status_code == 404


def test_delete_of_a_queued_document_supersedes_it(client, new_tenant, store_for):
    """DELETE of a document whose only version is queued is accepted (the newest write wins):
    the job of the queued version reads superseded; a second DELETE finds nothing (404)."""
    from pathweave_ingest import jobs

    tenant, headers = new_tenant()
    store = store_for(tenant)
    payload = jobs.payloads(tenant, [jobs.to_source({"title": "Pending", "text": "not yet ingested",
                                                     "source": "test"})])
    job_id = jobs.new_job_id()
    jobs.create_job(store, job_id, payload, 4, "inprocess")  # accepted, never enqueued: it stays queued
    response = client.delete(f"/v1/documents/{payload[0]['doc_id']}", headers=headers)
    assert response.status_code == 200 and response.json()["version"] == 2, response.text
    job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
    assert job["documents"][0]["status"] == "superseded" and job["documents"][0]["superseded_by"] == 2
    assert client.delete(f"/v1/documents/{payload[0]['doc_id']}", headers=headers).status_code == 404


def test_health_ready_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready" and ready.json()["queue"] == "inprocess"
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert "pathweave_http_requests_total" in text and 'route="/readyz"' in text
    assert "pathweave_ready 1.0" in text and "pathweave_reasoning_records_failed " in text


def test_openapi_is_complete(client):
    schema = client.get("/openapi.json").json()
    operations = {(method.upper(), path): op for path, item in schema["paths"].items() for method, op in item.items()}
    assert set(operations) == {
        ("POST", "/v1/documents"), ("GET", "/v1/jobs/{job_id}"), ("POST", "/v1/jobs/requeue"), ("GET", "/v1/documents"),
        ("DELETE", "/v1/documents/{doc_id}"), ("GET", "/v1/documents/{doc_id}"), ("PATCH", "/v1/documents/{doc_id}/acl"),
        ("PUT", "/v1/documents/{external_id}"), ("POST", "/v1/query"),
        ("GET", "/v1/queries"), ("GET", "/v1/queries/{query_id}"), ("GET", "/healthz"), ("GET", "/readyz"),
        ("GET", "/metrics")}
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    for (method, path), op in operations.items():
        assert op.get("summary"), (method, path)
        if path.startswith("/v1/"):
            assert op["security"] == [{"HTTPBearer": []}]
            for code in ("401", "429"):
                assert "application/problem+json" in op["responses"][code]["content"], (method, path, code)
    for path in ("/v1/documents", "/v1/query"):
        body = operations[("POST", path)]["requestBody"]["content"]
        assert body["application/json"]["examples"]
    assert "multipart/form-data" in operations[("POST", "/v1/documents")]["requestBody"]["content"]
    put = operations[("PUT", "/v1/documents/{external_id}")]["requestBody"]["content"]
    assert put["application/json"]["examples"] and "multipart/form-data" in put
    assert ".pdf" in json.dumps(operations[("POST", "/v1/documents")]) and ".docx" in json.dumps(put)
    schemas = schema["components"]["schemas"]
    for name in ("QueryRequest", "QueryResponse", "SubmitResponse", "JobResponse", "ReasoningRecord", "DeleteResponse",
                 "DocumentsRequest", "DocumentPut", "QueryList", "DocumentText"):
        assert schemas[name].get("examples"), name


def test_metrics_report_the_query_caches(client, new_tenant, ingest, docs):
    """``/metrics`` exports what the query caches hold (node rows, their approximate bytes,
    the topologies' passages), so an operator can tell a bounded cache filling from a leak."""
    _, headers = new_tenant("cache-metrics")
    assert ingest(headers, docs["core"])["status"] == "done"
    assert client.post("/v1/query", headers=headers, json={"question": "Where was Marie Curie born?"}).status_code == 200
    from prometheus_client.parser import text_string_to_metric_families

    gauges = {family.name: family.samples[0].value for family in text_string_to_metric_families(
        client.get("/metrics").text) if family.name.startswith(("pathweave_node_cache_", "pathweave_topology_"))}
    assert gauges["pathweave_node_cache_rows"] >= 1
    assert gauges["pathweave_node_cache_bytes"] >= 2000 * gauges["pathweave_node_cache_rows"] / 4  # vectors ~2 KB
    assert gauges["pathweave_topology_passages"] >= len(docs["core"])
    assert gauges["pathweave_topology_entities"] >= 1
    assert gauges["pathweave_topology_tenants"] >= 1
    assert gauges["pathweave_topology_bytes"] >= 240 * (gauges["pathweave_topology_passages"]
                                                         + gauges["pathweave_topology_entities"])
