"""Device check of the sentence-transformers embedder: CUDA against the CPU of the same machine.

Runs :class:`pathweave.embedding.embedders.Embedder` (sentence-transformers + torch, the code
ingestion uses for a model directory) over a sample of real passages and questions with:

* ``cpu-fp32``: CPU, float32, one worker thread per usable core (the default), batch 32
  (``models.embed_batch_size``): the reference;
* ``cpu-bf16``: CPU, bfloat16 (what ``embed_precision = auto`` picks on this CPU), only where
  the CPU has native bf16 instructions (AVX512-BF16 or AMX);
* ``cuda-fp32`` and ``cuda-bf16``: CUDA, float32 and bfloat16 (bfloat16 is what ``auto``
  picks on CUDA), batch 128 (four times the CPU batch, as :func:`get_embedder` does), then
  again at the other ``--cuda-batches`` for throughput alone.

Measured, for every variant:

* throughput: passages per second embedding all passages in one ``encode`` call (after a
  warm-up call), the median of ``--repeats`` timed calls (``--cpu-repeats`` on CPU);
  questions per second likewise; and the latency of one question embedded alone
  (``encode_query``, milliseconds, median over the questions);
* agreement with ``cpu-fp32`` (vectors are L2-normalized, so a dot product is the cosine):
  the minimum and mean cosine between a text's two vectors, the largest absolute difference
  of one element, for passages and questions apart; and for retrieval, each question's
  top-10 passages by dot product: the mean fraction of them that both variants share, and
  how many questions' top-1 passage differs.

Also recorded: torch, CUDA, sentence-transformers and transformers versions, the GPU's
name, the CPU, and ``onnxruntime.get_available_providers()`` (whether the catalog embedder,
run by ONNX Runtime, could use CUDA there). Writes ``device_embed.json`` into ``--out`` and
prints a summary. Without CUDA only the CPU variants run (for debugging the script).

Usage::

    PYTHONPATH=platform:api python tools/device_embed_check.py --sample sample.json \
        --model path/to/model_dir --out results/ [--limit 50]

``--sample`` is a JSON object ``{"passages": [str], "questions": [str], "source": str}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

TOP_K = 10
CPU_BATCH = 32  # models.embed_batch_size's default
CUDA_BATCH = 4 * CPU_BATCH  # get_embedder: four times as many on CUDA


def environment() -> dict:
    """Versions and hardware of this machine."""
    import sentence_transformers
    import torch
    import transformers

    from pathweave.embedding.embedders import cpu_has_bf16, cpu_workers
    from pathweave_bench.common import machine_info

    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "cuda_available": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpu": machine_info()["cpu"],
        "cpu_cores_usable": cpu_workers(),
        "cpu_has_bf16": cpu_has_bf16(),
    }
    try:
        import onnxruntime

        info["onnxruntime"] = onnxruntime.__version__
        info["onnxruntime_providers"] = onnxruntime.get_available_providers()
    except ImportError as error:
        info["onnxruntime"] = None
        info["onnxruntime_providers"] = f"not importable: {error}"
    return info


def timed(function, repeats: int) -> tuple[float, object]:
    """Median seconds of ``repeats`` calls of ``function()`` and the last call's result."""
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def run_variant(model: Path, device: str, precision: str, batch_size: int, passages: list[str],
                questions: list[str], repeats: int, latency: bool = True) -> dict:
    """Load an Embedder, warm it up and time it; returns its figures and vectors."""
    import torch

    from pathweave.embedding.embedders import Embedder

    start = time.perf_counter()
    embedder = Embedder(model, device=device, precision=precision, batch_size=batch_size)
    load_s = time.perf_counter() - start
    weights = {str(p.dtype) for p in embedder.model.parameters()}
    embedder.encode(passages[: max(batch_size * embedder.workers, 64)])  # warm-up: kernels, allocator
    embedder.encode(questions)
    passages_s, passage_vectors = timed(lambda: embedder.encode(passages), repeats)
    questions_s, question_vectors = timed(lambda: embedder.encode(questions), repeats)
    result = {
        "device": device, "precision": precision, "batch_size": batch_size, "workers": embedder.workers,
        "weights_dtype": sorted(weights), "load_s": round(load_s, 2),
        "passages_per_s": round(len(passages) / passages_s, 1), "passages_s": round(passages_s, 3),
        "questions_per_s": round(len(questions) / questions_s, 1), "questions_s": round(questions_s, 4),
    }
    if latency:
        one = []
        for question in questions:
            begin = time.perf_counter()
            embedder.encode_query(question)
            one.append(time.perf_counter() - begin)
        result["query_latency_ms_median"] = round(1000 * statistics.median(one), 2)
    if device.startswith("cuda"):
        result["cuda_max_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    del embedder
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return {"figures": result, "passages": passage_vectors, "questions": question_vectors}


def agreement(reference: dict, other: dict) -> dict:
    """How ``other``'s vectors agree with ``reference``'s (see the module docstring)."""
    out = {}
    for part in ("passages", "questions"):
        a, b = reference[part], other[part]
        cosine = np.sum(a.astype(np.float64) * b, axis=1)
        out[part] = {"min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
                     "max_abs_diff": float(np.abs(a - b).max())}
    k = min(TOP_K, len(reference["passages"]))
    top_a = np.argsort(-(reference["questions"] @ reference["passages"].T), axis=1, kind="stable")[:, :k]
    top_b = np.argsort(-(other["questions"] @ other["passages"].T), axis=1, kind="stable")[:, :k]
    shared = [len(set(x) & set(y)) / k for x, y in zip(top_a, top_b)]
    out[f"top{k}"] = {"mean_fraction_shared": float(np.mean(shared)),
                      "questions_all_shared": int(sum(s == 1.0 for s in shared)),
                      "questions_top1_differs": int(np.sum(top_a[:, 0] != top_b[:, 0])),
                      "questions": len(shared)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=Path, required=True, help="JSON {passages, questions, source}")
    parser.add_argument("--model", type=Path, required=True, help="sentence-transformers model directory")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")), help="folder of device_embed.json")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N passages and questions (0: all)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per CUDA variant (median)")
    parser.add_argument("--cpu-repeats", type=int, default=1, help="timed calls per CPU variant (median)")
    parser.add_argument("--cuda-batches", default=f"{CUDA_BATCH},32", help="CUDA batch sizes; the first is compared")
    args = parser.parse_args(argv)

    import torch

    sample = json.loads(args.sample.read_text())
    passages, questions = sample["passages"], sample["questions"]
    if args.limit:
        passages, questions = passages[: args.limit], questions[: args.limit]
    env = environment()
    print(json.dumps(env, indent=1), flush=True)
    report = {"environment": env, "sample": {"source": sample.get("source"), "passages": len(passages),
                                             "questions": len(questions),
                                             "passage_chars_mean": round(float(np.mean([len(p) for p in passages])), 1)},
              "model": str(args.model), "variants": {}, "agreement_with_cpu_fp32": {}}

    def record(name: str, run: dict) -> None:
        report["variants"][name] = run["figures"]
        print(f"{name}: {json.dumps(run['figures'])}", flush=True)

    reference = run_variant(args.model, "cpu", "float32", CPU_BATCH, passages, questions, args.cpu_repeats)
    record("cpu-fp32", reference)
    variants = []
    if env["cpu_has_bf16"]:
        variants.append(("cpu-bf16", "cpu", "bfloat16", CPU_BATCH, args.cpu_repeats))
    if torch.cuda.is_available():
        batches = [int(b) for b in args.cuda_batches.split(",")]
        for batch in batches:
            for precision, short in (("float32", "fp32"), ("bfloat16", "bf16")):
                name = f"cuda-{short}" if batch == batches[0] else f"cuda-{short}-batch{batch}"
                variants.append((name, "cuda", precision, batch, args.repeats))
    for name, device, precision, batch, repeats in variants:
        run = run_variant(args.model, device, precision, batch, passages, questions, repeats)
        record(name, run)
        report["agreement_with_cpu_fp32"][name] = agreement(reference, run)
        print(f"  vs cpu-fp32: {json.dumps(report['agreement_with_cpu_fp32'][name])}", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "device_embed.json").write_text(json.dumps(report, indent=1))
    print_summary(report)
    return 0


def print_summary(report: dict) -> None:
    env = report["environment"]
    print(f"\n== {env['gpu'] or 'no GPU'}; CPU {env['cpu']} ({env['cpu_cores_usable']} cores usable); "
          f"torch {env['torch']} (CUDA {env['torch_cuda']}); onnxruntime providers: {env['onnxruntime_providers']}")
    print(f"   sample: {report['sample']['passages']} passages, {report['sample']['questions']} questions")
    print(f"{'variant':24} {'batch':>5} {'passages/s':>11} {'questions/s':>12} {'1 query ms':>11}")
    for name, f in report["variants"].items():
        print(f"{name:24} {f['batch_size']:>5} {f['passages_per_s']:>11} {f['questions_per_s']:>12} "
              f"{f.get('query_latency_ms_median', ''):>11}")
    for name, a in report["agreement_with_cpu_fp32"].items():
        p, q, top = a["passages"], a["questions"], next(v for k, v in a.items() if k.startswith("top"))
        print(f"{name} vs cpu-fp32: passages cos min {p['min_cosine']:.6f} mean {p['mean_cosine']:.6f} "
              f"max|d| {p['max_abs_diff']:.2e}; questions cos min {q['min_cosine']:.6f} mean {q['mean_cosine']:.6f} "
              f"max|d| {q['max_abs_diff']:.2e}; top-10 shared {top['mean_fraction_shared']:.3f}, "
              f"top-1 differs for {top['questions_top1_differs']}/{top['questions']}")


if __name__ == "__main__":
    raise SystemExit(main())
