"""Streamed answers (issue 47) through the API served by uvicorn, with the real local model
server: the retrieval event comes before the first token, tokens come one by one (at least
five events before the end), the final event's answer is the tokens joined, and a client
that disconnects stops the model's generation (the model server logs the disconnect within
2 s)."""

from __future__ import annotations

import json

import httpx
import pytest

from conftest import CORE_DOCS, served_app, wait_job
from waiting import wait_until

pytestmark = pytest.mark.arcadedb_only  # the service's interface; the stores are covered by the rest of the suite

QUESTION = "On which river is the city where Marie Curie was born?"


@pytest.fixture(scope="module")
def served(settings, api_settings, worker_settings, runtime):
    with served_app(settings, api_settings, worker_settings, runtime, "stream-api") as live:
        yield live


def _events(response):
    """``(event, data)`` of an SSE response as they arrive."""
    event = None
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            yield event, json.loads(line[5:].strip())
            event = None


def test_an_answer_streams_token_by_token_and_a_disconnect_stops_the_model(served, runtime, llm_client, llm_server,
                                                                            settings, monkeypatch):
    import uuid

    base, keys = served
    token, _ = keys.create(f"stream{uuid.uuid4().hex[:8]}", "tests", 0)
    headers = {"Authorization": f"Bearer {token}"}
    monkeypatch.setattr(runtime, "_llm", llm_client)
    with httpx.Client(base_url=base, headers=headers, timeout=300) as http:
        job = http.post("/v1/documents", json={"documents": CORE_DOCS}).json()
        assert wait_job(http, {}, job["job_id"])["status"] == "done"
        body = {"question": QUESTION, "k": 3, "answer": True, "stream": True}
        with http.stream("POST", "/v1/query", json=body) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            events = list(_events(response))
    names = [name for name, _ in events]
    assert names[0] == "retrieval" and names[-1] == "answer" and set(names[1:-1]) == {"token"}, names
    retrieval, final = events[0][1], events[-1][1]
    assert retrieval["passages"] and retrieval["answer"] is None
    tokens = [data["text"] for name, data in events if name == "token"]
    assert len(tokens) >= 5
    answer = final["answer"]
    assert answer["error"] is None and answer["text"] == "".join(tokens)
    assert set(answer["passage_ids"]) <= {p["passage_id"] for p in final["passages"]}
    assert final["query_id"] == retrieval["query_id"] and "answer" in final["timings_ms"]

    log = settings.data_dir / "llm" / "server.log"
    before = log.read_text(errors="replace").count("Disconnected from client")
    with httpx.Client(base_url=base, headers=headers, timeout=300) as http:
        with http.stream("POST", "/v1/query", json=body) as response:
            received = 0
            for name, _ in _events(response):
                received += name == "token"
                if received == 2:
                    break  # leave after two tokens: closing the response drops the connection
    wait_until(lambda: log.read_text(errors="replace").count("Disconnected from client") != before, 2.0,
               "the model server's 'Disconnected from client' (else it went on generating after the client left)",
               interval_s=0.05)


def test_a_prunerag_query_streams_its_tree_node_by_node(served, runtime, monkeypatch):
    """PruneRAG's steps: one ``step`` event per tree node as it is settled (the root first,
    each node after its parent), then ``retrieval`` and ``answer``; the steps are the final
    tree's nodes, in order, with the same decisions and retrieved passages. The model's
    replies are scripted (a root decomposed into an answered child and an entity child with
    two leaves): the stream's order is the subject, the real model's tree has its own test."""
    import uuid

    from llm_scripted import ScriptedClient, two_level_tree

    base, keys = served
    token, _ = keys.create(f"steps{uuid.uuid4().hex[:8]}", "tests", 0)
    monkeypatch.setattr(runtime, "_llm", ScriptedClient(two_level_tree()))
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=600) as http:
        job = http.post("/v1/documents", json={"documents": CORE_DOCS}).json()
        assert wait_job(http, {}, job["job_id"])["status"] == "done"
        body = {"question": QUESTION, "mode": "prunerag", "k": 3}
        with http.stream("POST", "/v1/query", json=body, headers={"Accept": "text/event-stream"}) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            events = list(_events(response))
    names = [name for name, _ in events]
    steps = [data for name, data in events if name == "step"]
    assert steps and names == ["step"] * len(steps) + ["retrieval", "answer"], names
    final = events[-1][1]
    tree = final["tree"]["nodes"]
    assert [s["node_id"] for s in steps] == [n["node_id"] for n in tree]
    assert [(s["decision"], s["answer"]) for s in steps] == [(n["decision"], n["answer"]) for n in tree]
    assert [s["passage_ids"] for s in steps] == [[p["passage_id"] for p in n["passages"]] for n in tree]
    assert steps[0]["parent_id"] is None and steps[0]["text"] == QUESTION
    seen = set()
    for step in steps:  # a node is settled after its parent
        assert step["parent_id"] is None or step["parent_id"] in seen
        seen.add(step["node_id"])
    assert final["answer"] is not None and events[-2][1]["answer"] is None
    assert len(steps) == 5 and {s["depth"] for s in steps} == {1, 2, 3}, steps  # three levels streamed


class _EndlessStream:
    """A model that never stops writing (4 KB pieces, 1 ms apart) until it is closed."""

    def __init__(self) -> None:
        import threading

        self.closed = threading.Event()
        self.completion = None

    def __iter__(self):
        import time

        while not self.closed.is_set():
            yield "x" * 4095 + " "
            time.sleep(0.001)

    def close(self) -> None:
        self.closed.set()


class _EndlessClient:
    model = "endless"

    def __init__(self, stream: _EndlessStream) -> None:
        self.stream = stream

    def chat_stream(self, messages, **kwargs) -> _EndlessStream:
        return self.stream


def test_a_client_that_stops_reading_ends_its_stream_and_its_record_is_written(
        settings, api_settings, worker_settings, runtime, monkeypatch):
    """A client that reads the first event and then nothing (its receive buffer full, the
    server's send waiting): after ``api.stream_send_timeout_s`` the stream ends, the model's
    generation is closed and the record keeps what was answered. The model is scripted (it
    writes without end): the server's behaviour towards the stalled client is the subject."""
    import re
    import socket
    import uuid

    stream = _EndlessStream()
    monkeypatch.setattr(runtime, "_llm", _EndlessClient(stream))
    stalled = api_settings.model_copy(update={"stream_send_timeout_s": 1.0})
    with served_app(settings, stalled, worker_settings, runtime, "stalled-stream-api") as (base, keys):
        token, _ = keys.create(f"stall{uuid.uuid4().hex[:8]}", "tests", 0)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=300) as http:
            job = http.post("/v1/documents", json={"documents": CORE_DOCS}).json()
            assert wait_job(http, {}, job["job_id"])["status"] == "done"
        body = json.dumps({"question": QUESTION, "k": 3, "answer": True, "stream": True}).encode()
        host, port = base.removeprefix("http://").split(":")
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        client.connect((host, int(port)))
        try:
            client.sendall(f"POST /v1/query HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            received = b""
            while not (found := re.search(rb'"query_id":\s*"([0-9a-f]+)"', received)):
                chunk = client.recv(1024)
                assert chunk, received[-500:]
                received += chunk
            query_id = found.group(1).decode()
            # ... and reads no more: the server's sends fill the buffers, then wait
            wait_until(stream.closed.is_set, 60.0, "the stalled stream's model closed (the send timed out)")
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
                record = wait_until(lambda: http.get(f"/v1/queries/{query_id}"), 30.0,
                                    "the stalled query's record", until=lambda r: r.status_code == 200)
            assert record.json()["query_id"] == query_id
        finally:
            client.close()
