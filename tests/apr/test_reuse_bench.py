"""``pathweave bench reuse``'s sessions on the real MuSiQue sample (../shared/bench/musique):
the gold decomposition with ``#k`` filled by step k's gold answer, then the composed question,
and the gold paragraphs of each step."""

from __future__ import annotations

import pytest

from pathweave_bench.common import default_data_dir
from pathweave_bench.musique import gold_documents, load_musique
from pathweave_bench.reuse import corpus_for, session_gold, session_questions


@pytest.fixture(scope="module")
def musique():
    try:
        return load_musique(default_data_dir(), 10)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def test_sessions_fill_the_placeholders_with_the_gold_sub_answers(musique):
    questions, _ = musique
    first = questions[0]
    asked = session_questions(first)
    steps = first["question_decomposition"]
    assert len(asked) == len(steps) + 1 and asked[-1] == first["question"].strip()
    assert asked[1] == steps[1]["question"].replace("#1", steps[0]["answer"]).strip()
    assert not any("#1" in text or "#2" in text for q in questions for text in session_questions(q)[:-1])


def test_each_step_has_its_supporting_paragraph_and_the_last_all_of_them(musique):
    questions, documents = musique
    for question in questions:
        gold = session_gold(question, "t")
        assert all(len(step) == 1 for step in gold[:-1])
        assert gold[-1] == gold_documents(question, "t") and set().union(*gold[:-1]) <= gold[-1]
    corpus = corpus_for(questions[:2], documents, "t")
    assert 0 < len(corpus) <= sum(len(q["paragraphs"]) for q in questions[:2])


def test_a_missing_selector_policy_is_refused_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from pathweave_cli.main import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "reuse", "--selector-policy", str(tmp_path / "none.safetensors"),
                                      "--out", str(out)])
    assert result.exit_code == 2 and "no policy file" in result.output
    assert not out.exists()
