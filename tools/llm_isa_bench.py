"""What an instruction set buys the managed model server: tokens/s of two llama-cpp-python
builds on this host (issue 55: AVX2, the portable default of tools/build-llama.sh, against
AVX-512 without AMX).

Each build is a folder holding an installed ``llama_cpp`` (``pip install --no-deps --target
DIR WHEEL``; the default build is the venv's own). Each round runs every build once, in its
own process, in alternating order: the packaged model (Qwen2.5-Coder-1.5B Q4_K_M, the default),
all usable cores, a fixed ~300-token prompt (prompt evaluation, tokens/s) and 64 greedy tokens
(generation, tokens/s). Prints each build's median and the paired per-round ratio with its
standard error; writes ``llm_isa.json`` into ``--out``.

Usage: python tools/llm_isa_bench.py --build avx2= --build avx512=/tmp/ll512-site [--rounds 5]
(an empty path: the venv's llama_cpp).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROMPT = " ".join(["Marie Curie was born in Warsaw, on the Vistula, and worked in Paris on radioactivity."] * 20)

ONE_RUN = r"""
import json, os, sys, time
from llama_cpp import Llama
import llama_cpp
model = Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=os.cpu_count(), n_threads_batch=os.cpu_count(),
              verbose=False, seed=0)
tokens = model.tokenize(sys.argv[2].encode())
started = time.perf_counter()
model.eval(tokens)
prompt_s = time.perf_counter() - started
started = time.perf_counter()
generated = 0
for token in model.generate([], temp=0.0, reset=False):
    generated += 1
    if generated == 64:
        break
gen_s = time.perf_counter() - started
print(json.dumps({"prompt_tokens": len(tokens), "prompt_tps": len(tokens) / prompt_s, "gen_tps": generated / gen_s,
                  "library": llama_cpp.__file__, "system_info": llama_cpp.llama_print_system_info().decode()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="append", required=True, help="NAME=DIR (DIR empty: the venv's llama_cpp)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    from pathweave.servers.llm_weights import assemble

    model = assemble(args.model, Path(tempfile.gettempdir()) / "pathweave-isa-bench")
    builds = dict(item.split("=", 1) for item in args.build)
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    for round_no in range(args.rounds):
        order = list(builds) if round_no % 2 == 0 else list(reversed(builds))
        for name in order:
            env = {**os.environ, "PYTHONPATH": builds[name]} if builds[name] else dict(os.environ)
            done = subprocess.run([sys.executable, "-c", ONE_RUN, str(model), PROMPT], capture_output=True, text=True,
                                  env=env, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {round_no + 1} {name}: prompt {runs[name][-1]['prompt_tps']:.1f} tok/s, "
                  f"generation {runs[name][-1]['gen_tps']:.2f} tok/s", flush=True)
    summary = {name: {"prompt_tps_median": statistics.median(r["prompt_tps"] for r in rs),
                      "gen_tps_median": statistics.median(r["gen_tps"] for r in rs),
                      "system_info": rs[0]["system_info"], "library": rs[0]["library"]} for name, rs in runs.items()}
    names = list(builds)
    if len(names) == 2:
        for metric in ("prompt_tps", "gen_tps"):
            ratios = [b[metric] / a[metric] for a, b in zip(runs[names[0]], runs[names[1]])]
            se = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else 0.0
            summary[f"{names[1]}_over_{names[0]}_{metric}"] = {"mean": statistics.mean(ratios), "se": se}
            print(f"{names[1]} / {names[0]} {metric}: {statistics.mean(ratios):.3f} ± {se:.3f} (paired, "
                  f"{len(ratios)} rounds)")
    for name, values in summary.items():
        print(name, json.dumps(values))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "llm_isa.json").write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
