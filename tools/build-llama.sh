#!/usr/bin/env bash
# llama-cpp-python (the managed model server's llama.cpp) built from source for any x86-64 host
# it is installed on, whatever CPU the build runs on (issue 55): no -march=native, no AMX
# kernels (a VM may advertise AMX, even grant the tile permission, and still fault on the
# first `ldtilecfg`), no AVX-512 (not on every host, and measured to buy nothing here:
# docs/benchmarks-history.md, "llama.cpp instruction sets"); AVX2 + FMA + F16C (x86-64-v3) as ggml's
# non-native default. No runtime-dispatched variants (GGML_CPU_ALL_VARIANTS would pick the AMX
# variant from CPUID on such a VM).
#
# The wheel is built once per (version, flags, compiler) and kept under a folder named by
# their hash, never taken from pip's own wheel cache (keyed on the sdist alone, it may hold a
# wheel built natively before); the installation records the hash it holds, so a venv with a
# natively built llama-cpp-python is replaced by the portable wheel on the next `make install`.
#
# Usage: tools/build-llama.sh PYTHON [--flags "CMAKE ARGS"] [--print-key]
#   LLAMA_CPP_WHEEL_CACHE: where built wheels are kept (default ~/.cache/pathweave/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"; shift || true
VERSION="$(sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)"  # the extra `llm`'s pin
[ -n "$VERSION" ] || { echo "build-llama.sh: no llama-cpp-python pin in pyproject.toml" >&2; exit 2; }
FLAGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF \
-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
PRINT_KEY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --flags) FLAGS="$2"; shift 2 ;;
    --print-key) PRINT_KEY=1; shift ;;
    *) echo "build-llama.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
COMPILER="$( (cc --version 2>/dev/null || echo none) | head -1)"  # gcc's C and C++ come together
KEY="$(printf '%s\n%s\n%s\n' "$VERSION" "$FLAGS" "$COMPILER" | sha256sum | cut -c1-16)"
if [ "$PRINT_KEY" = 1 ]; then echo "$KEY"; exit 0; fi

PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
RECORD="$PREFIX/share/pathweave/llama-cpp-build.txt"
installed() {  # the version and the CPU library's hash of the llama_cpp this venv holds
  "$PY" - <<'PYEOF' 2>/dev/null
import hashlib, importlib.metadata, importlib.util, pathlib
spec = importlib.util.find_spec("llama_cpp")
library = pathlib.Path(spec.origin).parent / "lib" / "libggml-cpu.so"
print(importlib.metadata.version("llama_cpp_python"), hashlib.sha256(library.read_bytes()).hexdigest())
PYEOF
}
if [ -f "$RECORD" ] && [ "$(head -1 "$RECORD")" = "$KEY" ] && [ "$(sed -n 4p "$RECORD")" = "$(installed)" ]; then
  exit 0  # this venv holds the wheel of these flags, as built (not replaced since)
fi
CACHE="${LLAMA_CPP_WHEEL_CACHE:-$HOME/.cache/pathweave/wheels}/llama-cpp-python-$VERSION-$KEY"
if ! ls "$CACHE"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION for any x86-64 host (AVX2, no AVX-512/AMX; a few minutes, once)"
  rm -rf "$CACHE.partial"; mkdir -p "$CACHE.partial"
  started=$(date +%s)
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip wheel -q --no-deps --no-cache-dir \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$CACHE.partial"
  rm -rf "$CACHE"; mv "$CACHE.partial" "$CACHE"
  echo "built in $(( $(date +%s) - started )) s: $CACHE"
fi
"$PY" -m pip install -q --no-deps --force-reinstall "$CACHE"/llama_cpp_python-*.whl
mkdir -p "$(dirname "$RECORD")"
printf '%s\n%s\n%s\n%s\n' "$KEY" "$FLAGS" "$COMPILER" "$(installed)" > "$RECORD"
