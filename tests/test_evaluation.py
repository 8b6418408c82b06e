"""Answer metrics of spec §6, the paired comparison bench qa reports, and its table (pure logic)."""

import io
import sys

import pytest
from rich.console import Console

from pathweave.evaluation import exact_match, paired_difference, token_f1
from pathweave_bench.qa import print_qa_table
from pathweave.terminal import REDIRECTED_WIDTH, stdout_console


def test_exact_match_and_f1_use_squad_normalization_over_aliases():
    assert exact_match("The Finnish  markka.", ["Finnish markka"]) == 1.0
    assert exact_match("markka", ["Finnish markka"]) == 0.0
    assert token_f1("markka", ["Finnish markka"]) == pytest.approx(2 / 3)
    assert token_f1("Sonora", ["northwestern Mexico", "Sonora"]) == 1.0
    assert token_f1("", ["Sonora"]) == 0.0


def test_paired_difference_counts_questions_and_gives_the_standard_error():
    diff = paired_difference([1.0, 0.5, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0])
    assert (diff.better, diff.worse, diff.n) == (1, 1, 4)
    assert diff.mean == pytest.approx(0.125)
    # differences 1, 0, -0.5, 0: sample std 0.6292, / sqrt(4)
    assert diff.se == pytest.approx(0.31458, abs=1e-5)
    assert paired_difference([0.3], [0.1]).se == 0.0


@pytest.mark.parametrize("a, b", [([], []), ([0.1, 0.2], [0.1])])
def test_paired_difference_rejects_unpaired_scores(a, b):
    with pytest.raises(ValueError, match="equally long"):
        paired_difference(a, b)


def test_the_qa_table_shows_each_rows_f1_against_dense_top5():
    row = {"em": 0.1, "f1": 0.2, "prompt_tokens": 330, "completion_tokens": 20, "llm_calls": 1, "p50_ms": 8000,
           "errors": 0, "efr": None}
    results = {"questions": 4, "model": "m", "machine": {"cores": 2, "cpu": "cpu"},
               "efr": {"prunerag": None, "root_only": None},
               "rows": {"dense_top5": row,
                        "proprag_budget_200": {**row, "f1_vs_dense": paired_difference([1, 0.5, 0, 0], [0, 0.5, 0.5, 0])
                                               .as_dict()}}}
    console = Console(record=True, width=200)
    print_qa_table(results, console)
    cells = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
             for line in console.export_text().splitlines() if line.startswith("│")}
    assert cells["proprag_budget_200"][3] == "+0.125 (0.315)"
    assert cells["dense_top5"][3] == "-"  # no difference to itself


def test_a_redirected_stdout_console_is_wide_enough_for_the_qa_table(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)  # `bench qa ... | tee log`: not a terminal
    console = stdout_console()
    assert console.width == REDIRECTED_WIDTH
    row = {"em": 0.05, "f1": 0.139, "prompt_tokens": 330, "completion_tokens": 20, "llm_calls": 1, "p50_ms": 8000,
           "errors": 0, "efr": None}
    print_qa_table({"questions": 20, "model": "qwen2.5-coder-1.5b", "machine": {"cores": 2, "cpu": "AMD EPYC"},
                    "efr": {"prunerag": 0.643, "root_only": 0.909},
                    "rows": {"dense_top5": row, "proprag_budget_200": {
                        **row, "f1_vs_dense": paired_difference([0.5, 0], [0, 0.25]).as_dict()}}}, console)
    text = out.getvalue()
    assert "…" not in text  # rich's 80 columns cut these cells short
    assert "proprag_budget_200" in text and "+0.125 (0.375)" in text
    monkeypatch.setenv("COLUMNS", "100")
    assert stdout_console().width == 100  # an explicit width still wins
