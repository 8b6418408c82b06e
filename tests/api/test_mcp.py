"""The MCP tools (issue 47) through the official SDK's own client, against the real store
and models: over streamable HTTP on the API served by uvicorn (``/mcp``, the caller's API
key), and over stdio (``pathweave mcp`` as a subprocess, the key in its environment). The
tools are listed; ``search`` answers what ``POST /v1/query`` answers for the same request,
``get_reasoning_record`` what ``GET /v1/queries/{id}`` answers; a key without the needed
scope, a missing key and a malformed input are refused with clear errors."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx
import pytest

from conftest import CORE_DOCS, served_app, wait_job

pytestmark = pytest.mark.arcadedb_only  # the service's interface; the stores are covered by the rest of the suite

TOOLS = {"search", "answer", "get_reasoning_record", "get_document", "list_documents", "ingest_text"}
QUESTION = {"question": "Where was the physicist who won the Nobel Prize in 1903 born?", "mode": "proprag", "k": 3,
            "token_budget": 200}


@pytest.fixture(scope="module")
def served(settings, api_settings, worker_settings, runtime):
    """The API on a real socket (``/mcp`` included): ``(base_url, key store)``."""
    with served_app(settings, api_settings, worker_settings, runtime, "mcp-api") as live:
        yield live


@pytest.fixture(scope="module")
def tenant_keys(served):
    """A fresh tenant with the core documents: ``(tenant, query key, ingest key)``."""
    import uuid

    base, keys = served
    tenant = f"mcp{uuid.uuid4().hex[:10]}"
    query_key, _ = keys.create(tenant, "tests", 0, scope="query")
    ingest_key, _ = keys.create(tenant, "tests", 0, scope="ingest")
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ingest_key}"}, timeout=60) as http:
        job = http.post("/v1/documents", json={"documents": CORE_DOCS}).json()
        wait_job(http, {}, job["job_id"])
    return tenant, query_key, ingest_key


def _call(server, calls, headers: dict | None = None):
    """Run ``calls(client)`` (a coroutine function) with the SDK's client connected to
    ``server`` (a URL, with ``headers`` on every request, or stdio parameters)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        if isinstance(server, str):
            import httpx2

            async with httpx2.AsyncClient(headers=headers or {}, timeout=120) as http:
                async with Client(streamable_http_client(server, http_client=http)) as client:
                    return await calls(client)
        async with Client(server, read_timeout_seconds=300) as client:
            return await calls(client)

    return asyncio.run(main())


def _result(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _same_retrieval(mine: dict, rest: dict) -> None:
    """The parts of two query responses that do not depend on the query's id or timing."""
    def untimed(value):
        return {k: v for k, v in value.items() if not k.endswith("_ms")} if isinstance(value, dict) else value

    for field in ("passages", "citations", "context", "seeds"):
        assert untimed(mine.get(field)) == untimed(rest.get(field)), field
    assert [[step["prop_id"] for step in path["steps"]] for path in mine["paths"]] == \
        [[step["prop_id"] for step in path["steps"]] for path in rest["paths"]]
    assert mine["passages"], "the question finds the core documents"


def test_http_tools_equal_the_rest_api_and_scopes_hold(served, tenant_keys):
    base, _ = served
    _, query_key, ingest_key = tenant_keys
    auth = {"Authorization": f"Bearer {query_key}"}

    async def calls(client):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        found = _result(await client.call_tool("search", QUESTION))
        record = _result(await client.call_tool("get_reasoning_record", {"query_id": found["query_id"]}))
        resource = await client.read_resource(f"pathweave://queries/{found['query_id']}")
        assert json.loads(resource.contents[0].text) == record
        refused = await client.call_tool("ingest_text", {"text": "Nothing gets written by a query key."})
        bad = await client.call_tool("search", {**QUESTION, "k": 0})
        unknown_mode = await client.call_tool("search", {**QUESTION, "mode": "telepathy"})
        return tools, found, record, refused, bad, unknown_mode

    tools, found, record, refused, bad, unknown_mode = _call(f"{base}/mcp", calls, auth)
    assert tools == TOOLS
    with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
        rest = http.post("/v1/query", json=QUESTION).json()
        rest_record = http.get(f"/v1/queries/{found['query_id']}").json()
    _same_retrieval(found, rest)
    assert record == rest_record
    assert refused.is_error and "403 insufficient-scope" in refused.content[0].text
    assert bad.is_error and "422" in bad.content[0].text and "k" in bad.content[0].text
    assert unknown_mode.is_error and "422" in unknown_mode.content[0].text

    # an ingest key reads documents; a query key may not
    async def documents(client):
        listed = _result(await client.call_tool("list_documents", {"limit": 10}))
        doc = _result(await client.call_tool("get_document", {"doc_id": listed["documents"][0]["doc_id"]}))
        return listed, doc
    listed, doc = _call(f"{base}/mcp", documents, {"Authorization": f"Bearer {ingest_key}"})
    assert listed["total"] == len(CORE_DOCS) and doc["passages"]


def test_an_unexpected_failure_is_told_as_rest_tells_it_never_with_its_own_text(served, tenant_keys, monkeypatch):
    """A tool whose work fails unexpectedly answers what the REST route answers (500
    ``internal-error`` and a request id, the traceback in the server log), not the exception's
    text. The failure is injected into the real retriever."""
    from pathweave.query.retriever import Retriever

    def broken(self, *args, **kwargs):
        raise RuntimeError("SECRET-7731 in /srv/pathweave/internal.py: password=hunter2")

    monkeypatch.setattr(Retriever, "query", broken)
    base, _ = served
    _, query_key, _ = tenant_keys
    auth = {"Authorization": f"Bearer {query_key}"}

    async def calls(client):
        return await client.call_tool("search", QUESTION)

    failed = _call(f"{base}/mcp", calls, auth)
    with httpx.Client(base_url=base, headers=auth, timeout=60) as http:
        rest = http.post("/v1/query", json=QUESTION)
    assert rest.status_code == 500 and "SECRET" not in rest.text
    assert failed.is_error and "500 internal-error: internal error (request " in failed.content[0].text
    assert "SECRET" not in failed.content[0].text and "hunter2" not in failed.content[0].text


def test_http_without_a_valid_key_is_refused_before_the_sdk(served):
    base, _ = served
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers, kind in (({}, "missing-api-key"), ({"Authorization": "Bearer pw_nope_nope"}, "invalid-api-key")):
        response = httpx.post(f"{base}/mcp", json=hello, headers={**headers, "Accept": "application/json, "
                                                                                       "text/event-stream"})
        assert response.status_code == 401 and response.json()["type"].endswith(kind)


def test_stdio_server_answers_as_the_key_in_its_environment(served, tenant_keys):
    from mcp.client.stdio import StdioServerParameters

    base, _ = served
    _, query_key, _ = tenant_keys
    params = StdioServerParameters(command=sys.executable, args=["-m", "pathweave_cli.main", "mcp"],
                                   env={**os.environ, "PATHWEAVE_API_KEY": query_key})

    async def calls(client):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        found = _result(await client.call_tool("search", QUESTION))
        record = _result(await client.call_tool("get_reasoning_record", {"query_id": found["query_id"]}))
        return tools, found, record

    tools, found, record = _call(params, calls)
    assert tools == TOOLS
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {query_key}"}, timeout=60) as http:
        rest = http.post("/v1/query", json=QUESTION).json()
        assert record == http.get(f"/v1/queries/{found['query_id']}").json()
    _same_retrieval(found, rest)
