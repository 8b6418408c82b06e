"""The default spaCy extractor and the import of precomputed OpenIE extractions."""

import json

from pathweave.extractors.base import PassageInput, decontextualize
from pathweave.extractors.imported import ImportedExtractor


def test_pronoun_at_sentence_start_is_replaced_by_the_title():
    assert decontextualize("She was born in Warsaw.", "Marie Curie") == ("Marie Curie was born in Warsaw.", True)
    assert decontextualize("Its capital is Paris.", "France") == ("France's capital is Paris.", True)
    assert decontextualize("Paris is big.", "France") == ("Paris is big.", False)


def test_propositions_name_their_subject():
    from pathweave.extractors.base import build_propositions

    props = build_propositions("Warsaw", ["The city lies on the Vistula.", "It is large and old."], ["Vistula"])
    assert props[0] == ("Warsaw: The city lies on the Vistula.", ["Vistula", "Warsaw"])
    assert props[1] == ("Warsaw is large and old.", ["Warsaw"])


def test_a_statement_is_made_self_contained_by_its_title():
    from pathweave.extractors.base import self_contained

    assert self_contained("Marie Curie", "She  won the prize.") == "Marie Curie won the prize."
    assert self_contained("Warsaw", "The city lies on the Vistula.") == "Warsaw: The city lies on the Vistula."
    assert self_contained("Warsaw", "Warsaw is large.") == "Warsaw is large."
    assert self_contained("", "It is large.") == "It is large."


def test_spacy_extractor_finds_entities_propositions_and_triples(extractor):
    text = "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903."
    (out,) = extractor.extract([PassageInput("Marie Curie", text, text)])
    assert {"Marie Curie", "Warsaw"} <= set(out.entities)
    assert out.propositions[1][0].startswith("Marie Curie won the Nobel Prize")
    assert "Marie Curie" in out.propositions[1][1]
    assert ("Marie Curie", "bear in", "Warsaw") in out.triples or any(
        t[0] == "Marie Curie" and t[2] == "Warsaw" for t in out.triples)


def test_imported_extraction_links_sentences_to_imported_entities(tmp_path):
    record = {"title": "Warsaw", "text": "Warsaw is the capital of Poland. It lies on the Vistula.",
              "extracted_entities": ["Poland", "Vistula"],
              "extracted_triples": [["Warsaw", "capital of", "Poland"], ["Warsaw", "lies on", "Vistula"]]}
    path = tmp_path / "openie.json"
    path.write_text(json.dumps({"docs": [record]}))
    (out,) = ImportedExtractor(path).extract([PassageInput("Warsaw", record["text"], record["text"])])
    assert set(out.entities) == {"Warsaw", "Poland", "Vistula"}
    assert out.triples == [("Warsaw", "capital of", "Poland"), ("Warsaw", "lies on", "Vistula")]
    assert out.propositions[0][0] == "Warsaw is the capital of Poland."
    assert set(out.propositions[0][1]) == {"Warsaw", "Poland"}
    assert out.propositions[1][0] == "Warsaw lies on the Vistula."
    assert set(out.propositions[1][1]) == {"Warsaw", "Vistula"}


def test_imported_extraction_file_must_be_valid(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    try:
        ImportedExtractor(bad)
    except ValueError as exc:
        assert "bad.json" in str(exc)
    else:
        raise AssertionError("invalid extraction file accepted")


def test_bench_extract_counts_the_hop_answers_that_propositions_keep(extractor):
    from pathweave_bench.extract import hop_answer_recall, supporting_passages

    text = "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903."
    question = {"paragraphs": [{"idx": 0, "title": "Marie Curie", "paragraph_text": f"Marie Curie\n{text}"},
                               {"idx": 1, "title": "Warsaw", "paragraph_text": "Warsaw lies on the Vistula."}],
                "question_decomposition": [{"answer": "Warsaw", "paragraph_support_idx": 0},
                                           {"answer": "1903", "paragraph_support_idx": 0},
                                           {"answer": "the Vistula river", "paragraph_support_idx": 1}]}
    passages, answers = supporting_passages([question, question])  # each paragraph once; answers found in it only
    assert [(p.title, p.text) for p in passages] == [("Marie Curie", text), ("Warsaw", "Warsaw lies on the Vistula.")]
    assert answers == [["Warsaw", "1903"], []]
    sentences = [[t for t, _ in e.propositions] for e in extractor.extract(passages)]
    assert hop_answer_recall(sentences, answers) == (1.0, 2)
    assert hop_answer_recall([sentences[0][:1], sentences[1]], answers) == (0.5, 2)  # the 1903 sentence dropped
    assert hop_answer_recall([[], []], [[], []]) == (0.0, 0)
