"""``pathweave bench soak``: the real service under a day's mixed load with faults.

On loopback, in a fresh temporary data dir: a private Redis (append-only file, so a restart
keeps the queued batches), the managed store (owned by this benchmark: a crashed store is
restarted by whichever service process needs it first, with this owner,
:func:`pathweave.servers.processes.launch_owner`), the API (uvicorn), one Celery worker and, with
``--llm``, the managed model server (started on demand by the API). Then for ``--minutes``:

- **queries**: 8 clients, each its own kind of request (:data:`QUERY_KINDS`: proprag, dense,
  hipporag2, apr in sessions, proprag with token budgets 200 and 400, the latter in sessions,
  dense with a budget; with ``--llm`` an answering client and a prunerag one), with a query-scoped
  key, MuSiQue's questions in a per-client shuffled order, ``--think-s`` between requests;
- **documents**: a stream of new documents (MuSiQue's corpus, then 2WikiMultihopQA's from
  ``../shared/bench/scale``), PUT replacements of documents with an external id, deletes of
  ingested documents and document lists, with an ingest-scoped key;
- **the history checker** (``--history-writes``, :class:`~pathweave_bench.history.Register`):
  4 clients PUT and DELETE 5 external ids of their own tenant, spread over the run, while a
  reader asks for each id every second; after the drain the history is checked for lost
  updates, missing windows, going back and stale reads, and that tenant's graph is compared
  with a replay of its final versions (``bench history`` without the rest of the load);
- **faults** (:func:`fault_schedule`): SIGKILL of the worker every ``--worker-kill-every``
  minutes (restarted 2 s later, as a supervisor would), one SIGKILL of the store server, one
  Redis restart and, with ``--llm``, one SIGKILL of the model server.

Every 30 s the RSS of the API, the worker, the store and the model server is sampled. After
the run the benchmark waits (``--drain-minutes``) until every accepted document is done or
failed, then replays the accepted document operations, in order, through the same API into a
fresh tenant of the same store and compares the two document graphs
(:meth:`~pathweave.store.graph_store.GraphStore.document_counts`, :func:`~pathweave_bench.api.same_graph`).

Reported (``soak.json`` and ``soak.html``: latency and RSS over time with the fault markers):
requests by status code, p50/p95 per kind per window, documents accepted / done / failed
(with reasons) / stuck, RSS growth from minute 10 to the end, the tracebacks in the service
logs (each attributed to a fault within :data:`FAULT_WINDOW_S` before it, or unexplained), and
the managed servers of the run still alive a minute after it ended.
"""

from __future__ import annotations

import bisect
import io
import json
import os
import random
import re
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from rich.console import Console
from rich.table import Table

from pathweave.evaluation import percentile_ms
from pathweave.terminal import stdout_console
from pathweave_bench.api import same_graph
from pathweave_bench.common import default_data_dir, git_commit, machine_info, publish_results, wait_for
from pathweave_bench.history import HISTORY_WRITERS, Register, register_keys
from pathweave_bench.service import APPROXIMATE_SLACK, Service

TENANT = "soak"
REPLAY_TENANT = "soak-replay"
"""The tenant the accepted document operations are replayed into, on the same service and store."""
FAULT_WINDOW_S = 90.0
"""A traceback logged within this many seconds after a fault is attributed to it."""
RSS_EVERY_S = 30.0
"""How often (s) the RSS of the service processes is sampled."""

QUERY_KINDS: dict[str, dict] = {
    "proprag": {"mode": "proprag"},
    "dense": {"mode": "dense"},
    "hipporag2": {"mode": "hipporag2"},
    "apr_session": {"mode": "apr", "session": True},
    "proprag_budget_200": {"mode": "proprag", "token_budget": 200},
    "proprag_budget_400_session": {"mode": "proprag", "token_budget": 400, "session": True},
    "dense_budget_200": {"mode": "dense", "token_budget": 200},
    "proprag_answer": {"mode": "proprag", "token_budget": 400, "answer": True},
    "prunerag": {"mode": "prunerag"},
}
"""The request of each kind of query client (``session``: a session id, a new one every
:data:`SESSION_QUESTIONS` questions)."""
SESSION_QUESTIONS = 4


def client_kinds(llm: bool) -> list[str]:
    """The 8 query clients' kinds: every retrieval mode, budgets and sessions; with ``llm``
    the last two answer with the LLM (a budgeted answer, and prunerag)."""
    kinds = ["proprag", "dense", "hipporag2", "apr_session", "proprag_budget_200", "proprag_budget_400_session",
             "proprag", "dense_budget_200"]
    return kinds[:6] + ["proprag_answer", "prunerag"] if llm else kinds


def fault_schedule(minutes: float, worker_every_min: float, llm: bool) -> list[tuple[float, str]]:
    """``[(seconds from the start, fault)]`` in time order: ``worker`` every ``worker_every_min``
    minutes (not at the start or the end), ``store`` at 40 % of the run, ``redis`` at 60 %,
    ``llm`` at 75 % (with ``llm``)."""
    total = minutes * 60
    faults = []
    if worker_every_min > 0:
        at = worker_every_min * 60
        while at < total - 1:
            faults.append((at, "worker"))
            at += worker_every_min * 60
    faults += [(0.4 * total, "store"), (0.6 * total, "redis")]
    if llm:
        faults.append((0.75 * total, "llm"))
    return sorted(faults)


@dataclass
class Journal:
    """What the run did, appended to by its threads: requests, accepted document operations,
    faults, RSS samples and the sizes of the logs over time (to date their tracebacks)."""

    started: float = field(default_factory=time.monotonic)
    requests: list[dict] = field(default_factory=list)
    operations: list[dict] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)
    rss: list[dict] = field(default_factory=list)
    log_sizes: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return round(time.monotonic() - self.started, 2)

    def request(self, kind: str, status: int, ms: float, retry_after: bool = False, error: str = "") -> None:
        with self.lock:
            self.requests.append({"t": self.now(), "kind": kind, "status": status, "ms": round(ms, 1),
                                  "retry_after": retry_after, **({"error": error} if error else {})})

    def operation(self, entry: dict) -> None:
        with self.lock:
            self.operations.append({"t": self.now(), **entry})


def timed_call(client: httpx.Client, journal: Journal, kind: str, method: str, url: str, **kwargs):
    """One request of the load, recorded in ``journal`` (status 0: no response, with the
    error's class); returns the response or None."""
    started = time.perf_counter()
    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        journal.request(kind, 0, (time.perf_counter() - started) * 1000, error=type(exc).__name__)
        return None
    journal.request(kind, response.status_code, (time.perf_counter() - started) * 1000,
                    retry_after="retry-after" in response.headers)
    return response


def rss_mib(pid: int | None) -> float | None:
    """RSS (MiB) of process ``pid`` alone (a managed server it started is sampled as itself),
    None when it does not run."""
    if not pid:
        return None
    try:
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    except psutil.Error:
        return None


def run_soak(data: Path | None, distractors: Path | None, out: Path, minutes: float = 30.0, llm: bool = False,
             worker_kill_every: float = 5.0, think_s: float = 0.5, ingest_every_s: float = 5.0,
             ingest_batch: int = 5, drain_minutes: float = 15.0, keep: Path | None = None,
             history_writes: int = 220, seed: int = 50) -> dict:
    """Run the soak benchmark (see the module doc); returns (and writes) the results dict.
    ``seed``: documents ingested before the load starts. Raises RuntimeError when the service
    does not start."""
    from pathweave.servers import store_server
    from pathweave.settings import get_settings

    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    distractors = Path(distractors) if distractors else data.parent / "scale" / "2wikimultihopqa_corpus.json"
    questions = [q["question"] for q in json.loads((data / "musique_train.json").read_text())]
    documents = [{"title": d["title"].strip(), "text": d["text"].strip(), "source": f"musique#{i}"}
                 for i, d in enumerate(json.loads((data / "musique_train_corpus.json").read_text()))]
    if distractors.is_file():
        documents += [{"title": d["title"].strip(), "text": d["text"].strip(), "source": f"2wiki#{i}"}
                      for i, d in enumerate(json.loads(distractors.read_text()))]
    replacements = documents[::-1]  # PUT texts: from the end of the stream, so each version is new
    workdir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="pathweave-bench-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    settings = get_settings().model_copy(update={"data_dir": workdir})
    service = Service(workdir, llm)
    schedule = fault_schedule(minutes, worker_kill_every, llm)
    results: dict = {"machine": machine_info(), "commit": git_commit(), "minutes": minutes, "llm": llm,
                     "clients": client_kinds(llm), "think_s": think_s,
                     "ingest": {"every_s": ingest_every_s, "batch": ingest_batch}, "schedule": schedule,
                     "history_writes": history_writes, "seed": seed}
    journal = Journal()
    register: Register | None = None
    try:
        store_server.start(settings, owner=os.getpid())  # this run's store: it stops when the run ends
        service.start_redis()
        query_token = service.create_key(TENANT, "soak queries", "query")
        ingest_token = service.create_key(TENANT, "soak documents", "ingest")
        console.print("[dim]starting the API and the worker (models load once each)[/]")
        service.start_worker()
        service.start_api()
        ingest = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {ingest_token}"}, timeout=120)
        stream = iter(documents)
        accepted = submit(ingest, journal, [next(stream) for _ in range(seed)])
        wait_for(lambda: jobs_settled(ingest, [accepted["job_id"]]), 600, "seed documents", interval=2.0)
        console.print(f"[dim]soak: {minutes} min, faults {schedule}[/]")
        if history_writes:  # the history checker's writers, spread over the run, and its reader
            token, replay_token = register_keys(service)
            register = Register(service.url, token, replay_token, writes=history_writes, writers=HISTORY_WRITERS,
                                think_s=minutes * 60 * HISTORY_WRITERS / history_writes, read_pause_s=1.0)
        journal.started = time.monotonic()
        if register is not None:
            register.start(journal.started)  # one time base for the faults
        stop = threading.Event()
        threads = [threading.Thread(target=query_client, name=f"client-{n}", daemon=True,
                                    args=(service.url, query_token, kind, questions, n, think_s, journal, stop))
                   for n, kind in enumerate(client_kinds(llm))]
        threads += [threading.Thread(target=document_stream, name="documents", daemon=True,
                                     args=(ingest, journal, stream, replacements, ingest_every_s, ingest_batch, stop)),
                    threading.Thread(target=sampler, name="sampler", daemon=True, args=(service, journal, stop))]
        for thread in threads:
            thread.start()
        run_faults(service, journal, schedule, minutes * 60, console)
        stop.set()
        for thread in threads:
            thread.join(300)
        results["duration_s"] = journal.now()
        console.print(f"[dim]draining: waiting up to {drain_minutes} min for every accepted document[/]")
        job_ids = list(dict.fromkeys(op["job_id"] for op in journal.operations if op.get("job_id")))
        drain_started = time.monotonic()
        try:
            wait_for(lambda: jobs_settled(ingest, job_ids), drain_minutes * 60, "accepted documents", interval=5.0)
        except TimeoutError:
            pass
        results["drain_s"] = round(time.monotonic() - drain_started, 1)
        if register is not None:
            console.print("[dim]the history checker: draining its versions, checking, replaying[/]")
            register.history.faults = journal.faults
            try:
                results["history"] = {"faults": journal.faults, **register.finish(
                    settings, APPROXIMATE_SLACK, Path(out), stop_writers=True, drain_s=60 + drain_minutes * 60)}
            except Exception as exc:  # noqa: BLE001 - reported; the rest of the soak's results stay
                results["history"] = {"faults": journal.faults, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        results["documents"] = document_outcomes(ingest, job_ids)
        ingest.close()
        results["requests"] = request_summary(journal.requests)
        results["latency"] = latency_timeline(journal.requests, minutes)
        results["faults"] = journal.faults
        results["rss"] = journal.rss
        results["rss_growth"] = rss_growth(journal.rss, journal.faults)
        results["tracebacks"] = tracebacks(service.logs, journal)
        results["operations"] = Counter(op["op"] for op in journal.operations)
        console.print(f"[dim]replaying {len(journal.operations)} accepted document operations into a fresh tenant[/]")
        results["graph"] = replay_and_compare(settings, service, journal.operations)
    finally:
        if register is not None:
            register.stop()
        service.processes.stop_all()
        store_server.stop(settings)
        results["left_running"] = servers_left(workdir, 60.0)
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    (Path(out)).mkdir(parents=True, exist_ok=True)
    (Path(out) / "soak.html").write_text(html_report(results, journal))
    return publish_results(out, "soak.json", results, print_table, console)


def submit(client: httpx.Client, journal: Journal, documents: list[dict]) -> dict | None:
    """POST ``documents``; an accepted submission is journaled as an operation."""
    response = timed_call(client, journal, "post_documents", "POST", "/v1/documents", json={"documents": documents})
    if response is None or response.status_code != 202:
        return None
    body = response.json()
    journal.operation({"op": "post", "documents": documents, "job_id": body["job_id"],
                       "doc_ids": [d["doc_id"] for d in body["documents"]]})
    return body


def document_stream(client: httpx.Client, journal: Journal, stream, replacements: list[dict], every_s: float,
                    batch: int, stop: threading.Event) -> None:
    """New documents every ``every_s`` s (``batch`` at a time); every 4th tick a PUT that
    replaces one of 10 documents with an external id; every 6th a delete of the oldest
    ingested document not deleted yet; every 12th a document list."""
    tick, deletable, waiting = 0, [], None
    while not stop.wait(every_s):
        tick += 1
        if waiting is None:
            waiting = [d for _, d in zip(range(batch), stream)]
        accepted = submit(client, journal, waiting) if waiting else None
        if accepted is not None:
            deletable += [d["doc_id"] for d in accepted["documents"]]
            waiting = None
        if tick % 4 == 0:
            version = replacements[tick // 4 % len(replacements)]
            external = f"soak-ext-{tick // 4 % 10}"
            body = {"title": f"External document {tick // 4 % 10}", "text": version["text"]}
            response = timed_call(client, journal, "put_document", "PUT", f"/v1/documents/{external}", json=body)
            if response is not None and response.status_code == 202:
                journal.operation({"op": "put", "external_id": external, "body": body,
                                   "job_id": response.json()["job_id"]})
        if tick % 6 == 0 and deletable:
            doc_id = deletable[0]
            response = timed_call(client, journal, "delete_document", "DELETE", f"/v1/documents/{doc_id}")
            if response is not None and response.status_code in (200, 404):  # 409: still running, later
                deletable.pop(0)
                if response.status_code == 200:
                    journal.operation({"op": "delete", "doc_id": doc_id})
        if tick % 12 == 0:
            timed_call(client, journal, "list_documents", "GET", "/v1/documents", params={"limit": 20})


def query_client(url: str, token: str, kind: str, questions: list[str], number: int, think_s: float,
                 journal: Journal, stop: threading.Event) -> None:
    """One query client: requests of ``kind`` (:data:`QUERY_KINDS`) over the shuffled
    ``questions`` until ``stop``."""
    spec = QUERY_KINDS[kind]
    order = list(questions)
    random.Random(number).shuffle(order)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=180) as client:
        asked = 0
        while not stop.is_set():
            body = {"question": order[asked % len(order)], "mode": spec["mode"], "k": 5}
            body.update({key: spec[key] for key in ("token_budget", "answer") if key in spec})
            if spec.get("session"):
                body["session_id"] = f"soak-{number}-{asked // SESSION_QUESTIONS}"
            response = timed_call(client, journal, kind, "POST", "/v1/query", json=body)
            asked += 1
            if response is None or response.status_code in (429, 503):
                retry = float((response and response.headers.get("retry-after")) or 1.0)
                stop.wait(min(retry, 5.0))
            stop.wait(think_s)


CACHE_GAUGES = {"pathweave_node_cache_bytes": "api_cache_mib", "pathweave_topology_passages": "api_passages"}


def api_caches(url: str) -> dict[str, float]:
    """The API's query caches from its ``/metrics``: ``api_cache_mib`` (node rows, MiB) and
    ``api_passages`` (in its topology); {} when it does not answer."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return {}
    from prometheus_client.parser import text_string_to_metric_families

    return {CACHE_GAUGES[family.name]: family.samples[0].value / (2 ** 20 if family.name.endswith("bytes") else 1)
            for family in text_string_to_metric_families(text) if family.name in CACHE_GAUGES and family.samples}


def sampler(service: Service, journal: Journal, stop: threading.Event) -> None:
    """Every 5 s the logs' sizes (to date tracebacks), every :data:`RSS_EVERY_S` the RSS
    (MiB) of the API, worker, store and model server, and the API's query caches
    (:func:`api_caches`)."""
    last = -RSS_EVERY_S
    while True:
        now = journal.now()
        for name, path in service.logs.items():
            journal.log_sizes[name].append((now, path.stat().st_size if path.exists() else 0))
        if now - last >= RSS_EVERY_S:
            last = now
            pids = service.pids()
            journal.rss.append({"t": now, **{name: rss_mib(pids[name]) for name in ("api", "worker", "store", "llm")},
                                **api_caches(service.url)})
        if stop.wait(5.0):
            return


def run_faults(service: Service, journal: Journal, schedule: list[tuple[float, str]], total_s: float,
               console: Console) -> None:
    """Inflict the scheduled faults at their times, then wait out the run."""
    for at, fault in schedule:
        time.sleep(max(0.0, at - journal.now()))
        entry = {"t": journal.now(), "fault": fault}
        try:
            entry.update(service.kill(fault))
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            entry["error"] = f"{type(exc).__name__}: {exc}"
        journal.faults.append(entry)
        console.print(f"[dim]{entry['t']:.0f} s: fault {fault}: {entry}[/]")
    time.sleep(max(0.0, total_s - journal.now()))


def jobs_settled(client: httpx.Client, job_ids: list[str]) -> bool:
    """Are all ``job_ids`` finished (none queued or running)? False while the API does not answer."""
    try:
        for job_id in job_ids:
            response = client.get(f"/v1/jobs/{job_id}")
            if response.status_code != 200 or response.json()["status"] in ("queued", "running"):
                return False
    except httpx.HTTPError:
        return False
    return True


def document_outcomes(client: httpx.Client, job_ids: list[str]) -> dict:
    """Each accepted job's documents by final state, failures grouped by reason, and the
    documents still queued or running (stuck)."""
    states: Counter = Counter()
    reasons: Counter = Counter()
    stuck: list[str] = []
    for job_id in job_ids:
        response = client.get(f"/v1/jobs/{job_id}")
        if response.status_code != 200:
            states["unknown"] += 1
            continue
        for document in response.json().get("documents", []):
            states[document["status"]] += 1
            if document["status"] == "failed":
                reasons[(document.get("error") or "no reason given")[:200]] += 1
            elif document["status"] in ("queued", "running"):
                stuck.append(document["doc_id"])
    return {"jobs": len(job_ids), "by_state": dict(states), "failed_reasons": dict(reasons),
            "stuck": len(stuck), "stuck_ids": stuck[:20]}


def request_summary(requests: list[dict]) -> dict:
    """Requests by kind and status code, and the 5xx beyond 503 with Retry-After."""
    by_kind: dict[str, Counter] = defaultdict(Counter)
    for r in requests:
        by_kind[r["kind"]][str(r["status"])] += 1
    bad = [r for r in requests if r["status"] >= 500 and not (r["status"] == 503 and r["retry_after"])]
    return {"by_kind": {k: dict(v) for k, v in sorted(by_kind.items())}, "total": len(requests),
            "bad_5xx": len(bad), "no_response": sum(r["status"] == 0 for r in requests),
            "bad_5xx_first": bad[:10]}


def latency_timeline(requests: list[dict], minutes: float) -> dict:
    """p50/p95 (ms) of the successful queries of each kind per window (1 min, or 2 for runs
    over 20 min), and over the whole run."""
    window = 120.0 if minutes > 20 else 60.0
    queries = [r for r in requests if r["kind"] in QUERY_KINDS and r["status"] == 200]
    out: dict = {"window_s": window, "overall": {}, "windows": []}
    for kind in sorted({r["kind"] for r in queries}):
        ms = [r["ms"] for r in queries if r["kind"] == kind]
        out["overall"][kind] = {"n": len(ms), "p50_ms": round(percentile_ms(ms, 50), 1),
                                "p95_ms": round(percentile_ms(ms, 95), 1)}
    start = 0.0
    while start < minutes * 60:
        row = {"t": start}
        for kind in out["overall"]:
            ms = [r["ms"] for r in queries if r["kind"] == kind and start <= r["t"] < start + window]
            if ms:
                row[kind] = {"n": len(ms), "p50_ms": round(percentile_ms(ms, 50), 1),
                             "p95_ms": round(percentile_ms(ms, 95), 1)}
        out["windows"].append(row)
        start += window
    return out


def rss_growth(samples: list[dict], faults: list[dict], from_s: float = 600.0) -> dict:
    """RSS growth (%) of the API from the first sample at ``from_s`` (minute 10) to the last,
    and of the worker at equal age: the peak of its last life against the peak of its life
    that began at or after ``from_s`` (it restarts at every worker fault)."""
    out: dict = {}
    api = [s for s in samples if s["t"] >= from_s and s.get("api")]
    if len(api) >= 2:
        out["api"] = {"from_mib": api[0]["api"], "to_mib": api[-1]["api"],
                      "growth_pct": round(100 * (api[-1]["api"] / api[0]["api"] - 1), 1)}
        if "api_cache_mib" in api[0] and "api_cache_mib" in api[-1]:
            # the bounded node cache (query.node_cache_entries) fills as queries touch new nodes
            first, last = api[0]["api"] - api[0]["api_cache_mib"], api[-1]["api"] - api[-1]["api_cache_mib"]
            out["api"].update(cache_from_mib=round(api[0]["api_cache_mib"], 1),
                              cache_to_mib=round(api[-1]["api_cache_mib"], 1),
                              net_of_cache_growth_pct=round(100 * (last / first - 1), 1))
    restarts = [0.0] + [f["t"] for f in faults if f["fault"] == "worker"]
    lives = []
    for begin, end in zip(restarts, restarts[1:] + [float("inf")]):
        values = [s["worker"] for s in samples if begin <= s["t"] < end and s.get("worker")]
        if values:
            lives.append({"from_s": begin, "peak_mib": max(values)})
    later = [life for life in lives if life["from_s"] >= from_s - 1] or lives[-1:]
    if later and lives:
        first, last = later[0], lives[-1]
        out["worker"] = {"lives": lives, "from_mib": first["peak_mib"], "to_mib": last["peak_mib"],
                         "growth_pct": round(100 * (last["peak_mib"] / first["peak_mib"] - 1), 1)}
    store = [s for s in samples if s["t"] >= from_s and s.get("store")]
    if len(store) >= 2:
        out["store"] = {"from_mib": store[0]["store"], "to_mib": store[-1]["store"]}
    return out


TRACEBACK = "Traceback (most recent call last):"


def tracebacks(logs: dict[str, Path], journal: Journal) -> dict:
    """Every traceback in the service logs: its exception line, log, time (from the logs'
    sampled sizes) and the fault it follows within :data:`FAULT_WINDOW_S` s (None:
    unexplained)."""
    found = []
    for name, path in logs.items():
        if not path.exists():
            continue
        text = path.read_bytes()
        sizes = journal.log_sizes.get(name, [])
        offsets = [size for _, size in sizes]
        for match in re.finditer(re.escape(TRACEBACK.encode()), text):
            after = text[match.end():match.end() + 20000].decode(errors="replace").splitlines()
            exception = next((line.strip() for line in after[1:] if line and not line.startswith((" ", "\t"))
                              and not line.startswith(("Traceback", "During handling", "The above"))), "?")
            index = bisect.bisect_left(offsets, match.start() + 1)
            when = sizes[index][0] if index < len(sizes) else None
            cause = next((f["fault"] for f in reversed(journal.faults)
                          if when is not None and f["t"] <= when <= f["t"] + FAULT_WINDOW_S), None)
            found.append({"log": name, "t": when, "exception": exception[:300], "fault": cause})
    unexplained = [t for t in found if t["fault"] is None]
    return {"total": len(found), "after_a_fault": len(found) - len(unexplained), "unexplained": len(unexplained),
            "by_exception": dict(Counter(t["exception"][:160] for t in found).most_common(20)),
            "unexplained_first": unexplained[:20]}


def replay_and_compare(settings, service: Service, operations: list[dict]) -> dict:
    """Replay the accepted document operations, in their order, through the soak's own API
    (after the load and its faults) into the fresh tenant :data:`REPLAY_TENANT` of the same
    store; each PUT and DELETE waits for the jobs before it (a DELETE names the replay's id
    of the document the soak deleted: the API's id of its title and text in the replay
    tenant). Compares the two tenants' document graphs
    (:meth:`~pathweave.store.graph_store.GraphStore.document_counts`)."""
    from pathweave.runtime import open_store
    from pathweave_ingest.documents import document_id
    from pathweave_ingest.loaders import SourceDocument

    token = service.create_key(REPLAY_TENANT, "replay", "ingest")
    started = time.monotonic()
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=600) as client:
        pending: list[str] = []
        posts: list[dict] = []
        replayed: dict[str, str] = {}  # the soak's doc id -> the replay's (the API's ids: tenant, title, text)

        def flush() -> None:
            for start in range(0, len(posts), 1000):
                response = client.post("/v1/documents", json={"documents": posts[start:start + 1000]})
                response.raise_for_status()
                pending.append(response.json()["job_id"])
            posts.clear()
            wait_for(lambda: jobs_settled(client, pending), 3600, "replay jobs", service.api, service.logs["api"],
                     interval=0.3)
            pending.clear()

        for op in operations:
            if op["op"] == "post":
                posts += op["documents"]
                for d in op["documents"]:
                    source = SourceDocument(d.get("source") or "", d["title"].strip(), d["text"].strip())
                    replayed[document_id(TENANT, source)] = document_id(REPLAY_TENANT, source)
                continue
            flush()
            if op["op"] == "put":
                response = client.put(f"/v1/documents/{op['external_id']}", json=op["body"])
                response.raise_for_status()
                pending.append(response.json()["job_id"])
            elif op["op"] == "delete":
                client.delete(f"/v1/documents/{replayed[op['doc_id']]}").raise_for_status()
        flush()
    with open_store(settings, TENANT) as soaked, open_store(settings, REPLAY_TENANT) as clean:
        counts, reference = soaked.document_counts(), clean.document_counts()
    return {"replay_s": round(time.monotonic() - started, 1), "soak": counts, "replay": reference,
            **same_graph(counts, reference, slack=APPROXIMATE_SLACK)}


def servers_left(workdir: Path, wait_s: float) -> list[dict]:
    """The processes whose command line names ``workdir`` (the run's managed servers) still
    alive ``wait_s`` seconds after the run stopped them, or sooner when none is left."""
    deadline = time.monotonic() + wait_s
    this_run = {os.getpid(), *(p.pid for p in psutil.Process().parents())}  # the benchmark and its callers
    while True:
        left = []
        for process in psutil.process_iter(["pid", "cmdline"]):
            try:
                if process.info["pid"] not in this_run and str(workdir) in " ".join(process.info["cmdline"] or []):
                    left.append({"pid": process.info["pid"], "cmdline": " ".join(process.info["cmdline"])[:300]})
            except psutil.Error:
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1.0)


def timeline_svg(results: dict, journal: Journal) -> str:
    """Latency (p50 per kind per window) and RSS over time, faults as vertical lines (SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    timeline = results.get("latency", {})
    for kind in timeline.get("overall", {}):
        points = [(row["t"] / 60, row[kind]["p50_ms"]) for row in timeline.get("windows", []) if kind in row]
        top.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=kind)
    top.set_ylabel("p50 latency per window (ms)")
    top.set_yscale("log")
    top.legend(fontsize=7, ncol=2)
    for name in ("api", "worker", "store", "llm"):
        points = [(s["t"] / 60, s[name]) for s in journal.rss if s.get(name)]
        if points:
            bottom.plot([p[0] for p in points], [p[1] for p in points], label=name)
    bottom.set_ylabel("RSS (MiB)")
    bottom.set_xlabel("minutes")
    bottom.legend(fontsize=7)
    for axes in (top, bottom):
        for fault in journal.faults:
            axes.axvline(fault["t"] / 60, color="red" if fault["fault"] != "worker" else "grey", linestyle=":",
                         linewidth=0.8)
            if axes is top:
                axes.annotate(fault["fault"], (fault["t"] / 60, 1), xycoords=("data", "axes fraction"),
                              fontsize=7, rotation=90, va="top")
        axes.grid(alpha=0.3)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def html_report(results: dict, journal: Journal) -> str:
    """``soak.html``: the timeline plot and the results as JSON."""
    import html

    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Pathweave soak</title></head><body>"
            f"<h1>pathweave bench soak: {results['minutes']} min</h1><p>commit {html.escape(str(results['commit']))}, "
            f"machine {html.escape(json.dumps(results['machine']))}</p>{timeline_svg(results, journal)}"
            f"<pre>{html.escape(json.dumps(results, indent=2, default=str))}</pre></body></html>")


def print_table(results: dict, console: Console) -> None:
    machine = results["machine"]
    requests, documents = results.get("requests", {}), results.get("documents", {})
    table = Table(title=f"pathweave bench soak: {results['minutes']} min, {machine['cores']} cores, {machine['cpu']}")
    table.add_column("measure")
    table.add_column("value")
    table.add_row("requests", str(requests.get("total")))
    table.add_row("5xx other than 503 + Retry-After", str(requests.get("bad_5xx")))
    table.add_row("no response (connection errors)", str(requests.get("no_response")))
    for kind, codes in requests.get("by_kind", {}).items():
        table.add_row(f"  {kind}", json.dumps(codes))
    for kind, figures in results.get("latency", {}).get("overall", {}).items():
        table.add_row(f"p50 / p95 {kind}", f"{figures['p50_ms']:.0f} / {figures['p95_ms']:.0f} ms (n={figures['n']})")
    table.add_row("documents by state", json.dumps(documents.get("by_state")))
    table.add_row("failed: reasons", json.dumps(documents.get("failed_reasons"))[:300])
    table.add_row("stuck after the drain", str(documents.get("stuck")))
    graph = results.get("graph", {})
    table.add_row("graph = clean replay", f"{graph.get('same')} {json.dumps(graph.get('differences'))}")
    for name, growth in results.get("rss_growth", {}).items():
        table.add_row(f"RSS {name}, minute 10 -> end", f"{growth.get('from_mib')} -> {growth.get('to_mib')} MiB "
                                                       f"({growth.get('growth_pct', '–')} %)")
        if "cache_from_mib" in growth:
            table.add_row(f"  {name} node cache; RSS net of it", f"{growth['cache_from_mib']} -> "
                          f"{growth['cache_to_mib']} MiB; {growth['net_of_cache_growth_pct']} %")
    traces = results.get("tracebacks", {})
    table.add_row("tracebacks: total / after a fault / unexplained",
                  f"{traces.get('total')} / {traces.get('after_a_fault')} / {traces.get('unexplained')}")
    table.add_row("managed servers alive a minute after the end", str(len(results.get("left_running", []))))
    if "error" in results.get("history", {}):
        table.add_row("history checker", f"[red]{results['history']['error']}[/]")
    if "check" in results.get("history", {}):
        from pathweave_bench.history import check_rows

        for what, value in check_rows(results["history"]):
            table.add_row(f"history checker: {what}", value)
    console.print(table)
