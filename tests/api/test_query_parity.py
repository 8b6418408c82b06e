"""One request, one answer: every retrieval mode x option sent through the CLI
(``pathweave query``) and the API (``POST /v1/query``) gets the same passages and context, or
the same error (CLI exit 2 / API 422 with the same message), on the real store and models.
The expected outcome is not written here: it comes from the core's own check, so a case the
core refuses must be refused by both entries, and a case it accepts must succeed in both.
Answers (``answer``, mode prunerag's tree) need an LLM and are tested in test_answers.py;
here prunerag is sent only with the options it refuses."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pathweave.errors import BadRequest
from pathweave.model import MODES, RETRIEVAL_ONLY
from pathweave.retrieval.request import QueryRequest
from pathweave_cli.main import app as cli_app

QUESTION = "Which river flows through the city where Marie Curie was born?"
OPTIONS = [{}, {"k": 2}, {"token_budget": 64}, {"token_budget": 64, "selection_method": "greedy",
                                                 "context_style": "triples"},
           {"selection_method": "ilp"}, {"context_style": "triples"}, {"session_id": "parity"},
           {"token_budget": 64, "session_id": "parity"}, {"k": 0}]
CLI_FLAGS = {"k": "--k", "token_budget": "--budget", "selection_method": "--select", "context_style": "--style",
             "session_id": "--session-id"}
runner = CliRunner()


def _expected_error(mode: str, options: dict) -> str | None:
    try:
        QueryRequest.of(QUESTION, mode=mode, **options)
    except BadRequest as exc:
        return str(exc)
    return None


def test_every_mode_and_option_gets_the_same_result_or_error_from_the_cli_and_the_api(
        client, new_tenant, ingest, docs, base_store):
    tenant, headers = new_tenant("parity")
    assert ingest(headers, docs["core"])["status"] == "done"
    for mode in MODES:
        _compare(mode, client, tenant, headers, len(docs["core"]))


def _compare(mode: str, client, tenant: str, headers: dict, n_docs: int) -> None:
    compared = refused = 0
    for options in OPTIONS:
        error = _expected_error(mode, options)
        if error is None and mode not in RETRIEVAL_ONLY:
            continue  # an accepted prunerag request starts an LLM: test_answers.py
        # one session per entry: a session's second question reuses what the first was sent
        api_options = {**options, **({"session_id": f"{mode}-api"} if "session_id" in options else {})}
        cli_options = {**options, **({"session_id": f"{mode}-cli"} if "session_id" in options else {})}
        response = client.post("/v1/query", headers=headers, json={"question": QUESTION, "mode": mode, **api_options})
        args = ["query", QUESTION, "--mode", mode, "--tenant", tenant, "--json"]
        for name, value in cli_options.items():
            args += [CLI_FLAGS[name], str(value)]
        cli = runner.invoke(cli_app, args)
        if error is not None:
            assert response.status_code == 422, (mode, options, response.text)
            assert cli.exit_code == 2, (mode, options, cli.output)
            if "k" not in options:  # k=0 is refused by the API's schema and the CLI's range alike
                assert response.json()["detail"] == error and error in " ".join(cli.output.split()), (mode, options)
            refused += 1
            continue
        assert response.status_code == 200, (mode, options, response.text)
        assert cli.exit_code == 0, (mode, options, cli.output)
        api, local = response.json(), json.loads(cli.stdout)
        assert [p["passage_id"] for p in api["passages"]] == [p["passage_id"] for p in local["passages"]], mode
        assert 1 <= len(api["passages"]) <= min(options.get("k", 5), n_docs), (mode, options)
        assert (api["context"] or {}).get("text") == (local["context"] or {}).get("text"), (mode, options)
        assert (api["context"] is not None) == ("token_budget" in options), (mode, options)
        compared += 1
    assert refused >= 3 and (compared >= 2 or mode not in RETRIEVAL_ONLY), (mode, refused, compared)


FRONTIER_READS = {"frontier_entity_passages", "frontier_proposition_passages", "topology_passage_access",
                  "topology_passage_propositions", "topology_passage_triples", "topology_entity_synonyms",
                  "topology_entity_aliases"}
"""The statements a query's frontier reads rows with."""


def test_a_proprag_query_through_the_api_reads_the_store_a_bounded_number_of_times(
        client, new_tenant, ingest, docs, runtime, monkeypatch):
    """Round trips of one proprag query through the API, counted on the real store: the two
    vector searches and the two full-text searches (which read the graph version too: no round trip of its own for
    freshness), the G_sub fetch (passages and propositions not yet in the node cache), one
    result read (the passages' texts with their citations and sources) and the record write
    (one transaction). The route itself reads nothing more: no second citation or source read."""
    from pathweave.store.backends import base
    from pathweave.store.graph_store import GraphStore

    tenant, headers = new_tenant("trips")
    assert ingest(headers, docs["core"])["status"] == "done"
    warm = client.post("/v1/query", headers=headers, json={"question": "Who was Pierre Curie?"})
    assert warm.status_code == 200
    runtime.retriever(tenant).flush()
    listed = client.get("/v1/documents", headers=headers).json()["documents"]
    sources = {d["doc_id"]: d["source"] for d in listed}
    calls: list[str] = []
    run, in_transaction = GraphStore.run, GraphStore.run_in_transaction

    def counted_run(self, name, **params):
        if self.tenant == tenant:
            calls.append(name)
        return run(self, name, **params)

    def counted_transaction(self, steps, *args, **kwargs):
        if self.tenant == tenant:
            calls.append("transaction")
        return in_transaction(self, steps, *args, **kwargs)

    monkeypatch.setattr(GraphStore, "run", counted_run)
    monkeypatch.setattr(GraphStore, "run_in_transaction", counted_transaction)
    # the warm query's searches may have ended exact (the test session's tenants crowd the
    # shared indexes), and the next ones would then start exact; counted here: the index path
    monkeypatch.setattr(base, "_exact_bounds", {})
    response = client.post("/v1/query", headers=headers, json={"question": "Who won the Nobel Prize in 1903?"})
    runtime.retriever(tenant).flush()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["paths"] and all("citations" in step for path in body["paths"] for step in path["steps"])
    assert all(c["source"] == sources[c["doc_id"]] and c["source"] for c in body["citations"])
    # two vector searches (propositions, passages); each may widen under the index that the
    # test session's tenants share until it has this tenant's k (a search more each time)
    assert "graph_version" not in calls and calls.count("vector_search_versioned") >= 1, calls  # the first reads it
    assert calls.count("vector_search_versioned") + calls.count("vector_search") >= 2, calls
    assert calls.count("subgraph_passage_texts") <= 1 and calls.count("transaction") == 1, calls
    assert calls.count("subgraph_passages") <= 1 and calls.count("subgraph_propositions") <= 1, calls
    # beside them, the full-text searches of the question's names (passages, entities: issue 41), run
    # concurrently with the vector searches; widened like them
    assert calls.count("fulltext_search") >= 2, calls
    # a search that other tenants of the test database crowd may score this small tenant's own
    # nodes instead of widening (at most one exact read per search)
    exact = [name for name in calls if name.startswith("vector_exact_")]
    assert len(exact) <= calls.count("vector_search_versioned") + calls.count("vector_search"), calls
    # the frontier's reads (pathweave.graph.frontier): the rows the push needs that the warm query
    # did not read, a batch per round; none reads the tenant whole
    frontier = [name for name in calls if name in FRONTIER_READS]
    assert all(frontier.count(name) <= 3 for name in frontier), calls
    assert not set(calls) - set(exact) - set(frontier) - {
        "vector_search_versioned", "vector_search", "fulltext_search", "subgraph_passages", "subgraph_propositions",
        "subgraph_entities", "subgraph_passage_texts", "transaction"}, calls
