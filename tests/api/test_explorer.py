"""The reasoning explorer (/ui): the real API served by uvicorn on a free port, driven by a
real headless Chromium (Debian ``chromium`` + ``chromium-driver``, installed by tools/test.sh)
through selenium. The rendered Cytoscape graph must have exactly the nodes and edges the
stored reasoning record calls for, and stored text must never become HTML."""

from __future__ import annotations

import os
import time
import uuid

from urllib.parse import unquote

import httpx
import pytest

from conftest import served_app

XSS = '<img src=x onerror="window.__pwned=1">'


def expected_graph(record: dict) -> tuple[set[str], set[str]]:
    """The node and edge ids the explorer draws for ``record`` (the rules of explorer.js)."""
    nodes: set[str] = {"query"}
    edges: set[str] = set()
    for path in record["paths"]:
        p = f"path:{path['path_id']}"
        nodes.add(p)
        edges.add(f"found:query->{p}")
        previous = None
        for step in path["steps"]:
            x = f"prop:{step['prop_id']}"
            nodes.add(x)
            if previous is None:
                edges.add(f"step:{p}->{x}")
            elif step["via"]:
                v = f"via:{step['via']}"
                nodes.add(v)
                edges.update({f"via:{previous}->{v}", f"via:{v}->{x}"})
            else:
                edges.add(f"jump:{previous}->{x}")
            previous = x
    for passage in record["passages"]:
        n = f"passage:{passage['passage_id']}"
        nodes.add(n)
        for prop in passage["states"]:
            nodes.add(f"prop:{prop}")
            edges.add(f"states:{n}->prop:{prop}")
    prefix = {"Passage": "passage", "Proposition": "prop"}
    for row in record["selected"]:
        n = f"{prefix.get(row['label'], 'entity')}:{row['id']}"
        nodes.add(n)
        edges.add(f"selected:query->{n}")
    tree = record.get("tree")
    if tree and tree["nodes"]:
        edges.add(f"tree:query->tree:{tree['nodes'][0]['node_id']}")
        for node in tree["nodes"]:
            t = f"tree:{node['node_id']}"
            nodes.add(t)
            for hit in node["passages"]:
                nodes.add(f"passage:{hit['passage_id']}")
                edges.add(f"retrieved:{t}->passage:{hit['passage_id']}")
            edges.update(f"child:{t}->tree:{child}" for child in node["children"])
    answer = record.get("answer")
    if answer:
        nodes.add("answer")
        edges.add("answered:query->answer")
        for cited in answer["cited"]:
            target = f"{'prop' if cited['label'] == 'Proposition' else 'passage'}:{cited['id']}"
            nodes.add(target)
            edges.add(f"cites:answer->{target}")
    return nodes, edges


@pytest.fixture(scope="module")
def live(settings, api_settings, worker_settings, runtime):
    """The API on a real socket: ``(base_url, key store)``."""
    with served_app(settings, api_settings, worker_settings, runtime, "explorer-api") as live:
        yield live


def _tenant(live) -> tuple[str, dict]:
    _, keys = live
    token, _ = keys.create(f"ui{uuid.uuid4().hex[:10]}", "explorer tests", 0)
    return token, {"Authorization": f"Bearer {token}"}


def _ingest(base: str, headers: dict, docs: list[dict]) -> None:
    response = httpx.post(f"{base}/v1/documents", headers=headers, json={"documents": docs}, timeout=60)
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    deadline = time.monotonic() + 180
    while True:
        job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
        if job["status"] not in ("queued", "running"):
            assert job["status"] == "done", job
            return
        assert time.monotonic() < deadline, job
        time.sleep(0.2)


def _query(base: str, headers: dict, timeout: float = 120, **body) -> dict:
    response = httpx.post(f"{base}/v1/query", headers=headers, json=body, timeout=timeout)
    assert response.status_code == 200, response.text
    record = httpx.get(f"{base}/v1/queries/{response.json()['query_id']}", headers=headers, timeout=60)
    assert record.status_code == 200, record.text
    return record.json()


def _wait_state(driver, states=("ready",), timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        state = driver.execute_script("return document.body && document.body.dataset.state")
        if state in states:
            return state
        if state == "error":
            raise AssertionError(driver.find_element("id", "status").text)
        assert time.monotonic() < deadline, f"page state {state!r}"
        time.sleep(0.1)


def _open_with_key(driver, url: str, token: str) -> None:
    driver.get(url)
    if _wait_state(driver, ("key", "ready")) == "key":
        driver.find_element("id", "key").send_keys(token)
        driver.find_element("css selector", "#key-form button[type=submit]").click()
    _wait_state(driver)


def _panel(driver, node_id: str) -> dict:
    return driver.execute_script(
        "window.cy.getElementById(arguments[0]).emit('tap');"
        "const t = (id) => document.getElementById(id);"
        "return {kind: t('panel-kind').textContent, text: t('panel-text').textContent,"
        "        doc_hidden: t('panel-doc').hidden, doc_href: t('panel-doc-link').getAttribute('href'),"
        "        doc_text: t('panel-doc-link').textContent};", node_id)


def test_explorer_draws_the_record(live, browser, docs):
    base, _ = live
    token, headers = _tenant(live)
    _ingest(base, headers, docs["core"])
    record = _query(base, headers, question="Which river flows through the city where Marie Curie was born?",
                    mode="proprag", k=5, token_budget=256)
    assert record["paths"] and record["selected"] and record["passages"]

    # the page itself holds no tenant data; without a key it asks for one
    html = httpx.get(f"{base}/ui/queries/{record['query_id']}", timeout=10)
    assert html.status_code == 200 and "Marie" not in html.text and "Content-Security-Policy" in html.headers
    browser.get(f"{base}/ui/queries/{record['query_id']}")
    browser.execute_script("sessionStorage.clear()")
    _open_with_key(browser, f"{base}/ui/queries/{record['query_id']}", token)

    nodes = set(browser.execute_script("return window.cy.nodes().map(n => n.id())"))
    edges = set(browser.execute_script("return window.cy.edges().map(e => e.id())"))
    want_nodes, want_edges = expected_graph(record)
    assert nodes == want_nodes
    assert len(edges) == len(want_edges) and edges == want_edges
    # every edge joins drawn nodes, and the layout placed every node inside the canvas
    assert browser.execute_script("return window.cy.edges().every(e => e.source().length && e.target().length)")

    # a node's text in the side panel; a passage links to its document
    step = record["paths"][0]["steps"][0]
    assert _panel(browser, f"prop:{step['prop_id']}")["text"] == step["text"]
    passage = record["passages"][0]
    shown = _panel(browser, f"passage:{passage['passage_id']}")
    assert shown["kind"] == "Passage" and shown["text"] == passage["text"]
    assert not shown["doc_hidden"] and passage["doc_id"]
    assert unquote(shown["doc_href"]) == f"/ui/documents/{passage['doc_id']}#{passage['passage_id']}"
    assert _panel(browser, "query")["text"] == record["text"]

    target = os.environ.get("PATHWEAVE_TEST_EXPLORER_SCREENSHOT")
    if target:
        _panel(browser, f"prop:{step['prop_id']}")
        browser.save_screenshot(target)

    # the passage's document (same tab: the key is still in sessionStorage), the passage marked
    browser.get(base + shown["doc_href"])
    _wait_state(browser)
    hit = browser.execute_script("const p = document.querySelector('#doc-passages p.hit');"
                                 "return p && [p.dataset.passageId, p.textContent]")
    assert hit == [passage["passage_id"], passage["text"]]
    document = httpx.get(f"{base}/v1/documents/{passage['doc_id']}", headers=headers, timeout=30).json()
    assert browser.find_element("id", "doc-title").text == document["title"]
    assert len(browser.find_elements("css selector", "#doc-passages p")) == len(document["passages"])

    # the list page
    browser.get(f"{base}/ui/queries")
    _wait_state(browser)
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('#queries a')).map(a => a.getAttribute('href'))")
    assert f"/ui/queries/{record['query_id']}" in links


@pytest.mark.arcadedb_only  # the page's drawing; the records it reads are covered on both stores
def test_explorer_draws_the_answer_and_the_prunerag_tree(live, browser, docs, runtime, monkeypatch):
    """A PruneRAG query with a two-level tree (the root decomposed, one child answered, one
    asking for entities, their retrieved passages, the aggregated answer): its nodes, their
    children and retrieved passages, and the answer with what it cites are drawn. The model's
    replies are scripted (the page's drawing is the subject; the real model's tree has its own
    test, tests/llm/test_llm_real.py)."""
    from llm_scripted import ScriptedClient, two_level_tree

    base, _ = live
    token, headers = _tenant(live)
    _ingest(base, headers, docs["core"])
    monkeypatch.setattr(runtime, "_llm", ScriptedClient(two_level_tree()))
    record = _query(base, headers, question="On which river is the city where Marie Curie was born?",
                    mode="prunerag", k=3)
    assert len(record["tree"]["nodes"]) == 5 and record["answer"]["text"] == "the Vistula"
    browser.get(f"{base}/ui/queries/{record['query_id']}")
    browser.execute_script("sessionStorage.clear()")  # another test's key (tenant) may be kept there
    _open_with_key(browser, f"{base}/ui/queries/{record['query_id']}", token)
    nodes = set(browser.execute_script("return window.cy.nodes().map(n => n.id())"))
    edges = set(browser.execute_script("return window.cy.edges().map(e => e.id())"))
    want_nodes, want_edges = expected_graph(record)
    assert nodes == want_nodes and edges == want_edges
    root = record["tree"]["nodes"][0]
    assert {f"tree:{root['node_id']}", "answer"} <= nodes and f"tree:query->tree:{root['node_id']}" in edges
    assert any(e.startswith("retrieved:") for e in edges)
    shown = _panel(browser, f"tree:{root['node_id']}")
    assert shown["kind"] == "PruneRAG node" and shown["text"].startswith(root["text"])
    shown = _panel(browser, "answer")
    assert shown["kind"] == "Answer"
    assert shown["text"] == (record["answer"]["text"] or f"no answer: {record['answer']['error']}")


def test_stored_text_is_never_html(live, browser):
    base, _ = live
    token, headers = _tenant(live)
    doc = {"title": f"Gallery {XSS}", "text": f"The Ashen Gallery shows the painting {XSS} by Mirela Vost."}
    _ingest(base, headers, [doc])
    record = _query(base, headers, question=f"Who painted {XSS}?", mode="dense", k=3)
    passage = next(row for row in record["selected"] if row["label"] == "Passage")
    assert XSS in passage["text"]

    browser.get(f"{base}/ui/queries")
    browser.execute_script("sessionStorage.clear()")
    # a refused key is dropped and asked for again
    browser.get(f"{base}/ui/queries/{record['query_id']}")
    _wait_state(browser, ("key",))
    browser.find_element("id", "key").send_keys("pw_0123456789abcdef_wrong")
    browser.find_element("css selector", "#key-form button[type=submit]").click()
    time.sleep(0.5)
    _wait_state(browser, ("key",))
    assert "refused" in browser.find_element("id", "status").text
    assert browser.execute_script("return sessionStorage.length") == 0
    _open_with_key(browser, f"{base}/ui/queries/{record['query_id']}", token)
    shown = _panel(browser, f"passage:{passage['id']}")
    assert XSS in shown["text"]
    assert XSS in browser.find_element("id", "question").text
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return window.__pwned === undefined")
    # and on the list page
    browser.get(f"{base}/ui/queries")
    _wait_state(browser)
    assert XSS in browser.find_element("id", "queries").text
    assert browser.execute_script("return document.querySelectorAll('img').length === 0 && window.__pwned === undefined")


def test_explorer_static_files_and_api(client, new_tenant):
    for path in ("/ui/static/cytoscape.min.js", "/ui/static/explorer.js", "/ui/static/explorer.css"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["x-content-type-options"] == "nosniff"
    assert client.get("/ui/static/../app.py").status_code == 404
    assert client.get("/ui/static/nothing.js").status_code == 404
    assert client.get("/ui/queries/not-an-id").status_code in (404, 422)
    js = client.get("/ui/static/explorer.js").text
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js
    assert "http://" not in client.get("/ui/queries").text and "https://" not in client.get("/ui/queries").text
    _, headers = new_tenant()
    assert client.get("/v1/queries").status_code == 401
    body = client.get("/v1/queries", headers=headers).json()
    assert body == {"queries": [], "limit": 50}
    assert client.get("/v1/queries?limit=0", headers=headers).status_code == 422
    assert client.get("/v1/queries?other=1", headers=headers).status_code == 422
    assert client.get("/v1/documents/doc:0123456789abcdef01234567", headers=headers).status_code == 404
    assert client.get("/ui/documents/doc:0123456789abcdef01234567").status_code == 200


def test_explore_command_prints_the_url(monkeypatch):
    from typer.testing import CliRunner

    monkeypatch.setenv("PATHWEAVE_API_PORT", "8123")
    from pathweave.settings import get_settings

    get_settings.cache_clear()
    try:
        from pathweave_cli.main import app

        qid = "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0"
        result = CliRunner().invoke(app, ["explore", qid])
        assert result.exit_code == 0, result.output
        assert f"http://127.0.0.1:8123/ui/queries/{qid}" in result.output
        assert CliRunner().invoke(app, ["explore", "nothex"]).exit_code != 0
        assert "http://127.0.0.1:8123/ui/queries" in CliRunner().invoke(app, ["explore"]).output
    finally:
        get_settings.cache_clear()
