"""Mode apr through the API (spec §3): ``session_id`` on POST /v1/query, a re-asked question
referencing what the session already sent, and the record showing what was reused."""

QUESTION = "Whom did Pierre Curie marry?"


def test_a_session_reuses_runs_and_the_record_shows_it(client, new_tenant, ingest, docs):
    _, headers = new_tenant()
    assert ingest(headers, docs["core"])["status"] == "done"
    body = {"question": QUESTION, "mode": "apr", "session_id": "chat-1"}
    first = client.post("/v1/query", headers=headers, json=body)
    assert first.status_code == 200, first.text
    first = first.json()
    assert first["mode"] == "apr" and first["apr"]["runs"] and first["passages"]
    assert first["apr"]["prompt_tokens"] == min(first["apr"]["token_counts"].values())
    second = client.post("/v1/query", headers=headers, json=body).json()
    facts = [run for run in second["apr"]["runs"] if run["channel"] == "facts"]
    assert facts and all(run["reused"] for run in facts)
    assert second["apr"]["prompt_tokens"] < first["apr"]["prompt_tokens"]
    record = client.get(f"/v1/queries/{second['query_id']}", headers=headers)
    assert record.status_code == 200, record.text
    runs = record.json()["runs"]
    assert runs["session_id"] == "chat-1" and len(runs["reused"]) >= len(facts) and runs["asked"]


def test_bad_session_ids_are_refused_and_other_modes_say_they_ignore_one(client, new_tenant):
    _, headers = new_tenant()
    for bad in ({"question": QUESTION, "mode": "apr", "session_id": ""},
                {"question": QUESTION, "mode": "apr", "session_id": "a b"}):
        response = client.post("/v1/query", headers=headers, json=bad)
        assert response.status_code == 422, (bad, response.text)
    response = client.post("/v1/query", headers=headers, json={"question": QUESTION, "mode": "proprag",
                                                                "session_id": "chat-1"})
    assert response.status_code == 200 and "session_id applies to mode apr" in response.json()["note"]
    response = client.post("/v1/query", headers=headers, json={"question": QUESTION, "mode": "apr",
                                                                "token_budget": 100})
    assert response.status_code == 200 and "does not apply to mode apr" in response.json()["note"]
