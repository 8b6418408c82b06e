"""``pathweave train selector``: the APR selector policy trained with DPO (spec §3 "Selector
policy (DPO)"; APR paper §2.8).

For each MuSiQue question (``--data``, the first ``--limit``) the APR retrieval runs with all
27 action combinations of the channels facts, questions and answers; each is measured as
(accuracy, prompt tokens, latency ms), accuracy = context recall of the gold passages (or
exact match of the LLM's answer from the compact prompt with ``--accuracy em``). The
measurements go to ``--examples`` (JSONL; questions already there are not measured again),
the policy is trained on them (:func:`pathweave.apr.policy.train_policy`) and saved to
``--out``; point ``PATHWEAVE_SELECTOR_POLICY_PATH`` at it to use it.

The questions' passages are ingested into ``--tenant`` of the configured store first (all of
the corpus without ``--limit``; idempotent: what is stored is skipped). Before a question is
measured, its gold decomposition (MuSiQue's sub-questions, ``#k`` replaced by the gold
sub-answers) is asked and recorded, so that the channels questions and answers hold the
earlier questions a session would have asked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.table import Table

from pathweave.apr.examples import Evaluator, SelectorExample, SelectorQuestion, context_recall
from pathweave.terminal import console, progress_bar, stdout_console

train_app = typer.Typer(help="Train Pathweave's learned parts.", no_args_is_help=True)


def musique_questions(data: Path, limit: int, tenant: str) -> tuple[list[SelectorQuestion], list, dict[str, list[str]]]:
    """The first ``limit`` MuSiQue questions of ``data`` (0 = all) as :class:`SelectorQuestion`
    (gold = the supporting paragraphs' document ids in ``tenant``), the corpus documents
    they need (their 20 paragraphs each; the whole corpus when ``limit`` is 0) and each
    question's earlier questions: its gold decomposition (:func:`decomposition`)."""
    from pathweave_bench.musique import gold_documents, load_musique

    raw, documents = load_musique(data, limit)
    questions = [SelectorQuestion(q["id"], q["question"], frozenset(gold_documents(q, tenant)),
                                  tuple([q["answer"], *q.get("answer_aliases", [])])) for q in raw]
    if limit:
        wanted = {(p["title"].strip(), p["paragraph_text"].strip()) for q in raw for p in q["paragraphs"]}
        documents = [d for d in documents if (d.title, d.text) in wanted]
    return questions, documents, {q["id"]: decomposition(q) for q in raw}


def decomposition(question: dict) -> list[str]:
    """MuSiQue's gold sub-questions of ``question`` (``question_decomposition[].question``)
    with each ``#k`` placeholder replaced by the gold answer of sub-question k."""
    steps = question.get("question_decomposition") or []
    out = []
    for step in steps:
        text = step["question"]
        for k in range(len(steps), 0, -1):  # #10 before #1
            text = text.replace(f"#{k}", steps[k - 1].get("answer", ""))
        out.append(text)
    return out


def context_evaluator(select_context: Callable[[str, dict[str, str]], tuple[str, int, set[str]]],
                      accuracy: str = "recall", answer: Callable[[str, str], str] | None = None) -> Evaluator:
    """An :data:`~pathweave.apr.examples.Evaluator` over ``select_context(question,
    actions) -> (prompt text, prompt tokens, document ids whose evidence it holds)`` (the APR
    selection). Accuracy: ``recall`` = context recall of the question's gold documents;
    ``em`` = exact match of ``answer(question, prompt text)`` (the LLM) with the gold answers.
    Latency (ms): the selection, plus the answer for ``em``."""
    from pathweave.evaluation import exact_match

    if accuracy not in ("recall", "em") or (accuracy == "em" and answer is None):
        raise ValueError("accuracy is 'recall' or 'em' (em needs an answer function)")

    def evaluate(question: SelectorQuestion, actions: dict[str, str]) -> tuple[float, int, float]:
        started = time.perf_counter()
        text, tokens, docs = select_context(question.text, actions)
        if accuracy == "em":
            value = exact_match(answer(question.text, text), list(question.answers))
        else:
            value = context_recall(docs, question.gold)
        return value, tokens, (time.perf_counter() - started) * 1000

    return evaluate


def llm_answer(client) -> Callable[[str, str], str]:
    """``(question, prompt text) -> answer text`` by the LLM (the answer prompt of
    :mod:`pathweave.answering` with the compact prompt as its sources; "" on a failure)."""
    from pathweave.answering import ANSWER_TOKENS, answer_messages, answer_schema, parse_answer
    from pathweave.errors import LLMUnavailable
    from pathweave.llm.client import LLMError

    def answer(question: str, sources: str) -> str:
        try:
            completion = client.chat(answer_messages(question, sources), schema=answer_schema([]),
                                     max_tokens=ANSWER_TOKENS)
            return parse_answer(completion)[0]
        except (LLMError, LLMUnavailable, ValueError):  # a crashed model server: this one fails, the next restarts it
            return ""

    return answer


def apr_select_context(retriever) -> Callable[[str, dict[str, str]], tuple[str, int, set[str]]]:
    """``(question, actions) -> (compact prompt, prompt tokens, document ids of the passages it
    covers)`` of the APR retrieval (:func:`pathweave.apr.retrieve`, spec §3) with those
    selection actions; nothing is written."""
    from pathweave.apr import retrieve

    def select_context(question: str, actions: dict[str, str]) -> tuple[str, int, set[str]]:
        context = retrieve(retriever.resources, question, actions=actions).context
        return context.prompt, context.prompt_tokens, set(context.doc_ids)

    return select_context


def measure_with_store(settings, questions: list[SelectorQuestion], documents: list, path: Path, token_budget: int,
                       accuracy: str, prior: dict[str, list[str]]) -> list[SelectorExample]:
    """Ingest ``documents`` into the configured store's tenant (skipping what is stored),
    then measure the questions missing from ``path`` with the APR selection (progress bar).
    Before a question is measured its earlier questions ``prior[id]`` (the gold
    decomposition) are asked and recorded (question and answer runs), so the channels
    questions and answers hold what a session would have; the 27 measured runs of the
    question itself write nothing."""
    from pathweave.apr import retrieve
    from pathweave.embedding.embedders import get_query_embedder
    from pathweave.query.retriever import Retriever
    from pathweave.apr.examples import measure_examples
    from pathweave.runtime import open_store
    from pathweave_ingest.console import run_ingest
    from pathweave.extractors import make_extractor, question_parser

    with open_store(settings) as store:
        run_ingest(store, settings, documents, [], label="ingest MuSiQue passages")
        embedder = get_query_embedder(settings)
        retriever = Retriever(store, embedder, settings)
        retriever.resources.question_parser = question_parser(make_extractor(settings))
        answer = llm_answer(retriever.resources.llm_client()) if accuracy == "em" else None
        select_context = apr_select_context(retriever)
        evaluator = context_evaluator(select_context, accuracy, answer)
        counter = retriever.resources.token_counter()

        def ask_earlier(question: SelectorQuestion) -> None:
            for earlier in prior.get(question.id, []):
                text = answer(earlier, retrieve(retriever.resources, earlier).context.prompt) if answer else None
                retrieve(retriever.resources, earlier, write_record=True, answer_text=text)

        with progress_bar() as bar:
            task = bar.add_task("measure 27 selector combinations", total=len(questions), rate="")
            examples = measure_examples(questions, evaluator, embedder.encode, counter.count, token_budget, path,
                                        progress=lambda question: bar.advance(task), prepare=ask_earlier)
    return examples


def policy_rows(policy, examples: list[SelectorExample], settings) -> dict[str, dict]:
    """Mean accuracy and prompt tokens over ``examples`` (as measured) of the policy's choice
    per question, ``unique`` everywhere, ``include_all`` everywhere and ``best``: each
    question's highest-utility combination under ``settings`` (section ``selector``)."""
    from pathweave.apr.policy import CHANNELS, COMBINATIONS, combination

    def row(choose) -> dict:
        picked = [e.outcomes[COMBINATIONS.index(combination(choose(e)))] for e in examples]
        return {"accuracy": round(float(np.mean([o.accuracy for o in picked])), 4),
                "prompt_tokens": round(float(np.mean([o.prompt_tokens for o in picked])), 1)}

    return {"dpo": row(lambda e: policy.choose(e.features())),
            "unique": row(lambda e: dict.fromkeys(CHANNELS, "unique")),
            "include_all": row(lambda e: dict.fromkeys(CHANNELS, "include_all")),
            "best": row(lambda e: e.best(settings))}


@train_app.command("selector")
def train_selector(
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    limit: int = typer.Option(0, min=0, help="Only the first N questions (0 = all)."),
    out: Path = typer.Option(Path("selector-policy.safetensors"), help="Where the trained policy goes."),
    examples: Path = typer.Option(Path("selector-examples.jsonl"), help="Measured examples (JSONL): read, "
                                  "extended with the questions not in it yet."),
    tenant: str = typer.Option("musique", help="Tenant of the configured store holding the MuSiQue passages."),
    accuracy: str = typer.Option("recall", help="recall (context recall of the gold passages) | em (exact match "
                                                "of the LLM's answer, PATHWEAVE_LLM_*)."),
    budget: Optional[int] = typer.Option(None, min=0, help="Token budget feature recorded with the examples "
                                                            "(default: selector.token_budget)."),
    holdout: int = typer.Option(0, min=0, help="Measure but do not train on the last N questions; report the "
                                               "policy on them beside unique and include_all."),
) -> None:
    """Measure the 27 selector action combinations per question, train the DPO selector
    policy on them and save it."""
    from pathweave.apr.examples import measure_examples, read_examples, training_arrays
    from pathweave.apr.policy import train_policy
    from pathweave.settings import get_settings
    from pathweave_bench.common import default_data_dir

    settings = get_settings().model_copy(update={"tenant": tenant})
    if accuracy not in ("recall", "em"):
        console.print(f"[red]error:[/] --accuracy is recall or em, got {accuracy!r}")
        raise typer.Exit(2)
    try:
        questions, documents, prior = musique_questions(data or default_data_dir(), limit, tenant)
        known = {e.id for e in read_examples(examples)}
    except (FileNotFoundError, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    if holdout >= len(questions):
        console.print(f"[red]error:[/] --holdout {holdout} leaves no question of {len(questions)} to train on")
        raise typer.Exit(2)
    token_budget = settings.selector.token_budget if budget is None else budget
    if all(q.id in known for q in questions):  # nothing to measure: no store, no models
        measured = measure_examples(questions, None, None, None, token_budget, examples)
    else:
        measured = measure_with_store(settings, questions, documents, examples, token_budget, accuracy, prior)
    train, held_out = (measured[:-holdout], measured[-holdout:]) if holdout else (measured, [])
    features, utilities = training_arrays(train, settings.selector)
    meta = {"embedder": settings.models.embedder or "all-MiniLM-L6-v2", "data": str(data or default_data_dir()),
            "accuracy": accuracy}
    try:
        with progress_bar() as bar:
            task = bar.add_task("train selector (DPO)", total=None, rate="")
            policy, report = train_policy(features, utilities, settings.selector, meta=meta,
                                          progress=lambda step, total: bar.update(task, completed=step, total=total))
    except ValueError as exc:  # e.g. no preference pairs: every combination scored the same
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1)
    policy.save(out)
    figures = {"train": policy_rows(policy, train, settings.selector),
               **({"held_out": policy_rows(policy, held_out, settings.selector)} if held_out else {})}
    table = Table(title="selector actions per question, as measured (mean over the questions)")
    for column in ("questions", "selector", "accuracy", "prompt tokens"):
        table.add_column(column)
    for split, rows in figures.items():
        for name, row in rows.items():
            table.add_row(f"{split} ({len(train) if split == 'train' else len(held_out)})", name,
                          f"{row['accuracy']:.3f}", f"{row['prompt_tokens']:.1f}")
    stdout_console().print(table)
    console.print(f"{report.pairs} preference pairs from {report.examples} questions; DPO loss "
                  f"{report.loss[0]:.4f} -> {report.loss[-1]:.4f} in {report.seconds:.1f} s; policy written to {out}")
    console.print_json(json.dumps({**figures, "loss": [round(v, 4) for v in report.loss]}))
