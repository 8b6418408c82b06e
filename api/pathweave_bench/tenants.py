"""``pathweave bench tenants``: what a small tenant's vector search costs beside a large
tenant of the same database, as the large one grows.

On each managed store (a fresh one per backend, removed at the end): a small tenant of
``small`` passages, then a large tenant grown to each of ``sizes`` passages, all written
through the ingestion statement (``upsert_passages``) with synthetic vectors: unit vectors
around 500 random centres (a mixture, so neighbourhoods are uneven as in text embeddings;
the texts are not real). At each step the small tenant's ``queries`` searches for its k
nearest passages (query vectors drawn like the passages) are timed three ways in the same
run: the search as shipped (the shared index, and the tenant's own nodes scored exactly
once that costs less than widening further), the index alone (widening only: the
baseline), and the index alone for the large tenant. Recall@k is against numpy's exact
answer. Figures: p50 / p95 ms, recall, and the paired difference per search (shipped minus
index alone, mean ms and its standard error); ``tenants.json`` goes to ``out``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

from pathweave_bench.common import git_commit, machine_info, publish_results, with_backend

CENTRES = 500
NOISE = 0.6
"""Spread of the synthetic vectors around their centre (per-coordinate sd x sqrt(dimensions))."""


def synthetic_vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    """``(n, d)`` float32 unit vectors, each a random centre of ``centres`` plus noise."""
    d = centres.shape[1]
    picked = centres[rng.integers(len(centres), size=n)]
    vectors = picked + rng.standard_normal((n, d)) * (NOISE / np.sqrt(d))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def write_passages(store, vectors: np.ndarray, start: int, progress=None) -> None:
    """Passages ``start..start + len(vectors)`` of ``store``'s tenant with these vectors
    (statement ``upsert_passages``, as ingestion writes them; no document)."""
    from pathweave.graph.vectors import encode_vector

    batch = 1000
    for offset in range(0, len(vectors), batch):
        chunk = vectors[offset:offset + batch]
        store.write("upsert_passages", [
            {"passage_id": f"{store.tenant}:p{start + offset + i}", "doc_id": f"{store.tenant}:none",
             "tenant": store.tenant, "title": "synthetic", "text": "synthetic passage", "position": start + offset + i,
             "token_count": 2, "page": None, "section": None, "embedding": v.tolist(), "vec": encode_vector(v)}
            for i, v in enumerate(chunk)])
        if progress:
            progress(len(chunk))


def timed_searches(store, questions: np.ndarray, k: int, exact: bool, truth: list[set[str]] | None) -> dict:
    """p50 / p95 ms of ``store``'s k-nearest passage searches for ``questions`` (after one
    untimed search) and, with ``truth``, their mean recall@k."""
    from pathweave.store.backends import base

    base._sizes.clear()
    base._exact_bounds.clear()
    base.vector_search(store, "Passage", questions[0], k, exact=exact)
    times, recalls = [], []
    for i, question in enumerate(questions):
        started = time.perf_counter()
        hits = base.vector_search(store, "Passage", question, k, exact=exact)
        times.append((time.perf_counter() - started) * 1000)
        if truth is not None:
            recalls.append(len({h for h, _ in hits} & truth[i]) / k)
    out = {"p50_ms": round(float(np.percentile(times, 50)), 1), "p95_ms": round(float(np.percentile(times, 95)), 1),
           "times_ms": [round(x, 2) for x in times]}
    if recalls:
        out["recall"] = round(float(np.mean(recalls)), 3)
    return out


def paired_difference(a: list[float], b: list[float]) -> dict:
    """Mean of ``a[i] - b[i]`` (the same searches timed two ways, ms) and its standard error."""
    diff = np.asarray(a) - np.asarray(b)
    return {"mean": round(float(diff.mean()), 1),
            "se": round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 1) if len(diff) > 1 else 0.0}


def run_tenants(sizes: list[int], small: int, queries: int, k: int, backends: list[str], out: Path) -> dict:
    """Run the benchmark on each of ``backends``; returns (and writes) the results:
    ``backends`` -> {alone, steps: [{large, small_shipped, small_index_only, large_index}]}."""
    from rich.progress import Progress

    from pathweave.runtime import open_store
    from pathweave.servers import store_server
    from pathweave.settings import get_settings
    from pathweave.store.graph_store import GraphStore
    from pathweave.terminal import stdout_console

    console = stdout_console()
    data: dict[int, tuple] = {}  # dimensions -> the same vectors for every backend

    def vectors(dim: int) -> tuple:
        if dim not in data:
            rng = np.random.default_rng(11)
            centres = rng.standard_normal((CENTRES, dim))
            small_vectors, questions = synthetic_vectors(rng, centres, small), synthetic_vectors(rng, centres, queries)
            order = np.argsort(-(questions @ small_vectors.T), axis=1)[:, :k]
            data[dim] = (small_vectors, questions, [{f"small:p{j}" for j in row} for row in order],
                         synthetic_vectors(rng, centres, max(sizes)))
        return data[dim]

    results: dict = {"machine": machine_info(), "commit": git_commit(), "small": small, "queries": queries, "k": k,
                     "sizes": sizes, "backends": {}}
    for backend in backends:
        workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-tenants-"))
        settings = with_backend(get_settings().model_copy(update={"data_dir": workdir}), backend)
        console.print(f"[bold]backend: {backend}[/]")
        try:
            store_server.start(settings, owner=os.getpid())
            with open_store(settings, tenant="small") as small_store:
                small_vectors, questions, truth, large_vectors = vectors(small_store.dimensions)
                large = GraphStore(small_store.driver, small_store.database, small_store.backend, "large",
                                   small_store.batch_size, small_store.dimensions)
                write_passages(small_store, small_vectors, 0)
                row = {"alone": {"small_shipped": timed_searches(small_store, questions, k, True, truth),
                                 "small_index_only": timed_searches(small_store, questions, k, False, truth)},
                       "steps": []}
                written = 0
                for size in sizes:
                    with Progress(console=console, transient=True) as progress:
                        task = progress.add_task(f"large tenant to {size:,} passages", total=size - written)
                        started = time.perf_counter()
                        write_passages(large, large_vectors[written:size], written,
                                       lambda n: progress.advance(task, n))
                    write_s = time.perf_counter() - started
                    written = size
                    started = time.perf_counter()
                    large_index = timed_searches(large, questions, k, False, None)
                    step = {"large": size, "write_s": round(write_s, 1),
                            "first_search_s": round(time.perf_counter() - started, 1),
                            "small_shipped": timed_searches(small_store, questions, k, True, truth),
                            "small_index_only": timed_searches(small_store, questions, k, False, truth),
                            "large_index": large_index}
                    step["paired_ms"] = paired_difference(step["small_shipped"]["times_ms"],
                                                          step["small_index_only"]["times_ms"])
                    row["steps"].append(step)
                    console.print({key: value for key, value in step.items() if key.startswith(("large", "paired"))})
                results["backends"][backend] = row
        finally:
            store_server.stop(settings)
            shutil.rmtree(workdir, ignore_errors=True)
    return publish_results(out, "tenants.json", results, print_table, console)


def print_table(results: dict, console) -> None:
    """The small tenant's p50 / p95 ms and recall@k per large-tenant size, shipped vs index alone."""
    for backend, row in results["backends"].items():
        table = Table(title=f"{backend}: a tenant of {results['small']:,} passages beside a large one "
                            f"(k = {results['k']}, {results['queries']} searches)")
        for column in ("large tenant", "shipped p50 / p95 ms", "recall", "index alone p50 / p95 ms", "recall",
                       "shipped − index alone, mean ms ± se", "large tenant's own p50 ms"):
            table.add_column(column, justify="right")

        def cells(figures: dict) -> tuple[str, str]:
            return f"{figures['p50_ms']} / {figures['p95_ms']}", f"{figures['recall']:.3f}"

        table.add_row("none", *cells(row["alone"]["small_shipped"]), *cells(row["alone"]["small_index_only"]), "", "")
        for step in row["steps"]:
            paired = step["paired_ms"]
            table.add_row(f"{step['large']:,}", *cells(step["small_shipped"]), *cells(step["small_index_only"]),
                          f"{paired['mean']:+.1f} ± {paired['se']:.1f}", str(step["large_index"]["p50_ms"]))
        console.print(table)
