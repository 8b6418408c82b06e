"""What every benchmark records beside its figures: where the benchmark data is
(``../shared/bench``), the machine (cores, RAM, CPU), the commit, peak memory, and a wait
for the store server to go idle before timing queries."""

from __future__ import annotations

import platform as stdlib_platform
import resource
import json
import subprocess
import time
from pathlib import Path

import psutil

from pathweave.servers.processes import stop_process

REPO_ROOT = Path(__file__).resolve().parents[2]


def default_data_dir() -> Path:
    """``../shared/bench/musique`` next to the repository (or the working directory)."""
    for base in (Path.cwd(), REPO_ROOT):
        candidate = (base / ".." / "shared" / "bench" / "musique").resolve()
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("MuSiQue data not found at ../shared/bench/musique; pass --data")


def machine_info() -> dict:
    """Cores, RAM (GiB) and CPU model of this machine."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = stdlib_platform.processor()
    return {"cores": psutil.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "cpu": model}


def git_commit() -> str:
    """The short commit hash of the checkout (``unknown`` outside git)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def wait_for_idle_store(pid: int | None, timeout_s: float = 180.0, threshold_pct: float = 15.0) -> float:
    """Wait until the store server process ``pid`` uses under ``threshold_pct`` % CPU for
    two consecutive 1-s samples (after a large ingestion ArcadeDB keeps compacting and
    indexing for a while, which on 2 cores competes with the queries being timed).
    Returns the seconds waited (at most ``timeout_s``)."""
    if pid is None:
        return 0.0
    started, quiet = time.perf_counter(), 0
    try:
        process = psutil.Process(pid)
        while quiet < 2 and time.perf_counter() - started < timeout_s:
            quiet = quiet + 1 if process.cpu_percent(interval=1.0) < threshold_pct else 0
    except psutil.Error:
        pass
    return round(time.perf_counter() - started, 1)


def write_results(out: Path, name: str, results: dict) -> Path:
    """Write ``results`` as ``<out>/<name>`` (indented JSON, ``out`` created); returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(results, indent=2))
    return path


def publish_results(out: Path, name: str, results: dict, show, console) -> dict:
    """The end of a benchmark: :func:`write_results`, then ``show(results, console)`` (its
    table) and the file's path on ``console``. Returns ``results``."""
    path = write_results(out, name, results)
    show(results, console)
    console.print(f"wrote {path}")
    return results


BACKENDS = ("arcadedb", "neo4j")


def backend_list(value: str) -> list[str]:
    """The ``--backend`` option: ``arcadedb``, ``neo4j`` or ``both`` (ArcadeDB first).
    Raises ValueError on anything else."""
    if value == "both":
        return list(BACKENDS)
    if value not in BACKENDS:
        raise ValueError(f"--backend must be arcadedb, neo4j or both, not {value!r}")
    return [value]


def with_backend(settings, backend: str):
    """``settings`` with the managed store ``backend`` and its own data dir
    (``<data_dir>/<backend>``), so two backends of one benchmark run never share files."""
    store = settings.store.model_copy(update={"backend": backend, "uri": ""})
    return settings.model_copy(update={"store": store, "data_dir": Path(settings.data_dir) / backend})


def project_now(store) -> float:
    """On Neo4j + GDS: project the tenant's PPR graph of the current version now (the
    background projection is debounced), so timed queries measure GDS and not the
    in-process fallback; seconds it took (0.0 on other backends)."""
    from pathweave.store.backends.gds import ProjectionTooLarge

    projector = getattr(store.backend, "projector", None)
    if projector is None:
        return 0.0
    started = time.perf_counter()
    try:
        projector.project_now(store)
    except ProjectionTooLarge as refused:  # the queries then measure the in-process PPR, as they say
        print(f"not projected: {refused}")
    return round(time.perf_counter() - started, 2)


def ingestion_profile(report, embedder=None) -> dict:
    """An ingestion's per-stage profile (:class:`~pathweave_ingest.profile.IngestProfile`:
    busy seconds per stage, texts embedded) and, when ``embedder`` is given and the
    ingestion kept its texts (``keep_texts``), the **embed-only floor**: the seconds
    ``embedder`` takes for exactly the texts ingestion embedded, call by call, the tokens they
    hold, and ingestion's rate as a share of that floor (``embed_only_ratio`` = embed-only
    seconds / ingestion seconds, 1.0 = ingestion costs no more than its embeddings)."""
    from pathweave_ingest.profile import embed_only_seconds, tokens_of

    profile = report.profile.as_dict()
    if embedder is not None and report.profile.calls:
        calls = report.profile.calls
        floor = embed_only_seconds(embedder.encode, calls)
        profile.update(tokens_embedded=tokens_of(embedder.tokenizer, calls, embedder.max_seq_length),
                       embed_only_s=round(floor, 1),
                       embed_only_passages_per_s=round(report.passages_new / floor, 2) if floor else None,
                       embed_only_ratio=round(floor / report.seconds, 3) if report.seconds else None)
    return profile


def profile_table(rows: dict[str, dict], title: str = "Ingestion: busy seconds per stage"):
    """A rich table of :func:`ingestion_profile` results, one column per run (``rows``:
    label -> profile)."""
    from rich.table import Table

    from pathweave_ingest.profile import STAGES

    table = Table(title=title)
    table.add_column("stage")
    for label in rows:
        table.add_column(label, justify="right")
    for stage in STAGES:
        table.add_row(stage, *(f"{r['stages_s'].get(stage, 0.0):.1f}" for r in rows.values()))
    for key, name in (("texts_embedded", "texts embedded"), ("tokens_embedded", "tokens embedded"),
                      ("embed_only_s", "embed-only s"), ("embed_only_passages_per_s", "embed-only passages/s"),
                      ("embed_only_ratio", "ingestion / embed-only rate")):
        if any(key in r for r in rows.values()):
            table.add_row(name, *(str(r.get(key, "–")) for r in rows.values()))
    return table


def wait_for(predicate, timeout: float, what: str, process: subprocess.Popen | None = None, log: Path | None = None,
          interval: float = 0.2):
    """Poll ``predicate()`` every ``interval`` s until it gives a true value, which is returned.
    Raises RuntimeError (with the tail of ``log``) when ``process`` exits first, TimeoutError
    after ``timeout`` s; ``what`` names the awaited thing in both."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what}: process exited with {process.returncode}\n{tail}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout:.0f} s")
        time.sleep(interval)


class ChildProcesses:
    """A benchmark's child processes (servers, workers), each in its own session with its
    output appended to a log, stopped in reverse order by :meth:`stop_all`."""

    def __init__(self) -> None:
        self.items: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict, log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                       start_new_session=True)
        self.items.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.items):
            stop_process(process)


def http_ready(url: str) -> bool:
    """Does the API server at ``url`` answer ``/readyz`` with 200 (within 5 s)?"""
    import httpx

    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
