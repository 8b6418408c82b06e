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


def _row(tokens: float, recall: float) -> dict:
    return {"prompt_tokens_later": tokens, "context_recall_later": recall, "lines_later": 3.0,
            "referenced_later": 1.0, "questions_later": 10}


def test_the_session_curve_is_read_at_fresh_proprags_recall_at_budget_400():
    from pathweave_bench.reuse import html_report, matched_recall

    rows = {"100": {"fresh": _row(95, 0.40), "session": _row(90, 0.55)},
            "200": {"fresh": _row(190, 0.55), "session": _row(150, 0.72)},
            "400": {"fresh": _row(380, 0.70), "session": _row(300, 0.80)}}
    matched = matched_recall(rows)
    assert (matched["session_budget"], matched["session_tokens"], matched["token_ratio"]) == (200, 150, 0.3947)
    rows["200"]["session"] = _row(150, 0.69)  # below the target: the next budget that reaches it
    assert matched_recall(rows)["session_budget"] == 400
    rows["400"]["session"] = _row(300, 0.5)
    assert matched_recall(rows)["session_budget"] is None
    page = html_report({"commit": "c", "questions": 3, "machine": {}, "proprag": rows, "matched": matched,
                        "fresh": _row(1200, 0.47), "session": _row(450, 0.49)})
    assert page.count("<svg") == 1 and "proprag, session" in page and "apr, fresh" in page
