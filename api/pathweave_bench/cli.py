"""The ``pathweave bench`` commands (typer): ``musique``, ``qa``, ``extract``, ``reuse``, ``scale``,
``tenants``, ``api``, ``soak`` and ``select``.

Each runs one benchmark module of this package on real data from ``../shared/bench``
and prints its figures beside the baseline's, taken in the same run. The top-level
command line (:mod:`pathweave_cli.main`) mounts :data:`bench_app` as ``pathweave bench``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

bench_app = typer.Typer(help="Benchmarks on real data.", no_args_is_help=True)


def _comma_list(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated option value, in order."""
    return [item.strip() for item in text.split(",") if item.strip()]


BACKEND_OPTION = typer.Option("arcadedb", "--backend", help="The managed store to run on: arcadedb, neo4j "
                              "(Neo4j 5.26 + GDS 2.13) or both (side by side, one after the other).")


def _backends(value: str) -> list[str]:
    from pathweave_bench.common import backend_list

    try:
        return backend_list(value)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--backend") from None


@bench_app.command("scale")
def bench_scale(
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    distractors: Optional[list[Path]] = typer.Option(None, help="JSON lists of {title, text} added as distractors "
                                                     "(default ../shared/bench/scale/2wikimultihopqa_corpus.json)."),
    out: Path = typer.Option(Path("bench-results"), help="Where scale.json goes."),
    limit: int = typer.Option(0, help="Only the first N questions (0 = all)."),
    keep: Optional[Path] = typer.Option(None, help="Keep the benchmark's store in this new folder (tenant "
                                        "'scale') instead of a removed temporary one, to query it again; with "
                                        "--passages an existing folder is continued from the passages it holds."),
    passages: str = typer.Option("", help="Comma list of steps, e.g. 10000,30000,100000: grow one tenant to each "
                                 "(real passages, then renamed copies) and measure there (growth.json, bench.html)."),
    small: int = typer.Option(2000, min=1, help="With --passages: the second tenant's passages."),
    remeasure: bool = typer.Option(False, help="With --passages and --keep: measure again, at this commit, the "
                                   "steps the kept store already holds (their ingestion figures kept)."),
    backend: str = BACKEND_OPTION,
) -> None:
    """Recall, latency, memory and freshness at 1x and with distractors, or at each of --passages."""
    if passages:
        from pathweave_bench.growth import parse_steps, run_growth

        try:
            steps = parse_steps(passages)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--passages") from None
        if remeasure and keep is None:
            raise typer.BadParameter("--remeasure needs --keep (the store to measure again)", param_hint="--remeasure")
        run_growth(steps, data, distractors or None, out, limit, keep, _backends(backend), small, remeasure=remeasure)
        return
    from pathweave_bench.scale import run_scale

    run_scale(data, distractors or None, out, limit, keep, _backends(backend))


@bench_app.command("tenants")
def bench_tenants(
    sizes: str = typer.Option("10000,30000,100000", help="Comma list: the large tenant's passages at each step."),
    small: int = typer.Option(2000, min=1, help="The small tenant's passages."),
    queries: int = typer.Option(100, min=2, help="Searches timed per figure."),
    k: int = typer.Option(10, min=1, help="Nearest passages per search."),
    out: Path = typer.Option(Path("bench-results"), help="Where tenants.json goes."),
    backend: str = BACKEND_OPTION,
) -> None:
    """A small tenant's vector search beside a growing large tenant (synthetic vectors):
    p50 / p95 and recall as shipped, against the shared index alone."""
    from pathweave_bench.tenants import run_tenants

    try:
        steps = sorted({int(size) for size in _comma_list(sizes)})
    except ValueError:
        raise typer.BadParameter(f"not a comma list of integers: {sizes!r}", param_hint="--sizes") from None
    if not steps or steps[0] < 1:
        raise typer.BadParameter("give at least one size of 1 or more", param_hint="--sizes")
    run_tenants(steps, small, queries, k, _backends(backend), out)


@bench_app.command("musique")
def bench_musique(
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    out: Path = typer.Option(Path("bench-results"), help="Where musique.json and musique.html go."),
    questions: int = typer.Option(0, help="Use only the first N questions (0 = all)."),
    extractions: str = typer.Option("default,imported", help="Comma list: default, imported."),
    budget: str = typer.Option("", help="Comma list of token budgets (e.g. 200,400,800): also benchmark context selection."),
    rescore_top: str = typer.Option("", help="Comma list of PropRAG re-scoring depths M (e.g. 0,2,40): also run "
                                             "proprag with each (rows proprag_m<M>), the recall/latency trade-off."),
    backend: str = BACKEND_OPTION,
    embedder: str = typer.Option("", help="Comma list of catalog embedders (e.g. minilm,bge-small): each one's rows "
                                          "side by side, with the paired per-question difference to the first "
                                          "(default: the configured embedder)."),
    reembed_from: Optional[str] = typer.Option(None, help="Also ingest with this catalog embedder and switch the "
                                               "tenant to each --embedder with `pathweave reembed`: its recall beside "
                                               "the clean ingest's, paired per question."),
    acl_split: Optional[float] = typer.Option(None, "--acl-split", min=0.0, max=1.0, help="Instead: access lists. "
                                              "This share of the documents (at random, --seed) goes to group:a, the "
                                              "rest to group:b; group A's recall and top 5 on the shared tenant vs a "
                                              "tenant of A's documents alone, and p50 with and without the check "
                                              "(acl_split.json)."),
    seed: int = typer.Option(7, help="With --acl-split: the seed of the split."),
    tracing: bool = typer.Option(False, "--tracing", help="Instead: what OpenTelemetry tracing costs a query. Each "
                                 "ranking mode untraced (no SDK), then with the SDK exporting over OTLP/HTTP to a local "
                                 "collector, sampled out and in, in alternating order (tracing.json)."),
) -> None:
    """Recall@2/5, latency, ingestion speed and RSS on MuSiQue; PropRAG vs dense vs HippoRAG 2."""
    from pathweave.embedding.catalog import UnknownEmbedder, get
    from pathweave_bench.musique import run_musique

    if tracing:
        from pathweave_bench.tracing import run_tracing

        if len(_backends(backend)) > 1:  # the SDK takes one tracer provider per process
            raise typer.BadParameter("--tracing runs on one backend at a time", param_hint="--backend")
        run_tracing(data, out, questions, _backends(backend)[0])
        return
    if acl_split is not None:
        from pathweave_bench.acl_split import run_acl_split

        if not 0 < acl_split < 1:
            raise typer.BadParameter("give a share between 0 and 1 (e.g. 0.5)", param_hint="--acl-split")
        for name in _backends(backend):
            run_acl_split(data, out / name if len(_backends(backend)) > 1 else out, acl_split, questions, seed, name)
        return

    budgets = [int(b) for b in _comma_list(budget)]
    rescore = [int(m) for m in _comma_list(rescore_top)]
    embedders = _comma_list(embedder)
    try:
        for name in embedders:
            get(name)
    except UnknownEmbedder as error:
        raise typer.BadParameter(str(error), param_hint="--embedder") from None
    try:
        if reembed_from:
            get(reembed_from)
    except UnknownEmbedder as error:
        raise typer.BadParameter(str(error), param_hint="--reembed-from") from None
    run_musique(data, out, questions, _comma_list(extractions), budgets, rescore, _backends(backend), embedders or None,
                reembed_from)


@bench_app.command("calibrate")
def bench_calibrate(
    corpus: Optional[Path] = typer.Option(None, help="JSON list of {title, text} without questions (default "
                                          "../shared/bench/scale/2wikimultihopqa_corpus.json)."),
    out: Path = typer.Option(Path("bench-results"), help="Where calibration.json goes."),
    embedder: str = typer.Option("bge-small,bge-small-int8,e5-small", help="Comma list of catalog embedders."),
    passages: int = typer.Option(2000, min=50, help="The first N passages of the corpus."),
) -> None:
    """Each embedder's cosine thresholds matched to MiniLM's share of pairs."""
    from pathweave_bench.calibrate import run_calibrate
    from pathweave_bench.common import default_data_dir

    corpus = corpus or default_data_dir().parent / "scale" / "2wikimultihopqa_corpus.json"
    run_calibrate(corpus, out, _comma_list(embedder), passages)


@bench_app.command("reuse")
def bench_reuse(
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    out: Path = typer.Option(Path("bench-results"), help="Where reuse.json and reuse.html go."),
    limit: int = typer.Option(0, help="Only the first N questions, and only their paragraphs ingested (0 = all)."),
    selector_policy: Optional[Path] = typer.Option(
        None, help="A trained DPO selector policy (pathweave train selector) for the selector rows' `dpo` row "
                   "(default: PATHWEAVE_SELECTOR_POLICY_PATH; none: no `dpo` row)."),
) -> None:
    """APR (spec §3): prompt tokens and context recall of a session's later questions vs the
    same questions asked fresh, the selector rows and the three prompt renderings' token counts."""
    from pathweave_bench.reuse import run_reuse

    if selector_policy is not None and not selector_policy.is_file():
        raise typer.BadParameter(f"no policy file at {selector_policy}", param_hint="--selector-policy")
    run_reuse(data, out, limit, selector_policy)


@bench_app.command("soak")
def bench_soak(
    minutes: float = typer.Option(30.0, min=1.0, help="How long the load runs (minutes)."),
    llm: bool = typer.Option(False, "--llm", help="Also the managed LLM server: an answering client, a prunerag "
                                                  "client and one SIGKILL of the model server."),
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    distractors: Optional[Path] = typer.Option(None, help="The 2WikiMultihopQA passages streamed after MuSiQue's "
                                               "(default ../shared/bench/scale/2wikimultihopqa_corpus.json)."),
    out: Path = typer.Option(Path("bench-results"), help="Where soak.json and soak.html go."),
    worker_kill_every: float = typer.Option(5.0, min=0.0, help="SIGKILL the worker every N minutes (0 = never)."),
    think_s: float = typer.Option(0.5, min=0.0, help="Each query client's pause between requests (s)."),
    ingest_every_s: float = typer.Option(5.0, min=0.5, help="Seconds between document submissions."),
    ingest_batch: int = typer.Option(5, min=1, help="New documents per submission."),
    drain_minutes: float = typer.Option(15.0, min=0.0, help="After the load: how long to wait for the accepted "
                                                            "documents to finish."),
    keep: Optional[Path] = typer.Option(None, help="Keep the run's data dir in this new folder."),
    history_writes: int = typer.Option(220, min=0, help="The history checker's PUTs and DELETEs of 5 ids, "
                                                       "spread over the run (0 = no checker; a DELETE of an "
                                                       "absent id is no version: about 200 versions)."),
) -> None:
    """The service (API, Celery worker, Redis, managed store) under mixed load with faults:
    status codes, latency and RSS over time, documents' outcomes, a clean-replay graph check,
    and the history checker's figures (``bench history``) under the same faults."""
    from pathweave_bench.soak import run_soak

    if keep is not None and keep.exists():
        raise typer.BadParameter(f"{keep} exists", param_hint="--keep")
    run_soak(data, distractors, out, minutes, llm, worker_kill_every, think_s, ingest_every_s, ingest_batch,
             drain_minutes, keep, history_writes)


@bench_app.command("history")
def bench_history(
    writes: int = typer.Option(220, min=1, help="Write requests (PUT and DELETE) of the clients together (a "
                                                "DELETE of an absent id is no version: about 200 versions)."),
    ids: int = typer.Option(5, min=1, help="External ids they write."),
    writers: int = typer.Option(4, min=1, help="Concurrent writing clients."),
    worker_kills: int = typer.Option(3, min=0, help="SIGKILLs of the worker, each while a version runs."),
    store_kills: int = typer.Option(1, min=0, help="SIGKILLs of the store server."),
    api_kills: int = typer.Option(2, min=0, help="SIGKILLs of the API between a submission's accepting commit "
                                                 "and its publish (a fault point; restarted at once)."),
    redis_losses: int = typer.Option(1, min=0, help="SIGKILLs of Redis, started again without its files (every "
                                                    "message it held lost)."),
    backend: str = typer.Option("arcadedb", help="The managed store: arcadedb or neo4j."),
    think_s: float = typer.Option(1.0, min=0.0, help="Each writer's mean pause between writes (s)."),
    out: Path = typer.Option(Path("bench-results"), help="Where history.json (and a failing history) go."),
) -> None:
    """A register checker for versioned documents in broker mode (Celery, Redis): concurrent
    PUTs and DELETEs of a few external ids under worker, store, API and Redis kills, every
    read recorded; lost updates, versions left queued or running, missing windows, going
    back, and the graph against a clean replay of the final versions."""
    from pathweave.terminal import stdout_console
    from pathweave_bench.history import print_table, run_history

    if backend not in ("arcadedb", "neo4j"):
        raise typer.BadParameter("use arcadedb or neo4j", param_hint="--backend")
    results = run_history(out, writes, ids, writers, worker_kills, store_kills, backend, think_s,
                          api_kills=api_kills, redis_losses=redis_losses)
    print_table(results, stdout_console())
    if not results["ok"]:
        raise typer.Exit(1)


@bench_app.command("qa")
def bench_qa(
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    out: Path = typer.Option(Path("bench-results"), help="Where qa.json goes."),
    limit: int = typer.Option(0, help="Only the first N questions (0 = all; e.g. 20 on a CPU)."),
    rows: Optional[str] = typer.Option(None, help="Comma-separated rows to run (default all: dense_top5, "
                                                  "proprag_top5, proprag_budget_200, proprag_budget_400, prunerag, proprag_stream)."),
) -> None:
    """EM/F1/EFR of LLM answers: dense top-5, PropRAG top-5, budgeted context 200/400, PruneRAG."""
    from pathweave_bench.qa import ROWS, run_qa

    chosen = tuple(dict.fromkeys(_comma_list(rows))) if rows is not None else ROWS
    unknown = [r for r in chosen if r not in ROWS]
    if unknown or not chosen:
        raise typer.BadParameter(f"unknown rows {unknown}; use {', '.join(ROWS)}", param_hint="--rows")

    run_qa(data, out, limit, chosen)


@bench_app.command("extract")
def bench_extract(
    data: Optional[Path] = typer.Option(None, help="Folder with the MuSiQue files (default ../shared/bench/musique)."),
    out: Path = typer.Option(Path("bench-results"), help="Where extract.json goes."),
    limit: int = typer.Option(10, help="The supporting paragraphs of the first N questions (0 = all 100: 234 "
                                       "paragraphs)."),
) -> None:
    """LLM extractor vs spaCy: propositions per passage and hop-answer recall of MuSiQue's
    supporting paragraphs."""
    from pathweave_bench.extract import run_extract

    if limit < 0:
        raise typer.BadParameter("must be >= 0", param_hint="--limit")
    run_extract(data, out, limit)


@bench_app.command("api")
def bench_api(
    data: Optional[Path] = typer.Option(None, help="MuSiQue folder (default ../shared/bench/musique)."),
    out: Path = typer.Option(Path("bench-results"), help="Where api.json goes."),
    passages: int = typer.Option(0, help="Ingest only the first N corpus passages (0 = all 1,890)."),
    questions: int = typer.Option(0, help="Query only the first N questions (0 = all 100)."),
    mode: str = typer.Option("proprag", help="Retrieval mode of the timed queries."),
    redis_url: Optional[str] = typer.Option(None, help="Broker for the worker run (default: start a private "
                                                       "redis-server on a free port)."),
    workers: int = typer.Option(1, min=1, help="Celery worker processes of the scaled service (the cores split "
                                               "between their embedders)."),
    replicas: int = typer.Option(1, min=1, help="API processes of the scaled service, the requests spread over "
                                                "them."),
) -> None:
    """API query p50/p95 at 1 and 8 clients and ingestion passages/s through a Celery worker
    with its per-stage profile, each beside the in-process figure of the same run (MuSiQue
    corpus); with --replicas/--workers above 1, the service as that many API replicas and
    workers too, beside one of each. Every service graph is compared with the in-process one."""
    from pathweave_bench.api import run_api_bench

    run_api_bench(data, out, passages, questions, mode, redis_url, workers, replicas)


@bench_app.command("select")
def bench_select() -> None:
    """Context selection on synthetic candidate graphs: CP-SAT solve time and greedy quality (JSON)."""
    from pathweave_bench.selection import main

    main()
