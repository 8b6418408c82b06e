"""Key scopes on every authenticated route of the real app: a ``query`` key may query and
read reasoning records only; an ``ingest`` key may also submit, replace and delete
documents and read jobs; an ``admin`` key may do everything. A key without the scope gets
403 ``insufficient-scope`` with a problem document, and nothing changes."""

from __future__ import annotations

import pytest

from pathweave_api.keys import SCOPES

HEX32 = "0" * 32


def _routes(doc_id: str, job_id: str, query_id: str) -> list[tuple[str, str, str, dict, str]]:
    """(method, route template, path, request keywords, the scope it needs) of every
    authenticated route."""
    new = {"json": {"documents": [{"title": "Scoped", "text": "A scoped key wrote this document."}]}}
    return [
        ("POST", "/v1/query", "/v1/query", {"json": {"question": "Where was Marie Curie born?", "k": 1}}, "query"),
        ("GET", "/v1/queries", "/v1/queries", {}, "query"),
        ("GET", "/v1/queries/{query_id}", f"/v1/queries/{query_id}", {}, "query"),
        ("POST", "/v1/documents", "/v1/documents", new, "ingest"),
        ("GET", "/v1/documents", "/v1/documents", {}, "ingest"),
        ("GET", "/v1/documents/{doc_id}", f"/v1/documents/{doc_id}", {}, "ingest"),
        ("PUT", "/v1/documents/{external_id}", "/v1/documents/scoped-1",
         {"json": {"title": "Scoped", "text": "Replaced text."}}, "ingest"),
        ("PATCH", "/v1/documents/{doc_id}/acl", f"/v1/documents/{doc_id}/acl", {"json": {"acl": None}}, "ingest"),
        ("DELETE", "/v1/documents/{doc_id}", f"/v1/documents/{doc_id}", {}, "ingest"),
        ("GET", "/v1/jobs/{job_id}", f"/v1/jobs/{job_id}", {}, "ingest"),
        ("POST", "/v1/jobs/requeue", "/v1/jobs/requeue", {}, "admin"),
    ]


def test_every_route_with_every_scope(client, keys, ingest, docs, app):
    tenant = "scopes"
    tokens = {scope: keys.create(tenant, f"scope {scope}", 0, scope)[0] for scope in SCOPES}
    headers = {scope: {"Authorization": f"Bearer {token}"} for scope, token in tokens.items()}
    job = ingest(headers["admin"], docs["core"])
    assert job["status"] == "done"
    doc_id = job["documents"][0]["doc_id"]
    query_id = client.post("/v1/query", headers=headers["admin"], json={"question": "Marie Curie?"}).json()["query_id"]
    routes = _routes(doc_id, job["job_id"], query_id)
    # every authenticated route of the app is here
    authenticated = {(method.upper(), path) for path, item in app.openapi()["paths"].items()
                     if path.startswith("/v1/") for method in item}
    assert authenticated == {(method, template) for method, template, _, _, _ in routes}
    for method, _, path, kwargs, needed in routes:
        for scope in SCOPES:
            response = client.request(method, path, headers=headers[scope], **kwargs)
            allowed = SCOPES.index(scope) >= SCOPES.index(needed)
            if allowed:
                assert response.status_code != 403, (method, path, scope, response.text)
            else:
                assert response.status_code == 403, (method, path, scope, response.text)
                problem = response.json()
                assert response.headers["content-type"].startswith("application/problem+json")
                assert problem["type"].endswith("insufficient-scope") and needed in problem["detail"]
                if method == "DELETE":  # a refused write changes nothing
                    assert client.get(path, headers=headers["admin"]).status_code == 200
    # the ingest key's DELETE, after the query key's refusal, removed it
    assert client.get(f"/v1/documents/{doc_id}", headers=headers["admin"]).status_code == 404
    listed = client.get("/v1/documents", headers=headers["admin"]).json()
    assert "Scoped" in {d["title"] for d in listed["documents"]}  # the allowed submissions were accepted


@pytest.mark.parametrize("scope", SCOPES)
def test_the_openapi_schema_documents_403(app, scope):
    spec = app.openapi()
    assert "403" in spec["paths"]["/v1/query"]["post"]["responses"]
    assert "403" in spec["paths"]["/v1/documents"]["post"]["responses"]
