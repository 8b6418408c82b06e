"""APR on the real store server with the real embedder and spaCy extractor (spec §3):
stable codebook codes, fact runs at ingestion, sessions that reference instead of re-send,
earlier answers retrievable by later questions, and document deletion removing runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pathweave.apr import retrieve
from pathweave.apr.runs import line, segment
from pathweave.apr.scoring import answer_quota
from pathweave.apr.memory import seen_runs
from pathweave.records.reasoning import read_query_runs
from pathweave.query.retriever import Retriever
from pathweave_ingest.documents import document_id
from pathweave_ingest.jobs import delete_document
from pathweave.extractors import question_parser
from pathweave_ingest.loaders import SourceDocument

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

DOCS = [
    SourceDocument("curie.txt", "Marie Curie",
                   "Marie Curie discovered polonium. Marie Curie married Pierre Curie. Pierre Curie taught physics "
                   "at the Sorbonne. The Sorbonne is located in Paris.", key="curie.txt"),
    SourceDocument("polonium.txt", "Polonium",
                   "Polonium is a chemical element. Polonium was named after Poland. Poland borders Germany.",
                   key="polonium.txt"),
]
EXTRA = SourceDocument("einstein.txt", "Albert Einstein",
                       "Albert Einstein developed relativity. Albert Einstein married Mileva Maric.", key="einstein.txt")


@pytest.fixture()
def retriever(store, embedder, extractor, settings):
    return Retriever(store, embedder, settings.model_copy(update={"tenant": store.tenant}),
                     question_parser=question_parser(extractor))


def codes(store) -> dict[str, int]:
    return {row["id"]: row["code"] for row in store.run("apr_tenant_codes")}


def test_codes_are_assigned_once_and_stay_stable_across_reingest(pipeline, store):
    pipeline.ingest(DOCS)
    first = codes(store)
    counts = store.counts()
    assert counts["Triple"] >= 4 and counts["Run"] >= 1
    labels = {row["label"] for row in store.run("apr_tenant_codes")}
    assert labels == {"Entity", "Relation", "Triple", "Run"}
    for label in labels:  # per kind: 0..n-1, each once
        mine = sorted(row["code"] for row in store.run("apr_tenant_codes") if row["label"] == label)
        assert mine == list(range(len(mine)))
    pipeline.ingest(DOCS)  # idempotent: nothing changes
    assert codes(store) == first and store.counts() == counts
    pipeline.ingest([EXTRA])  # new symbols get new codes, old ones keep theirs
    after = codes(store)
    assert {k: after[k] for k in first} == first
    new = {k: v for k, v in after.items() if k not in first}
    assert new and all(v >= 0 for v in new.values())


def test_fact_runs_follow_the_segmenter_in_text_order(pipeline, store, embedder, settings):
    pipeline.ingest(DOCS)
    pids = [row["id"] for row in store.run("document_passage_ids", ids=[document_id(store.tenant, DOCS[0])])]
    rows = store.run("apr_passage_runs", ids=pids)
    stored = [[tuple(t) for t in row["triples"]] for row in rows]
    triples = [t for run in stored for t in run]
    assert triples, "the passage's triples are in its runs"
    expected = segment(triples, embedder.encode([line(t) for t in triples]), settings.apr.run_tau,
                       settings.apr.chain_bonus)
    assert sorted(stored) == sorted([[triples[i] for i in run] for run in expected])


def test_a_session_that_reasks_a_question_sends_references_not_text(pipeline, retriever, store):
    pipeline.ingest(DOCS)
    question = "Who did Marie Curie marry?"
    first = retriever.query(question, mode="apr", session_id="s-1", write_record=True).apr
    assert first.runs and not any(run.reused for run in first.runs)
    assert "Pierre Curie" in first.prompt
    again = retriever.query(question, mode="apr", session_id="s-1", write_record=True)
    second = again.apr
    facts = [run for run in second.runs if run.channel == "facts"]
    assert facts and all(run.reused for run in facts)
    for run in facts:  # referenced by code, their text not re-sent
        assert all(text not in second.prompt for text in run.lines)
    assert second.prompt_tokens < first.prompt_tokens
    assert "rules" in json.loads(first.prompt) and "rules" not in json.loads(second.prompt)  # legend sent once
    assert all(str(run.code) in second.prompt for run in facts)
    assert set(second.passage_ids) >= {p for run in facts for p in run.passage_ids}
    assert set(second.doc_ids) <= {document_id(store.tenant, d) for d in DOCS} and second.doc_ids
    record = read_query_runs(store, again.query_id)
    assert record["session_id"] == "s-1"
    assert {r["run_id"] for r in record["reused"]} >= {run.run_id for run in facts}
    assert len(record["asked"]) == 1
    # another session has seen nothing: the facts are sent in full again
    other = retriever.query(question, mode="apr", session_id="s-2", write_record=True).apr
    assert not any(run.reused for run in other.runs if run.channel == "facts")
    assert "Pierre Curie" in other.prompt and "rules" in json.loads(other.prompt)
    # within one prompt a triple is given once: a later run lists only its triples not given above
    assert prompt_triples(other) and len(prompt_triples(other)) == len(set(prompt_triples(other)))


def prompt_triples(context) -> list[tuple]:
    """Every triple a compact prompt gives, as words ``(h, r, t)`` whatever its rendering."""
    payload = json.loads(context.prompt)
    e, r, edges = payload.get("e"), payload.get("r"), payload.get("edge_matrix")
    out = []
    for channel in ("facts", "questions", "given knowledge"):
        for items in (payload.get(channel) or {}).values():
            for item in items:
                h, p, t = edges[item] if edges is not None else item
                out.append((e[h], r[p], e[t]) if e is not None else (h, p, t))
    return out


def test_earlier_answers_and_questions_are_retrieved_for_a_similar_question(pipeline, retriever):
    pipeline.ingest(DOCS)
    retriever.query("Who did Marie Curie marry?", mode="apr", write_record=True)
    later = retrieve(retriever.resources, "Whom did Marie Curie marry?", actions={"facts": "not_include"})
    channels = {run.channel for run in later.context.runs}
    assert {"questions", "answers"} <= channels and "facts" not in channels
    answer = next(run for run in later.context.runs if run.channel == "answers")
    assert answer.passage_ids  # the evidence answer stands for its passages
    # the channel actions change what is sent, and so the tokens
    everything = retrieve(retriever.resources, "Whom did Marie Curie marry?", actions={"facts": "include_all"})
    assert everything.context.prompt_tokens > later.context.prompt_tokens


def test_a_follow_up_takes_earlier_questions_and_answers_from_its_own_session(pipeline, retriever, store):
    pipeline.ingest(DOCS)
    retrieve(retriever.resources, "What did Marie Curie discover?", session_id="s-1", write_record=True)
    retrieve(retriever.resources, "Which element was named after Poland?", session_id="s-1", write_record=True)  # other evidence
    retrieve(retriever.resources, "Who did Marie Curie marry?", session_id="other", write_record=True)  # after s-1's
    own = seen_runs(store, "s-1")
    everything = {"questions": "include_all", "answers": "include_all"}
    follow = retrieve(retriever.resources, "Whom did Marie Curie marry?", session_id="s-1", actions=everything).context
    memory = [run for run in follow.runs if run.channel in ("questions", "answers")]
    # the session's own questions and answers, referenced by code; the other session's not there
    assert memory and all(run.run_id in own and run.reused for run in memory)
    answers = [run for run in memory if run.channel == "answers"]
    assert len(answers) == 2 > answer_quota(2)  # runs the session saw are kept beyond the quota
    # with the tenant's memory the follow-up also gets the other session's question and answer
    tenant = retriever.settings.model_copy(update={"apr": retriever.settings.apr.model_copy(
        update={"session_memory": "tenant"})})
    wide = Retriever(store, retriever.embedder, tenant)
    wide.resources.question_parser = retriever.resources.question_parser
    broad = retrieve(wide.resources, "Whom did Marie Curie marry?", session_id="s-1", actions=everything).context
    assert any(run.run_id not in own for run in broad.runs if run.channel in ("questions", "answers"))
    assert broad.prompt_tokens > follow.prompt_tokens


def test_bad_input_is_refused_and_writes_nothing(pipeline, retriever, store):
    pipeline.ingest(DOCS)
    before = store.counts()
    with pytest.raises(ValueError):
        retriever.query("  ", mode="apr")
    with pytest.raises(ValueError, match="session_id"):
        retriever.query("Who?", mode="proprag", session_id="s")
    with pytest.raises(ValueError, match="unknown action"):
        retrieve(retriever.resources, "Who did Marie Curie marry?", actions={"facts": "some"}, write_record=True)
    with pytest.raises(ValueError, match="session_id"):
        retrieve(retriever.resources, "Who did Marie Curie marry?", session_id=" ", write_record=True)
    assert store.counts() == before


def test_deleting_a_document_removes_its_runs(pipeline, store):
    pipeline.ingest(DOCS)
    doc = document_id(store.tenant, DOCS[1])
    pids = [row["id"] for row in store.run("document_passage_ids", ids=[doc])]
    assert store.run("apr_passage_runs", ids=pids)
    runs_before = store.counts()["Run"]
    delete_document(store, doc)
    left = store.counts()["Run"]
    assert 0 < left < runs_before
    # the other document's runs are all still there, with their edges
    kept = [row["id"] for row in store.run("document_passage_ids", ids=[document_id(store.tenant, DOCS[0])])]
    assert len(store.run("apr_passage_runs", ids=kept)) == left
    assert np.isfinite(left)


def test_proprag_can_add_the_passages_of_earlier_similar_questions(pipeline, retriever, store, embedder, settings):
    from pathweave.retrieval.proprag import earlier_question_passages

    pipeline.ingest(DOCS)
    assert earlier_question_passages(store, embedder.encode_one("Who did Marie Curie marry?")) == []
    first = retriever.query("Who did Marie Curie marry?", mode="apr", write_record=True).apr
    sent = {p for run in first.runs if run.channel == "facts" for p in run.passage_ids}
    found = earlier_question_passages(store, embedder.encode_one("Whom did Marie Curie marry?"))
    assert found and {pid for pid, _ in found} == sent and all(cos >= 0.8 for _, cos in found)
    on = Retriever(store, embedder, settings.model_copy(update={
        "tenant": store.tenant, "apr": settings.apr.model_copy(update={"proprag_question_runs": True})}))
    result = on.query("Whom did Marie Curie marry?", mode="proprag", write_record=False)
    assert result.passages and {hit.passage_id for hit in result.passages} & sent


def test_the_facts_channel_starts_from_proprags_top_passages(pipeline, retriever, store, settings):
    """``apr.facts_source = "proprag"`` (the default): the fact runs offered are those of the
    passages PropRAG ranks top ``facts_passages`` for the question, scored coarse-to-fine;
    ``index``: the run index's nearest runs, as the paper."""
    pipeline.ingest(DOCS + [EXTRA])
    question = "Where did the husband of Marie Curie teach?"
    top = retriever.query(question, k=1, write_record=False).passages
    narrow = settings.apr.model_copy(update={"facts_passages": 1})
    one = Retriever(store, retriever.embedder, settings.model_copy(update={"tenant": store.tenant, "apr": narrow}))
    facts = [run for run in retrieve(one.resources, question).context.runs if run.channel == "facts"]
    assert facts and {p for run in facts for p in run.passage_ids} == {top[0].passage_id}
    # the mode's passages are the ones the facts channel started from, in PropRAG's order
    proprag = [hit.passage_id for hit in retriever.query(question, k=3, write_record=False).passages]
    assert [hit.passage_id for hit in retriever.query(question, mode="apr", k=3, write_record=False).passages] == \
        proprag
    everywhere = settings.apr.model_copy(update={"facts_source": "index"})
    paper = Retriever(store, retriever.embedder, settings.model_copy(update={"tenant": store.tenant,
                                                                             "apr": everywhere}))
    passages = {p for run in retrieve(paper.resources, question).context.runs if run.channel == "facts" for p in run.passage_ids}
    assert len(passages) > 1  # the coarse search over all runs reaches the other documents' runs


def test_document_counts_leave_out_what_queries_write(pipeline, retriever, store):
    """GraphStore.document_counts (bench soak's graph check): APR queries in a session add
    question/answer runs, memory triples, records and sessions; the document graph's counts stay
    those ingestion gave, and a document's deletion changes them."""
    pipeline.ingest(DOCS)
    documents, everything = store.document_counts(), store.counts()
    assert documents["Triple"] >= 4 and documents["Run"] >= 1 and documents["rel:EDGE"] >= documents["Run"]
    for key in ("Passage", "Entity", "Relation", "Triple", "Run", "rel:EDGE"):  # before any query: all of it
        assert documents[key] == everything[key], key
    retriever.query("Whom did Marie Curie marry?", mode="apr", session_id="s-1", write_record=True)
    retriever.query("What did the man who married Marie Curie teach?", mode="apr", session_id="s-1",
                    write_record=True)
    after = store.counts()
    assert after["Run"] > everything["Run"] and after.get("Query", 0) >= 2  # the queries wrote memory
    assert store.document_counts() == documents
    delete_document(store, document_id(store.tenant, DOCS[1]))
    left = store.document_counts()
    assert left["Document"] == documents["Document"] - 1 and left["Triple"] < documents["Triple"]


def test_a_document_asserting_what_a_question_named_first_gets_the_same_graph(pipeline, retriever, store, embedder,
                                                                                extractor, settings):
    """An APR question writes its triples and entities as memory before any document asserts
    them; a document that later does gives the triple its fact embedding (HippoRAG 2's fact
    index) and the entity its synonymy links, as in a store that never saw the question."""
    import uuid

    from pathweave.store.graph_store import GraphStore
    from pathweave_ingest.pipeline import Pipeline

    retriever.query("Marie Curie married Pierre Curie.", mode="apr", write_record=True)
    memory = {row["id"] for row in store.run("existing_triple_ids", ids=[r["id"] for r in store.run(
        "apr_tenant_codes") if r["label"] == "Triple"])}
    asked = store.counts()["Triple"]
    assert asked >= 1 and not memory  # memory triples: no fact embedding yet
    pipeline.ingest(DOCS)
    other = GraphStore(store.driver, store.database, store.backend, f"t{uuid.uuid4().hex[:10]}",
                       store.batch_size, store.dimensions)
    Pipeline(other, embedder, extractor, settings.model_copy(update={"tenant": other.tenant})).ingest(DOCS)
    asserted = [row["id"] for row in store.run("apr_tenant_codes") if row["label"] == "Triple"]
    with_fact = {row["id"] for row in store.run("existing_triple_ids", ids=asserted)}
    assert store.document_counts() == other.document_counts()
    assert len(with_fact) == other.document_counts()["Triple"]  # every asserted triple is in the fact index
    assert store.counts()["Triple"] < asked + other.counts()["Triple"]  # the question's triple was asserted


def test_concurrent_code_assignments_give_distinct_codes(store, while_held):
    """Two transactions give codes to different entities of one tenant at once (one holds the
    codebook while the other asks): every code is distinct (the counter is read under its
    lock, not before)."""
    from pathweave.apr.codebook import code_steps

    ids = [f"{store.tenant}:e{i}" for i in range(5)]
    store.write("upsert_entities", [{"entity_id": i, "tenant": store.tenant, "name": i, "norm_name": i, "type": "ORG",
                                     "embedding": [1.0] + [0.0] * (store.dimensions - 1), "vec": ""} for i in ids])

    def give(run, chosen):
        for name, params in code_steps(store.tenant, {"entity": chosen}):
            run(name, **params)

    store.execute_write(lambda run: give(run, ids[:1]))  # the codebook exists (its counter at 1)
    while_held(lambda run: give(run, ids[1:3]), lambda: store.execute_write(lambda run: give(run, ids[3:])))
    codes = [row["code"] for row in store.run("apr_entity_rows", ids=ids)]
    assert sorted(codes) == [0, 1, 2, 3, 4]
