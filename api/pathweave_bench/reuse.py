"""``pathweave bench reuse``: APR's reuse across a session on the MuSiQue sample
(spec §3).

A fresh store (temporary data directory) ingests the corpus (with ``--limit N``: only the
paragraphs of the first N questions) with the default extractor. For each question, a
session asks its gold decomposition (``question_decomposition[].question`` with ``#k``
replaced by the gold answer of step k) and then the composed question, in mode ``apr``
(records written: the tenant's memory); each question is also asked fresh just before
(no session, nothing written), so fresh and session see the same memory (earlier answers
and questions of the tenant) and differ only by the session's references. Per
question: the compact prompt's tokens (configured tokenizer) and the context recall of the
gold passages (sub-question k: its supporting paragraph; the composed question: all of
them), counting runs sent and runs referenced. Figures: means over the questions after the
first of each session ("later"), session vs fresh, and the three renderings' token counts
on the same payloads; the plain-text baseline (the covered passages' texts) beside them.

Then, on the same later questions asked fresh, ``selector`` rows: every channel
``unique``, every channel ``include_all``, and the trained DPO policy (``--selector-policy``,
else ``PATHWEAVE_SELECTOR_POLICY_PATH``; its row is left out when there is none), each
with prompt tokens and context recall; and alias consolidation
(:func:`pathweave_bench.consolidation.consolidation_figures`): ``entities_before``/``_after``
and proprag ``recall_at_5_before``/``_after`` on the questions.

Then the ``proprag`` rows (:func:`proprag_rows`): the same sessions asked in mode proprag
with each token budget of :data:`BUDGETS`, in a session (lines already sent referenced by
code: :mod:`pathweave.retrieval.context_codes`) and fresh, with prompt tokens and context recall
of the later questions, and ``matched`` (:func:`matched_recall`): the session curve read at
fresh proprag's recall at budget 400. Writes ``reuse.json`` and ``reuse.html`` (the
recall-vs-tokens plot, :func:`recall_tokens_svg`) to ``--out``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from pathweave.servers import store_server
from pathweave.apr import retrieve
from pathweave.apr.prompt import RENDERINGS
from pathweave.apr.channel_actions import CHANNELS
from pathweave.embedding.embedders import get_query_embedder
from pathweave.query.retriever import Retriever
from pathweave.settings import get_settings
from pathweave.runtime import open_store
from pathweave_bench.common import (default_data_dir, git_commit, machine_info, peak_rss_mb, wait_for_idle_store,
                                    publish_results)
from pathweave_bench.consolidation import consolidation_figures
from pathweave_bench.musique import load_musique, paragraph_document_id
from pathweave.terminal import stdout_console
from pathweave.extractors import make_extractor, question_parser

_PLACEHOLDER = re.compile(r"#(\d+)")


def session_questions(question: dict) -> list[str]:
    """The gold decomposition with ``#k`` replaced by step k's gold answer, then the composed question."""
    steps = question["question_decomposition"]
    answers = [step["answer"] for step in steps]

    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers)
                                else m.group(0), text)
    return [fill(step["question"]).strip() for step in steps] + [question["question"].strip()]


def session_gold(question: dict, tenant: str) -> list[set[str]]:
    """Gold document ids per session question: step k's supporting paragraph, then all supporting ones."""
    paragraphs = question["paragraphs"]
    by_idx = {p.get("idx", i): p for i, p in enumerate(paragraphs)}
    steps = [{paragraph_document_id(by_idx[s["paragraph_support_idx"]], tenant)}
             if s.get("paragraph_support_idx") in by_idx else set() for s in question["question_decomposition"]]
    return steps + [{paragraph_document_id(p, tenant) for p in paragraphs if p["is_supporting"]}]


def corpus_for(questions: list[dict], documents: list, tenant: str) -> list:
    """The documents that are paragraphs of ``questions`` (content ids as the corpus's)."""
    from pathweave.text import stable_id

    wanted = {paragraph_document_id(p, tenant) for q in questions for p in q["paragraphs"]}
    return [d for d in documents if stable_id("doc", tenant, d.title, d.text) in wanted]


def ask_sessions(sessions, suffix: str, measure) -> tuple[list[dict], list[dict]]:
    """Ask every session's questions in order in session ``reuse-<id><suffix>``, each later
    question also fresh just before: ``measure(question, gold, session_id or None)`` -> row.
    Returns the rows of the later questions ``(fresh, session)``."""
    fresh, session = [], []
    for q, asked, gold in sessions:
        sid = f"reuse-{q['id']}{suffix}"
        for i, (text, g) in enumerate(zip(asked, gold)):
            if i:
                fresh.append(measure(text, g, None))
            row = measure(text, g, sid)
            if i:
                session.append(row)
    return fresh, session


def _measure(retriever: Retriever, question: str, gold: set[str], session_id: str | None, doc_of,
             actions: dict[str, str] | None = None) -> dict:
    started = time.perf_counter()
    out = retrieve(retriever.resources, question, session_id=session_id, actions=actions, write_record=session_id is not None)
    ms = (time.perf_counter() - started) * 1000
    context = out.context
    docs = {doc_of(pid) for pid in context.passage_ids}
    return {"prompt_tokens": context.prompt_tokens, "token_counts": context.token_counts,
            "recall": len(gold & docs) / len(gold) if gold else None, "ms": ms,
            "runs": len(context.runs), "reused": sum(run.reused for run in context.runs),
            "passage_ids": context.passage_ids}


def _summary(rows: list[dict], counter, texts) -> dict:
    recalls = [r["recall"] for r in rows if r["recall"] is not None]
    return {"prompt_tokens_later": round(float(np.mean([r["prompt_tokens"] for r in rows])), 1) if rows else None,
            "context_recall_later": round(float(np.mean(recalls)), 4) if recalls else None,
            "renderings_later": {name: round(float(np.mean([r["token_counts"][name] for r in rows])), 1)
                                 for name in RENDERINGS} if rows else {},
            "passage_text_tokens_later": round(float(np.mean([
                counter.count("\n".join(texts(r["passage_ids"]))) for r in rows])), 1) if rows else None,
            "runs_later": round(float(np.mean([r["runs"] for r in rows])), 2) if rows else None,
            "runs_reused_later": round(float(np.mean([r["reused"] for r in rows])), 2) if rows else None,
            "p50_ms": round(float(np.percentile([r["ms"] for r in rows], 50)), 1) if rows else None,
            "questions_later": len(rows)}


def run_reuse(data: Path | None, out: Path, limit: int = 0, selector_policy: Path | None = None) -> dict:
    """Run the benchmark; returns (and writes) the results dict (see the module docstring).
    ``selector_policy``: the DPO policy file of the ``dpo`` selector row (None: the configured one)."""
    from pathweave_ingest.console import run_ingest

    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    questions, documents = load_musique(data, limit)
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-reuse-"))
    tenant = "bench-reuse"
    settings = get_settings().model_copy(update={"data_dir": workdir, "tenant": tenant})
    if limit:
        documents = corpus_for(questions, documents, tenant)
    results: dict = {"machine": {**machine_info(), "load_1m_at_start": round(os.getloadavg()[0], 2)},
                     "commit": git_commit(), "questions": len(questions), "passages": len(documents),
                     "entities_before": None, "entities_after": None, "recall_at_5_before": None,
                     "recall_at_5_after": None, "selector": None}
    try:
        with open_store(settings, tenant=tenant) as store:
            report = run_ingest(store, settings, documents, [], None, label="ingest (default extractor)")
            info = store_server.status(settings)
            results["ingest"] = {"passages": report.passages_new, "triples": report.triples,
                                 "runs": store.counts().get("Run", 0), "seconds": round(report.seconds, 1)}
            results["ingest"]["store_idle_wait_s"] = wait_for_idle_store(info.pid if info else None)
            retriever = Retriever(store, get_query_embedder(settings), settings)
            retriever.resources.question_parser = question_parser(make_extractor(settings))
            counter = retriever.resources.token_counter()
            reader = retriever.resources.reader(retriever.resources.topology())

            def doc_of(pid: str) -> str:
                return (reader.passages([pid]).get(pid) or ("", "", None))[1]

            def texts(pids: list[str]) -> list[str]:
                found = reader.passage_texts(pids)
                return [found[p][0] for p in pids if p in found]

            sessions = [(q, session_questions(q), session_gold(q, tenant)) for q in questions]
            retrieve(retriever.resources, sessions[0][1][0])  # warm: the embedder's first shapes, the indexes
            console.print(f"[dim]{len(sessions)} sessions (decomposition, then the composed question), "
                          "each question also asked fresh[/]")
            fresh, session = ask_sessions(sessions, "", lambda text, g, sid: _measure(retriever, text, g, sid, doc_of))
            results["fresh"] = _summary(fresh, counter, texts)
            results["session"] = _summary(session, counter, texts)
            results["paired"] = paired(fresh, session)
            f, s = results["fresh"], results["session"]
            if f["prompt_tokens_later"]:
                results["token_reduction_later"] = round(1 - s["prompt_tokens_later"] / f["prompt_tokens_later"], 4)
            if f["context_recall_later"] is not None and s["context_recall_later"] is not None:
                results["recall_delta_later"] = round(s["context_recall_later"] - f["context_recall_later"], 4)
            results["renderings"] = {"fresh": f["renderings_later"], "session": s["renderings_later"]}
            later = [(text, g) for _, asked, gold in sessions for text, g in list(zip(asked, gold))[1:]]
            results["selector"] = selector_rows(retriever, later, doc_of, counter, texts, selector_policy)
            console.print(f"[dim]proprag with token budgets {', '.join(map(str, BUDGETS))}: the same sessions, "
                          "each later question also asked fresh[/]")
            results["proprag"] = proprag_rows(retriever, sessions)
            results["matched"] = matched_recall(results["proprag"])
            results.update(consolidation_figures(retriever, questions, console=console))
        results["peak_rss_mb"] = round(peak_rss_mb(), 1)
        results["machine"]["load_1m_at_end"] = round(os.getloadavg()[0], 2)
    finally:
        store_server.stop(settings)
        shutil.rmtree(workdir, ignore_errors=True)
    published = publish_results(out, "reuse.json", results, print_table, console)
    (Path(out) / "reuse.html").write_text(html_report(results))
    console.print(f"wrote {Path(out) / 'reuse.html'}")
    return published


BUDGETS = (50, 100, 150, 200, 300, 400)
"""Token budgets of the proprag rows: the issue's 100 / 200 / 400 and the points between
that the recall-vs-tokens curves are read off."""


def _budgeted(retriever: Retriever, question: str, gold: set[str], budget: int, session_id: str | None) -> dict:
    """One proprag query with ``budget`` (in session ``session_id``, record written; fresh:
    nothing written): the context's tokens (what is sent now) and its context recall (gold
    documents with evidence in the context, referenced lines included: the session has them)."""
    from pathweave_bench.musique import context_recall

    found = retriever.search(question, mode="proprag", token_budget=budget, session_id=session_id,
                             write_record=session_id is not None)
    context = found.result.context
    if context is None:  # nothing retrieved
        return {"prompt_tokens": 0, "recall": 0.0 if gold else None, "lines": 0, "referenced": 0}
    return {"prompt_tokens": context.token_count,
            "recall": context_recall(context.lines, found.subgraph, gold) if gold else None,
            "lines": len(context.lines), "referenced": sum(line.referenced for line in context.lines)}


def proprag_rows(retriever: Retriever, sessions: list[tuple[dict, list[str], list[set[str]]]]) -> dict:
    """``{budget: {fresh, session}}`` over the later questions of ``sessions``: each question
    of a session asked in proprag with the budget in its own session per budget (the first
    question too, so the later ones can reference it), and each later question asked fresh.
    Each row: mean prompt tokens, context recall, lines and lines referenced."""
    def summary(rows: list[dict]) -> dict:
        recalls = [r["recall"] for r in rows if r["recall"] is not None]
        return {"prompt_tokens_later": round(float(np.mean([r["prompt_tokens"] for r in rows])), 1),
                "context_recall_later": round(float(np.mean(recalls)), 4) if recalls else None,
                "lines_later": round(float(np.mean([r["lines"] for r in rows])), 2),
                "referenced_later": round(float(np.mean([r["referenced"] for r in rows])), 2),
                "questions_later": len(rows)}

    out: dict = {}
    for budget in BUDGETS:
        fresh, session = ask_sessions(
            track(sessions, description=f"proprag budget {budget}", console=stdout_console()), f"-b{budget}",
            lambda text, g, sid, budget=budget: _budgeted(retriever, text, g, budget, sid))
        out[str(budget)] = {"fresh": summary(fresh), "session": summary(session), "paired": paired(fresh, session)}
    return out


def paired(fresh: list[dict], session: list[dict]) -> dict:
    """Session minus fresh on the same later questions (rows in the same order): the mean
    difference of context recall and of prompt tokens, each with its standard error."""
    def mean_se(values: list[float]) -> tuple[float | None, float | None]:
        if not values:
            return None, None
        se = float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else None
        return round(float(np.mean(values)), 4), (round(se, 4) if se is not None else None)

    recall = [s["recall"] - f["recall"] for f, s in zip(fresh, session)
              if f["recall"] is not None and s["recall"] is not None]
    tokens = [s["prompt_tokens"] - f["prompt_tokens"] for f, s in zip(fresh, session)]
    (r, r_se), (t, t_se) = mean_se(recall), mean_se(tokens)
    return {"recall_delta": r, "recall_delta_se": r_se, "tokens_delta": t, "tokens_delta_se": t_se}


def matched_recall(rows: dict, reference: int = 400) -> dict | None:
    """The session curve read at fresh proprag's context recall at budget ``reference``: the
    smallest budget whose session recall reaches it, and that row's prompt tokens against
    fresh's at ``reference`` (the issue's target: at most 50 %). None without the rows."""
    if str(reference) not in rows:
        return None
    target = rows[str(reference)]["fresh"]
    for budget in sorted(rows, key=int):
        session = rows[budget]["session"]
        if session["context_recall_later"] is not None and session["context_recall_later"] >= target["context_recall_later"]:
            return {"fresh_budget": reference, "fresh_recall": target["context_recall_later"],
                    "fresh_tokens": target["prompt_tokens_later"], "session_budget": int(budget),
                    "session_recall": session["context_recall_later"], "session_tokens": session["prompt_tokens_later"],
                    "token_ratio": round(session["prompt_tokens_later"] / target["prompt_tokens_later"], 4)}
    return {"fresh_budget": reference, "fresh_recall": target["context_recall_later"],
            "fresh_tokens": target["prompt_tokens_later"], "session_budget": None}


def recall_tokens_svg(results: dict) -> str:
    """The recall-vs-tokens plot (SVG, matplotlib): proprag fresh and in a session over the
    budgets, apr fresh and in a session, and how the session curve was matched to fresh
    proprag's recall at budget 400."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    rows = results.get("proprag") or {}
    for kind, style in (("fresh", "o--"), ("session", "o-")):
        points = [(row[kind]["prompt_tokens_later"], row[kind]["context_recall_later"], budget)
                  for budget, row in sorted(rows.items(), key=lambda item: int(item[0]))]
        if points:
            axes.plot([p[0] for p in points], [p[1] for p in points], style, label=f"proprag, {kind}")
            for x, y, budget in points:
                axes.annotate(budget, (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    for kind, marker in (("fresh", "s"), ("session", "D")):
        row = results.get(kind)
        if row and row.get("prompt_tokens_later"):
            axes.plot([row["prompt_tokens_later"]], [row["context_recall_later"]], marker, label=f"apr, {kind}")
    matched = results.get("matched")
    if matched and matched.get("session_budget"):
        axes.axhline(matched["fresh_recall"], color="grey", linewidth=0.8, linestyle=":")
        axes.plot([matched["session_tokens"], matched["fresh_tokens"]], [matched["session_recall"],
                  matched["fresh_recall"]], "k:", linewidth=0.8)
        axes.annotate(f"session {matched['session_tokens']:.0f} vs fresh {matched['fresh_tokens']:.0f} tokens "
                      f"({matched['token_ratio']:.0%})", (matched["session_tokens"], matched["fresh_recall"]),
                      textcoords="offset points", xytext=(4, 6), fontsize=8)
    axes.set_xlabel("prompt tokens sent (later questions of a session, mean)")
    axes.set_ylabel("context recall of gold passages")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def html_report(results: dict) -> str:
    """A self-contained HTML page: the recall-vs-tokens plot and the results."""
    import html
    import json

    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Pathweave session reuse</title></head>"
            f"<body style='font-family:sans-serif'><h1>Session reuse: recall vs prompt tokens</h1>"
            f"<p>commit {html.escape(str(results.get('commit')))}, MuSiQue {results.get('questions')} questions, "
            f"machine {html.escape(json.dumps(results.get('machine')))}</p>{recall_tokens_svg(results)}"
            f"<pre>{html.escape(json.dumps(results, indent=2))}</pre></body></html>")


def selector_rows(retriever: Retriever, later: list[tuple[str, set[str]]], doc_of, counter, texts,
                  policy: Path | None = None) -> dict:
    """``{unique, include_all[, dpo]}`` -> the :func:`_summary` of ``later`` (question, gold
    documents) asked fresh with every channel ``unique``, every channel ``include_all``, and
    the DPO policy's choice (``policy``, else ``selector.policy_path``; left out without one)."""
    rows = {name: _summary([_measure(retriever, text, gold, None, doc_of, dict.fromkeys(CHANNELS, name))
                            for text, gold in later], counter, texts) for name in ("unique", "include_all")}
    policy = policy or retriever.settings.selector.policy_path
    if policy is not None:  # mode apr asks the policy when no actions are given
        settings = retriever.settings.model_copy(update={"selector": retriever.settings.selector.model_copy(
            update={"policy_path": Path(policy)})})
        chooser = Retriever(retriever.store, retriever.embedder, settings,
                            question_parser=retriever.resources.question_parser)
        rows["dpo"] = _summary([_measure(chooser, text, gold, None, doc_of) for text, gold in later], counter, texts)
    return rows


def print_table(results: dict, console: Console) -> None:
    """Session vs fresh on the later questions: prompt tokens, recall, the renderings."""
    table = Table(title=f"APR reuse, MuSiQue {results['questions']} questions (later questions of each session)")
    for column in ("", "prompt tokens", "context recall", *RENDERINGS, "passage text tokens", "runs (reused)"):
        table.add_column(column)
    rows = [(name, results.get(name) or {}) for name in ("fresh", "session")] + \
        [(f"fresh, {name}", row) for name, row in (results.get("selector") or {}).items()]
    for name, row in rows:
        if not row:
            continue
        table.add_row(name, str(row["prompt_tokens_later"]), str(row["context_recall_later"]),
                      *[str(row["renderings_later"].get(r)) for r in RENDERINGS], str(row["passage_text_tokens_later"]),
                      f"{row['runs_later']} ({row['runs_reused_later']})")
    console.print(table)
    if "token_reduction_later" in results:
        se = (results.get("paired") or {}).get("recall_delta_se")
        console.print(f"session vs fresh: {results['token_reduction_later']:.1%} fewer prompt tokens, "
                      f"context recall {results.get('recall_delta_later', 0):+.4f}"
                      + (f" (paired SE {se})" if se is not None else ""))
    if results.get("proprag"):
        budgets = Table(title="proprag with a token budget, later questions: fresh vs in a session")
        for column in ("budget", "fresh tokens", "fresh recall", "session tokens", "session recall",
                       "recall, session - fresh (SE)", "lines (referenced)"):
            budgets.add_column(column)
        for budget, row in sorted(results["proprag"].items(), key=lambda item: int(item[0])):
            f, s = row["fresh"], row["session"]
            d = row.get("paired") or {}
            budgets.add_row(budget, str(f["prompt_tokens_later"]), str(f["context_recall_later"]),
                            str(s["prompt_tokens_later"]), str(s["context_recall_later"]),
                            f"{d.get('recall_delta')} ± {d.get('recall_delta_se')}",
                            f"{s['lines_later']} ({s['referenced_later']})")
        console.print(budgets)
    matched = results.get("matched")
    if matched and matched.get("session_budget"):
        console.print(f"fresh proprag at budget {matched['fresh_budget']}: recall {matched['fresh_recall']} with "
                      f"{matched['fresh_tokens']} tokens; a session reaches {matched['session_recall']} at budget "
                      f"{matched['session_budget']} with {matched['session_tokens']} tokens "
                      f"({matched['token_ratio']:.1%})")
    elif matched:
        console.print(f"no session budget reaches fresh proprag's recall at budget {matched['fresh_budget']} "
                      f"({matched['fresh_recall']})")
    if results.get("entities_before") is not None:
        console.print(f"alias consolidation: {results['entities_before']} -> {results['entities_after']} entities, "
                      f"proprag R@5 {results['recall_at_5_before']:.4f} -> {results['recall_at_5_after']:.4f}")
