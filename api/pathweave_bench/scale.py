"""``pathweave bench scale``: the query path as the corpus grows.

One store, one tenant, default extractor. Size "base": the MuSiQue corpus; size "scaled":
the same plus distractor passages (default: the 6,119 2WikiMultihopQA passages in
``../shared/bench/scale``, 4.2x). Ingestion runs in this process; queries in a separate
query-only process (:class:`QueryProcess`), as an API replica beside an ingestion worker.
At each size: PropRAG and dense Recall@2/5 on the MuSiQue questions, PropRAG with the
exact stage-1 power iteration instead of the local push (the approximation's recall
effect), warm query p50/p95, the query process's RSS (what serving the tenant costs), the
store server's RSS and the ingestion rate. Then freshness at the scaled size, in
:data:`FRESH_DOCUMENTS` rounds: ingest one new document and time the query process's next
query, which must return it (medians of the rounds, and each round). Writes
``scale.json`` to ``--out``.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

from pathweave.servers import store_server
from pathweave.embedding.embedders import get_query_embedder
from pathweave.evaluation import percentile_ms
from pathweave.query.retriever import Retriever
from pathweave.settings import get_settings
from pathweave.runtime import open_store
from pathweave_bench.common import (default_data_dir, git_commit, machine_info, profile_table, project_now,
                                    publish_results, wait_for_idle_store, with_backend)
from pathweave_bench.musique import evaluate, paired_difference
from pathweave.terminal import stdout_console
from pathweave_ingest.loaders import SourceDocument

FRESH_DOCUMENTS = [  # (title, text, question): invented facts no corpus states
    ("Velmora Lighthouse", "The Velmora Lighthouse on the island of Qisk was designed by the engineer Tamsin "
     "Oakhollow and first lit in 1893.", "Who designed the lighthouse on the island of Qisk?"),
    ("Brannoch Viaduct", "The Brannoch Viaduct across the Ulvre gorge was built by the contractor Idris "
     "Penhallow between 1871 and 1874.", "Who built the viaduct across the Ulvre gorge?"),
    ("Sorrel Quay Observatory", "The Sorrel Quay Observatory in the town of Marrowick was founded by the "
     "astronomer Liesl Vantongeren in 1902.", "Who founded the observatory in Marrowick?"),
    ("Hethra Canal", "The Hethra Canal linking Dunmarrow to the Pell estuary was surveyed by the engineer "
     "Osric Tallowmere in 1788.", "Who surveyed the canal linking Dunmarrow to the Pell estuary?"),
    ("Quillon Abbey Library", "The Quillon Abbey Library on the river Ask was endowed by the merchant Berenike "
     "Solvay in 1655.", "Who endowed the library of the abbey on the river Ask?"),
]
"""One document per freshness round: ingested into the scaled store, then the query
process's very next query asks its question. A first query is one sample of a latency
(two quiet runs of the same code: 195 and 222 ms), so the figure is the median of the
rounds, with every round's value beside it."""


def default_distractors() -> list[Path]:
    """``../shared/bench/scale/2wikimultihopqa_corpus.json`` beside the MuSiQue folder."""
    return [default_data_dir().parent / "scale" / "2wikimultihopqa_corpus.json"]


def rss_mb(pid: int | None = None) -> float:
    """Current resident memory of ``pid`` (default: this process), MiB."""
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


EXACT = "proprag_exact"
"""The reference row: proprag with the exact stage-1 PPR (power iteration) on the tenant's
whole topology (:func:`exact_reference`)."""


def exact_reference(retriever: Retriever) -> Retriever:
    """A retriever of ``retriever``'s store whose proprag is the exact reference: stage 1 by
    power iteration over the tenant's whole topology (``query.topology = whole``, a cache of
    its own), what a frontier's bounded push is compared against."""
    settings = retriever.settings
    return Retriever(retriever.store, retriever.embedder, settings.model_copy(update={
        "retrieval": settings.retrieval.model_copy(update={"stage1_ppr": "power"}),
        "query": settings.query.model_copy(update={"topology": "whole"})}))


def measure(retriever: Retriever, questions: list[dict], console: Console) -> dict:
    """Recall and latency of proprag (push and exact PPR) and dense on ``questions``."""
    proprag = evaluate(retriever, questions, "proprag", console)
    dense = evaluate(retriever, questions, "dense", console)
    # what a query process holds to serve (before the exact-PPR reference below builds its
    # whole-graph walk matrix, which serving never does)
    serving_rss = rss_mb()
    power = evaluate(exact_reference(retriever), questions, "proprag", console)
    return {"recall_at_2": proprag["recall_at_2"], "recall_at_5": proprag["recall_at_5"],
            "dense_recall_at_2": dense["recall_at_2"], "dense_recall_at_5": dense["recall_at_5"],
            "exact_ppr_recall_at_2": power["recall_at_2"], "exact_ppr_recall_at_5": power["recall_at_5"],
            "p50_ms": proprag["p50_ms"], "p95_ms": proprag["p95_ms"],
            "exact_ppr_p50_ms": power["p50_ms"], "dense_p50_ms": dense["p50_ms"],
            "stage_p50_ms": proprag["stage_p50_ms"], "query_rss_mb": serving_rss}


WARM_UP_QUERIES = 200
"""Title queries ("What is known about <title>?", not the evaluated questions) before each
size is timed. The scaled size used to be timed after the base size's ~350 queries had run
and the base size after the service's 50 alone, so the two p50s were taken in different
states (base 167 ms, scaled 136 ms, quiet run of de33c68)."""


def _refresh_and_measure(retriever: Retriever, console: Console, questions: list[dict]) -> dict:
    """In the query process after an ingestion: the first query (which applies the graph
    changes), :data:`WARM_UP_QUERIES` warm-up queries, then :func:`measure`."""
    started = time.perf_counter()
    retriever.query("What is known about this?", write_record=False)  # applies the changes
    refresh_s = time.perf_counter() - started
    retriever.warm_up(WARM_UP_QUERIES)
    return {**measure(retriever, questions, console), "first_query_after_ingest_s": round(refresh_s, 2)}


def _fresh_query(retriever: Retriever, console: Console, title: str, question: str) -> dict:
    """In the query process right after one new document (``title``) was ingested elsewhere:
    the very next query, ``question`` (must return it): its ms, stage timings and rank."""
    started = time.perf_counter()
    result = retriever.query(question, k=5, write_record=False)
    first_ms = (time.perf_counter() - started) * 1000
    rank = next((hit.rank for hit in result.passages if hit.title == title), None)
    return {"first_query_ms": round(first_ms, 1), "stages_ms": result.timings_ms, "found": rank is not None,
            "rank": rank}


def _first_query(retriever: Retriever, console: Console, question: str) -> dict:
    """The process's first query (its tenant's topology loaded from the store): its ms."""
    started = time.perf_counter()
    retriever.query(question, k=5, write_record=False)
    return {"first_query_ms": round((time.perf_counter() - started) * 1000, 1)}


def _modes(retriever: Retriever, console: Console, questions: list[dict], modes: list[str]) -> dict:
    """:func:`~pathweave_bench.musique.evaluate` of each of ``modes`` (warm), without the
    per-question lists; :data:`EXACT` is the exact reference (:func:`exact_reference`), and
    proprag's paired difference to it (``proprag.vs_exact``: mean and SE of R@2 and R@5)
    when both ran. The process's RSS before hipporag2 or the reference (``query_rss_mb``:
    what serving PropRAG and dense holds; both read the tenant's whole topology) and after
    all of them, and its query caches (before the reference: the serving ones)."""
    figures, results, serving_rss, caches = {}, {}, None, None
    for mode in modes:
        if mode in ("hipporag2", EXACT) and serving_rss is None:
            serving_rss, caches = rss_mb(), retriever.resources.cache.stats()
        runner = exact_reference(retriever) if mode == EXACT else retriever
        results[mode] = evaluate(runner, questions, "proprag" if mode == EXACT else mode, console)
        figures[mode] = {key: results[mode][key] for key in ("recall_at_2", "recall_at_5", "p50_ms", "p95_ms")}
    if EXACT in results and "proprag" in results:
        figures["proprag"]["vs_exact"] = paired_difference(results["proprag"], results[EXACT])
    return {"modes": figures, "query_rss_mb": serving_rss or rss_mb(), "query_rss_all_modes_mb": rss_mb(),
            "caches": caches or retriever.resources.cache.stats()}


_COMMANDS = {"measure": _refresh_and_measure, "fresh": _fresh_query, "first": _first_query, "modes": _modes,
             "warm_up": lambda retriever, console, queries: retriever.warm_up(queries),
             "warm_p50": lambda retriever, console, questions: evaluate(retriever, questions, "proprag",
                                                                        console)["p50_ms"]}


def _serve_queries(conn, settings, tenant: str) -> None:
    """Body of the query process: one store connection, one retriever, commands from ``conn``."""
    embedder = get_query_embedder(settings)
    with open_store(settings, tenant=tenant) as store:
        retriever = Retriever(store, embedder, settings)
        console = stdout_console()
        while True:
            command, args = conn.recv()
            if command == "stop":
                return
            try:
                conn.send((True, _COMMANDS[command](retriever, console, *args)))
            except Exception as exc:  # noqa: BLE001 - reported to the benchmark process
                conn.send((False, f"{type(exc).__name__}: {exc}"))


class QueryProcess:
    """A query-only process beside the ingesting one, as an API replica runs beside a
    worker: it never ingests, so its RSS is what serving the tenant costs, and it learns
    of each ingestion only through the store's graph-change log."""

    def __init__(self, settings, tenant: str = "scale") -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(target=_serve_queries, args=(child, settings, tenant), daemon=True)
        self.process.start()

    def call(self, command: str, *args):
        """Run ``command`` there and return its result; RuntimeError with its error."""
        self._conn.send((command, args))
        ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(f"query process: {value}")
        return value

    def close(self) -> None:
        if self.process.is_alive():
            self._conn.send(("stop", ()))
            self.process.join(60)
        if self.process.is_alive():
            self.process.kill()


def run_scale(data: Path | None, distractors: list[Path] | None, out: Path, limit: int = 0,
              keep: Path | None = None, backends: list[str] | None = None) -> dict:
    """Run the benchmark on each of ``backends`` (the managed stores ``arcadedb`` and/or
    ``neo4j``, one after the other, default ArcadeDB alone); returns (and writes) the results
    dict: ``backends`` -> {sizes, fresh}, and for a single backend the same at the top level.
    Ingestion runs in this process, queries in a separate :class:`QueryProcess`. The store
    lives in a temporary data dir, removed at the end, or in ``keep`` (must not exist yet;
    kept, server stopped). Raises FileExistsError when ``keep`` exists."""
    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    corpus = json.loads((data / "musique_train_corpus.json").read_text())
    questions = json.loads((data / "musique_train.json").read_text())
    questions = questions[:limit] if limit else questions
    extra = [d for path in (distractors or default_distractors()) for d in json.loads(Path(path).read_text())]
    base_docs = [SourceDocument(f"musique#{i}", d["title"].strip(), d["text"].strip()) for i, d in enumerate(corpus)]
    extra_docs = [SourceDocument(f"distractor#{i}", d["title"].strip(), d["text"].strip()) for i, d in enumerate(extra)]
    if keep is not None:
        keep.mkdir(parents=True)  # FileExistsError: never ingest into an existing folder
    workdir = keep or Path(tempfile.mkdtemp(prefix="pathweave-bench-scale-"))
    backends = backends or ["arcadedb"]
    results: dict = {"backends": {}, "machine": machine_info(), "commit": git_commit(), "questions": len(questions)}
    try:
        for backend in backends:
            settings = with_backend(get_settings().model_copy(update={"data_dir": workdir, "tenant": "scale"}), backend)
            console.print(f"[bold]backend: {backend}[/]")
            results["backends"][backend] = _run_backend(settings, questions, base_docs, extra_docs, console)
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if len(backends) == 1:
        results.update(results["backends"][backends[0]])
    return publish_results(out, "scale.json", results, print_table, console)


def _run_backend(settings, questions: list[dict], base_docs: list[SourceDocument], extra_docs: list[SourceDocument],
                 console: Console) -> dict:
    """Both sizes and the freshness rounds on the managed store of ``settings`` (stopped after)."""
    from pathweave_ingest.console import run_ingest

    results: dict = {"sizes": {}}
    queries: QueryProcess | None = None
    try:
        with open_store(settings, tenant="scale") as store:
            queries = QueryProcess(settings)
            passages = 0
            for size, docs in (("base", base_docs), ("scaled", extra_docs)):
                report = run_ingest(store, settings, docs, [], None, label=f"ingest ({size})")
                passages += report.passages_new
                info = store_server.status(settings)
                console.print("[dim]waiting for the store server to finish its post-ingestion work[/]")
                wait_for_idle_store(info.pid if info else None)
                projection_s = project_now(store)
                row = queries.call("measure", questions)
                row.update(passages=passages, ratio=round(passages / results["sizes"]["base"]["passages"], 2)
                           if size == "scaled" else 1.0,
                           passages_per_s=round(report.passages_per_s, 2), ingest_s=round(report.seconds, 1),
                           synonymy=report.synonymy, **report.profile.as_dict(),
                           store_rss_mb=rss_mb(info.pid) if info else None, gds_projection_s=projection_s)
                results["sizes"][size] = row
                console.print(f"{size}: {json.dumps(row)}")
            # freshness: one new document ingested here, then the query process's very next query
            rounds = []
            for title, text, question in FRESH_DOCUMENTS:
                document = SourceDocument(f"fresh-{uuid.uuid4().hex[:8]}", title, text)
                started = time.perf_counter()
                one = run_ingest(store, settings, [document], [], None, label=f"ingest (one document: {title})")
                rounds.append({"ingest_one_s": round(time.perf_counter() - started, 2), "synonymy": one.synonymy,
                               "stages_s": one.profile.as_dict()["stages_s"],
                               **queries.call("fresh", title, question)})
            results["fresh"] = {
                "ingest_one_s": statistics.median(r["ingest_one_s"] for r in rounds),
                "first_query_ms": round(percentile_ms([r["first_query_ms"] for r in rounds], 50), 1),
                "first_query_max_ms": max(r["first_query_ms"] for r in rounds),
                "warm_p50_ms": results["sizes"]["scaled"]["p50_ms"],
                "warm_p50_after_ms": queries.call("warm_p50", questions[:20]),
                "found": all(r["found"] for r in rounds), "rounds": rounds}
    finally:
        if queries is not None:
            queries.close()
        store_server.stop(settings)
    return results


def print_table(results: dict, console: Console) -> None:
    table = Table(title=f"Scale ({results['questions']} MuSiQue questions) on {results['machine']['cores']} cores")
    for column in ("backend", "size", "passages", "R@2", "R@5", "R@5 exact PPR", "dense R@5", "p50 ms", "p95 ms",
                   "query RSS MiB", "store RSS MiB", "ingest p/s"):
        table.add_column(column)
    rows = [(backend, size, r) for backend, run in results["backends"].items() for size, r in run["sizes"].items()]
    for backend, size, r in rows:
        table.add_row(backend, size, str(r["passages"]), f"{r['recall_at_2']:.3f}", f"{r['recall_at_5']:.3f}",
                      f"{r['exact_ppr_recall_at_5']:.3f}", f"{r['dense_recall_at_5']:.3f}", f"{r['p50_ms']:.0f}",
                      f"{r['p95_ms']:.0f}", f"{r['query_rss_mb']:.0f}", f"{r['store_rss_mb']}", f"{r['passages_per_s']:.1f}")
    console.print(table)
    console.print(profile_table({f"{backend} {size}": r for backend, size, r in rows if "stages_s" in r}))
    for backend, run in results["backends"].items():
        console.print(f"freshness ({backend}): {run.get('fresh')}")
