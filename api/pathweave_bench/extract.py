"""``pathweave bench extract``: how much of a passage's facts the LLM extractor's propositions
keep (``--extractor llm``), beside the spaCy extractor in the same run.

Input: the supporting paragraphs of the first N MuSiQue questions (each once). A *hop* is
one sub-question of a question's gold decomposition with the paragraph that supports it,
counted only when its answer occurs in that paragraph. **Hop-answer recall** = the fraction
of hops whose answer (SQuAD-normalized, spec §6) occurs in some proposition extracted from
the paragraph: a fact no proposition states cannot be found by PropRAG's proposition search
nor shown in a token-budgeted context. spaCy's propositions are the paragraph's sentences,
so its recall is the ceiling a sentence split allows.

Per extractor: passages, propositions per passage, words per proposition, hop-answer recall,
seconds per passage (wall clock, extraction only: nothing is ingested; the LLM gets
``PATHWEAVE_LLM_CONCURRENCY`` passages at a time), and for the LLM completion
tokens per passage and spaCy fallbacks (unparsable outputs). The LLM is section ``llm``
(``PATHWEAVE_LLM_*``; the managed local server by default). Writes ``extract.json`` to ``--out``
with every passage's propositions.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pathweave.evaluation import normalize_answer
from pathweave.llm.client import connect
from pathweave.settings import get_settings
from pathweave_bench.common import default_data_dir, git_commit, machine_info, publish_results
from pathweave_bench.musique import load_musique, paragraph_title_text
from pathweave.terminal import progress_bar, stdout_console
from pathweave.extractors.base import PassageInput
from pathweave.extractors.llm_extractor import LLMExtractor
from pathweave.extractors.spacy_extractor import SpacyExtractor


def _contains(text: str, answer: str) -> bool:
    """Whether normalized ``answer`` occurs in normalized ``text`` on word boundaries."""
    answer = normalize_answer(answer)
    return bool(answer) and f" {answer} " in f" {normalize_answer(text)} "


def supporting_passages(questions: list[dict]) -> tuple[list[PassageInput], list[list[str]]]:
    """The questions' supporting paragraphs, each once (first-seen order), and per passage the
    answers of the hops it supports that occur in its text. Returns ``(passages, answers)``
    of equal length."""
    index: dict[tuple[str, str], int] = {}
    passages: list[PassageInput] = []
    answers: list[list[str]] = []
    for question in questions:
        by_idx = {p["idx"]: p for p in question["paragraphs"]}
        for hop in question.get("question_decomposition", []):
            paragraph = by_idx.get(hop.get("paragraph_support_idx"))
            if paragraph is None:
                continue
            key = title, text = paragraph_title_text(paragraph)
            if key not in index:
                index[key] = len(passages)
                passages.append(PassageInput(title, text, text))
                answers.append([])
            if _contains(text, hop["answer"]) and hop["answer"] not in answers[index[key]]:
                answers[index[key]].append(hop["answer"])
    return passages, answers


def hop_answer_recall(propositions: list[list[str]], answers: list[list[str]]) -> tuple[float, int]:
    """``(recall, hops)``: the share of the hop answers of each passage (``answers[i]``) that
    occur in some proposition of that passage (``propositions[i]``), and how many there are
    (recall 0.0 when none)."""
    found = [any(_contains(p, a) for p in props) for props, passage_answers in zip(propositions, answers)
             for a in passage_answers]
    return (sum(found) / len(found) if found else 0.0), len(found)


def _row(extractor, passages: list[PassageInput], answers: list[list[str]], bar, label: str,
         batch: int = 1) -> tuple[dict, list]:
    """Extract every passage, ``batch`` at a time (on the bar); the row's figures and the propositions."""
    task = bar.add_task(label, total=len(passages), rate="")
    started, propositions = time.perf_counter(), []
    for i in range(0, len(passages), batch):
        chunk = extractor.extract(passages[i:i + batch])
        propositions.extend([text for text, _ in extraction.propositions] for extraction in chunk)
        bar.update(task, advance=len(chunk), rate=f"{(time.perf_counter() - started) / len(propositions):.1f} s/passage")
    seconds = time.perf_counter() - started
    recall, hops = hop_answer_recall(propositions, answers)
    count = sum(len(p) for p in propositions)
    row = {"passages": len(passages), "propositions_per_passage": round(count / max(1, len(passages)), 2),
           "words_per_proposition": round(sum(len(p.split()) for ps in propositions for p in ps) / max(1, count), 1),
           "hops": hops, "hop_answer_recall": round(recall, 4),
           "s_per_passage": round(seconds / max(1, len(passages)), 2)}
    return row, propositions


def run_extract(data: Path | None, out: Path, limit: int = 10) -> dict:
    """Run the benchmark on the first ``limit`` questions (0 = all 100); returns (and writes
    ``out/extract.json``) the results dict. Raises LLMError / LLMServerError when the LLM is
    unavailable (before any extraction)."""
    console = stdout_console()
    questions, _ = load_musique(Path(data) if data else default_data_dir(), limit)
    passages, answers = supporting_passages(questions)
    settings = get_settings()
    client = connect(settings.data_dir, settings.llm)
    client.check()
    llm = LLMExtractor(client, settings.llm.concurrency)
    results: dict = {"model": client.model, "questions": len(questions), "machine": machine_info(),
                     "commit": git_commit(), "rows": {}}
    with progress_bar() as bar:
        results["rows"]["spacy"], spacy_props = _row(SpacyExtractor(), passages, answers, bar, "spacy")
        results["rows"]["llm"], llm_props = _row(llm, passages, answers, bar, f"llm ({client.model})",
                                                 llm.concurrency)  # PATHWEAVE_LLM_CONCURRENCY passages at a time
    usage = client.usage()
    results["rows"]["llm"].update(completion_tokens_per_passage=round(usage.completion_tokens / max(1, len(passages))),
                                  fallbacks=llm.fallbacks)
    results["per_passage"] = [{"title": p.title, "hop_answers": a, "spacy": s, "llm": m}
                              for p, a, s, m in zip(passages, answers, spacy_props, llm_props)]
    return publish_results(out, "extract.json", results, print_extract_table, console)


def print_extract_table(results: dict, console: Console) -> None:
    """One row per extractor: propositions per passage, words per proposition, hop-answer
    recall, s/passage, completion tokens and fallbacks (LLM)."""
    machine = results["machine"]
    table = Table(title=f"Extraction of MuSiQue supporting paragraphs ({results['questions']} questions), "
                        f"LLM {results['model']}, {machine['cores']} cores {machine['cpu']}")
    for column in ("extractor", "passages", "props/passage", "words/prop", "hop-answer recall", "hops",
                   "s/passage", "completion tok", "fallbacks"):
        table.add_column(column)
    for name, r in results["rows"].items():
        table.add_row(name, str(r["passages"]), f"{r['propositions_per_passage']:.1f}",
                      f"{r['words_per_proposition']:.1f}", f"{r['hop_answer_recall']:.3f}", str(r["hops"]),
                      f"{r['s_per_passage']:.1f}", str(r.get("completion_tokens_per_passage", "-")),
                      str(r.get("fallbacks", "-")))
    console.print(table)
