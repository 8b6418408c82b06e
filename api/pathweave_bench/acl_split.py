"""``pathweave bench musique --acl-split S``: access lists on MuSiQue.

The corpus's documents are split at random (seeded) between two groups, a share ``S`` to
``group:a`` and the rest to ``group:b``, so each question's gold passages are spread
across them. Three tenants are ingested, each in a store of its own (a managed server per
data directory, so no tenant's texts crowd another's indexes):
- ``full``: every document, with its group's access list;
- ``plain``: every document without access lists (the ingestion rate without them, like for
  like: a fresh store each);
- ``a-only``: group A's documents alone, the reference: what a separate, A-only deployment
  would return.

Each question then runs in each ranking mode three ways, in alternating order:
- on ``full`` for a caller of group A (the access check);
- on ``full`` for an unrestricted caller (no check);
- on ``a-only``, unrestricted.

Reported:
- R@2/R@5 against the gold passages A may read, for A on ``full`` and on ``a-only``, with
  the paired per-question difference and its standard error;
- the share of questions whose top-5 passages are identical in the two;
- p50 with and without the access check, with the paired difference in ms, and each stage's
  p50 with and without it (``result.timings_ms``: where the check's cost sits);
- the ingestion rates of ``full`` and ``plain``.

Questions with no gold passage in group A are left out of recall (their number is printed).
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

from pathweave.access import Access
from pathweave.embedding.embedders import get_embedder, get_query_embedder
from pathweave.evaluation import percentile_ms, recall_at_k
from pathweave.query.retriever import Retriever
from pathweave.runtime import open_store
from pathweave.servers import store_server
from pathweave.settings import get_settings
from pathweave.terminal import stdout_console
from pathweave_bench.common import default_data_dir, git_commit, machine_info, with_backend
from pathweave_bench.musique import load_musique, paired_mean_se, paragraph_title_text
from pathweave_ingest.loaders import SourceDocument

MODES = ("proprag", "dense", "hipporag2")
GROUP_A, GROUP_B = "group:a", "group:b"


def split(documents: list[SourceDocument], share: float, seed: int) -> list[bool]:
    """Which documents go to group A: each with probability ``share``, from ``seed``."""
    rng = random.Random(seed)
    return [rng.random() < share for _ in documents]


def _timed(retriever: Retriever, question: str, mode: str, access: Access):
    started = time.perf_counter()
    result = retriever.query(question, mode=mode, k=20, access=access, write_record=False)
    return result, (time.perf_counter() - started) * 1000


def evaluate_split(full: Retriever, alone: Retriever, questions: list[dict], a_keys: set[tuple[str, str]],
                   modes: tuple[str, ...] = MODES) -> dict:
    """Per mode: recall of group A's caller on ``full`` and of ``alone`` against the gold
    passages A may read (``a_keys``: the (title, text) of A's documents), top-5 identity and
    the latencies with and without the access check (see the module's text)."""
    a_caller = Access.of([GROUP_A])
    out = {}
    for mode in modes:
        for retriever in (full, alone):  # warm: topology matrices, the restricted view, the baseline graph
            retriever.query(questions[0]["question"], mode=mode, k=5, write_record=False)
        full.query(questions[0]["question"], mode=mode, k=5, access=a_caller, write_record=False)
        rows = {"restricted": {"r2": [], "r5": [], "ms": []}, "alone": {"r2": [], "r5": [], "ms": []},
                "unrestricted": {"ms": []}}
        stages: dict[str, dict[str, list[float]]] = {"restricted": {}, "unrestricted": {}}
        same_top5, differing, skipped = 0, [], 0
        for i, question in enumerate(questions):
            runs = [("restricted", full, a_caller), ("unrestricted", full, Access()), ("alone", alone, Access())]
            if i % 2:
                runs.reverse()  # alternate the order: neither run always goes first
            results = {}
            for name, retriever, access in runs:
                result, ms = _timed(retriever, question["question"], mode, access)
                results[name] = result
                rows[name]["ms"].append(ms)
                for stage, stage_ms in (result.timings_ms if name in stages else {}).items():
                    stages[name].setdefault(stage, []).append(stage_ms)
            gold = {paragraph_title_text(p) for p in question["paragraphs"] if p["is_supporting"]} & a_keys
            top = {name: [(hit.title, hit.text) for hit in results[name].passages]
                   for name in ("restricted", "alone")}
            if top["restricted"][:5] == top["alone"][:5]:
                same_top5 += 1
            else:
                differing.append(question["id"])
            if not gold:
                skipped += 1
                continue
            for name in ("restricted", "alone"):
                rows[name]["r2"].append(recall_at_k(top[name], gold, 2))
                rows[name]["r5"].append(recall_at_k(top[name], gold, 5))
        out[mode] = {
            **{f"{name}_recall_at_{k}": round(float(np.mean(rows[name][f"r{k}"])), 4) if rows[name][f"r{k}"] else None
               for name in ("restricted", "alone") for k in (2, 5)},
            "recall_at_5_restricted_minus_alone": paired_mean_se(rows["restricted"]["r5"], rows["alone"]["r5"]),
            "top5_identical": round(same_top5 / len(questions), 4), "top5_differing_questions": differing,
            "questions_without_a_gold": skipped,
            **{f"{name}_p50_ms": round(percentile_ms(rows[name]["ms"], 50), 1) for name in rows},
            **{f"{name}_p95_ms": round(percentile_ms(rows[name]["ms"], 95), 1) for name in rows},
            "p50_ratio_restricted_to_unrestricted": round(percentile_ms(rows["restricted"]["ms"], 50)
                                                          / percentile_ms(rows["unrestricted"]["ms"], 50), 3),
            "ms_restricted_minus_unrestricted": paired_mean_se(rows["restricted"]["ms"], rows["unrestricted"]["ms"]),
            "stage_p50_ms": {stage: {name: round(percentile_ms(stages[name].get(stage, [0.0]), 50), 2)
                                     for name in stages}
                             for stage in sorted(set(stages["restricted"]) | set(stages["unrestricted"]))},
        }
    return out


def run_acl_split(data: Path | None, out: Path, share: float = 0.5, limit: int = 0, seed: int = 7,
                  backend: str = "arcadedb", modes: tuple[str, ...] = MODES) -> dict:
    """Run the benchmark on ``backend`` (a managed store in a temporary data directory,
    stopped at the end); write ``acl_split.json`` to ``out`` and print the table. Raises
    ValueError for a share outside (0, 1)."""
    from pathweave_ingest.console import run_ingest

    if not 0 < share < 1:
        raise ValueError(f"--acl-split takes a share between 0 and 1, got {share}")
    console = stdout_console()
    data = Path(data) if data else default_data_dir()
    questions, documents = load_musique(data, limit)
    in_a = split(documents, share, seed)
    a_keys = {(d.title, d.text) for d, a in zip(documents, in_a) if a}
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-acl-"))
    base = get_settings().model_copy(update={"data_dir": workdir})
    tenants = {
        "full": [dataclasses.replace(d, acl=(GROUP_A if a else GROUP_B,)) for d, a in zip(documents, in_a)],
        "plain": documents,
        "a-only": [d for d, a in zip(documents, in_a) if a],
    }
    # a managed store per tenant: its own data directory, hence its own server
    settings = {name: with_backend(base.model_copy(update={"data_dir": workdir / name,
                                                           "tenant": f"bench-acl-{name}"}), backend)
                for name in tenants}
    models = Path(get_settings().data_dir) / "models"  # one export of the embedder for all, made before any timing
    models.mkdir(parents=True, exist_ok=True)
    for tenant_settings in settings.values():
        Path(tenant_settings.data_dir).mkdir(parents=True, exist_ok=True)
        (Path(tenant_settings.data_dir) / "models").symlink_to(models, target_is_directory=True)
        get_embedder(tenant_settings)  # loaded (each data dir's own) before the ingestion clocks start
    results: dict = {"machine": machine_info(), "commit": git_commit(), "backend": backend, "share": share,
                     "seed": seed, "questions": len(questions), "documents": len(documents),
                     "documents_a": len(tenants["a-only"]), "stores": "one per tenant", "ingest": {}}
    try:
        for name, docs in tenants.items():
            with open_store(settings[name]) as store:
                report = run_ingest(store, settings[name], docs, [], None, label=f"ingest ({name})")
                results["ingest"][name] = {"passages": report.passages_new, "seconds": round(report.seconds, 1),
                                           "passages_per_s": round(report.passages_per_s, 2)}
            if name == "plain":  # measured for its ingestion rate only: its server stops now
                store_server.stop(settings[name])
        embedder = get_query_embedder(settings["full"])
        with open_store(settings["full"]) as full_store, open_store(settings["a-only"]) as alone_store:
            full = Retriever(full_store, embedder, settings["full"])
            alone = Retriever(alone_store, embedder, settings["a-only"])
            console.print(f"[dim]{len(questions)} questions x {len(modes)} modes x (group A on full, unrestricted "
                          "on full, a-only)[/]")
            results["results"] = evaluate_split(full, alone, questions, a_keys, modes)
    finally:
        for name in tenants:
            store_server.stop(settings[name])
        shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "acl_split.json").write_text(json.dumps(results, indent=2))
    print_split(results, console)
    console.print(f"wrote {out / 'acl_split.json'}")
    return results


def print_split(results: dict, console) -> None:
    """The table of :func:`run_acl_split`'s results."""
    table = Table(title=f"Access lists on MuSiQue: group A holds {results['documents_a']} of "
                        f"{results['documents']} documents ({results['backend']}, {results['machine'].get('cpu', '')})")
    for column in ("mode", "R@5 A on full", "R@5 A-only", "diff ± SE", "top-5 identical", "p50 check ms",
                   "p50 no check ms", "ratio", "paired ms ± SE"):
        table.add_column(column)
    for mode, row in results["results"].items():
        diff, ms = row["recall_at_5_restricted_minus_alone"], row["ms_restricted_minus_unrestricted"]
        table.add_row(mode, f"{row['restricted_recall_at_5']}", f"{row['alone_recall_at_5']}",
                      f"{diff['mean']:+.4f} ± {diff['se']:.4f}", f"{row['top5_identical']:.0%}",
                      f"{row['restricted_p50_ms']}", f"{row['unrestricted_p50_ms']}",
                      f"{row['p50_ratio_restricted_to_unrestricted']}x", f"{ms['mean']:+.1f} ± {ms['se']:.1f}")
    console.print(table)
    for mode, row in results["results"].items():  # where the check's cost sits: the stages it grew most
        grown = sorted(((ms["restricted"] - ms["unrestricted"], stage) for stage, ms in row["stage_p50_ms"].items()
                        if stage != "total"), reverse=True)[:4]
        console.print(f"{mode}: stage p50 with minus without the check: "
                      + ", ".join(f"{stage} {diff:+.1f} ms" for diff, stage in grown))
    rates = ", ".join(f"{name} {row['passages_per_s']} p/s" for name, row in results["ingest"].items())
    console.print(f"ingestion: {rates}; questions without a gold passage in group A (left out of recall): "
                  f"{next(iter(results['results'].values()))['questions_without_a_gold']}")
