"""PruneRAG's tree logic (spec §4) on scripted replies: decisions, confidence threshold,
retry, decomposition, entity leaves, depth limit, dead leaves, aggregation."""

from __future__ import annotations

import math

from pathweave.llm.client import LLMError, TokenLogprob
from pathweave.llm.confidence import answer_confidence, last_json_object, span_confidence, value_span
from pathweave.settings import PruneRAGSettings
from pathweave.model import PassageHit
from pathweave.retrieval.prunerag import build_tree
from llm_scripted import ScriptedClient, completion


def retrieve(text: str, k: int) -> list[PassageHit]:
    return [PassageHit(passage_id=f"p:{text}:{i}", doc_id=f"d:{text}:{i}", title=f"T{i}", text=f"about {text}",
                       score=1.0 / (i + 1), rank=i + 1) for i in range(k)]


def test_last_json_object_takes_the_last_top_level_object():
    text = 'thinking {"a": 1} then ```json\n{"type": "answer", "answer": "Paris", "x": {"y": 2}}\n```'
    obj, start, end = last_json_object(text)
    assert obj == {"type": "answer", "answer": "Paris", "x": {"y": 2}}
    assert text[start:end].startswith('{"type"')
    assert last_json_object("no json {here") is None


def test_confidence_covers_the_answer_value_tokens_only():
    text = '{"type": "answer", "answer": "James Cameron"}'
    start, end = value_span(text, 0, len(text), "answer")
    assert text[start:end] == "James Cameron"
    # tokens: the value split in two tokens with log-probs -0.1 and -0.3, the rest -4
    pieces = [('{"type": "answer", "answer": "', -4.0), ("James", -0.1), (" Cameron", -0.3), ('"}', -4.0)]
    tokens = [TokenLogprob(t, lp) for t, lp in pieces]
    assert math.isclose(answer_confidence(text, tokens), math.exp(-0.2))
    # a token straddling the value's edge counts (it generates answer characters)
    straddle = [TokenLogprob('{"type": "answer", "answer": "J', -1.0), TokenLogprob('ames Cameron"}', -0.5)]
    assert math.isclose(span_confidence(text, straddle, (start, end)), math.exp(-0.75))


def test_high_confidence_answer_at_the_root_is_the_answer():
    client = ScriptedClient(['{"type": "answer", "answer": "Warsaw"}'])
    tree, answer = build_tree("Where was Marie Curie born?", client, retrieve, PruneRAGSettings())
    root = tree.nodes[0]
    assert (root.decision, root.answer, len(tree.nodes)) == ("answer", "Warsaw", 1)
    assert root.confidence > 0.95
    assert answer.text == "Warsaw" and answer.llm_calls == 1 == tree.llm_calls
    assert tree.retrievals == 1 and len(root.passages) == 5


def test_low_confidence_answer_is_retried_then_decomposed_and_aggregated():
    client = ScriptedClient([
        completion('{"type": "answer", "answer": "Lyon"}', answer_logprob=-1.0),   # confidence 0.37: rejected
        '{"type": "decomposition", "subquery1": "Who directed X?", "subquery2": "Where was that director born?"}',
        '{"type": "answer", "answer": "Ann Lee"}',
        '{"type": "entity", "entity1": "Ann Lee", "entity2": "birthplace of Ann Lee"}',
        '{"answer": "Leeds"}',                                                       # aggregation
    ])
    tree, answer = build_tree("Where was the director of X born?", client, retrieve, PruneRAGSettings())
    decisions = [(n.kind, n.decision, n.depth) for n in tree.nodes]
    assert decisions == [("query", "decomposition", 1), ("query", "answer", 2), ("query", "entity", 2),
                         ("entity", "retrieved", 3), ("entity", "retrieved", 3)]
    root = tree.nodes[0]
    assert root.llm_calls == 2 and math.isclose(root.confidence, math.exp(-1.0), rel_tol=1e-4)
    assert "low confidence" in client.calls[1][-1]["content"]          # the retry carries the note
    assert client.calls[1][-2] == {"role": "assistant", "content": '{"type": "answer", "answer": "Lyon"}'}
    assert "Where was the director of X born?" in client.calls[2][-1]["content"]  # parent query in the child prompt
    assert answer.text == "Leeds" and tree.llm_calls == 5 and tree.retrievals == 5
    aggregation = client.calls[-1][-1]["content"]
    assert "Ann Lee" in aggregation and "birthplace of Ann Lee" in aggregation
    assert "Documents of the root question" in aggregation                     # root docs kept
    assert root.children == ["n1", "n2"] and tree.nodes[2].children == ["n3", "n4"]


def test_depth_limit_stops_expansion():
    decompose = '{"type": "decomposition", "subquery1": "a?", "subquery2": "b?"}'
    client = ScriptedClient([decompose, decompose, decompose, '{"answer": "x"}'])
    tree, _ = build_tree("q?", client, retrieve, PruneRAGSettings(max_depth=2))
    assert [n.decision for n in tree.nodes] == ["decomposition", "max_depth", "max_depth"]


def test_failures_make_dead_leaves_never_exceptions():
    client = ScriptedClient([
        '{"type": "decomposition", "subquery1": "a?", "subquery2": "b?"}',
        "I think the answer is probably 42",             # no JSON object at all
        LLMError("LLM request timed out"),
        LLMError("endpoint unreachable"),                # the aggregation fails too
    ])
    tree, answer = build_tree("q?", client, retrieve, PruneRAGSettings())
    assert [n.decision for n in tree.nodes] == ["decomposition", "dead", "dead"]
    assert "unparseable" in tree.nodes[1].error and "timed out" in tree.nodes[2].error
    assert answer.text == "" and "unreachable" in answer.error


def test_failed_retrieval_kills_only_its_branch():
    def flaky(text: str, k: int):
        if text == "b?":
            raise RuntimeError("store down")
        return retrieve(text, k)

    client = ScriptedClient(['{"type": "decomposition", "subquery1": "a?", "subquery2": "b?"}',
                             '{"type": "answer", "answer": "A"}', '{"answer": "A"}'])
    tree, answer = build_tree("q?", client, flaky, PruneRAGSettings())
    assert [n.decision for n in tree.nodes] == ["decomposition", "answer", "dead"]
    assert answer.text == "A"


def test_each_node_is_heard_of_once_settled_and_a_raising_listener_stops_the_tree():
    replies = ['{"type": "decomposition", "subquery1": "a?", "subquery2": "b?"}',
               '{"type": "answer", "answer": "A"}', '{"type": "entity", "entity1": "E"}', '{"answer": "A"}']
    heard = []
    tree, _ = build_tree("q?", ScriptedClient(list(replies)), retrieve, PruneRAGSettings(),
                         on_step=lambda node, parent: heard.append((node.node_id, parent, node.decision,
                                                                    len(node.passages))))
    assert heard == [("n0", None, "decomposition", 5), ("n1", "n0", "answer", 5), ("n2", "n0", "entity", 5),
                     ("n3", "n2", "retrieved", 5)]
    assert [n.node_id for n in tree.nodes] == [h[0] for h in heard]

    class Left(Exception):
        pass

    def leave(node, parent):
        if node.node_id == "n1":
            raise Left()

    client = ScriptedClient(list(replies))
    try:
        build_tree("q?", client, retrieve, PruneRAGSettings(), on_step=leave)
    except Left:
        pass
    else:
        raise AssertionError("the listener's exception did not end the tree")
    assert len(client.calls) == 2  # the root's decision and n1's: nothing after the listener raised
