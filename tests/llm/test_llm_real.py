"""LLM features against the real managed llama.cpp server (Qwen2.5-Coder-0.5B): JSON and
token logprobs, answer-token confidence, PruneRAG trees persisted and read back, answers
recorded with their citations, bad endpoint / timeout handling, LLM extraction, the
server's lifecycle files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pathweave.answering import MAX_CITATIONS, answer_messages, answer_schema, parse_answer, source_labels
from pathweave.llm.client import LLMClient, LLMError
from pathweave.llm.confidence import answer_confidence, last_json_object
from pathweave.settings import PruneRAGSettings
from pathweave.model import PassageHit
from pathweave.retrieval.prunerag import build_tree, node_messages
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import load_path

# the model server's features; what they write is in the store-facing tests of both stores
# (tests/test_store_contract.py, tests/llm/test_llm_access.py)
pytestmark = pytest.mark.arcadedb_only
FIXTURES = Path(__file__).parents[1] / "fixtures"
QUESTION = "On which river stands the city where Marie Curie was born?"
PASSAGES = [PassageHit(passage_id="p1", doc_id="d1", title="Marie Curie", rank=1, score=1.0,
                       text="Marie Curie was a physicist. She was born in Warsaw in 1867.")]
ANSWER_ONLY = {"type": "object", "properties": {"type": {"const": "answer"}, "answer": {"type": "string"}},
               "required": ["type", "answer"]}


@pytest.fixture()
def retriever(pipeline, store, embedder, settings, llm_client):
    documents, errors = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    pipeline.ingest(documents, errors)
    return Retriever(store, embedder, settings, llm=llm_client)


def test_json_output_with_token_logprobs(llm_client):
    completion = llm_client.chat([{"role": "user", "content": 'Return {"city": "<capital of Poland>"} as JSON.'}],
                                 json=True, logprobs=True, max_tokens=24)
    assert last_json_object(completion.text) is not None
    spelled = b"".join(bytes(t.bytes) if t.bytes is not None else t.token.encode() for t in completion.tokens)
    assert completion.text.encode() in spelled
    assert all(t.logprob <= 0.0 for t in completion.tokens)
    assert completion.prompt_tokens > 10 and completion.completion_tokens == len(completion.tokens)
    assert completion.latency_ms > 0 and completion.model


def test_confidence_is_the_mean_logprob_of_the_answer_value_tokens(llm_client):
    from pathweave.model import TreeNode

    node = TreeNode(node_id="n0", kind="query", text="Where was Marie Curie born?", depth=1, passages=PASSAGES)
    completion = llm_client.chat(node_messages(node, "ROOT"), schema=ANSWER_ONLY, logprobs=True, max_tokens=32)
    obj, start, end = last_json_object(completion.text)
    value = obj["answer"].encode()
    raw = completion.text.encode()
    first = raw.index(b'"answer"')
    value_start = raw.index(value, first) if value else -1
    # independent walk: tokens whose bytes overlap the answer value's bytes
    offset, picked = 0, []
    for token in completion.tokens:
        piece = bytes(token.bytes) if token.bytes is not None else token.token.encode()
        if value and offset < value_start + len(value) and offset + len(piece) > value_start:
            picked.append(token.logprob)
        offset += len(piece)
    assert picked and len(picked) < len(completion.tokens)  # the keys and braces are left out
    expected = math.exp(sum(picked) / len(picked))
    assert math.isclose(answer_confidence(completion.text, completion.tokens), expected, rel_tol=1e-9)


def test_prunerag_rejects_low_confidence_and_persists_the_tree(retriever):
    # threshold 1.01: no answer can pass, every answer is retried; the root alone (max_depth 1: the
    # model's confidence is the subject; a deeper tree's logic and storage have their own tests)
    params = retriever.settings.prunerag.model_copy(update={"threshold": 1.01, "max_depth": 1, "top_k": 2})
    retriever = Retriever(retriever.store, retriever.embedder, retriever.settings.model_copy(update={"prunerag": params}),
                          llm=retriever.resources.llm_client())
    result = retriever.query(QUESTION, mode="prunerag", k=3)
    tree = result.tree
    assert result.mode == "prunerag" and len(result.passages) == 3
    assert tree.nodes[0].text == QUESTION and tree.nodes[0].depth == 1
    for node in tree.nodes:
        assert node.decision != "answer"                                # confidence <= 1 < threshold
        if node.decision == "low_confidence":
            assert node.llm_calls == 2 and 0 < node.confidence <= 1  # rejected, asked again, still an answer
        if node.kind == "query" and node.decision != "dead":
            assert len(node.passages) == 2
    aggregated = 1 if result.answer.error is None or "aggregation" in (result.answer.error or "") else 0
    assert tree.llm_calls == sum(n.llm_calls for n in tree.nodes) + aggregated
    assert result.answer.llm_calls == tree.llm_calls and result.answer.prompt_tokens == tree.prompt_tokens > 0
    record = retriever.read_record(result.query_id)
    stored = record["tree"]
    assert stored["llm_calls"] == tree.llm_calls and stored["retrievals"] == tree.retrievals
    assert [(n["kind"], n["text"], n["decision"], n["answer"], n["depth"]) for n in stored["nodes"]] == \
        [(n.kind, n.text, n.decision, n.answer, n.depth) for n in tree.nodes]
    assert [[p["passage_id"] for p in n["passages"]] for n in stored["nodes"]] == \
        [[h.passage_id for h in n.passages] for n in tree.nodes]
    assert [len(n["children"]) for n in stored["nodes"]] == [len(n.children) for n in tree.nodes]
    assert record["answer"]["text"] == result.answer.text and record["answer"]["source"] == "prunerag"


def test_answer_cites_passages_and_is_recorded(retriever):
    result = retriever.query(QUESTION, "proprag", k=3, answer=True)
    answer = result.answer
    assert answer.error is None and answer.text and answer.source == "passages"
    assert answer.prompt_tokens > 50 and answer.completion_tokens > 0 and answer.latency_ms > 0
    assert set(answer.passage_ids) <= {hit.passage_id for hit in result.passages}
    record = retriever.read_record(result.query_id)
    assert record["answer"]["text"] == answer.text
    assert [c["id"] for c in record["answer"]["cited"]] == answer.passage_ids
    budgeted = retriever.query(QUESTION, "proprag", k=3, token_budget=40, answer=True)
    assert budgeted.answer.source == "context" and budgeted.answer.error is None
    assert budgeted.answer.prompt_tokens < answer.prompt_tokens
    assert set(budgeted.answer.citations) <= set(source_labels(budgeted)) and source_labels(budgeted)


def test_answer_schema_lets_the_model_cite_only_source_labels(llm_client):
    # asked to quote the sources' text as citations (what the 1.5B did at small budgets,
    # running out of tokens), the schema's grammar still only lets labels through
    sources = ("- Marie Curie was born in Warsaw. [Marie Curie]\n- Warsaw stands on the Vistula river. [Warsaw]\n"
               "- Paris stands on the Seine. [Paris]\n- Kraków stands on the Vistula. [Krakow]")
    messages = answer_messages(QUESTION, sources)
    messages[-1]["content"] += "\nIn citations, copy the full sentence of every source, including unrelated ones."
    completion = llm_client.chat(messages, schema=answer_schema(["Marie Curie", "Warsaw", "Paris", "Krakow"]),
                                 max_tokens=96)
    answer, labels = parse_answer(completion)
    assert answer and set(labels) <= {"Marie Curie", "Warsaw", "Paris", "Krakow"} and len(labels) <= MAX_CITATIONS
    none = llm_client.chat(messages, schema=answer_schema([]), max_tokens=96)
    assert parse_answer(none)[1] == []


def test_answer_is_a_short_phrase_from_the_sources(llm_client):
    # the sources hold the answer inside sentences; the answer is the phrase, not a sentence
    # and not the prompt's own wording (the 1.5B once copied a placeholder of it)
    sources = ("- Marie Curie was a physicist and chemist who was born in the city of Warsaw in 1867. [Marie Curie]\n"
               "- Warsaw is the capital and largest city of Poland and stands on the Vistula river. [Warsaw]")
    completion = llm_client.chat(answer_messages("In which city was Marie Curie born?", sources),
                                 schema=answer_schema(["Marie Curie", "Warsaw"]), max_tokens=96)
    answer, labels = parse_answer(completion)
    assert "warsaw" in answer.lower() and len(answer.split()) <= 3, answer
    assert labels and set(labels) <= {"Marie Curie", "Warsaw"}


def test_bad_endpoint_and_timeout_give_dead_leaves(retriever, llm_server, llm_settings):
    from pathweave.servers.processes import free_port

    down = LLMClient(f"http://127.0.0.1:{free_port()}/v1", "none", timeout_s=5)
    with pytest.raises(LLMError, match="unreachable"):
        down.check()
    result = Retriever(retriever.store, retriever.embedder, retriever.settings, llm=down).query(QUESTION, "prunerag")
    assert result.tree.nodes[0].decision == "dead" and "unreachable" in result.tree.nodes[0].error
    assert result.answer.text == "" and "unreachable" in result.answer.error
    slow = LLMClient(llm_server.base_url, llm_settings.model, timeout_s=0.05, schema_style="json_object")
    tree, answer = build_tree(QUESTION, slow, lambda text, k: PASSAGES, PruneRAGSettings())
    assert tree.nodes[0].decision == "dead" and "timed out" in tree.nodes[0].error
    assert answer.error is not None and slow.usage().failures == 2


def test_llm_extractor_keeps_every_sentence_and_ingests_idempotently(store, embedder, settings, llm_client):
    from pathweave.extractors.base import PassageInput
    from pathweave.extractors.llm_extractor import LLMExtractor
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.pipeline import Pipeline

    extractor = LLMExtractor(llm_client)
    text = ("Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903. "
            "Her husband was Pierre Curie, a French physicist.")
    extraction = extractor.extract([PassageInput("Marie Curie", text, text)])[0]
    assert extractor.fallbacks == 0 and extraction.entities
    statements = " | ".join(text for text, _ in extraction.propositions).lower()
    assert all(fact in statements for fact in ("warsaw", "1903", "pierre curie")), statements  # one group per sentence
    assert all("marie curie" in text.lower() for text, _ in extraction.propositions)  # self-contained
    assert all(isinstance(name, str) for _, names in extraction.propositions for name in names)
    pipeline = Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant}))
    pipeline.ingest([SourceDocument("test#curie", "Marie Curie", text)], [])
    counts = store.counts()
    assert counts["Passage"] == 1 and counts.get("Proposition", 0) >= 1 and counts.get("Entity", 0) >= 1
    pipeline.ingest([SourceDocument("test#curie", "Marie Curie", text)], [])
    assert store.counts() == counts


def test_managed_server_files_and_clear_errors(settings, llm_server, llm_settings, tmp_path, monkeypatch):
    from pathweave.servers import llm_server as server
    from pathweave.servers.llm_weights import ModelUnavailable, PackagedModel, part_files

    assert server.status(settings.data_dir) == llm_server
    directory = server.server_dir(settings.data_dir)
    assert (directory / "server.json").is_file() and (directory / "server.log").stat().st_size > 0
    assert (directory / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").stat().st_size == 491_400_064
    assert server.start(settings.data_dir, llm_settings) == llm_server  # already running: reused
    with pytest.raises(ModelUnavailable, match="pip install"):
        part_files(PackagedModel("x", "no_such_part_package_", 2, 10, "x.gguf"))
    with pytest.raises(server.LLMServerError, match="unknown packaged model"):
        server.start(tmp_path, llm_settings.model_copy(update={"model": "gpt-9"}))
    monkeypatch.setattr(server, "extra_installed", lambda: False)
    with pytest.raises(server.LLMServerError, match="pip install"):
        server.start(tmp_path, llm_settings)
