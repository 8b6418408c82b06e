"""Lexical hits beside the vector hits (issue 41): full-text indexes on both stores, the
question's terms sent safely escaped, and reciprocal rank fusion finding the codes and
surnames a small embedder misses (a fixture of our own)."""

from __future__ import annotations

import pytest

from pathweave.store.backends import fulltext_search
from pathweave.retrieval.lexical import MAX_TERMS, complete_ties, lucene_query, rrf
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import SourceDocument

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def test_lucene_query_quotes_every_term_and_drops_stop_words():
    assert lucene_query("Who signed contract PX-4471 with O'Neill?") == '"PX-4471" "O\'Neill"'  # names and codes
    assert lucene_query("who signed the contract") == '"signed" "contract"'  # nothing named: every term
    assert lucene_query("what is the") == ""
    assert lucene_query('x\\y "z"') == '"x" "y" "z"'
    assert len(lucene_query(" ".join(f"w{i}" for i in range(100))).split()) == MAX_TERMS


def test_rrf_fuses_by_rank_alone():
    fused = rrf([[("a", 0.9), ("b", 0.8)], [("b", 12.0), ("c", 3.0)]])
    assert [item for item, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


def test_equal_scores_share_a_rank_whatever_order_the_index_listed_them_in():
    vector = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    one = rrf([vector, [("x", 5.0), ("c", 1.0), ("b", 1.0)]])
    other = rrf([vector, [("x", 5.0), ("b", 1.0), ("c", 1.0)]])
    assert one == other and dict(one)["b"] == pytest.approx(1 / 62 + 1 / 62)


def test_a_group_of_equal_scores_split_by_the_cut_is_left_out():
    hits = [("x", 5.0), ("y", 2.0), ("a", 1.0), ("b", 1.0), ("c", 1.0)]
    assert complete_ties(hits, 4) == [("x", 5.0), ("y", 2.0)]  # c tied a and b past the cut
    assert complete_ties(hits[:4], 4) == hits[:4]  # the index had no more: the group is whole
    assert complete_ties(hits, 2) == hits[:2]  # the cut falls between groups
    assert complete_ties([("a", 1.0), ("b", 1.0), ("c", 1.0)], 2) == []  # a term every passage holds


#: Where a sentence embedder misses and a full-text index does not: a code or a surname that
#: appears once in a passage about something else, beside passages on the question's topic.
TARGETS = [("KX-4471", "Haraldsen", "The warehouse in Gdynia received forty pallets of chairs in March. The delivery "
            "note refers to KX-4471 and was countersigned by Haraldsen. Unloading took two days because of a storm "
            "on the coast, and the forklift rental was extended."),
           ("QZ-9902", "Wojciechowska", "Invoices for the cafeteria refurbishment were paid in two instalments. The "
            "second instalment, booked under QZ-9902, was approved by Wojciechowska before the audit. The auditors "
            "asked for photographs of the finished counters."),
           ("RT-3318", "Okonkwo", "Printer toner is ordered every quarter from the framework catalogue. Order RT-3318 "
            "went missing at the loading dock until Okonkwo traced it. The catalogue prices are reviewed each "
            "January.")]
TOPICAL = ["Contracts are signed by the head of purchasing after the supplier wins the tender.",
           "A signed contract is stored in the archive for ten years after it ends.",
           "Who may sign a contract depends on its value: above one million, the board signs.",
           "The supplier signs the contract first; the company's signatory signs it within five days.",
           "Every contract names the person who signed it and the date of signature.",
           "Contracts signed electronically carry a qualified signature of the signatory.",
           "A contract amendment must be signed by the same people who signed the contract.",
           "The legal department checks who signed each contract before payment is released.",
           "Framework contracts are signed once and call-off orders are placed under them."]


def contracts() -> list[SourceDocument]:
    docs = [SourceDocument(f"notes/{i}.txt", f"Note {i + 1}", text) for i, (_, _, text) in enumerate(TARGETS)]
    return docs + [SourceDocument(f"policy/{i}.txt", f"Contract policy {i + 1}", text)
                   for i, text in enumerate(TOPICAL)]


@pytest.fixture()
def contract_retriever(pipeline, store, embedder, settings):
    pipeline.ingest(contracts())
    return lambda lexical: Retriever(store, embedder, settings.model_copy(update={
        "tenant": store.tenant, "retrieval": settings.retrieval.model_copy(update={"lexical": lexical})}))


def _rank(result, doc_title: str) -> int:
    titles = [hit.title for hit in result.passages]
    return titles.index(doc_title) + 1 if doc_title in titles else 99


def test_codes_and_surnames_that_dense_misses_are_found_by_fusion(contract_retriever):
    missed, found = 0, 0
    for i, (code, surname, _) in enumerate(TARGETS):
        for question in (f"Who signed contract {code}?", f"Which contract did {surname} sign?"):
            alone = _rank(contract_retriever("off").query(question, mode="dense", k=12), f"Note {i + 1}")
            fused = _rank(contract_retriever("rrf").query(question, mode="dense", k=12), f"Note {i + 1}")
            missed += alone > 1
            found += fused == 1
    assert found == 6  # every code and every surname: the passage naming it first
    assert missed >= 3  # the embedder alone puts a passage on the topic first for at least half of them


def test_proprag_with_lexical_seeds_keeps_what_it_found(contract_retriever):
    """PropRAG reaches most of them through its proposition paths already; the lexical stage-1
    seeds (passages and the entities the question names) never push one down."""
    for i, (code, surname, _) in enumerate(TARGETS):
        for question in (f"Who signed contract {code}?", f"Which contract did {surname} sign?"):
            alone = _rank(contract_retriever("off").query(question, mode="proprag", k=12), f"Note {i + 1}")
            fused = _rank(contract_retriever("rrf").query(question, mode="proprag", k=12), f"Note {i + 1}")
            assert fused <= alone, question


@pytest.mark.parametrize("question", [
    'title:(" OR 1=1) --', "*:*", "contract~ AND NOT furniture^10", 'PX\\-4471 "unclosed', "{!lucene} [a TO z]",
    "passage_id:* OR tenant:*", "\x00 \u2028 ; DROP INDEX passage_fulltext",
])
def test_lucene_syntax_in_a_question_is_searched_as_text(contract_retriever, store, question):
    """Operators, fields, wildcards and ranges are quoted terms: the search runs, finds only
    this tenant's nodes, and a question of syntax alone matches nothing it does not name."""
    passages = {row["id"] for row in store.run("topology_passage_ids")}
    for label in ("Passage", "Proposition", "Entity"):
        hits = fulltext_search(store, label, lucene_query(question), 50)  # no parse error, no injection
        assert label != "Passage" or {pid for pid, _ in hits} <= passages
    result = contract_retriever("rrf").query(question, mode="dense", k=3)
    assert len(result.passages) <= 3
    assert lucene_query("*:* ~ ^ ( ) [ ] { } && || !") == ""  # syntax alone asks nothing
    assert fulltext_search(store, "Passage", lucene_query("Kowal*"), 50) == []  # no wildcard: the literal term


def test_fulltext_search_keeps_to_its_tenant(contract_retriever, store, base_store, pipeline):
    from pathweave.store.graph_store import GraphStore

    other = GraphStore(base_store.driver, base_store.database, base_store.backend, store.tenant + "x",
                       base_store.batch_size, base_store.dimensions)
    assert fulltext_search(other, "Passage", lucene_query("Wojciechowska"), 10) == []
    mine = fulltext_search(store, "Passage", lucene_query("Wojciechowska"), 10)
    assert len(mine) == 1

