"""Session reuse on the token-budgeted context (APR's "send only what is new" on spec §5's
selection), on the real store, models and tokenizer: a line a session was sent costs only
its code in the selection, a session never sends a statement's text twice, and a query
without a session gets the context it got before any session ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathweave.errors import NotApplicable
from pathweave.query.retriever import Retriever
from pathweave.retrieval.context_codes import LEGEND, SessionLines, read_session_lines
from pathweave.selection import assign_costs
from pathweave_ingest.loaders import load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"

QUESTIONS = ["On which river stands the city where Marie Curie was born?",
             "Where was Marie Curie born?",
             "Which prize did Marie Curie win with Pierre Curie?",
             "On which river stands the city where Marie Curie was born?"]


@pytest.fixture()
def retriever(pipeline, store, embedder, settings):
    documents, errors = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    pipeline.ingest(documents, errors)
    return Retriever(store, embedder, settings)


def test_a_line_sent_earlier_in_the_session_costs_only_its_reference(retriever):
    first = retriever.query(QUESTIONS[0], token_budget=120, session_id="s-cost").context
    assert first.session_id == "s-cost" and first.text.startswith(LEGEND + "\n")
    assert first.token_count <= 120 and first.lines
    codes = [line.code for line in first.lines]
    assert sorted(codes, key=lambda c: int(c[1:])) == [f"S{i}" for i in range(1, len(codes) + 1)]
    assert not any(line.referenced for line in first.lines)
    assert all(line.line.startswith(f"- {line.code}: ") for line in first.lines)

    # the selection's costs: a line the session has is its code's tokens, a new one its text's
    counter = retriever.resources.token_counter()
    sent = read_session_lines(retriever.store, "s-cost")
    assert sent.codes == {line.id: line.code for line in first.lines} and sent.next_number == len(codes) + 1
    retrieval = retriever.search(QUESTIONS[0], token_budget=120, write_record=False)
    from pathweave.retrieval.context import candidate_graph

    graph = candidate_graph(retrieval.result, retrieval.subgraph, retrieval.query)
    costs = {n.id: n.cost for n in assign_costs(sent.mark(graph), counter).nodes}
    plain = {n.id: n.cost for n in assign_costs(graph, counter).nodes}
    for line in first.lines:
        assert costs[line.id] == counter.count(f"- {line.code}") < plain[line.id], line

    # the same question again in the session: what it had is referenced by the same code, and
    # the budget buys evidence it was not sent
    again = retriever.query(QUESTIONS[0], token_budget=120, session_id="s-cost").context
    assert not again.text.startswith(LEGEND)  # the legend once per session
    referenced = {line.id: line for line in again.lines if line.referenced}
    assert set(referenced) == {line.id for line in first.lines}
    assert all(referenced[line.id].code == line.code and referenced[line.id].line == f"- {line.code}"
               for line in first.lines)
    assert again.token_count <= 120 and len(again.lines) > len(first.lines)
    # the answer step's reader has not seen the session: the expanded context writes them out
    assert all(f"{line.code}: " in again.expanded for line in first.lines)
    # the record marks what was referenced
    sent = read_session_lines(retriever.store, "s-cost")
    record = retriever.read_record(retriever.query(QUESTIONS[1], token_budget=80, session_id="s-cost").query_id)
    marked = [row for row in record["selected"] if row["code"]]
    assert marked and all(row["referenced"] == (row["id"] in sent.codes) for row in marked)
    assert any(row["referenced"] for row in marked)


def test_a_session_never_sends_a_statements_text_twice(retriever):
    sent_text: dict[str, str] = {}  # id -> the code its text was sent with
    for question in QUESTIONS:
        context = retriever.query(question, token_budget=100, session_id="s-twice").context
        for line in context.lines:
            if line.referenced:
                assert line.id in sent_text and sent_text[line.id] == line.code, line
                assert line.line == f"- {line.code}"
            else:
                assert line.id not in sent_text, f"{line.id} sent twice"
                sent_text[line.id] = line.code
    assert len(set(sent_text.values())) == len(sent_text)  # one code per line
    # another session starts from nothing
    other = retriever.query(QUESTIONS[0], token_budget=100, session_id="s-other").context
    assert other.text.startswith(LEGEND) and not any(line.referenced for line in other.lines)


def test_a_query_without_a_session_gets_the_context_it_got_before(retriever):
    before = retriever.query(QUESTIONS[0], token_budget=100, write_record=False).context
    for question in QUESTIONS[:2]:
        retriever.query(question, token_budget=100, session_id="s-fresh")
    after = retriever.query(QUESTIONS[0], token_budget=100, write_record=False).context
    assert after.text == before.text and after.session_id is None and after.expanded is None
    assert all(line.code is None and not line.referenced for line in after.lines)
    assert not any(line.line.startswith("- S") for line in after.lines)


def test_a_session_needs_a_budget_in_the_ranking_modes(retriever):
    with pytest.raises(NotApplicable, match="session_id applies with a token_budget in mode proprag"):
        retriever.query(QUESTIONS[0], session_id="s")
    assert SessionLines("s").first and SessionLines("s", {"p": "S4"}).next_number == 5


def test_evidence_sent_for_an_earlier_question_stays_a_candidate_of_a_later_one(retriever):
    """APR's answer memory on the budgeted context: the lines that answered the session's earlier
    question are candidates of the next question's selection even where its own ranking left
    them out (here: 2 candidate passages of the 8 in G_sub), linked to Q and costing only their
    codes; without a session nothing is added."""
    from pathweave.retrieval.context import QUERY_NODE, candidate_graph

    narrow = retriever.settings.model_copy(update={"selection": retriever.settings.selection.model_copy(
        update={"context_passages": 2})})
    retriever = Retriever(retriever.store, retriever.embedder, narrow)
    first = retriever.query(QUESTIONS[0], k=1, token_budget=100, session_id="s-memory").context
    sent = read_session_lines(retriever.store, "s-memory")
    later = retriever.search(QUESTIONS[2], k=1, token_budget=100, write_record=False)
    plain = candidate_graph(later.result, later.subgraph, later.query)
    remembered = candidate_graph(later.result, later.subgraph, later.query, earlier=sent.codes)
    added = {n.id for n in remembered.nodes} - {n.id for n in plain.nodes}
    in_subgraph = set(later.subgraph.prop_ids) | set(later.subgraph.passage_ids)
    assert added and added <= set(sent.codes) & in_subgraph
    assert all((QUERY_NODE, node) in {tuple(e) for e in remembered.edges} for node in added)
    counter = retriever.resources.token_counter()
    costs = {n.id: n.cost for n in assign_costs(sent.mark(remembered), counter).nodes}
    assert all(costs[node] == counter.count(f"- {sent.codes[node]}") for node in added)
    # in the session the later question references them, whatever its own ranking holds
    context = retriever.query(QUESTIONS[2], k=1, token_budget=100, session_id="s-memory").context
    assert {line.id for line in context.lines if line.referenced} & added
    assert first.lines and context.token_count <= 100
