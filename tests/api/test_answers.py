"""``answer: true`` and mode ``prunerag`` through the API: with the real local model
server (0.5B) the response carries the answer, its citations and costs, and the stored
record has it; with the LLM unreachable the query still succeeds and says why there is
no answer."""

from __future__ import annotations

import pytest

QUESTION = "On which river is the city where Marie Curie was born?"


@pytest.mark.arcadedb_only  # the model server through the API; the stores are covered by the rest of the suite
def test_answer_with_the_real_model_server(client, new_tenant, ingest, docs, runtime, llm_client, monkeypatch):
    _, headers = new_tenant()
    assert ingest(headers, docs["core"])["status"] == "done"
    monkeypatch.setattr(runtime, "_llm", llm_client)
    response = client.post("/v1/query", headers=headers, json={"question": QUESTION, "k": 3, "answer": True})
    assert response.status_code == 200, response.text
    body = response.json()
    answer = body["answer"]
    assert answer["error"] is None and answer["text"] and answer["source"] == "passages"
    assert answer["prompt_tokens"] > 0 and answer["completion_tokens"] > 0 and answer["llm_calls"] == 1
    assert set(answer["passage_ids"]) <= {p["passage_id"] for p in body["passages"]}
    assert body["tree"] is None
    record = client.get(body["links"]["record"], headers=headers)
    assert record.status_code == 200, record.text
    stored = record.json()["answer"]
    assert stored["text"] == answer["text"] and stored["model"] == answer["model"]
    assert [c["id"] for c in stored["cited"]] == answer["passage_ids"]


def test_without_a_reachable_llm_the_query_answers_with_passages_and_says_why(client, new_tenant, ingest, docs):
    _, headers = new_tenant()
    assert ingest(headers, docs["core"])["status"] == "done"
    response = client.post("/v1/query", headers=headers, json={"question": QUESTION, "answer": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["passages"] and body["answer"]["text"] == "" and "unreachable" in body["answer"]["error"]
    response = client.post("/v1/query", headers=headers, json={"question": QUESTION, "mode": "prunerag"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["mode"] == "prunerag" and body["tree"]["nodes"][0]["decision"] == "dead"
    assert body["passages"] and "unreachable" in body["answer"]["error"]
