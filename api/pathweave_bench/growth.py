"""``pathweave bench scale --passages 10000,30000,100000``: one tenant grown step by step.

The corpus, in a fixed order: the MuSiQue passages (the questions' gold passages are there
from the first step), the distractor passages (2WikiMultihopQA by default), then synthetic
passages (:mod:`pathweave_bench.synthetic`: the same real passages, names consistently
renamed, copy after copy), all through the normal ingestion pipeline. A second tenant of
``small`` passages (the first MuSiQue passages) sits beside the large one.

At each step, with the large tenant at ``N`` passages (the last 1,000 of them ingested
apart, timed: the ingestion rate at that size):

- a new query process (an API replica restarted): its first query (what it reads of the
  tenant to answer it), its tenth, then, after warm-up queries, Recall@2/5 and p50/p95 of
  proprag, dense and hipporag2 on the MuSiQue questions, its RSS and query caches, and the
  exact reference (proprag with the exact PPR on the whole topology) with proprag's paired
  difference to it;
- the store server's RSS and the data folder's size on disk, the GDS projection's seconds;
- freshness: one new document (the same at every step), its ingest seconds, the next
  query's ms and the document's rank (the document is removed again, so a kept store
  grows by the corpus alone);
- the small tenant's proprag R@5 and p50 (and once, before the large tenant grows, the
  same tenant alone: the reference).

``--keep DIR`` keeps the store and ``growth.json`` beside it: a rerun with the same DIR
continues from the passages it holds, measures only the steps above and reports them with
the earlier ones. Results: ``growth.json`` and ``bench.html``
(curves against passages on a log scale, and a fit per metric extrapolated to 1,000,000
passages: :mod:`pathweave_bench.growth_report`).
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path

from pathweave.runtime import open_store
from pathweave.servers import store_server
from pathweave.settings import get_settings
from pathweave.terminal import stdout_console
from pathweave_bench.common import (default_data_dir, git_commit, machine_info, project_now, wait_for_idle_store,
                                    with_backend, write_results)
from pathweave_bench.scale import EXACT, FRESH_DOCUMENTS, QueryProcess, default_distractors, rss_mb
from pathweave_bench.synthetic import renamed_copies
from pathweave_ingest.loaders import SourceDocument

LARGE, SMALL = "scale", "small"
MODES = ["proprag", "dense", "hipporag2", EXACT]
TIMED_PASSAGES = 1000
"""Passages ingested apart at the end of each step, their rate the step's ingestion rate."""
WARM_UP = 200
"""Title queries before the timed ones in each new query process (see :data:`pathweave_bench.scale.WARM_UP_QUERIES`)."""


def parse_steps(value: str) -> list[int]:
    """``"10000,30000"`` -> ``[10000, 30000]`` (sorted, distinct). Raises ValueError for
    anything but integers above :data:`TIMED_PASSAGES`."""
    try:
        steps = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"comma list of passage counts expected, not {value!r}") from None
    if not steps or steps[0] <= TIMED_PASSAGES:
        raise ValueError(f"steps above {TIMED_PASSAGES:,} passages expected, e.g. 10000,30000,100000")
    return steps


def real_documents(data: Path, distractors: list[Path]) -> list[SourceDocument]:
    """The MuSiQue corpus, then the distractor passages, as documents (sources as in ``bench scale``)."""
    corpus = json.loads((data / "musique_train_corpus.json").read_text())
    extra = [d for path in distractors for d in json.loads(Path(path).read_text())]
    return ([SourceDocument(f"musique#{i}", d["title"].strip(), d["text"].strip()) for i, d in enumerate(corpus)]
            + [SourceDocument(f"distractor#{i}", d["title"].strip(), d["text"].strip()) for i, d in enumerate(extra)])


def corpus_in_order(real: list[SourceDocument]):
    """The large tenant's documents: ``real``, then renamed copies of them, endlessly."""
    return itertools.chain(real, renamed_copies([(d.title, d.text) for d in real]))


def tenant_size(store) -> tuple[int, int]:
    """``(documents, passages)`` the tenant holds."""
    counts = {row["label"]: row["n"] for row in store.run("count_nodes")}
    return int(counts.get("Document", 0)), int(counts.get("Passage", 0))


def grow(store, settings, documents, target: int, passages: int, label: str) -> tuple[int, float]:
    """Ingest the next documents of the iterator ``documents`` until the tenant holds
    ``target`` passages (from ``passages``); returns (passages now, as the store counts
    them; seconds). Raises RuntimeError when a document fails or three batches in a row add
    no passage (the synthetic corpus never ends: a broken store must stop the run, not spin)."""
    from pathweave_ingest.console import run_ingest

    started, empty = time.perf_counter(), 0
    while passages < target:
        stored_docs, stored = tenant_size(store)
        per_document = max(1.0, stored / stored_docs) if stored_docs else 1.0  # some documents have several
        batch = list(itertools.islice(documents, max(1, int((target - passages) / per_document))))
        if not batch:
            break
        report = run_ingest(store, settings, batch, [], None, label=f"{label} ({passages:,} -> {target:,})")
        empty = 0 if report.passages_new else empty + 1
        if report.errors or empty == 3:
            raise RuntimeError(f"{label}: {len(batch)} documents added {report.passages_new} passages; "
                               f"errors: {report.errors[:3]}")
        passages = tenant_size(store)[1]
    return passages, time.perf_counter() - started


def store_disk_mb(settings) -> float:
    """The managed store's database files (ArcadeDB's ``server/databases``, Neo4j's
    ``neo4j/data``; not its logs, nor the models beside them), MiB. Files that vanish while
    counted (the store compacts meanwhile) are left out."""
    total = 0
    for folder in (Path(settings.data_dir) / "server" / "databases", Path(settings.data_dir) / "neo4j" / "data"):
        for path in folder.rglob("*") if folder.is_dir() else ():
            try:
                total += path.stat().st_size if path.is_file() else 0
            except OSError:
                pass
    return round(total / 2**20, 1)


def _store_pid(settings) -> int | None:
    info = store_server.status(settings)
    return info.pid if info else None


def _warm_store(settings) -> None:
    """Warm-up queries (:data:`WARM_UP` titles, not the questions) from a query process of
    their own, so a store started for a run meets the measured process warm, as a running
    store serving other replicas is (a remeasured step's store was started by this run)."""
    queries = QueryProcess(settings, LARGE)
    try:
        queries.call("warm_up", WARM_UP)
    finally:
        queries.close()


def _small_figures(settings, questions: list[dict]) -> dict:
    """The small tenant's proprag R@5 and p50 in a new query process."""
    queries = QueryProcess(settings, SMALL)
    try:
        queries.call("warm_up", 50)
        return queries.call("modes", questions, ["proprag"])["modes"]["proprag"]
    finally:
        queries.close()


def _freshness(store, settings, queries: QueryProcess) -> dict:
    """One new document into the large tenant (the same one at every step), the query
    process's next query, the document removed again (also when the query fails: a kept
    store holds the corpus alone)."""
    from pathweave_ingest.console import run_ingest
    from pathweave_ingest.documents import document_id

    title, text, question = FRESH_DOCUMENTS[0]
    document = SourceDocument("fresh-document", title, text)
    started = time.perf_counter()
    try:
        run_ingest(store, settings, [document], [], None, label=f"ingest one document ({title})")
        ingest_s = round(time.perf_counter() - started, 2)
        found = queries.call("fresh", title, question)
    finally:
        run_ingest(store, settings, [], [], None, label="remove it", remove=[document_id(LARGE, document)])
    return {"ingest_one_s": ingest_s, "first_query_ms": found["first_query_ms"], "rank": found["rank"]}


def measure_step(store, settings, questions: list[dict]) -> dict:
    """The figures of one step (see the module), the large tenant as it is."""
    waited = wait_for_idle_store(_store_pid(settings))
    projection_s = project_now(store)
    queries = QueryProcess(settings, LARGE)  # an API replica started now: nothing loaded yet
    try:
        first = queries.call("first", questions[0]["question"])["first_query_ms"]
        tenth = [queries.call("first", q["question"])["first_query_ms"] for q in questions[1:10]][-1]
        queries.call("warm_up", WARM_UP)
        served = queries.call("modes", questions, MODES)
        fresh = _freshness(store, settings, queries)
        fresh["warm_p50_ms"] = served["modes"]["proprag"]["p50_ms"]
    finally:
        queries.close()
    pid = _store_pid(settings)
    return {**served, "first_query_after_restart_ms": first, "tenth_query_after_restart_ms": tenth, "fresh": fresh,
            "store_rss_mb": rss_mb(pid) if pid else None, "store_disk_mb": store_disk_mb(settings),
            "gds_projection_s": projection_s, "waited_for_idle_store_s": waited,
            "small": _small_figures(settings, questions)}


def _merged(previous: dict, backend: str, run: dict) -> dict:
    """``run`` with the steps (and the small tenant alone) of an earlier run of the kept
    store on ``backend`` that this run did not measure again."""
    before = previous.get("backends", {}).get(backend, {})
    steps = {s["passages"]: s for s in before.get("steps", [])}
    steps.update({s["passages"]: s for s in run["steps"]})
    return {**before, **run, "steps": [steps[n] for n in sorted(steps)],
            **({"small_alone": before["small_alone"]} if "small_alone" in before and "small_alone" not in run else {})}


def run_growth(steps: list[int], data: Path | None, distractors: list[Path] | None, out: Path, limit: int = 0,
               keep: Path | None = None, backends: list[str] | None = None, small: int = 2000,
               timed: int = TIMED_PASSAGES, remeasure: bool = False) -> dict:
    """Grow the large tenant to each of ``steps`` passages on each of ``backends`` and
    measure (see the module); returns the results and writes ``growth.json`` and
    ``bench.html`` to ``out``. ``steps``: as :func:`parse_steps` returns them. ``keep``: the
    store's folder, kept (created, or continued from the passages it holds). ``timed``: the
    passages ingested apart at each step (tests make it small). ``remeasure``: a step the kept
    store already holds is measured again at this commit (its growth and ingestion figures
    from the earlier run, its ``commit`` of its own; the store, started for the run, warmed
    first by another query process), not skipped."""
    from pathweave_bench.growth_report import print_growth, write_html

    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    questions = json.loads((data / "musique_train.json").read_text())
    questions = questions[:limit] if limit else questions
    real = real_documents(data, distractors or default_distractors())
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    workdir = keep or Path(tempfile.mkdtemp(prefix="pathweave-bench-growth-"))
    results: dict = {"backends": {}, "machine": machine_info(), "commit": git_commit(), "questions": len(questions),
                     "small_passages": small, "real_documents": len(real), "timed_passages": timed}
    previous = json.loads((workdir / "growth.json").read_text()) if (workdir / "growth.json").exists() else {}
    results["backends"] = dict(previous.get("backends", {}))  # another backend's earlier steps stay
    try:
        for backend in backends or ["arcadedb"]:
            settings = with_backend(get_settings().model_copy(update={"data_dir": workdir}), backend)
            console.print(f"[bold]backend: {backend}[/]")
            run: dict = {"steps": []}
            try:
                with open_store(settings, tenant=LARGE) as store, open_store(settings, tenant=SMALL) as small_store:
                    small_docs, small_now = tenant_size(small_store)
                    grow(small_store, settings, iter(real[small_docs:]), small, small_now, "small tenant")
                    documents, passages = tenant_size(store)
                    if passages == 0:
                        run["small_alone"] = _small_figures(settings, questions)
                        console.print(f"small tenant alone: {run['small_alone']}")
                    corpus = itertools.islice(corpus_in_order(real), documents, None)
                    held = {s["passages"]: s for s in previous.get("backends", {}).get(backend, {}).get("steps", [])}
                    for target in steps:
                        if passages >= target:
                            built = next((held[n] for n in sorted(held) if n >= target), None)
                            if not remeasure or built is None or built["passages"] != passages:
                                console.print(f"[dim]{target:,}: already built ({passages:,} passages)[/]")
                                continue
                            kept = {key: built[key] for key in ("passages", "grow_s", "timed_passages",
                                                                "ingest_passages_per_s") if key in built}
                            _warm_store(settings)  # started for this run: warm, as the other replicas keep it
                            row = {**kept, "ingest_commit": built.get("commit", previous.get("commit")),
                                   "commit": git_commit(), **measure_step(store, settings, questions)}
                            run["steps"].append(row)
                            console.print(f"{passages:,} passages, measured again: {json.dumps(row)}")
                            results["backends"][backend] = _merged(previous, backend, run)
                            write_results(workdir, "growth.json", results)
                            continue
                        passages, grow_s = grow(store, settings, corpus, target - timed, passages, "grow")
                        wait_for_idle_store(_store_pid(settings))  # the timed passages meet a quiet store
                        before = passages
                        passages, timed_s = grow(store, settings, corpus, target, passages, "timed")
                        row = {"passages": passages, "grow_s": round(grow_s, 1), "timed_passages": passages - before,
                               "ingest_passages_per_s": round((passages - before) / max(timed_s, 1e-9), 2),
                               **measure_step(store, settings, questions)}
                        run["steps"].append(row)
                        console.print(f"{passages:,} passages: {json.dumps(row)}")
                        results["backends"][backend] = _merged(previous, backend, run)
                        write_results(workdir, "growth.json", results)  # a long run leaves what it measured
            finally:
                store_server.stop(settings)
            results["backends"][backend] = _merged(previous, backend, run)
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    write_results(out, "growth.json", results)
    console.print(f"wrote {write_html(out / 'bench.html', results)}")
    print_growth(results, console)
    return results
