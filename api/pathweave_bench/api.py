"""``pathweave bench api``: the service under load, beside the in-process figures of
the same run, on the MuSiQue corpus (``../shared/bench/musique``).

One fresh data directory (temporary), one Redis (private ``redis-server`` on a
free port unless ``--redis-url``), then in sequence (nothing else runs meanwhile):

1. ingestion through one Celery worker process (``--workers N``: N of them, the cores
   split between their embedders; ``python -m pathweave_ingest.worker``, models loaded
   before the clock starts): ``POST /v1/documents`` to an API server (uvicorn) with the
   whole corpus, clock stops when the job is done; every worker's batch log lines give the
   per-stage profile;
2. the same corpus ingested in-process (the API's no-broker path: the same task
   functions on :class:`~pathweave_ingest.tasks.InProcessQueue`) as another tenant, its
   per-stage profile, and the two tenants' graphs compared (:func:`same_graph`);
3. queries, after the same 50 un-timed warm-up queries on both sides (questions
   built from passage titles, not the benchmark's): ``POST /v1/query`` over HTTP
   with 1 and 8 concurrent clients, and the
   same questions through :class:`~pathweave.query.retriever.Retriever` in this
   process with 1 and 8 threads, alternating in chunks (a change of machine load
   hits both alike); p50/p95 latency, throughput, and the API's overhead (wall time
   minus the retrieval time the server reports).

Writes ``api.json`` to ``--out`` and prints a table.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from pathweave.evaluation import percentile_ms
from pathweave.servers.processes import free_port, stop_process
from pathweave_bench.common import (ChildProcesses, default_data_dir, git_commit, http_ready, machine_info,
                                    profile_table, publish_results, wait_for)
from pathweave.terminal import stdout_console
from pathweave_bench.service import api_command
from pathweave_ingest.worker import broker_answers

BATCH_LOG = re.compile(r"batch of \d+ for (?P<tenant>\S+) \(job [^)]*\): (?P<summary>\{.*\})$")
"""The line :func:`pathweave_ingest.tasks.run_batch` logs after each batch (its summary as JSON)."""


def batch_profile(lines: Iterable[str], tenant: str) -> dict:
    """The ingestion profile of ``tenant``'s batches from their log ``lines``: busy seconds per
    stage and texts embedded, summed over batches (:mod:`pathweave_ingest.profile`)."""
    from pathweave_ingest.profile import STAGES

    total = {"stages_s": dict.fromkeys(STAGES, 0.0), "texts_embedded": 0, "batches": 0}
    for line in lines:
        found = BATCH_LOG.search(line.rstrip())
        if found is None or found["tenant"] != tenant:
            continue
        summary = json.loads(found["summary"])
        for stage, seconds in summary.get("stages_s", {}).items():
            total["stages_s"][stage] = round(total["stages_s"].get(stage, 0.0) + seconds, 3)
        total["texts_embedded"] += summary.get("texts_embedded", 0)
        total["batches"] += 1
    return total


class _Lines(logging.Handler):
    """Keeps the messages of the records it handles (the in-process batches' log lines)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _run_concurrent(call, questions: list[str], clients: int) -> tuple[list[tuple[float, bool, float]], float]:
    """``call(question) -> (ok, server_ms)`` for every question with ``clients`` concurrent
    callers; returns ``[(wall_ms, ok, server_ms)]`` and the wall seconds of the round."""
    samples: list[tuple[float, bool, float]] = []
    lock = threading.Lock()

    def one(question: str) -> None:
        started = time.perf_counter()
        ok, server_ms = call(question)
        elapsed = (time.perf_counter() - started) * 1000
        with lock:
            samples.append((elapsed, ok, server_ms))

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(one, questions))
    return samples, time.perf_counter() - started


def _compare(over_http, in_process, questions: list[str], clients: int, rounds: int = 5) -> tuple[dict, dict]:
    """Latency of the same questions through the API and in-process, alternating in
    ``rounds`` chunks so a change of machine load hits both alike."""
    out = {}
    for name in ("api", "inprocess"):
        out[name] = {"samples": [], "wall": 0.0}
    size = max(1, -(-len(questions) // rounds))
    for number, start in enumerate(range(0, len(questions), size)):
        chunk = questions[start:start + size]
        order = (("api", over_http), ("inprocess", in_process))
        for name, call in order if number % 2 == 0 else order[::-1]:
            samples, wall = _run_concurrent(call, chunk, clients)
            out[name]["samples"].extend(samples)
            out[name]["wall"] += wall
    results = []
    for name in ("api", "inprocess"):
        samples, wall = out[name]["samples"], out[name]["wall"]
        walls = [s[0] for s in samples]
        entry = {"clients": clients, "queries": len(samples), "errors": sum(not s[1] for s in samples),
                 "p50_ms": round(percentile_ms(walls, 50), 1), "p95_ms": round(percentile_ms(walls, 95), 1),
                 "queries_per_s": round(len(samples) / wall, 2) if wall else 0.0}
        # the retriever's own time (``timings_ms.total``), and for the API what HTTP, auth, JSON
        # and the citation lookups add to it
        entry["retrieval_p50_ms"] = round(percentile_ms([s[2] for s in samples if s[1]], 50), 1)
        if name == "api":
            entry["overhead_p50_ms"] = round(percentile_ms([s[0] - s[2] for s in samples if s[1]], 50), 1)
        results.append(entry)
    return results[0], results[1]


def same_graph(counts: dict[str, int], reference: dict[str, int], tolerance: float = 0.01, slack: int = 0) -> dict:
    """Whether the graph of ``counts`` (:meth:`~pathweave.store.graph_store.GraphStore.counts`: nodes by
    label, ``rel:TYPE`` relationships) is the one ``reference`` counts: every count equal,
    except SYNONYM and ALIAS_OF edges, which come from the store's approximate vector index
    and may differ by ``tolerance`` (a share, or ``slack`` edges) when batches ran in another order. Jobs
    (bookkeeping: one per submission) are not compared. Returns
    ``{"same": bool, "differences": {key: [count, reference]}}``."""
    approximate = {"rel:SYNONYM", "rel:ALIAS_OF"}
    keys = sorted((set(counts) | set(reference)) - {"Job"})
    differences = {key: [counts.get(key, 0), reference.get(key, 0)] for key in keys
                   if counts.get(key, 0) != reference.get(key, 0)}
    same = all(key in approximate and abs(a - b) <= max(tolerance * max(a, b), slack)
               for key, (a, b) in differences.items())
    return {"same": same, "differences": differences}


class ServiceRun:
    """One configuration of the service under load: ``replicas`` API processes (uvicorn) and
    ``workers`` Celery workers on the run's store and Redis, each replica on its own port (what
    a load balancer spreads requests over)."""

    def __init__(self, processes: ChildProcesses, env: dict, workdir: Path, label: str, replicas: int,
                 workers: int) -> None:
        self.label, self.workdir = label, workdir
        self.worker_logs = [workdir / f"{label}-worker-{n}.log" for n in range(workers)]
        threads = {} if workers == 1 else {"PATHWEAVE_MODELS_EMBED_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}
        self.workers = [processes.start([sys.executable, "-m", "pathweave_ingest.worker"], {**env, **threads}, log)
                        for log in self.worker_logs]
        self.api_logs = [workdir / f"{label}-api-{n}.log" for n in range(replicas)]
        self.urls = []
        self.apis = []
        for log in self.api_logs:
            port = free_port()
            self.apis.append(processes.start(api_command(port), env, log))
            self.urls.append(f"http://127.0.0.1:{port}")
        for worker, log in zip(self.workers, self.worker_logs):
            wait_for(lambda: "ready." in log.read_text(errors="replace"), 300, "worker", worker, log)
        for api, url, log in zip(self.apis, self.urls, self.api_logs):
            wait_for(lambda: http_ready(url), 300, "API server", api, log)

    def ingest(self, documents: list[dict], headers: dict, tenant: str, max_documents: int) -> dict:
        """POST the corpus spread over the replicas (at most ``max_documents`` a request), poll
        the jobs through the replicas in turn until done: the ingestion figures."""
        clients = [httpx.Client(base_url=url, headers=headers, timeout=120) for url in self.urls]
        try:
            started = time.perf_counter()
            jobs, batches = [], 0
            for n, start in enumerate(range(0, len(documents), max_documents)):
                response = clients[n % len(clients)].post(
                    "/v1/documents", json={"documents": documents[start:start + max_documents]})
                if response.status_code != 202:
                    raise RuntimeError(f"POST /v1/documents: {response.status_code} {response.text[:500]}")
                jobs.append(response.json()["job_id"])
                batches += response.json()["batches"]
            turn = iter(range(10**9))

            def finished() -> list[dict] | None:
                states = [clients[next(turn) % len(clients)].get(f"/v1/jobs/{job}").json() for job in jobs]
                return states if all(j["status"] not in ("queued", "running") for j in states) else None

            done = wait_for(finished, 7200, f"{self.label} ingestion", self.workers[0], self.worker_logs[0],
                            interval=2.0)
            seconds = time.perf_counter() - started
        finally:
            for client in clients:
                client.close()
        passages = sum(j["progress"]["passages"] for j in done)
        return {"documents": sum(j["total"] for j in done), "failed": sum(j["counts"]["failed"] for j in done),
                "passages": passages, "seconds": round(seconds, 1), "passages_per_s": round(passages / seconds, 2),
                "batches": batches, "replicas": len(self.urls), "workers": len(self.workers),
                "profile": batch_profile([line for log in self.worker_logs
                                          for line in log.read_text(errors="replace").splitlines()], tenant)}

    def stop_workers(self) -> None:
        for worker in self.workers:
            stop_process(worker)  # nothing else ingests while the next run is timed

    def tracebacks(self) -> int:
        return sum(log.read_text(errors="replace").count("Traceback") for log in self.api_logs)


def run_api_bench(data: Path | None, out: Path, passages: int = 0, questions: int = 0, mode: str = "proprag",
                  redis_url: str | None = None, workers: int = 1, replicas: int = 1) -> dict:
    """Run the benchmark; returns (and writes) the results dict. The service runs as one API
    replica with one Celery worker; with ``replicas`` or ``workers`` above 1, also as that many
    of each (another tenant, the same corpus: ``ingest.scaled`` and ``query.scaled_<clients>``,
    requests spread over the replicas), beside the one-and-one figures of the same run. Each
    service tenant's graph is compared with the in-process one (:func:`same_graph`)."""
    from pathweave.servers import store_server
    from pathweave.settings import WorkerSettings, get_settings
    from pathweave_bench.service import create_key
    from pathweave_ingest.jobs import batches_of, create_job, job_status, new_job_id, payloads
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.tasks import InProcessQueue
    from pathweave_ingest.worker_runtime import Runtime

    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    corpus = json.loads((data / "musique_train_corpus.json").read_text())
    corpus = corpus[:passages] if passages else corpus
    asked = [q["question"] for q in json.loads((data / "musique_train.json").read_text())]
    asked = asked[:questions] if questions else asked
    documents = [{"title": d["title"].strip(), "text": d["text"].strip(), "source": f"musique#{i}"}
                 for i, d in enumerate(corpus)]
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-api-"))
    settings = get_settings().model_copy(update={"data_dir": workdir})
    processes = ChildProcesses()
    queue = f"pathweave.bench.{uuid.uuid4().hex[:8]}"
    scaled = replicas > 1 or workers > 1
    results: dict = {"machine": machine_info(), "commit": git_commit(), "documents": len(documents),
                     "questions": len(asked), "mode": mode, "workers": workers, "replicas": replicas,
                     "ingest": {}, "query": {},
                     # other processes on the machine skew every figure: the 1-minute load average
                     # (runnable processes) when each measurement started and ended
                     "load_avg_1m": {"start": round(os.getloadavg()[0], 2)}}
    runtime = None
    runs: list[ServiceRun] = []
    try:
        if redis_url is None:
            binary = shutil.which("redis-server")
            if binary is None:
                raise RuntimeError("redis-server not found: run tools/start-redis.sh or pass --redis-url")
            port = free_port()
            processes.start([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], dict(os.environ), workdir / "redis.log")
            redis_url = f"redis://127.0.0.1:{port}/0"
        wait_for(lambda: broker_answers(redis_url), 30, "redis")
        store_server.start(settings)  # the shared store server of this run
        worker_tenant, scaled_tenant, inproc_tenant = "bench-worker", "bench-scaled", "bench-inprocess"
        env = {**os.environ, "PATHWEAVE_DATA_DIR": str(workdir), "PATHWEAVE_WORKER_BROKER_URL": redis_url,
               "PATHWEAVE_WORKER_QUEUE": queue, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}
        headers = {"Authorization": f"Bearer {create_key(env, worker_tenant, 'bench', 'admin')}"}
        scaled_headers = {"Authorization": f"Bearer {create_key(env, scaled_tenant, 'bench', 'admin')}"}
        max_documents = settings.api.max_documents

        # 1. the service as one API replica and one Celery worker; then (when asked) as more of each
        configurations = [("worker", worker_tenant, headers, 1, 1)]
        if scaled:
            configurations.append(("scaled", scaled_tenant, scaled_headers, replicas, workers))
        for label, tenant, auth, n_replicas, n_workers in configurations:
            console.print(f"[dim]starting {n_replicas} API replica(s) and {n_workers} worker(s) (models load once "
                          "each)[/]")
            run = ServiceRun(processes, env, workdir, label, n_replicas, n_workers)
            runs.append(run)
            console.print(f"[dim]ingesting {len(documents)} passages through {n_workers} worker(s)[/]")
            results["load_avg_1m"][f"ingest_{label}_start"] = round(os.getloadavg()[0], 2)
            results["ingest"][label] = run.ingest(documents, auth, tenant, max_documents)
            results["load_avg_1m"][f"ingest_{label}_end"] = round(os.getloadavg()[0], 2)
            run.stop_workers()

        # 2. the same corpus in-process (the API's no-broker path), another tenant
        ws = WorkerSettings(broker_url="")
        runtime = Runtime(settings, ws)
        runtime.warm()
        console.print(f"[dim]ingesting {len(documents)} passages in-process[/]")
        store = runtime.store(inproc_tenant)
        results["load_avg_1m"]["ingest_inprocess_start"] = round(os.getloadavg()[0], 2)
        started = time.perf_counter()
        docs = payloads(inproc_tenant, [SourceDocument(d["source"], d["title"], d["text"]) for d in documents])
        job_id = new_job_id()
        batch_size = ws.batch_size(runtime.device)
        submission = create_job(store, job_id, docs, batch_size, "inprocess")
        batches = batches_of(submission.to_enqueue, batch_size)
        local = InProcessQueue(runtime, maxsize=max(1, len(batches)), workers=1)
        batch_lines = _Lines()
        tasks_log = logging.getLogger("pathweave_ingest.tasks")
        tasks_log.addHandler(batch_lines)
        level = tasks_log.level
        tasks_log.setLevel(logging.INFO)
        try:
            local.submit_all(inproc_tenant, job_id, batches)
            local.join(timeout=7200)
        finally:
            tasks_log.removeHandler(batch_lines)
            tasks_log.setLevel(level)
        seconds = time.perf_counter() - started
        local.close()
        job = job_status(store, job_id)
        results["ingest"]["inprocess"] = {
            "documents": job["total"], "failed": job["counts"]["failed"], "passages": job["progress"]["passages"],
            "seconds": round(seconds, 1), "passages_per_s": round(job["progress"]["passages"] / seconds, 2),
            "batches": len(batches), "profile": batch_profile(batch_lines.lines, inproc_tenant)}
        results["load_avg_1m"]["ingest_inprocess_end"] = round(os.getloadavg()[0], 2)
        # the workers wrote the same graph as the single in-process runner (another tenant)
        results["ingest"]["same_graph"] = same_graph(runtime.store(worker_tenant).counts(), store.counts())
        if scaled:
            results["ingest"]["scaled_same_graph"] = same_graph(runtime.store(scaled_tenant).counts(), store.counts())

        # 3. queries: HTTP (API server) vs in-process Retriever, same questions, same graph
        retriever = runtime.retriever(worker_tenant)
        # warm both sides alike (snapshot, per-shape kernels): the same un-timed title queries
        warm_questions = [f"What is known about {title}?" for title in
                          list(dict.fromkeys(d["title"] for d in documents if d["title"]))[:50]]
        for question in warm_questions:
            retriever.query(question, mode=mode, k=5, write_record=False)
        with httpx.Client(base_url=runs[0].urls[0], headers=headers, timeout=120,
                          limits=httpx.Limits(max_connections=16)) as client:
            for question in warm_questions:
                client.post("/v1/query", json={"question": question, "mode": mode, "k": 5}).raise_for_status()

            def over_http(question: str) -> tuple[bool, float]:
                response = client.post("/v1/query", json={"question": question, "mode": mode, "k": 5})
                if response.status_code != 200:
                    return False, 0.0
                return True, float(response.json()["timings_ms"].get("total", 0.0))

            def in_process(question: str) -> tuple[bool, float]:
                try:
                    result = retriever.query(question, mode=mode, k=5)
                except Exception:  # noqa: BLE001 - counted as an error, like a non-200 answer
                    return False, 0.0
                return True, float(result.timings_ms.get("total", 0.0))

            for clients in (1, 8):
                console.print(f"[dim]{len(asked)} queries ({mode}), {clients} client(s): API and in-process, "
                              "alternating[/]")
                api_figures, local_figures = _compare(over_http, in_process, asked, clients)
                results["query"][f"api_{clients}"] = api_figures
                results["query"][f"inprocess_{clients}"] = local_figures
                results["load_avg_1m"][f"query_{clients}_end"] = round(os.getloadavg()[0], 2)
        if scaled:
            results["query"].update(_spread_queries(runs[1].urls, scaled_headers, asked, warm_questions, mode, console))
        results["api_log_tracebacks"] = sum(run.tracebacks() for run in runs)
    finally:
        try:
            if runtime is not None:
                runtime.close()
        finally:  # whatever the runtime's close raised, nothing the run started is left running
            processes.stop_all()
            store_server.stop(settings)
            shutil.rmtree(workdir, ignore_errors=True)
    return publish_results(out, "api.json", results, print_table, console)


def _spread_queries(urls: list[str], headers: dict, asked: list[str], warm: list[str], mode: str,
                    console: Console) -> dict:
    """The questions over the replicas at ``urls`` (each client thread sends to the next
    replica in turn, as a load balancer would) with 1 and 8 clients, after the warm-up
    questions on every replica: ``{"scaled_<clients>": figures}``."""
    clients_of = [httpx.Client(base_url=url, headers=headers, timeout=120, limits=httpx.Limits(max_connections=16))
                  for url in urls]
    turn, lock = iter(range(10**9)), threading.Lock()
    try:
        for client in clients_of:
            for question in warm:
                client.post("/v1/query", json={"question": question, "mode": mode, "k": 5}).raise_for_status()

        def spread(question: str) -> tuple[bool, float]:
            with lock:
                client = clients_of[next(turn) % len(clients_of)]
            response = client.post("/v1/query", json={"question": question, "mode": mode, "k": 5})
            if response.status_code != 200:
                return False, 0.0
            return True, float(response.json()["timings_ms"].get("total", 0.0))

        out = {}
        for clients in (1, 8):
            console.print(f"[dim]{len(asked)} queries ({mode}), {clients} client(s) over {len(urls)} replica(s)[/]")
            samples, wall = _run_concurrent(spread, asked, clients)
            walls = [s[0] for s in samples]
            out[f"scaled_{clients}"] = {
                "clients": clients, "replicas": len(urls), "queries": len(samples),
                "errors": sum(not s[1] for s in samples), "p50_ms": round(percentile_ms(walls, 50), 1),
                "p95_ms": round(percentile_ms(walls, 95), 1),
                "queries_per_s": round(len(samples) / wall, 2) if wall else 0.0}
        return out
    finally:
        for client in clients_of:
            client.close()


def print_table(results: dict, console: Console) -> None:
    machine = results["machine"]
    table = Table(title=f"pathweave bench api: {results['documents']} passages, {results['questions']} questions "
                        f"({results['mode']}), {machine['cores']} cores, {machine['cpu']}")
    for column in ("measure", "through the service", "in-process (or as said)", "unit"):
        table.add_column(column)
    worker, local = results["ingest"]["worker"], results["ingest"]["inprocess"]
    table.add_row("ingestion (1 replica, 1 worker vs in-process queue)", f"{worker['passages_per_s']:.1f}",
                  f"{local['passages_per_s']:.1f}", "passages/s")
    same = results["ingest"].get("same_graph")
    if same is not None:
        table.add_row("same graph as in-process (SYNONYM, ALIAS_OF within 1 %)", str(same["same"]),
                      json.dumps(same["differences"]), "")
    scaled = results["ingest"].get("scaled")
    if scaled is not None:
        name = f"{scaled['replicas']} replica(s), {scaled['workers']} worker(s)"
        table.add_row(f"ingestion ({name} vs 1 and 1)", f"{scaled['passages_per_s']:.1f}",
                      f"{worker['passages_per_s']:.1f}", "passages/s")
        same = results["ingest"]["scaled_same_graph"]
        table.add_row(f"same graph as in-process ({name})", str(same["same"]), json.dumps(same["differences"]), "")
        for clients in (1, 8):
            spread, one = results["query"][f"scaled_{clients}"], results["query"][f"api_{clients}"]
            table.add_row(f"throughput, {clients} client(s), {name} vs 1 replica", f"{spread['queries_per_s']:.1f}",
                          f"{one['queries_per_s']:.1f}", "queries/s")
            table.add_row(f"query p50, {clients} client(s), {name} vs 1 replica", f"{spread['p50_ms']:.0f}",
                          f"{one['p50_ms']:.0f}", "ms")
    for clients in (1, 8):
        api, proc = results["query"][f"api_{clients}"], results["query"][f"inprocess_{clients}"]
        table.add_row(f"query p50, {clients} client(s)", f"{api['p50_ms']:.0f}", f"{proc['p50_ms']:.0f}", "ms")
        table.add_row(f"query p95, {clients} client(s)", f"{api['p95_ms']:.0f}", f"{proc['p95_ms']:.0f}", "ms")
        table.add_row(f"throughput, {clients} client(s)", f"{api['queries_per_s']:.1f}", f"{proc['queries_per_s']:.1f}",
                      "queries/s")
        table.add_row(f"errors, {clients} client(s)", str(api["errors"]), str(proc["errors"]), "")
        table.add_row(f"retrieval p50 (server-side), {clients} client(s)", f"{api['retrieval_p50_ms']:.0f}",
                      f"{proc['retrieval_p50_ms']:.0f}", "ms")
        table.add_row(f"API overhead p50 (wall - retrieval), {clients} client(s)", f"{api['overhead_p50_ms']:.0f}",
                      "", "ms")
    console.print(table)
    console.print(profile_table({"worker": worker["profile"], "in-process": local["profile"]}))
    console.print(f"1-minute load average during the run (2 = both cores busy): {results['load_avg_1m']}")
