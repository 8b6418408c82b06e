"""Bad inputs on every endpoint: 4xx problem details with a clear message, never a
stack trace, and nothing written to the graph."""

from __future__ import annotations

import json

import pytest

INJECTIONS = [
    "' OR 1=1 --",
    "x'}) MATCH (n) DETACH DELETE n //",
    "$tenant",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "doc:0000' OR '1'='1",
]
JOB_ID = "0123456789abcdef0123456789abcdef"
DOC_ID = "doc:0123456789abcdef01234567"


def assert_problem(response, status: int, *words: str) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["status"] == status and body["title"] and body["type"].startswith("urn:pathweave:problem:")
    assert body["detail"] and "Traceback" not in response.text and 'File "' not in response.text
    for word in words:
        assert word.lower() in body["detail"].lower(), (word, body["detail"])
    return body


@pytest.fixture()
def quiet_tenant(new_tenant, store_for):
    """A fresh tenant; asserts at the end that nothing at all was written for it."""
    tenant, headers = new_tenant("bad")
    yield tenant, headers
    assert store_for(tenant).counts() == {}, "a rejected request wrote to the graph"


# ---------------------------------------------------------------------------- auth

ENDPOINTS = [
    ("POST", "/v1/documents", {"json": {"documents": [{"text": "hello"}]}}),
    ("GET", f"/v1/jobs/{JOB_ID}", {}),
    ("GET", "/v1/documents", {}),
    ("DELETE", f"/v1/documents/{DOC_ID}", {}),
    ("POST", "/v1/query", {"json": {"question": "hello"}}),
    ("GET", f"/v1/queries/{JOB_ID}", {}),
]


@pytest.mark.parametrize("method,path,kwargs", ENDPOINTS)
@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer nonsense", "Basic dXNlcjpwYXNz",
                                  "Bearer pw_0123456789abcdef_" + "A" * 43, "Bearer ' OR 1=1 --"])
def test_missing_or_invalid_key(client, method, path, kwargs, auth):
    headers = {"Authorization": auth} if auth else {}
    body = assert_problem(client.request(method, path, headers=headers, **kwargs), 401)
    assert "api key" in body["detail"].lower()


def test_wrong_secret_and_revoked_key(client, keys):
    token, record = keys.create("revoked-tenant", "tests", 0)
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get("/v1/documents", headers=headers).status_code == 200
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert_problem(client.get("/v1/documents", headers={"Authorization": f"Bearer {wrong}"}), 401, "invalid")
    assert keys.revoke(record.key_id)
    assert_problem(client.get("/v1/documents", headers=headers), 401, "revoked")


def test_rate_limit_per_key(settings, api_settings, worker_settings, runtime, keys):
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    limited = create_app(settings, api_settings.model_copy(update={"rate_limit_per_s": 0.2,
                                                                    "rate_limit_burst": 3}),
                         worker_settings, runtime=runtime, keys=keys)
    token, _ = keys.create("ratelimited", "tests")  # default (settings) rate
    other, _ = keys.create("ratelimited", "tests")
    client = TestClient(limited)
    headers = {"Authorization": f"Bearer {token}"}
    assert [client.get("/v1/documents", headers=headers).status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get("/v1/documents", headers=headers)
    assert_problem(refused, 429, "rate limit")
    assert int(refused.headers["retry-after"]) >= 1
    assert client.get("/v1/documents", headers={"Authorization": f"Bearer {other}"}).status_code == 200


# ---------------------------------------------------------------------------- POST /v1/documents

JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.mark.parametrize("content,content_type,status,words", [
    (b"", "application/json", 400, ["empty"]),
    (b"   \n", "application/json", 400, ["empty"]),
    (b"{\"documents\": [", "application/json", 400, ["malformed JSON"]),
    (b"{'documents': []}", "application/json", 400, ["malformed JSON"]),
    (b"\xff\xfe\x00\x01binary\x00", "application/json", 400, ["UTF-8"]),
    (b'{"documents": [{"text": "caf\xe9"}]}', "application/json", 400, ["UTF-8"]),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "image/png", 415, ["content type"]),
    (b"hello", "text/plain", 415, ["content type"]),
    (b"{}", "application/json", 422, ["documents"]),
    (b"[]", "application/json", 422, ["invalid"]),
    (b"null", "application/json", 422, ["invalid"]),
    (json.dumps({"documents": []}).encode(), "application/json", 422, ["documents"]),
    (json.dumps({"documents": [{"title": "x"}]}).encode(), "application/json", 422, ["text"]),
    (json.dumps({"documents": [{"text": ""}]}).encode(), "application/json", 422, ["text"]),
    (json.dumps({"documents": [{"text": "  \n\t "}]}).encode(), "application/json", 422, ["empty"]),
    (json.dumps({"documents": [{"text": "nul\u0000byte"}]}).encode(), "application/json", 422, ["NUL"]),
    (json.dumps({"documents": [{"text": 42}]}).encode(), "application/json", 422, ["text"]),
    (json.dumps({"documents": [{"text": "ok", "extra": 1}]}).encode(), "application/json", 422, ["extra"]),
    (json.dumps({"documents": "not a list"}).encode(), "application/json", 422, ["documents"]),
    (b"[" * 5000 + b"]" * 5000, "application/json", 400, ["malformed JSON"]),
])
def test_documents_bad_json(client, quiet_tenant, content, content_type, status, words):
    _, headers = quiet_tenant
    response = client.post("/v1/documents", headers={**headers, "Content-Type": content_type}, content=content)
    assert_problem(response, status, *words)


def test_documents_oversized_body(client, quiet_tenant, api_settings):
    _, headers = quiet_tenant
    text = "word " * (api_settings.max_body_bytes // 5 + 10)
    response = client.post("/v1/documents", headers=headers, json={"documents": [{"text": text}]})
    assert_problem(response, 413, "exceeds the limit")


def test_documents_oversized_streamed_body(client, quiet_tenant, api_settings):
    _, headers = quiet_tenant

    def chunks():
        yield b'{"documents": [{"text": "'
        for _ in range(api_settings.max_body_bytes // 1000 + 5):
            yield b"x" * 1000
        yield b'"}]}'

    response = client.post("/v1/documents", headers={**headers, **JSON_HEADERS}, content=chunks())
    assert_problem(response, 413, "exceeds the limit")


def test_too_many_documents(client, quiet_tenant, api_settings):
    _, headers = quiet_tenant
    many = [{"text": f"d{i}"} for i in range(1001)]
    assert_problem(client.post("/v1/documents", headers=headers, json={"documents": many}), 422, "documents")


@pytest.mark.parametrize("files,words", [
    ([("files", ("a.txt", b"", "text/plain"))], ["empty"]),
    ([("files", ("a.txt", b"text\x00with\x00nul" * 10, "text/plain"))], ["binary"]),
    ([("files", ("a.txt", "caf\u00e9".encode("latin-1"), "text/plain"))], ["UTF-8"]),
    ([("files", ("a.pdf", b"%PDF-1.4 ...", "application/pdf"))], ["a.pdf", "corrupt PDF"]),
    ([("files", ("a.doc", b"old word", "application/msword"))], ["unsupported file type"]),
    ([("files", ("a", b"no extension", "text/plain"))], ["unsupported file type"]),
    ([("files", ("a.json", b"{not json", "application/json"))], ["invalid JSON"]),
    ([("files", ("a.json", b'{"title": "x"}', "application/json"))], ["text"]),
    ([("files", ("a.jsonl", b'{"text": "ok"}\n{broken\n', "application/json"))], ["line 2"]),
    ([("files", ("good.txt", b"A good document.", "text/plain")), ("files", ("bad.txt", b"", "text/plain"))],
     ["bad.txt", "nothing was ingested"]),
    ([("files", ("../../etc/passwd.txt", b"", "text/plain"))], ["passwd.txt"]),
])
def test_documents_bad_files(client, quiet_tenant, files, words):
    _, headers = quiet_tenant
    body = assert_problem(client.post("/v1/documents", headers=headers, files=files), 422, *words)
    assert body["errors"]


def test_documents_bad_multipart(client, quiet_tenant):
    _, headers = quiet_tenant
    assert_problem(client.post("/v1/documents", headers=headers, files=[
        ("other", ("x.txt", b"x", "text/plain"))]), 422, "unknown form field")
    assert_problem(client.post("/v1/documents", headers=headers, data={"files": "text value"},
                               files=[("files", ("x.txt", b"fine", "text/plain"))]), 422, "file upload")
    broken = b"--XYZ\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.txt\"\r\n\r\nabc"
    response = client.post("/v1/documents", headers={**headers, "Content-Type": "multipart/form-data; boundary=XYZ"},
                           content=broken)
    assert 400 <= response.status_code < 500 and response.headers["content-type"].startswith("application/problem+json")
    no_boundary = client.post("/v1/documents", headers={**headers, "Content-Type": "multipart/form-data"},
                              content=b"abc")
    assert 400 <= no_boundary.status_code < 500


# ---------------------------------------------------------------------------- POST /v1/query


@pytest.mark.parametrize("payload,status,words", [
    (b"", 400, ["empty"]),
    (b"{\"question\": ", 400, ["malformed JSON"]),
    (b"\xc3\x28", 400, ["UTF-8"]),
    (b"{}", 422, ["question"]),
    (json.dumps({"question": ""}).encode(), 422, ["question"]),
    (json.dumps({"question": "   "}).encode(), 422, ["empty"]),
    (json.dumps({"question": "a\u0000b"}).encode(), 422, ["NUL"]),
    (json.dumps({"question": "x" * 2001}).encode(), 422, ["question"]),
    (json.dumps({"question": "q", "k": 0}).encode(), 422, ["k"]),
    (json.dumps({"question": "q", "k": 51}).encode(), 422, ["k"]),
    (json.dumps({"question": "q", "k": "five"}).encode(), 422, ["k"]),
    (json.dumps({"question": "q", "k": 2.5}).encode(), 422, ["k"]),
    (json.dumps({"question": "q", "mode": "sql"}).encode(), 422, ["mode"]),
    (json.dumps({"question": "q", "token_budget": 0}).encode(), 422, ["token_budget"]),
    (json.dumps({"question": "q", "token_budget": 10**9}).encode(), 422, ["token_budget"]),
    (json.dumps({"question": "q", "selection_method": "magic"}).encode(), 422, ["selection_method"]),
    (json.dumps({"question": "q", "context_style": "prose"}).encode(), 422, ["context_style"]),
    (json.dumps({"question": "q", "cypher": "MATCH (n) RETURN n"}).encode(), 422, ["extra"]),
    (json.dumps({"question": ["a", "b"]}).encode(), 422, ["question"]),
    (json.dumps(["question"]).encode(), 422, ["invalid"]),
])
def test_query_bad_inputs(client, quiet_tenant, payload, status, words):
    _, headers = quiet_tenant
    assert_problem(client.post("/v1/query", headers={**headers, **JSON_HEADERS}, content=payload), status, *words)


def test_query_bad_content_type_and_size(client, quiet_tenant, api_settings):
    _, headers = quiet_tenant
    assert_problem(client.post("/v1/query", headers={**headers, "Content-Type": "text/plain"}, content=b"q"), 415)
    assert_problem(client.post("/v1/query", headers=headers, data={"question": "q"}), 415)
    big = {"question": "q", "padding": "x" * api_settings.max_small_body_bytes}
    assert_problem(client.post("/v1/query", headers=headers, json=big), 413, "exceeds the limit")


@pytest.mark.parametrize("question", INJECTIONS)
def test_injection_in_question_is_just_text(client, new_tenant, ingest, docs, store_for, question):
    victim, victim_headers = new_tenant("victim")
    ingest(victim_headers, docs["core"][:1])
    before = store_for(victim).counts()
    tenant, headers = new_tenant()
    result = client.post("/v1/query", headers=headers, json={"question": question})
    assert result.status_code == 200 and result.json()["passages"] == []
    record = client.get(f"/v1/queries/{result.json()['query_id']}", headers=headers).json()
    assert record["text"] == question.strip()
    assert store_for(victim).counts() == before
    assert {k for k in store_for(tenant).counts()} <= {"Query"}


def test_injection_in_document_is_stored_literally(client, new_tenant, ingest, store_for):
    tenant, headers = new_tenant()
    text = "Robert'); MATCH (n) DETACH DELETE n; // wrote $tenant and {x: 1} on the wall."
    job = ingest(headers, [{"title": "x'}) DETACH DELETE n //", "text": text}])
    assert job["status"] == "done"
    rows = store_for(tenant).run("snapshot_passages")
    assert [r["text"] for r in rows] == [text] and rows[0]["title"] == "x'}) DETACH DELETE n //"


# ---------------------------------------------------------------------------- ids


@pytest.mark.parametrize("method,template", [("GET", "/v1/jobs/{}"), ("DELETE", "/v1/documents/{}"),
                                             ("GET", "/v1/queries/{}")])
@pytest.mark.parametrize("bad_id", INJECTIONS[:2] + ["", "ABCDEF", "doc:" + "g" * 24, "0" * 33, "%00", "\u00e9"])
def test_malformed_ids(client, quiet_tenant, method, template, bad_id):
    _, headers = quiet_tenant
    response = client.request(method, template.format(bad_id), headers=headers)
    assert response.status_code in (404, 405, 422), response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in response.text


@pytest.mark.parametrize("method,path", [("GET", f"/v1/jobs/{JOB_ID}"), ("DELETE", f"/v1/documents/{DOC_ID}"),
                                         ("GET", f"/v1/queries/{JOB_ID}")])
def test_unknown_ids(client, quiet_tenant, method, path):
    _, headers = quiet_tenant
    assert_problem(client.request(method, path, headers=headers), 404, "no ", "this tenant")


@pytest.mark.parametrize("query", ["limit=0", "limit=100000", "offset=-1", "status=bogus", "limit=abc",
                                   "status=' OR 1=1"])
def test_list_bad_query_params(client, quiet_tenant, query):
    _, headers = quiet_tenant
    assert_problem(client.get(f"/v1/documents?{query}", headers=headers), 422)


def test_unknown_route_and_method(client):
    assert_problem(client.get("/v1/nothing"), 404, "no route")
    assert_problem(client.put("/v1/query", json={}), 405, "not allowed")


# ---------------------------------------------------------------------------- query consistency


def test_query_consistency_bookmarks_are_checked(client, new_tenant, base_store):
    """``consistency``: bookmarks a job answered. Too many, or not text, is a 422 on every
    store; a string Neo4j does not know as a bookmark is a 422 there (ArcadeDB's single
    server needs none and ignores them)."""
    _, headers = new_tenant("bookmarks")
    ask = {"question": "Which river flows through Warsaw?", "k": 2}
    assert_problem(client.post("/v1/query", headers=headers, json={**ask, "consistency": ["b"] * 65}), 422,
                   "consistency")
    assert_problem(client.post("/v1/query", headers=headers, json={**ask, "consistency": [7]}), 422)
    for forged in (["not-a-bookmark"], ["0"]):  # Neo4j: a client error, and a database error
        answer = client.post("/v1/query", headers=headers, json={**ask, "consistency": forged})
        if base_store.backend.name == "neo4j":
            assert_problem(answer, 422, "bookmark")
        else:
            assert answer.status_code == 200, answer.text
