"""Defects found when the running service was attacked (issue 15): each test failed
before its fix. Real app, real store server, real models, real uvicorn where the HTTP
parser is involved."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from waiting import wait_until


def assert_problem(response, status: int, *words: str) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["status"] == status and body["title"] and body["type"].startswith("urn:pathweave:problem:")
    for word in words:
        assert word.lower() in body["detail"].lower(), (word, body["detail"])
    return body

LONE_SURROGATE_JSONL = b'{"title":"x","text":"a \\ud800 b"}\n'
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"


@pytest.fixture()
def quiet_tenant(new_tenant, store_for):
    tenant, headers = new_tenant("hard")
    yield tenant, headers
    assert store_for(tenant).counts() == {}, "a rejected request wrote to the graph"


# ---------------------------------------------------------------------------- 1. lone surrogates


@pytest.mark.parametrize("name,content", [
    ("a.jsonl", LONE_SURROGATE_JSONL),
    ("a.json", b'[{"title":"x","text":"a \\ud800 b"}]'),
    ("a.json", b'{"title":"\\udfff","text":"fine text"}'),
])
def test_lone_surrogate_upload_is_422(client, quiet_tenant, name, content):
    _, headers = quiet_tenant
    response = client.post("/v1/documents", headers=headers, files=[("files", (name, content, "application/json"))])
    body = assert_problem(response, 422, "surrogate")
    assert body["errors"]


def test_lone_surrogate_json_body_is_422_too(client, quiet_tenant):
    _, headers = quiet_tenant
    for document in ('{"title":"x","text":"a \\ud800 b"}', '{"title":"\\ud800","text":"fine"}'):
        response = client.post("/v1/documents", headers={**headers, "Content-Type": "application/json"},
                               content=('{"documents": [' + document + ']}').encode())
        assert_problem(response, 422)


def test_lone_surrogate_in_a_jsonl_file_is_a_load_error(tmp_path):
    from pathweave_ingest.loaders import load_path

    (tmp_path / "a.jsonl").write_bytes(LONE_SURROGATE_JSONL + b'{"title":"y","text":"fine"}\n')
    docs, errors = load_path(tmp_path, 10_000)
    assert [d.title for d in docs] == ["y"]
    assert len(errors) == 1 and "surrogate" in errors[0].reason


# ---------------------------------------------------------------------------- 4. re-submitting running documents


def test_resubmitting_a_running_document_queues_a_newer_version(client, new_tenant, store_for, wait):
    """A document another worker is running, submitted again, is accepted as the next version
    and enqueued (never left to the running one, whose result would be the older write): the
    running version cannot finish as done any more, the new job runs to done."""
    from pathweave_ingest import jobs, lifecycle

    tenant, headers = new_tenant("resub")
    store = store_for(tenant)
    doc = {"title": "Crasher", "text": "Crasher is a document whose worker is still running it."}
    payload = jobs.payloads(tenant, [jobs.to_source({**doc, "source": "test"})])
    first = jobs.new_job_id()
    [running] = jobs.create_job(store, first, payload, 4, "celery").to_enqueue
    assert [d["doc_id"] for d in lifecycle.claim(store, [running], (), "elsewhere:1", lease_s=600)] == [running["doc_id"]]

    response = client.post("/v1/documents", headers=headers, json={"documents": [doc]})
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["enqueued"] == 1 and body["documents"][0]["version"] == running["version"] + 1
    job = wait(headers, body["job_id"])
    assert job["status"] == "done" and job["documents"][0]["version"] == running["version"] + 1
    assert lifecycle.finish(store, [{"doc_id": running["doc_id"], "version": running["version"],
                                     "finished_at": jobs.now_iso(), "seconds": 0.0, "passages": 0,
                                     "propositions": 0, "entities": 0, "triples": 0}]) == set()
    old = client.get(f"/v1/jobs/{first}", headers=headers).json()
    assert old["documents"][0]["status"] == "superseded"


# ---------------------------------------------------------------------------- 5. auth throttling


@pytest.fixture()
def throttled_app(settings, api_settings, worker_settings, runtime, keys):
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    app = create_app(settings, api_settings.model_copy(update={
        "auth_failures_per_key": 3, "auth_failures_per_address": 8, "auth_failure_window_s": 60.0,
        "auth_max_concurrent_kdf": 2}), worker_settings, runtime=runtime, keys=keys)
    return app, TestClient(app)


def test_failed_authentication_is_throttled_per_key_id(throttled_app, keys):
    app, client = throttled_app
    token, record = keys.create("throttled", "tests", 0)
    good = {"Authorization": f"Bearer {token}"}
    assert client.get("/v1/documents", headers=good).status_code == 200  # verified once: cached
    wrong = {"Authorization": f"Bearer {token[:-4]}{'AAAA' if not token.endswith('AAAA') else 'BBBB'}"}
    assert [client.get("/v1/documents", headers=wrong).status_code for _ in range(3)] == [401, 401, 401]
    refused = client.get("/v1/documents", headers=wrong)
    body = assert_problem(refused, 429, "failed authentication")
    retry_after = int(refused.headers["retry-after"])
    assert 1 <= retry_after <= 60 and f"retry in {retry_after} s" in body["detail"]
    # the key's owner, verified before, is not locked out by someone guessing its secret
    assert client.get("/v1/documents", headers=good).status_code == 200


def test_failed_authentication_is_throttled_per_client_address(throttled_app):
    _, client = throttled_app
    statuses = [client.get("/v1/documents", headers={"Authorization": f"Bearer pw_{i:016x}_{'A' * 43}"}).status_code
                for i in range(10)]
    assert statuses[:8] == [401] * 8 and statuses[8:] == [429, 429], statuses


def test_a_forwarded_address_from_an_untrusted_peer_is_ignored(settings, api_settings, worker_settings, runtime,
                                                                keys):
    """Only a trusted proxy names the client: a client that sends X-Forwarded-For itself
    (here from the test client's address, not the trusted 10.0.0.1) is still counted as
    itself, so it cannot spread its failures over made-up addresses."""
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    app = create_app(settings, api_settings.model_copy(update={
        "auth_failures_per_address": 8, "auth_failure_window_s": 60.0, "trusted_proxies": "10.0.0.1"}),
        worker_settings, runtime=runtime, keys=keys)
    client = TestClient(app)
    statuses = [client.get("/v1/documents", headers={"Authorization": f"Bearer pw_{i:016x}_{'B' * 43}",
                                                     "X-Forwarded-For": f"192.0.2.{i}"}).status_code
                for i in range(10)]
    assert statuses[:8] == [401] * 8 and statuses[8:] == [429, 429], statuses


def test_concurrent_kdf_runs_are_bounded(throttled_app, keys):
    from argon2 import PasswordHasher

    app, client = throttled_app
    store = app.state.services.keys
    running, peak, lock = [0], [0], threading.Lock()
    real_verify = PasswordHasher.verify

    class Counting(PasswordHasher):
        def verify(self, hash, password):  # noqa: A002 - argon2's name
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            try:
                time.sleep(0.2)  # a costly KDF run
                return real_verify(self, hash, password)
            finally:
                with lock:
                    running[0] -= 1

    saved = store._hasher
    store._hasher = Counting(time_cost=1, memory_cost=1024, parallelism=1)
    tokens = [keys.create("kdf", "tests", 0)[0] for _ in range(8)]
    results: list[int] = []
    try:
        threads = [threading.Thread(target=lambda t=t: results.append(
            client.get("/v1/documents", headers={"Authorization": f"Bearer {t}"}).status_code)) for t in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        store._hasher = saved
    assert peak[0] <= 2, peak
    assert sorted(set(results)) <= [200, 429] and results.count(200) >= 2, results


# ---------------------------------------------------------------------------- 7. no client-chosen redirects


@pytest.mark.parametrize("path", ["/v1/jobs/abc/", "/v1/documents/", "/v1/query/", "/healthz/"])
def test_no_redirect_to_the_client_chosen_host(client, path):
    response = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert not 300 <= response.status_code < 400, (response.status_code, response.headers)
    assert "evil.example" not in response.headers.get("location", "")
    assert response.headers["content-type"].startswith("application/problem+json")


# ---------------------------------------------------------------------------- 8. input strictness


@pytest.mark.parametrize("text", [ZERO_WIDTH, " \u200b \n\u00ad\t"])
def test_zero_width_only_text_is_rejected(client, quiet_tenant, text):
    _, headers = quiet_tenant
    assert_problem(client.post("/v1/documents", headers=headers, json={"documents": [{"text": text}]}), 422, "empty")
    assert_problem(client.post("/v1/documents", headers=headers, files=[
        ("files", ("z.txt", text.encode(), "text/plain"))]), 422, "visible")
    assert_problem(client.post("/v1/documents", headers=headers, files=[
        ("files", ("z.jsonl", json.dumps({"text": text}).encode(), "application/json"))]), 422, "empty")
    assert_problem(client.post("/v1/query", headers=headers, json={"question": text}), 422, "empty")
    # PUT holds the same rule as POST (one validator): JSON and a file alike
    assert_problem(client.put("/v1/documents/z-1", headers=headers, json={"title": "Z", "text": text}), 422, "empty")
    assert_problem(client.put("/v1/documents/z-1", headers=headers, files=[
        ("files", ("z.txt", text.encode(), "text/plain"))]), 422, "visible")


@pytest.mark.parametrize("payload", [{"question": "q", "k": "5"}, {"question": "q", "k": True},
                                     {"question": "q", "k": [5]}, {"question": "q", "token_budget": "100"},
                                     {"question": "q", "token_budget": False}])
def test_query_numbers_are_strict(client, quiet_tenant, payload):
    _, headers = quiet_tenant
    assert_problem(client.post("/v1/query", headers=headers, json=payload), 422)


def test_integral_numbers_are_integers_as_the_schema_says(client, new_tenant):
    _, headers = new_tenant("int")
    response = client.post("/v1/query", headers=headers, json={"question": "Where is Warsaw?", "k": 3.0})
    assert response.status_code == 200, response.text


def test_unknown_query_parameters_are_rejected(client, quiet_tenant):
    _, headers = quiet_tenant
    assert_problem(client.get("/v1/documents?limit=1&stauts=done", headers=headers), 422, "stauts")


def test_documents_fields_are_strict(client, quiet_tenant):
    _, headers = quiet_tenant
    assert_problem(client.post("/v1/documents", headers=headers, json={"documents": [{"text": "ok", "title": 5}]}),
                   422, "title")


def test_rate_limit_body_agrees_with_retry_after(settings, api_settings, worker_settings, runtime, keys):
    from fastapi.testclient import TestClient

    from pathweave_api.app import create_app

    limited = create_app(settings, api_settings.model_copy(update={"rate_limit_per_s": 1.0,
                                                                    "rate_limit_burst": 1}),
                         worker_settings, runtime=runtime, keys=keys)
    token, _ = keys.create("ratelimited", "tests")
    client = TestClient(limited)
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get("/v1/documents", headers=headers).status_code == 200
    # the bucket refills in 1 s: the first request's own time (a store read) cannot refill it
    refused = client.get("/v1/documents", headers=headers)
    body = assert_problem(refused, 429)
    assert refused.headers["retry-after"] == "1" and "retry in 1 s" in body["detail"], body["detail"]


@pytest.fixture(scope="module")
def uvicorn_url(app):
    """The real app behind a real uvicorn server with the protocol `pathweave serve` uses."""
    import uvicorn

    from pathweave.servers.processes import free_port
    from pathweave_api.protocols import http_protocol

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
                                           http=http_protocol()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, f"uvicorn started on port {port}", interval_s=0.05)
    yield ("127.0.0.1", port)
    server.should_exit = True
    thread.join(10)


def _raw(address, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("length", [b"abc", b"-1", b"1e3", b"5, 6"])
def test_malformed_content_length_gets_a_problem_document(uvicorn_url, length):
    status, headers, body = _raw(uvicorn_url, b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                                              b"\r\nContent-Length: " + length + b"\r\nConnection: close\r\n\r\n{}")
    assert status == 400
    assert headers["content-type"].startswith("application/problem+json"), headers
    problem = json.loads(body)
    assert problem["status"] == 400 and problem["type"].startswith("urn:pathweave:problem:") and problem["detail"]


# ---------------------------------------------------------------------------- 9. docs and behaviour agree


def test_unterminated_multipart_is_400(client, quiet_tenant):
    _, headers = quiet_tenant
    broken = b"--XYZ\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.txt\"\r\n\r\nabc"
    response = client.post("/v1/documents", headers={**headers, "Content-Type": "multipart/form-data; boundary=XYZ"},
                           content=broken)
    assert_problem(response, 400, "multipart")


def test_too_many_files_is_422(client, quiet_tenant, api_settings):
    _, headers = quiet_tenant
    files = [("files", (f"f{i}.txt", b"x", "text/plain")) for i in range(api_settings.max_documents + 1)]
    assert_problem(client.post("/v1/documents", headers=headers, files=files), 422, "too many")


def test_options_lists_every_method_of_the_path(client):
    response = client.options("/v1/documents")
    assert_problem(response, 405)
    assert {m.strip() for m in response.headers["allow"].split(",")} >= {"GET", "POST"}
    response = client.request("PATCH", "/v1/documents/doc:0123456789abcdef01234567")
    assert_problem(response, 405)
    assert {"DELETE", "GET", "PUT"} <= {m.strip() for m in response.headers["allow"].split(",")}


def test_schema_types_match_the_handler(client):
    """The schema states what the handler enforces: visible text without NUL, integer k
    (no "5" or true), the configured document limit."""
    import re

    schema = client.get("/openapi.json").json()["components"]["schemas"]
    text = schema["DocumentIn"]["properties"]["text"]
    question = schema["QueryRequest"]["properties"]["question"]
    for spec in (text, question):
        pattern = re.compile(spec["pattern"])
        assert pattern.search("Marie Curie") and not pattern.search("\u200b \u200d")
        assert not pattern.search("a\x00b")
    assert "pattern" in schema["DocumentIn"]["properties"]["title"]
    assert schema["QueryRequest"]["properties"]["k"]["type"] == "integer"
    budget = next(s for s in schema["QueryRequest"]["properties"]["token_budget"]["anyOf"] if s["type"] == "integer")
    api = client.app.state.services.api
    assert (budget["minimum"], budget["maximum"]) == (api.min_token_budget, api.max_token_budget)
    documents = schema["DocumentsRequest"]["properties"]["documents"]
    assert documents["maxItems"] == client.app.state.services.api.max_documents
