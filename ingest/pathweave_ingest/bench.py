"""``pathweave bench musique``: retrieval quality and speed on the MuSiQue sample.

A fresh store (temporary data directory) ingests the 1,890-passage corpus
twice, as two tenants: with the default spaCy extractor and with the imported
gpt-3.5 OpenIE extraction. Each of the 100 questions runs in the three modes
(proprag, dense, hipporag2: the baselines are measured in the same run).
Prints one table and writes ``musique.json`` and ``musique.html`` to ``--out``.
"""

from __future__ import annotations

import json
import platform as stdlib_platform
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

from pathweave import server
from pathweave.embeddings import get_embedder
from pathweave.evaluation import percentile_ms, recall_at_k
from pathweave.retrieval.retriever import MODES, Retriever
from pathweave.settings import get_settings
from pathweave.store import open_store
from pathweave.text import stable_id
from pathweave_ingest.loaders import SourceDocument

REPO_ROOT = Path(__file__).resolve().parents[2]
EXTRACTION_FILE = "openie_gpt-3.5-turbo-1106.json"


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
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gold_documents(question: dict, tenant: str) -> set[str]:
    """Document ids of the question's supporting paragraphs (title + paragraph_text rule)."""
    gold = set()
    for paragraph in question["paragraphs"]:
        if paragraph["is_supporting"]:
            title, text = paragraph["title"].strip(), paragraph["paragraph_text"].strip()
            if text.startswith(title + "\n"):
                text = text[len(title) + 1:].strip()
            gold.add(stable_id("doc", tenant, title, text))
    return gold


def evaluate(retriever: Retriever, questions: list[dict], mode: str, console: Console) -> dict:
    """Recall@2/5 and latency percentiles of ``mode`` over ``questions`` (warm)."""
    retriever.query(questions[0]["question"], mode=mode, k=5)  # warm: snapshot, baseline graph
    r2, r5, latencies = [], [], []
    for question in questions:
        started = time.perf_counter()
        result = retriever.query(question["question"], mode=mode, k=20)
        latencies.append((time.perf_counter() - started) * 1000)
        docs = [hit.doc_id for hit in result.passages]
        gold = gold_documents(question, retriever.store.tenant)
        r2.append(recall_at_k(docs, gold, 2))
        r5.append(recall_at_k(docs, gold, 5))
    return {"recall_at_2": round(sum(r2) / len(r2), 4), "recall_at_5": round(sum(r5) / len(r5), 4),
            "p50_ms": round(percentile_ms(latencies, 50), 1), "p95_ms": round(percentile_ms(latencies, 95), 1)}


def run_musique(data: Path | None, out: Path, limit: int = 0, extractions: list[str] | None = None) -> dict:
    """Run the benchmark; returns (and writes) the results dict."""
    from pathweave_ingest.cli import run_ingest

    console = Console()
    data = Path(data) if data else default_data_dir()
    corpus = json.loads((data / "musique_train_corpus.json").read_text())
    questions = json.loads((data / "musique_train.json").read_text())
    questions = questions[:limit] if limit else questions
    documents = [SourceDocument(f"musique#{i}", d["title"].strip(), d["text"].strip()) for i, d in enumerate(corpus)]
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-"))
    settings = get_settings().model_copy(update={"data_dir": workdir})
    results: dict = {"results": {}, "ingest": {}, "machine": machine_info(), "commit": git_commit(),
                     "questions": len(questions), "passages": len(documents)}
    try:
        embedder = get_embedder(settings)
        for extraction in extractions or ["default", "imported"]:
            tenant = f"bench-{extraction}"
            file = data / EXTRACTION_FILE if extraction == "imported" else None
            with open_store(settings, tenant=tenant) as store:
                report = run_ingest(store, settings.model_copy(update={"tenant": tenant}), documents, [], file,
                                    label=f"ingest ({extraction})")
                info = server.status(settings)
                results["ingest"][extraction] = {
                    "passages": report.passages_new, "propositions": report.propositions_new,
                    "entities": report.entities_new, "triples": report.triples,
                    "seconds": round(report.seconds, 1), "passages_per_s": round(report.passages_per_s, 2),
                    "peak_rss_mb": round(peak_rss_mb(), 1),
                    "store_server_rss_mb": round(psutil.Process(info.pid).memory_info().rss / 2**20, 1) if info else None,
                }
                retriever = Retriever(store, embedder, settings)
                results["results"][extraction] = {}
                for mode in MODES:
                    console.print(f"[dim]querying {len(questions)} questions: {extraction} / {mode}[/]")
                    results["results"][extraction][mode] = evaluate(retriever, questions, mode, console)
        results["peak_rss_mb"] = round(peak_rss_mb(), 1)
    finally:
        server.stop(settings)
        shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "musique.json").write_text(json.dumps(results, indent=2))
    (out / "musique.html").write_text(html_report(results))
    print_table(results, console)
    console.print(f"wrote {out / 'musique.json'} and {out / 'musique.html'}")
    return results


def print_table(results: dict, console: Console) -> None:
    table = Table(title=f"MuSiQue ({results['questions']} questions, {results['passages']} passages) "
                        f"on {results['machine']['cores']} cores, {results['machine']['cpu']}")
    for column in ("extraction", "mode", "Recall@2", "Recall@5", "p50 ms", "p95 ms", "ingest p/s", "peak RSS MiB"):
        table.add_column(column)
    for extraction, modes in results["results"].items():
        ingest = results["ingest"][extraction]
        for mode, r in modes.items():
            table.add_row(extraction, mode, f"{r['recall_at_2']:.3f}", f"{r['recall_at_5']:.3f}",
                          f"{r['p50_ms']:.0f}", f"{r['p95_ms']:.0f}", f"{ingest['passages_per_s']:.1f}",
                          f"{ingest['peak_rss_mb']:.0f}")
    console.print(table)


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
