"""Per-document access lists through the API (real app, store, extractor and embedder):
documents submitted with ``acl``; keys with principals, a delegate key asking on behalf of a
user (principals or a verified ID token); every response a caller gets (query in each
ranking mode with and without a budget, its reasoning record, the lists of queries and
documents, a document) is walked whole for what it may not read; PATCH of an access list
holds for the next query; a key without ``delegate`` gets 403, a forged or expired ID token
401."""

from __future__ import annotations

import time
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pathweave.settings import AccessSettings
from test_access import strings  # the walk over a whole response (tests/test_access.py)
from waiting import wait_until

DOCS = [
    {"title": "Tidewright Guild", "text": "The Tidewright Guild repairs ships in the Harbor of Ostrevane. The Tidewright "
                                          "Guild was founded in Caldris."},
    {"title": "Project Ossifrage", "acl": ["group:red"],
     "text": "Project Ossifrage is led by Ilsabet Quorne of the Tidewright Guild. Its budget is MARKERRED4471."},
    {"title": "Sablewind merger", "acl": ["group:blue"],
     "text": "The Sablewind merger was negotiated by Dorvan Prell of the Tidewright Guild. Its value is "
             "MARKERBLUE9923."},
    {"title": "Tolliver file", "acl": [],
     "text": "Wenna Tolliver was dismissed from the Tidewright Guild. The file number is MARKERPRIVATE3307."},
]
SECRETS = {"Project Ossifrage": ["MARKERRED4471", "Quorne", "Ossifrage"],
           "Sablewind merger": ["MARKERBLUE9923", "Prell", "Sablewind"],
           "Tolliver file": ["MARKERPRIVATE3307", "Tolliver"]}
ISSUER, AUDIENCE = "https://idp.example.test", "pathweave-tests"


@pytest.fixture(scope="module")
def signing_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture()
def corpus(client, keys, ingest):
    """A tenant holding :data:`DOCS`: ``(tenant, admin headers, {title: doc_id}, {title: [passage ids]})``."""
    tenant = f"acc{uuid.uuid4().hex[:10]}"
    token, _ = keys.create(tenant, "admin", 0)
    headers = {"Authorization": f"Bearer {token}"}
    job = ingest(headers, DOCS)
    assert job["status"] == "done", job
    ids = {d["title"]: d["doc_id"] for d in job["documents"]}
    passages = {title: [p["passage_id"] for p in client.get(f"/v1/documents/{doc_id}", headers=headers)
                        .json()["passages"]] for title, doc_id in ids.items()}
    return tenant, headers, ids, passages


def key(keys, tenant: str, principals=None, delegate: bool = False, scope: str = "ingest") -> dict:
    token, _ = keys.create(tenant, "tests", 0, scope, principals, delegate)
    return {"Authorization": f"Bearer {token}"}


def hidden(readable: set[str], ids: dict, passages: dict) -> list[str]:
    return [s for title in SECRETS if title not in readable for s in SECRETS[title] + [ids[title]] + passages[title]]


def responses(client, headers: dict, ids: dict) -> list:
    """Everything a caller can read: queries in every ranking mode (with and without a budget),
    their records, the lists of queries and documents, and each document."""
    out = []
    for mode in ("proprag", "dense", "hipporag2"):
        for budget in (None, 300):
            body = {"question": "Who leads work at the Tidewright Guild and what is the budget?", "mode": mode,
                    "k": 10, **({"token_budget": budget} if budget else {})}
            answer = client.post("/v1/query", headers=headers, json=body)
            assert answer.status_code == 200, answer.text
            out.append(answer.json())
            record = client.get(f"/v1/queries/{answer.json()['query_id']}", headers=headers)
            assert record.status_code == 200, record.text
            out.append(record.json())
    out.append(client.get("/v1/queries", headers=headers).json())
    out.append(client.get("/v1/documents", headers=headers).json())
    for doc_id in ids.values():
        response = client.get(f"/v1/documents/{doc_id}", headers=headers)
        out.append(response.json() if response.status_code == 200 else response.status_code)
    return out


def test_keys_with_principals_see_only_what_they_may_read(client, keys, corpus):
    tenant, admin, ids, passages = corpus
    everything = " ".join(strings(responses(client, admin, ids)))
    assert "MARKERPRIVATE3307" in everything and "MARKERBLUE9923" in everything  # the unrestricted key
    for principals, readable in ((["group:red"], {"Project Ossifrage"}), (["group:blue"], {"Sablewind merger"}),
                                 (["user:zed"], set())):
        seen = strings(responses(client, key(keys, tenant, principals), ids))
        leaked = [h for h in hidden(readable, ids, passages) if any(h in s for s in seen)]
        assert not leaked, (principals, leaked)
        assert all(any(SECRETS[t][0] in s for s in seen) for t in readable)
    red = key(keys, tenant, ["group:red"])
    listed = client.get("/v1/documents", headers=red).json()
    assert {d["title"] for d in listed["documents"]} == {"Tidewright Guild", "Project Ossifrage"}
    assert client.get(f"/v1/documents/{ids['Sablewind merger']}", headers=red).status_code == 404
    assert client.delete(f"/v1/documents/{ids['Sablewind merger']}", headers=red).status_code == 404
    admin_query = client.post("/v1/query", headers=admin, json={"question": "Tidewright Guild"}).json()
    assert client.get(f"/v1/queries/{admin_query['query_id']}", headers=red).status_code == 404


def test_only_a_delegate_key_asks_on_behalf_of_a_user(client, keys, corpus, signing_key, monkeypatch):
    tenant, admin, ids, passages = corpus
    plain, delegate = key(keys, tenant, scope="query"), key(keys, tenant, delegate=True, scope="query")
    capped = key(keys, tenant, ["group:blue"], delegate=True, scope="query")  # the user reads at most what it reads
    body = {"question": "What is the budget of the Tidewright Guild's project?", "mode": "dense", "k": 10}
    for header in ({"X-Pathweave-On-Behalf-Of": "group:red"}, {"X-Pathweave-Id-Token": "x.y.z"}):
        refused = client.post("/v1/query", headers={**plain, **header}, json=body)
        assert refused.status_code == 403 and refused.json()["type"].endswith("delegate-required"), refused.text
    on_behalf = client.post("/v1/query", headers={**delegate, "X-Pathweave-On-Behalf-Of": "group:red"}, json=body)
    text = " ".join(strings(on_behalf.json()))
    assert on_behalf.status_code == 200 and "MARKERRED4471" in text and "MARKERBLUE9923" not in text
    malformed = client.post("/v1/query", headers={**delegate, "X-Pathweave-On-Behalf-Of": "finance"}, json=body)
    assert malformed.status_code == 422
    within = client.post("/v1/query", headers={**capped, "X-Pathweave-On-Behalf-Of": "group:red,group:blue"}, json=body)
    text = " ".join(strings(within.json()))
    assert within.status_code == 200 and "MARKERBLUE9923" in text and "MARKERRED4471" not in text

    pem = signing_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    svc = client.app.state.services
    monkeypatch.setattr(svc, "settings", svc.settings.model_copy(update={"access": AccessSettings(
        id_token_issuer=ISSUER, id_token_audience=AUDIENCE, id_token_public_key=pem, id_token_algorithms="RS256")}))

    def token(signer=signing_key, **claims) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "4711", "iat": now, "exp": now + 300,
                   "groups": ["red"], **claims}
        return jwt.encode(payload, signer, algorithm="RS256")

    good = client.post("/v1/query", headers={**delegate, "X-Pathweave-Id-Token": token()}, json=body)
    text = " ".join(strings(good.json()))
    assert good.status_code == 200 and "MARKERRED4471" in text and "MARKERBLUE9923" not in text, good.text
    forged = token(signer=rsa.generate_private_key(public_exponent=65537, key_size=2048))
    for bad in (forged, token(exp=int(time.time()) - 10), token(aud="another-app"), token(iss="https://evil.test"),
                "not-a-jwt"):
        refused = client.post("/v1/query", headers={**delegate, "X-Pathweave-Id-Token": bad}, json=body)
        assert refused.status_code == 401 and refused.json()["type"].endswith("invalid-id-token"), refused.text


def test_patch_of_an_access_list_holds_for_the_next_query(client, keys, corpus):
    tenant, admin, ids, _ = corpus
    blue = key(keys, tenant, ["group:blue"])
    body = {"question": "Who was dismissed from the Tidewright Guild?", "mode": "dense", "k": 10}

    def blue_sees_the_file() -> bool:
        return "MARKERPRIVATE3307" in " ".join(strings(client.post("/v1/query", headers=blue, json=body).json()))

    assert not blue_sees_the_file()
    done = client.patch(f"/v1/documents/{ids['Tolliver file']}/acl", headers=admin, json={"acl": ["group:blue"]})
    assert done.status_code == 200 and done.json()["acl"] == ["group:blue"], done.text
    assert blue_sees_the_file()
    assert client.patch(f"/v1/documents/{ids['Tolliver file']}/acl", headers=admin,
                        json={"acl": []}).status_code == 200
    assert not blue_sees_the_file()
    assert client.patch(f"/v1/documents/{ids['Tolliver file']}/acl", headers=admin,
                        json={"acl": ["finance"]}).status_code == 422
    assert client.patch("/v1/documents/doc:000000000000000000000000/acl", headers=admin,
                        json={"acl": None}).status_code == 404
    red = key(keys, tenant, ["group:red"])  # may not change what it may not read, nor widen what it reads
    assert client.patch(f"/v1/documents/{ids['Tolliver file']}/acl", headers=red,
                        json={"acl": ["group:red"]}).status_code == 404
    assert client.patch(f"/v1/documents/{ids['Project Ossifrage']}/acl", headers=red,
                        json={"acl": None}).status_code == 403
    tolliver = next(d for d in DOCS if d["title"] == "Tolliver file")
    resubmitted = client.post("/v1/documents", headers=red, json={"documents": [{**tolliver, "acl": ["group:red"]}]})
    assert resubmitted.status_code == 403, resubmitted.text  # nor take it over by submitting it again
    put = client.put("/v1/documents/policies:blue-only", headers=admin,
                     json={"title": "Blue policy", "text": "The Blue policy names MARKERPUT5521.", "acl": ["group:blue"]})
    assert put.status_code == 202
    client.get(f"/v1/jobs/{put.json()['job_id']}", headers=admin)
    wait_until(lambda: client.get(f"/v1/jobs/{put.json()['job_id']}", headers=admin).json(), 60,
               f"job {put.json()['job_id']} (the PUT) finished", interval_s=0.1,
               until=lambda job: job["status"] not in ("queued", "running"))
    ask = {"question": "Which policy names a marker?", "mode": "dense", "k": 10}
    assert "MARKERPUT5521" in " ".join(strings(client.post("/v1/query", headers=blue, json=ask).json()))
    assert "MARKERPUT5521" not in " ".join(strings(client.post("/v1/query", headers=red, json=ask).json()))


def test_a_version_accepted_and_not_yet_ingested_is_not_replaced_by_a_key_that_may_not_read_it(
        client, keys, store_for):
    """The access check of a replacing write runs in the accepting transaction, under the head's
    lock, against the newest accepted access list: a version only queued (nothing stored yet)
    is refused to a key not on its list, nothing written; a key on it replaces it."""
    from pathweave_ingest import jobs

    tenant = f"accq{uuid.uuid4().hex[:10]}"
    store = store_for(tenant)
    pending = {"title": "Harrow ledger", "text": "The Harrow ledger names MARKERQUEUED7710.", "source": "harrow",
               "acl": ["group:blue"]}
    payload = jobs.payloads(tenant, [jobs.to_source(pending)])
    doc_id = payload[0]["doc_id"]
    jobs.create_job(store, jobs.new_job_id(), payload, 4, "inprocess")  # accepted, never enqueued: it stays queued
    head = store.run("document_states", ids=[doc_id])[0]
    assert (head["status"], head["version"], head["ingested"]) == ("queued", 1, False)
    red = key(keys, tenant, ["group:red"])
    refused = client.post("/v1/documents", headers=red, json={"documents": [{**pending, "acl": ["group:red"]}]})
    assert refused.status_code == 403 and refused.json()["type"].endswith("not-permitted"), refused.text
    head = store.run("document_states", ids=[doc_id])[0]
    assert (head["status"], head["version"]) == ("queued", 1)  # nothing of the refused write
    gone = client.delete(f"/v1/documents/{doc_id}", headers=red)  # nor a DELETE: as absent, nothing written
    assert gone.status_code == 404, gone.text
    assert store.run("document_states", ids=[doc_id])[0]["version"] == 1
    assert store.run("doc_head_acl", ids=[doc_id])[0]["acl"] == ["group:blue"]
    blue = key(keys, tenant, ["group:blue"])
    accepted = client.post("/v1/documents", headers=blue, json={"documents": [pending]})
    assert accepted.status_code == 202 and accepted.json()["documents"][0]["version"] == 2, accepted.text
    # a first version in flight that named no list: its stored list is not known yet, so only an
    # unrestricted caller replaces it (as only such a caller reads its job)
    unnamed = {"title": "Harrow minutes", "text": "The Harrow minutes name MARKERUNNAMED7711.", "source": "minutes"}
    jobs.create_job(store, jobs.new_job_id(), jobs.payloads(tenant, [jobs.to_source(unnamed)]), 4, "inprocess")
    refused = client.post("/v1/documents", headers=red, json={"documents": [unnamed]})
    assert refused.status_code == 403 and refused.json()["type"].endswith("not-permitted"), refused.text
    fresh = {"title": "Red notes", "text": "The red notes name MARKERFRESH7712.", "source": "red-notes",
             "acl": ["group:red"]}
    assert client.post("/v1/documents", headers=red, json={"documents": [fresh]}).status_code == 202  # a new id


def test_an_upload_carries_its_access_list_in_the_form(client, keys, wait):
    tenant = f"accu{uuid.uuid4().hex[:10]}"
    admin = key(keys, tenant)
    files = [("files", ("larkspur.txt", b"The Larkspur audit was signed by Osgood Trell. Its code is MARKERUPLOAD6610.\n",
                        "text/plain")), ("acl", (None, "group:red,user:alice"))]
    bad = client.post("/v1/documents", headers=admin, files=[files[0], ("acl", (None, "finance"))])
    assert bad.status_code == 422 and "finance" in bad.json()["detail"]
    done = client.post("/v1/documents", headers=admin, files=files)
    assert done.status_code == 202, done.text
    assert wait(admin, done.json()["job_id"])["status"] == "done"
    listed = client.get(f"/v1/documents/{done.json()['documents'][0]['doc_id']}", headers=admin)
    assert listed.status_code == 200
    ask = {"question": "Who signed the Larkspur audit?", "mode": "dense", "k": 5}
    for principals, sees in ((["group:red"], True), (["user:alice"], True), (["group:blue"], False)):
        answer = client.post("/v1/query", headers=key(keys, tenant, principals), json=ask).json()
        assert ("MARKERUPLOAD6610" in " ".join(strings(answer))) == sees, principals


def test_a_job_lists_to_a_restricted_caller_only_the_documents_it_may_read(client, keys, ingest):
    tenant = f"acc{uuid.uuid4().hex[:10]}"
    admin = key(keys, tenant, scope="admin")
    job = ingest(admin, DOCS)
    red = key(keys, tenant, ["group:red"])
    view = client.get(f"/v1/jobs/{job['job_id']}", headers=red)
    assert view.status_code == 200, view.text
    assert {d["title"] for d in view.json()["documents"]} == {"Tidewright Guild", "Project Ossifrage"}
    assert view.json()["total"] == len(DOCS) and view.json()["status"] == "done"  # the job's state: all of it
    whole = client.get(f"/v1/jobs/{job['job_id']}", headers=admin).json()
    assert len(whole["documents"]) == len(DOCS)
    hidden_ids = [d["doc_id"] for d in whole["documents"] if d["title"] in ("Sablewind merger", "Tolliver file")]
    assert len(hidden_ids) == 2 and not any(doc_id in view.text for doc_id in hidden_ids)
    assert "Sablewind" not in view.text and "Tolliver" not in view.text
