"""``pathweave bench qa``: answer quality with an LLM on the MuSiQue sample.

A fresh store (temporary data directory) ingests the 1,890-passage corpus with the
default extractor; the LLM is section ``llm`` (``PATHWEAVE_LLM_*``) (the managed local server of the
configured data directory by default, so its assembled model is reused). Each question
is answered five ways, all in the same run:

- ``dense_top5``: from the dense top-5 passages; ``proprag_top5``: from PropRAG's top 5;
- ``proprag_budget_200`` / ``_400``: from PropRAG's token-budgeted context (spec §5);
- ``prunerag``: the PruneRAG tree (spec §4), every node retrieved by PropRAG;
- ``proprag_stream``: PropRAG's top 5 answered as ``POST /v1/query`` with ``stream`` answers
  (prose with ``[n]`` citations, read as the model writes it): its time to the first piece
  (``first_ms``, from the query's start) beside its time to the whole answer, and the paired
  per-question difference of the two (``whole_minus_first``).

Per row: EM and token F1 (spec §6, SQuAD normalization, max over answer + aliases), mean
prompt and completion tokens, LLM calls per question and p50 latency (ms, retrieval +
LLM); for every row but ``dense_top5``, its F1 against the dense top-5 answers on the same
questions (``f1_vs_dense``: mean per-question difference, its standard error, questions
better / worse; on 20 questions one answer moves the mean by up to 0.05). EFR (spec §4)
= P(answer wrong | every gold passage was retrieved): for PruneRAG over everything its
tree retrieved, and for "root only" (the answer from the root's PropRAG top-5, i.e.
``proprag_top5``). Writes ``qa.json`` to ``--out``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from pathweave.servers import store_server
from pathweave.answering import generate_answer
from pathweave.embedding.embedders import get_query_embedder
from pathweave.errors import LLMUnavailable
from pathweave.evaluation import exact_match, paired_difference, percentile_ms, token_f1
from pathweave.model import Answer
from pathweave.llm.client import connect
from pathweave.query.retriever import Retriever
from pathweave.settings import get_settings
from pathweave.runtime import open_store
from pathweave_bench.common import default_data_dir, git_commit, machine_info, wait_for_idle_store, publish_results
from pathweave_bench.musique import gold_documents, load_musique
from pathweave.terminal import progress_bar, stdout_console
from pathweave_ingest.console import run_ingest

ROWS = ("dense_top5", "proprag_top5", "proprag_budget_200", "proprag_budget_400", "prunerag", "proprag_stream")


def _row_run(retriever: Retriever, client, question: str, row: str):
    """``(result, retrieved doc ids, ms to the first streamed piece or None)`` of one row for
    one question."""
    if row == "prunerag":
        result = retriever.search(question, "prunerag", 5, write_record=False).result
        return result, [hit.doc_id for hit in result.tree.retrieved_passages()], None
    if row == "proprag_stream":
        started, first = time.perf_counter(), []

        def on_event(event) -> None:
            if event.kind == "token" and not first:
                first.append((time.perf_counter() - started) * 1000)
        result = retriever.query(question, "proprag", 5, write_record=False, answer=True, on_event=on_event)
        return result, [hit.doc_id for hit in result.passages], first[0] if first else None
    mode = "dense" if row == "dense_top5" else "proprag"
    budget = int(row.rsplit("_", 1)[1]) if "budget" in row else None
    result = retriever.search(question, mode, 5, write_record=False, token_budget=budget).result
    try:
        result.answer = generate_answer(client, result)
    except LLMUnavailable as exc:  # the model server exited: this answer failed, the next call restarts it
        result.answer = Answer(text="", source="passages", model=getattr(client, "model", ""), error=str(exc))
    return result, [hit.doc_id for hit in result.passages], None


def efr(cases: list[tuple[bool, float]]) -> float | None:
    """Evidence forgetting rate (spec §4): mean(forget) / mean(all gold retrieved) over
    ``(all_gold_retrieved, em)`` cases; None when no case retrieved all its gold."""
    gold = [all_gold for all_gold, _ in cases]
    forget = [all_gold and em == 0.0 for all_gold, em in cases]
    return round(float(np.mean(forget)) / float(np.mean(gold)), 4) if any(gold) else None


def run_qa(data: Path | None, out: Path, limit: int = 0, rows: tuple[str, ...] = ROWS) -> dict:
    """Run the benchmark; returns (and writes ``out/qa.json``) the results dict."""
    console = stdout_console()
    questions, documents = load_musique(Path(data) if data else default_data_dir(), limit)
    base = get_settings()
    llm = base.llm
    console.print(f"[dim]LLM: {llm.model} at {llm.base_url or 'the managed local server'}[/]")
    client = connect(base.data_dir, llm)  # before the store: a missing model fails fast
    client.check(logprobs="prunerag" in rows)
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-qa-"))
    spacy = base.ingest.model_copy(update={"extractor": "spacy"})  # the default extractor, whatever is configured
    settings = base.model_copy(update={"data_dir": workdir, "tenant": "bench-qa", "ingest": spacy})
    per_row = {row: {"em": [], "f1": [], "prompt_tokens": [], "completion_tokens": [], "llm_calls": [], "ms": [],
                     "first_ms": [], "errors": 0, "efr": []} for row in rows}
    details = []
    results: dict = {"model": client.model, "endpoint": llm.base_url or "managed llama.cpp server",
                     "questions": len(questions), "machine": machine_info(), "commit": git_commit(),
                     "prunerag": base.prunerag.model_dump()}
    try:
        with open_store(settings) as store:
            report = run_ingest(store, settings, documents, [], label="ingest MuSiQue corpus")
            info = store_server.status(settings)
            wait_for_idle_store(info.pid if info else None)
            retriever = Retriever(store, get_query_embedder(settings), settings, llm=client)
            retriever.warm_up(10)
            results["ingest_s"] = round(report.seconds, 1)
            with progress_bar() as bar:
                task = bar.add_task("answer", total=len(questions) * len(rows), rate="")
                for question in questions:
                    answers = [question["answer"], *question.get("answer_aliases", [])]
                    gold = gold_documents(question, store.tenant)
                    detail = {"id": question["id"], "question": question["question"], "gold": question["answer"]}
                    for row in rows:
                        started = time.perf_counter()
                        result, docs, first_ms = _row_run(retriever, client, question["question"], row)
                        ms = (time.perf_counter() - started) * 1000
                        answer = result.answer
                        em, f1 = exact_match(answer.text, answers), token_f1(answer.text, answers)
                        stats = per_row[row]
                        stats["em"].append(em)
                        stats["f1"].append(f1)
                        stats["prompt_tokens"].append(answer.prompt_tokens)
                        stats["completion_tokens"].append(answer.completion_tokens)
                        stats["llm_calls"].append(answer.llm_calls)
                        stats["ms"].append(ms)
                        if first_ms is not None:
                            stats["first_ms"].append((first_ms, ms))
                        stats["errors"] += answer.error is not None
                        stats["efr"].append((gold <= set(docs), em))
                        detail[row] = {"answer": answer.text, "em": em, "f1": round(f1, 3), "ms": round(ms),
                                       **({"first_ms": round(first_ms)} if first_ms is not None else {}),
                                       "prompt_tokens": answer.prompt_tokens, "error": answer.error,
                                       **({"tree": [(n.decision, n.text, n.answer, n.confidence)
                                                    for n in result.tree.nodes]} if result.tree else {})}
                        bar.advance(task)
                        bar.update(task, rate=f"{row}: {ms / 1000:.0f} s")
                    details.append(detail)
    finally:
        store_server.stop(settings)
        shutil.rmtree(workdir, ignore_errors=True)
    results["rows"] = {row: {"em": round(float(np.mean(s["em"])), 4), "f1": round(float(np.mean(s["f1"])), 4),
                             "prompt_tokens": round(float(np.mean(s["prompt_tokens"])), 1),
                             "completion_tokens": round(float(np.mean(s["completion_tokens"])), 1),
                             "llm_calls": round(float(np.mean(s["llm_calls"])), 2),
                             "p50_ms": round(percentile_ms(s["ms"], 50), 1), "errors": s["errors"],
                             "efr": efr(s["efr"])}
                       for row, s in per_row.items() if s["em"]}
    for row, s in per_row.items():
        if s["first_ms"]:  # a streamed row: the first piece beside the whole answer, on the same questions
            firsts, wholes = [f for f, _ in s["first_ms"]], [w for _, w in s["first_ms"]]
            results["rows"][row].update({
                "first_p50_ms": round(percentile_ms(firsts, 50), 1), "first_p95_ms": round(percentile_ms(firsts, 95), 1),
                "whole_minus_first": paired_difference(wholes, firsts).as_dict()})
    dense = per_row.get("dense_top5", {}).get("f1")
    if dense:
        for row, figures in results["rows"].items():
            if row != "dense_top5":
                figures["f1_vs_dense"] = paired_difference(per_row[row]["f1"], dense).as_dict()
    results["efr"] = {"prunerag": results["rows"].get("prunerag", {}).get("efr"),
                      "root_only": results["rows"].get("proprag_top5", {}).get("efr")}
    results["llm_usage"] = vars(client.usage())
    results["per_question"] = details
    return publish_results(out, "qa.json", results, print_qa_table, console)


def print_qa_table(results: dict, console: Console) -> None:
    """One row per answer source: EM, F1 (and its paired difference to dense top-5 +- its
    standard error), tokens, LLM calls, p50 latency, EFR."""
    machine = results["machine"]
    table = Table(title=f"MuSiQue QA ({results['questions']} questions), {results['model']}, "
                        f"{machine['cores']} cores {machine['cpu']}")
    for column in ("row", "EM", "F1", "F1 - dense (SE)", "prompt tok", "completion tok", "LLM calls", "p50 s",
                   "first piece p50 s", "EFR", "errors"):
        table.add_column(column)
    for row, r in results["rows"].items():
        vs = r.get("f1_vs_dense")
        table.add_row(row, f"{r['em']:.3f}", f"{r['f1']:.3f}", f"{vs['mean']:+.3f} ({vs['se']:.3f})" if vs else "-",
                      f"{r['prompt_tokens']:.0f}", f"{r['completion_tokens']:.0f}", f"{r['llm_calls']:.1f}",
                      f"{r['p50_ms'] / 1000:.1f}", f"{r['first_p50_ms'] / 1000:.2f}" if "first_p50_ms" in r else "-",
                      "-" if r["efr"] is None else f"{r['efr']:.3f}", str(r["errors"]))
    console.print(table)
    console.print(f"EFR: PruneRAG {results['efr']['prunerag']} vs root only (PropRAG top-5) {results['efr']['root_only']}")
    for row, r in results["rows"].items():
        if "whole_minus_first" in r:
            d = r["whole_minus_first"]
            console.print(f"{row}: the whole answer comes {d['mean'] / 1000:.2f} s (SE {d['se'] / 1000:.2f}) after its "
                          f"first piece (first piece p50 {r['first_p50_ms'] / 1000:.2f} s, whole p50 "
                          f"{r['p50_ms'] / 1000:.2f} s)")
