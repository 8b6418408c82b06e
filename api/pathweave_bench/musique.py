"""``pathweave bench musique``: retrieval quality and speed on the MuSiQue sample.

A fresh store (temporary data directory) ingests the 1,890-passage corpus
twice, as two tenants: with the default spaCy extractor and with the imported
gpt-3.5 OpenIE extraction. Each of the 100 questions runs in the retrieval modes that
need no LLM (proprag, dense, hipporag2: the baselines are taken in the same run;
PruneRAG is measured by ``pathweave bench qa``).
Prints one table and writes ``musique.json`` and ``musique.html`` to ``--out``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from rich.console import Console
from rich.table import Table

from pathweave.servers import store_server
from pathweave.embedding.embedders import get_embedder, get_query_embedder
from pathweave.evaluation import percentile_ms, recall_at_k
from pathweave.model import RETRIEVAL_ONLY
from pathweave.query.retriever import Retriever
from pathweave.settings import get_settings
from pathweave.runtime import open_store
from pathweave.text import stable_id
from pathweave_bench.common import (default_data_dir, git_commit, ingestion_profile, machine_info, peak_rss_mb,
                                    profile_table, project_now, wait_for_idle_store, with_backend)
from pathweave.terminal import stdout_console
from pathweave_ingest.loaders import SourceDocument

EXTRACTION_FILE = "openie_gpt-3.5-turbo-1106.json"


def load_musique(data: Path, limit: int = 0) -> tuple[list[dict], list[SourceDocument]]:
    """The MuSiQue sample in ``data``: its first ``limit`` questions (0 = all) and the corpus
    as documents (``musique#<i>`` sources)."""
    corpus = json.loads((data / "musique_train_corpus.json").read_text())
    questions = json.loads((data / "musique_train.json").read_text())
    documents = [SourceDocument(f"musique#{i}", d["title"].strip(), d["text"].strip()) for i, d in enumerate(corpus)]
    return (questions[:limit] if limit else questions), documents


def paragraph_title_text(paragraph: dict) -> tuple[str, str]:
    """``(title, text)`` of one MuSiQue paragraph as the corpus stores it: its
    ``paragraph_text`` without a leading ``title + "\n"``, both stripped."""
    title, text = paragraph["title"].strip(), paragraph["paragraph_text"].strip()
    if text.startswith(title + "\n"):
        text = text[len(title) + 1:].strip()
    return title, text


def paragraph_document_id(paragraph: dict, tenant: str) -> str:
    """The document id of one MuSiQue paragraph in the corpus (title + paragraph_text rule)."""
    return stable_id("doc", tenant, *paragraph_title_text(paragraph))


def gold_documents(question: dict, tenant: str) -> set[str]:
    """Document ids of the question's supporting paragraphs (title + paragraph_text rule)."""
    return {paragraph_document_id(p, tenant) for p in question["paragraphs"] if p["is_supporting"]}


def evaluate(retriever: Retriever, questions: list[dict], mode: str, console: Console) -> dict:
    """Recall@2/5 and latency percentiles of ``mode`` over ``questions`` (warm)."""
    retriever.query(questions[0]["question"], mode=mode, k=5)  # warm: topology matrices, baseline graph
    r2, r5, latencies, stages = [], [], [], {}
    for question in questions:
        started = time.perf_counter()
        result = retriever.query(question["question"], mode=mode, k=20)
        latencies.append((time.perf_counter() - started) * 1000)
        for stage, ms in result.timings_ms.items():
            stages.setdefault(stage, []).append(ms)
        docs = [hit.doc_id for hit in result.passages]
        gold = gold_documents(question, retriever.store.tenant)
        r2.append(recall_at_k(docs, gold, 2))
        r5.append(recall_at_k(docs, gold, 5))
    retriever.flush()  # the reasoning records, written meanwhile in the background
    return {"recall_at_2": round(sum(r2) / len(r2), 4), "recall_at_5": round(sum(r5) / len(r5), 4),
            "per_question": {"recall_at_2": [round(x, 4) for x in r2], "recall_at_5": [round(x, 4) for x in r5]},
            "p50_ms": round(percentile_ms(latencies, 50), 1), "p95_ms": round(percentile_ms(latencies, 95), 1),
            "stage_p50_ms": {k: round(percentile_ms(v, 50), 1) for k, v in stages.items()},
            "stage_p95_ms": {k: round(percentile_ms(v, 95), 1) for k, v in stages.items()}}


def context_recall(lines, subgraph, gold: set[str]) -> float:
    """Share of gold documents whose evidence (a passage or a proposition it states) is in
    the context; ``subgraph``: the query's G_sub the context was selected from."""
    prop_index = {rid: i for i, rid in enumerate(subgraph.prop_ids)}
    passage_doc = dict(zip(subgraph.passage_ids, subgraph.passage_docs))
    covered: set[str] = set()
    for line in lines:
        if line.kind == "passage":
            covered.add(passage_doc[line.id])
        elif line.kind == "proposition":
            covered |= {subgraph.passage_docs[i] for i in subgraph.prop_passages[prop_index[line.id]].indices}
    return len(covered & gold) / len(gold)


def truncated_top_k(hits, budget: int, counter, k: int = 5) -> tuple[list[str], int]:
    """The "top-k passages truncated to the budget" baseline: documents (partly) included, tokens used."""
    docs, used = [], 0
    for hit in hits[:k]:
        cost = counter.count(f"- {hit.text} [{hit.title}]")
        if used >= budget:
            break
        docs.append(hit.doc_id)
        used += min(cost, budget - used)
    return docs, used


def evaluate_budgets(retriever: Retriever, questions: list[dict], budgets: list[int], reach_step: int = 25) -> dict:
    """Context recall and tokens per budget: ILP vs greedy vs truncated top-5 passages (spec §5).

    Also the smallest budget (searched in steps of ``reach_step`` tokens) at which the ILP
    context reaches the recall of the top-5 passages, and the tokens it used there.
    """
    from pathweave.retrieval.context import candidate_graph, select_context

    counter = retriever.resources.token_counter()
    limit_ms = retriever.settings.selection.select_time_limit_ms
    full = {"recall": [], "tokens": []}
    cases = []  # (gold, result, candidate graph, subgraph) per question
    for question in questions:
        gold = gold_documents(question, retriever.store.tenant)
        found = retriever.search(question["question"], mode="proprag", k=retriever.settings.selection.context_passages,
                                 write_record=False)
        result = found.result
        graph = candidate_graph(result, found.subgraph, found.query, retriever.settings.selection.path_weight)
        cases.append((gold, result, graph, found.subgraph))
        top5 = [hit.doc_id for hit in result.passages[:5]]
        full["recall"].append(len(gold & set(top5)) / len(gold))
        full["tokens"].append(sum(counter.count(f"- {h.text} [{h.title}]") for h in result.passages[:5]))

    def run(budget: int, methods: tuple[str, ...]) -> dict:
        row = {m: {"recall": [], "tokens": [], "solve_ms": [], "objective": []} for m in (*methods, "topk_truncated")}
        for gold, result, graph, subgraph in cases:
            for method in methods:
                context = select_context(graph, budget, method, counter, "bullets", limit_ms)
                row[method]["recall"].append(context_recall(context.lines, subgraph, gold))
                row[method]["tokens"].append(context.token_count)
                row[method]["solve_ms"].append(context.solve_ms)
                row[method]["objective"].append(context.objective)
            docs, used = truncated_top_k(result.passages, budget, counter)
            row["topk_truncated"]["recall"].append(len(gold & set(docs)) / len(gold))
            row["topk_truncated"]["tokens"].append(used)
        out = {method: {"context_recall": round(float(np.mean(v["recall"])), 4),
                        "tokens": round(float(np.mean(v["tokens"])), 1),
                        **({"solve_ms_p50": round(percentile_ms(v["solve_ms"], 50), 1),
                            "solve_ms_p95": round(percentile_ms(v["solve_ms"], 95), 1)} if v["solve_ms"] else {})}
               for method, v in row.items()}
        if "greedy" in methods:
            ilp, greedy = np.asarray(row["ilp"]["objective"]), np.asarray(row["greedy"]["objective"])
            ok = ilp > 0
            out["greedy_over_ilp_objective"] = round(float(np.mean(greedy[ok] / ilp[ok])), 4) if ok.any() else None
        return out

    summary: dict = {"top5_passages": {"context_recall": round(float(np.mean(full["recall"])), 4),
                                       "tokens": round(float(np.mean(full["tokens"])), 1)},
                     "candidate_nodes_mean": round(float(np.mean([len(g.nodes) for _, _, g, _ in cases])), 1),
                     "budgets": {str(b): run(b, ("ilp", "greedy")) for b in budgets}}
    target, top5_tokens = summary["top5_passages"]["context_recall"], summary["top5_passages"]["tokens"]
    summary["tokens_to_reach_top5_recall"] = None
    for budget in range(reach_step, int(top5_tokens) + reach_step, reach_step):
        row = summary["budgets"].get(str(budget)) or run(budget, ("ilp",))
        if row["ilp"]["context_recall"] >= target:
            summary["tokens_to_reach_top5_recall"] = {
                "budget": budget, "ilp_context_recall": row["ilp"]["context_recall"], "ilp_tokens": row["ilp"]["tokens"],
                "share_of_top5_tokens": round(row["ilp"]["tokens"] / top5_tokens, 3)}
            break
    return summary


def evaluate_selection_sizes(retriever: Retriever, questions: list[dict], passages: tuple[int, ...] = (5, 10, 15, 30),
                             budget: int = 400, reference_ms: float = 2000.0) -> dict:
    """ILP vs greedy on the real candidate graphs of ``questions`` built from their top
    5/10/15/30 passages (~40, 65, 100 and 200 nodes): ILP wall time (50 ms limit) p50/p95
    in ms and how often it proves optimality, each selector's objective as a fraction of
    the best known, and the time a ``reference_ms`` warm-started ILP run needs to prove
    optimality (p50/p95 ms over the graphs it proves)."""
    from pathweave.retrieval.context import candidate_graph
    from pathweave.selection import assign_costs, select, solve_ilp

    counter = retriever.resources.token_counter()
    limit_ms = retriever.settings.selection.select_time_limit_ms
    rows: dict[int, dict[str, list]] = {n: {k: [] for k in ("nodes", "ms", "optimal", "ilp", "greedy", "ref_optimal",
                                                          "ref_ms")}
                                        for n in passages}
    for question in questions:
        found = retriever.search(question["question"], mode="proprag", k=max(passages), write_record=False)
        result = found.result
        for n in passages:
            top = result.model_copy(update={"passages": result.passages[:n]})
            graph = assign_costs(candidate_graph(top, found.subgraph, found.query,
                                                 retriever.settings.selection.path_weight), counter)
            ilp, greedy = select(graph, budget, "ilp", limit_ms), select(graph, budget, "greedy")
            reference = solve_ilp(graph, budget, time_limit_ms=reference_ms,
                                  hint=max(ilp, greedy, key=lambda s: s.objective).selected)
            best = max(reference.objective, ilp.objective, greedy.objective)
            row = rows[n]
            row["nodes"].append(len(graph.nodes))
            row["ms"].append(ilp.solve_ms)
            row["optimal"].append(ilp.status == "OPTIMAL")
            row["ref_optimal"].append(reference.status == "OPTIMAL")
            if reference.status == "OPTIMAL":
                row["ref_ms"].append(reference.solve_ms)
            row["ilp"].append(ilp.objective / best if best > 0 else 1.0)
            row["greedy"].append(greedy.objective / best if best > 0 else 1.0)
    return {"budget": budget, "time_limit_ms": limit_ms, "questions": len(questions), "sizes": {
        str(n): {"passages": n, "nodes_mean": round(float(np.mean(r["nodes"])), 1),
                 "ilp_ms_p50": round(percentile_ms(r["ms"], 50), 1), "ilp_ms_p95": round(percentile_ms(r["ms"], 95), 1),
                 "ilp_optimal_frac": round(float(np.mean(r["optimal"])), 3),
                 "reference_optimal_frac": round(float(np.mean(r["ref_optimal"])), 3),
                 "prove_ms_p50": round(percentile_ms(r["ref_ms"], 50), 1) if r["ref_ms"] else None,
                 "prove_ms_p95": round(percentile_ms(r["ref_ms"], 95), 1) if r["ref_ms"] else None,
                 "ilp_over_best": round(float(np.mean(r["ilp"])), 4),
                 "greedy_over_best": round(float(np.mean(r["greedy"])), 4)}
        for n, r in rows.items()}}


def paired_mean_se(a, b) -> dict:
    """Mean and standard error of the per-question paired difference ``a - b`` (same
    questions, same order), with ``n``."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
    return {"mean": round(float(diff.mean()), 4) if len(diff) else 0.0, "se": round(se, 4), "n": len(diff)}


def paired_difference(row: dict, base: dict) -> dict:
    """The per-question paired difference ``row - base`` of one mode's results (``evaluate``'s
    dicts over the same questions): mean and standard error of R@2 and R@5. The 100 questions
    are one sample, so the SE of the paired mean is what tells a gain from noise."""
    entry = {}
    for metric in ("recall_at_2", "recall_at_5"):
        paired = paired_mean_se(row["per_question"][metric], base["per_question"][metric])
        entry[metric] = {"mean": paired["mean"], "se": paired["se"]}
    return entry


def paired_differences(results: dict, reference: str) -> dict:
    """For every row keyed ``<extraction>@<embedder>[@backend]`` whose embedder is not
    ``reference``: the per-question paired difference (:func:`paired_difference`) to the same
    extraction, mode and backend with ``reference``."""
    out: dict = {}
    for key, modes in results.items():
        parts = key.split("@")
        if len(parts) < 2 or parts[1] == reference:
            continue
        base = results.get("@".join([parts[0], reference, *parts[2:]]))
        if base is None:
            continue
        for mode, row in modes.items():
            if mode in base and "per_question" in row:
                out.setdefault(key, {})[mode] = paired_difference(row, base[mode])
    return out


def reembedded_rows(base, backend: str, source: str, target, documents: list[SourceDocument],
                    questions: list[dict], clean: dict, console: Console) -> dict:
    """``pathweave reembed`` measured: a tenant ingested with the ``source`` embedder, switched
    in place to ``target`` (the settings of the clean run), then asked the questions in the
    retrieval modes that need no LLM. Returns ``{"ingest_s", "reembed_s", "vectors", "synonyms",
    "aliases", "results": {mode: evaluate's dict}, "paired": {mode: paired difference to
    clean}}``; ``clean``: the clean ingest's results by mode."""
    from pathweave_ingest.console import run_ingest
    from pathweave_ingest.reembed import reembed

    tenant = f"bench-reembed-{source}-{target.models.embedder}"
    settings = with_backend(base.with_embedder(source), backend)
    with open_store(settings, tenant=tenant) as store:
        report = run_ingest(store, settings.model_copy(update={"tenant": tenant}), documents, [], None,
                            label=f"ingest with {source}", keep_texts=True)
    out: dict = {"ingest_s": round(report.seconds, 1)}
    with open_store(target, tenant=tenant) as store:
        console.print(f"[dim]re-embedding tenant {tenant}: {source} -> {target.models.embedder}[/]")
        started = time.perf_counter()
        done = reembed(store, get_embedder(target), target)
        out |= {"reembed_s": round(time.perf_counter() - started, 1), "vectors": done.vectors,
                "synonyms": done.synonyms, "aliases": done.aliases, "results": {}, "paired": {}}
        retriever = Retriever(store, get_query_embedder(target), target)
        retriever.warm_up()
        for mode in RETRIEVAL_ONLY:
            console.print(f"[dim]querying {len(questions)} questions: re-embedded / {mode}[/]")
            out["results"][mode] = evaluate(retriever, questions, mode, console)
            out["paired"][mode] = paired_difference(out["results"][mode], clean[mode])
    return out


def run_musique(data: Path | None, out: Path, limit: int = 0, extractions: list[str] | None = None,
                budgets: list[int] | None = None, rescore_tops: list[int] | None = None,
                backends: list[str] | None = None, embedders: list[str] | None = None,
                reembed_from: str | None = None) -> dict:
    """Run the benchmark; returns (and writes) the results dict. ``rescore_tops``: extra
    proprag runs with these re-scoring depths M (rows ``proprag_m<M>``). ``backends``: the
    managed stores to run on, one after the other on the same corpus (``arcadedb``,
    ``neo4j``; default ArcadeDB alone); with Neo4j the rows are keyed ``<extraction>@<backend>``,
    and Neo4j adds the row ``proprag_gds`` (stage 1 by ``gds.pageRank``, ``stage1_ppr = gds``).
    ``embedders``: catalog embedders compared side by side (each with its calibrated
    thresholds, its own tenants); with more than one the rows are keyed
    ``<extraction>@<embedder>[@<backend>]`` and ``paired`` holds each embedder's per-question
    differences to the first one's. ``reembed_from``: also ingest the default extraction with
    this embedder and switch it in place to each of ``embedders`` (:func:`reembedded_rows`;
    ``results["reembed"]``, keyed like the rows)."""
    from pathweave_ingest.console import run_ingest

    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    questions, documents = load_musique(data, limit)
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-"))
    base = get_settings().model_copy(update={"data_dir": workdir})
    backends = backends or ["arcadedb"]
    results: dict = {"results": {}, "ingest": {}, "machine": machine_info(), "commit": git_commit(),
                     "questions": len(questions), "passages": len(documents), "backends": backends}
    started: list = []
    try:
        if budgets:  # first, while no store server shares the cores
            from pathweave_bench.selection import synthetic_solve_stats

            console.print("[dim]ILP vs greedy on synthetic candidate graphs of 50/100/200 nodes[/]")
            results["selection_synthetic"] = synthetic_solve_stats(sizes=(50, 100, 200), trials=20, budget=400)
        names = embedders or [base.models.embedder]
        results["embedders"] = names
        results["reembed_from"] = reembed_from
        runs = [(backend, name, extraction) for backend in backends for name in names
                for extraction in extractions or ["default", "imported"]]
        for backend, name, extraction in runs:
            settings = with_backend(base.with_embedder(name), backend)
            embedder = get_query_embedder(settings)  # what queries embed with (the CLI's and the API's)
            if started and started[-1].store.backend != backend:
                store_server.stop(started[-1])  # one store server at a time: the next backend gets the cores
            started.append(settings)
            key = "@".join([extraction] + ([name] if len(names) > 1 else []) + ([] if backends == ["arcadedb"]
                                                                              else [backend]))
            tenant = f"bench-{extraction}-{name}"
            file = data / EXTRACTION_FILE if extraction == "imported" else None
            with open_store(settings, tenant=tenant) as store:
                report = run_ingest(store, settings.model_copy(update={"tenant": tenant}), documents, [], file,
                                    label=f"ingest ({key})", keep_texts=extraction == "default")
                info = store_server.status(settings)
                results["ingest"][key] = {
                    "passages": report.passages_new, "propositions": report.propositions_new,
                    "entities": report.entities_new, "triples": report.triples,
                    "seconds": round(report.seconds, 1), "passages_per_s": round(report.passages_per_s, 2),
                    "peak_rss_mb": round(peak_rss_mb(), 1),
                    "store_server_rss_mb": round(psutil.Process(info.pid).memory_info().rss / 2**20, 1) if info else None,
                }
                if extraction == "default":
                    console.print("[dim]the embed-only floor: the embedder alone on the texts ingestion embedded[/]")
                results["ingest"][key]["profile"] = ingestion_profile(report, get_embedder(settings))
                console.print("[dim]waiting for the store server to finish its post-ingestion work[/]")
                results["ingest"][key]["store_idle_wait_s"] = wait_for_idle_store(info.pid if info else None)
                results["ingest"][key]["gds_projection_s"] = project_now(store)
                retriever = Retriever(store, embedder, settings)
                results["ingest"][key]["warm_up_s"] = round(retriever.warm_up(), 1)
                results["results"][key] = {}
                for mode in RETRIEVAL_ONLY:  # the LLM modes: pathweave bench qa
                    console.print(f"[dim]querying {len(questions)} questions: {key} / {mode}[/]")
                    results["results"][key][mode] = evaluate(retriever, questions, mode, console)
                # the vector hits alone beside the default's fusion with full-text hits
                alone = settings.retrieval.model_copy(update={"lexical": "off"})
                variant = Retriever(store, embedder, settings.model_copy(update={"retrieval": alone}),
                                    cache=retriever.resources.cache)
                for mode in ("proprag", "dense"):
                    console.print(f"[dim]querying {len(questions)} questions: {key} / {mode}, vector hits alone[/]")
                    results["results"][key][f"{mode}_vector_only"] = evaluate(variant, questions, mode, console)
                # mode apr with the paper's facts channel (the run index's nearest runs) beside
                # the default (the fact runs of PropRAG's top passages), on the same questions
                console.print(f"[dim]querying {len(questions)} questions: {key} / apr, facts from the run index[/]")
                apr_index = settings.apr.model_copy(update={"facts_source": "index"})
                variant = Retriever(store, embedder, settings.model_copy(update={"apr": apr_index}),
                                    cache=retriever.resources.cache)
                results["results"][key]["apr_index"] = evaluate(variant, questions, "apr", console)
                if backend == "neo4j":  # stage 1 in the database: gds.pageRank on the projection
                    console.print(f"[dim]querying {len(questions)} questions: {key} / proprag, stage 1 by GDS[/]")
                    params = settings.retrieval.model_copy(update={"stage1_ppr": "gds"})
                    variant = Retriever(store, embedder, settings.model_copy(update={"retrieval": params}),
                                        cache=retriever.resources.cache)
                    results["results"][key]["proprag_gds"] = evaluate(variant, questions, "proprag", console)
                for m in rescore_tops or []:
                    console.print(f"[dim]querying {len(questions)} questions: {key} / proprag, M = {m}[/]")
                    params = settings.retrieval.model_copy(update={"rescore_top": m})
                    variant = Retriever(store, embedder, settings.model_copy(update={"retrieval": params}),
                                        cache=retriever.resources.cache)
                    results["results"][key][f"proprag_m{m}"] = evaluate(variant, questions, "proprag", console)
                if reembed_from and extraction == "default" and name != reembed_from:
                    results.setdefault("reembed", {})[key] = reembedded_rows(
                        base, backend, reembed_from, settings, documents, questions, results["results"][key], console)
                if budgets:
                    console.print(f"[dim]token-budgeted context: {key}, budgets {budgets}[/]")
                    results.setdefault("context", {})[key] = evaluate_budgets(retriever, questions, budgets)
                    console.print(f"[dim]ILP vs greedy on real candidate graphs of ~50-200 nodes: {key}[/]")
                    results.setdefault("selection_sizes", {})[key] = evaluate_selection_sizes(
                        retriever, questions[:30])
        results["peak_rss_mb"] = round(peak_rss_mb(), 1)
        if len(names) > 1:
            results["paired"] = paired_differences(results["results"], names[0])
    finally:
        for settings in started:
            store_server.stop(settings)
        shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "musique.json").write_text(json.dumps(results, indent=2))
    (out / "musique.html").write_text(html_report(results))
    print_table(results, console)
    if results.get("context"):
        print_context_table(results, console)
    console.print(f"wrote {out / 'musique.json'} and {out / 'musique.html'}")
    return results


def print_table(results: dict, console: Console) -> None:
    table = Table(title=f"MuSiQue ({results['questions']} questions, {results['passages']} passages) "
                        f"on {results['machine']['cores']} cores, {results['machine']['cpu']}")
    for column in ("extraction", "mode", "R@2", "R@5", "p50 ms", "p95 ms", "ingest p/s", "peak RSS MiB"):
        table.add_column(column, no_wrap=column in ("extraction", "mode"), min_width=11 if column == "mode" else None)
    for extraction, modes in results["results"].items():
        ingest = results["ingest"][extraction]
        for mode, r in modes.items():
            table.add_row(extraction, mode, f"{r['recall_at_2']:.3f}", f"{r['recall_at_5']:.3f}",
                          f"{r['p50_ms']:.0f}", f"{r['p95_ms']:.0f}", f"{ingest['passages_per_s']:.1f}",
                          f"{ingest['peak_rss_mb']:.0f}")
    console.print(table)
    profiles = {key: ingest["profile"] for key, ingest in results["ingest"].items() if "profile" in ingest}
    if profiles:
        console.print(profile_table(profiles))
    if results.get("paired"):
        paired = Table(title=f"Paired per-question difference to {results['embedders'][0]} (mean ± SE)")
        for column in ("row", "mode", "ΔR@2", "ΔR@5"):
            paired.add_column(column)
        for key, modes in results["paired"].items():
            for mode, entry in modes.items():
                paired.add_row(key, mode, *(f"{entry[m]['mean']:+.3f} ± {entry[m]['se']:.3f}"
                                            for m in ("recall_at_2", "recall_at_5")))
        console.print(paired)
    if results.get("reembed"):
        table = Table(title=f"pathweave reembed from {results['reembed_from']}: the switched tenant against a "
                            "clean ingest with the same embedder (paired per-question difference, mean ± SE)")
        for column in ("row", "re-embed s", "mode", "R@2", "R@5", "ΔR@2", "ΔR@5"):
            table.add_column(column)
        for key, entry in results["reembed"].items():
            for mode, r in entry["results"].items():
                table.add_row(key, f"{entry['reembed_s']:.0f}", mode, f"{r['recall_at_2']:.3f}",
                              f"{r['recall_at_5']:.3f}", *(f"{entry['paired'][mode][m]['mean']:+.3f} ± "
                                                           f"{entry['paired'][mode][m]['se']:.3f}"
                                                           for m in ("recall_at_2", "recall_at_5")))
        console.print(table)


def print_context_table(results: dict, console: Console) -> None:
    table = Table(title="Token-budgeted context (proprag candidates): context recall / mean tokens")
    for column in ("extraction", "budget", "ILP", "greedy", "top-5 truncated", "ILP solve p50/p95 ms", "greedy/ILP"):
        table.add_column(column)
    for extraction, summary in results["context"].items():
        for budget, row in summary["budgets"].items():
            table.add_row(extraction, budget,
                          *(f"{row[m]['context_recall']:.3f} / {row[m]['tokens']:.0f}" for m in ("ilp", "greedy", "topk_truncated")),
                          f"{row['ilp']['solve_ms_p50']:.0f} / {row['ilp']['solve_ms_p95']:.0f}",
                          f"{row['greedy_over_ilp_objective']}")
        top = summary["top5_passages"]
        console.print(f"{extraction}: top-5 passages reach context recall {top['context_recall']:.3f} with "
                      f"{top['tokens']:.0f} tokens; ILP reaches it: {summary['tokens_to_reach_top5_recall']}")
    console.print(table)
    if results.get("selection_sizes"):
        sizes = Table(title="ILP vs greedy on real candidate graphs (budget 400 tokens, 50 ms limit)")
        for column in ("extraction", "passages", "nodes", "ILP ms p50/p95", "ILP optimal", "ILP/best", "greedy/best",
                       "time to prove p50/p95 ms"):
            sizes.add_column(column)
        for extraction, study in results["selection_sizes"].items():
            for row in study["sizes"].values():
                sizes.add_row(extraction, str(row["passages"]), f"{row['nodes_mean']:.0f}",
                              f"{row['ilp_ms_p50']:.0f} / {row['ilp_ms_p95']:.0f}", f"{row['ilp_optimal_frac']:.0%}",
                              f"{row['ilp_over_best']:.4f}", f"{row['greedy_over_best']:.4f}",
                              f"{row['prove_ms_p50']} / {row['prove_ms_p95']}")
        console.print(sizes)


def _bars(title: str, items: list[tuple[str, float]], unit: str, scale: float) -> str:
    height = 24 * len(items) + 30
    rows = [f'<text x="0" y="16" font-weight="bold">{title}</text>']
    for i, (label, value) in enumerate(items):
        y = 30 + 24 * i
        width = max(1.0, value / scale * 420)
        rows.append(f'<text x="0" y="{y + 14}" font-size="12">{label}</text>'
                    f'<rect x="200" y="{y}" width="{width:.1f}" height="18" fill="#4a7bd0"/>'
                    f'<text x="{205 + width:.1f}" y="{y + 14}" font-size="12">{value:g} {unit}</text>')
    return f'<svg width="760" height="{height}" xmlns="http://www.w3.org/2000/svg">{"".join(rows)}</svg>'


def html_report(results: dict) -> str:
    """A self-contained HTML page with recall and latency bar charts."""
    import html

    recall = [(f"{e}/{m} R@5", r["recall_at_5"]) for e, modes in results["results"].items() for m, r in modes.items()]
    recall2 = [(f"{e}/{m} R@2", r["recall_at_2"]) for e, modes in results["results"].items() for m, r in modes.items()]
    latency = [(f"{e}/{m} p50", r["p50_ms"]) for e, modes in results["results"].items() for m, r in modes.items()]
    max_latency = max([v for _, v in latency] + [1.0])
    body = "".join([
        _bars("Recall@5", recall, "", 1.0), _bars("Recall@2", recall2, "", 1.0),
        _bars("Query latency p50", latency, "ms", max_latency),
    ])
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Pathweave MuSiQue benchmark</title></head>"
            f"<body style='font-family:sans-serif'><h1>Pathweave MuSiQue benchmark</h1>"
            f"<p>commit {html.escape(results['commit'])}, machine {html.escape(json.dumps(results['machine']))}</p>"
            f"{body}<pre>{html.escape(json.dumps(results, indent=2))}</pre></body></html>")
