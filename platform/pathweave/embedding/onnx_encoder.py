"""The embedder's transformer as an ONNX Runtime session (CPU, float32).

The packaged sentence-transformers model is exported once with ``torch.onnx.export`` from
its local weights (nothing is downloaded) into ``<data_dir>/models/`` and then run by ONNX
Runtime instead of PyTorch eager: same weights and arithmetic (cosine to the PyTorch vectors
>= 0.99999), about half the time per forward pass for the short batches a query makes
(figures in docs/benchmarks-history.md). Only the transformer is exported; token ids come from
the model's own tokenizer and mean pooling is applied here, so only models made of
``Transformer -> mean Pooling [-> Normalize]`` qualify (:func:`supports`).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np


def supports(model_dir: Path) -> bool:
    """Whether the sentence-transformers model in ``model_dir`` is ``Transformer -> mean
    Pooling [-> Normalize]`` (what :class:`OnnxEncoder` reproduces; read from its
    ``modules.json`` and the pooling's ``config.json``, without loading it) and onnxruntime
    is installed."""
    import importlib.util
    import json

    if importlib.util.find_spec("onnxruntime") is None:
        return False
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        names = [module["type"].rsplit(".", 1)[-1] for module in modules]
        if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"]):
            return False
        pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    modes = {key for key, on in pooling.items() if key.startswith("pooling_mode_") and on is True}
    return modes == {"pooling_mode_mean_tokens"}


def _fingerprint(model_dir: Path) -> str:
    """Short hash of the model directory's weight and config files (names, sizes, mtimes)."""
    digest = hashlib.sha256()
    for path in sorted(model_dir.rglob("*")):
        if path.is_file() and path.suffix in {".safetensors", ".bin", ".json"}:
            stat = path.stat()
            digest.update(f"{path.relative_to(model_dir)}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    return digest.hexdigest()[:16]


def export(model_dir: Path, cache_dir: Path, timeout_s: float = 600.0) -> Path:
    """The ONNX file of the transformer of the sentence-transformers model in ``model_dir``
    (inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` of shape ``(batch, tokens)``
    int64; output ``(batch, tokens, dim)`` float32), exported once per model version into
    ``cache_dir`` (written to a temporary name and renamed, so concurrent processes never
    read a partial file). Returns its path.

    The export runs in a child Python process (``python -m pathweave.embedding.onnx_encoder``): a
    process that exports keeps the exporter's heap for good (figures in docs/benchmarks-history.md), and
    the first process to start on a data dir is often a long-lived API replica or worker. Raises
    ``RuntimeError`` when the export fails or takes longer than ``timeout_s`` seconds."""
    import subprocess
    import sys

    target = cache_dir / f"{model_dir.name}-{_fingerprint(model_dir)}.onnx"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([sys.executable, "-m", "pathweave.embedding.onnx_encoder", str(model_dir), str(target)],
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"ONNX export of {model_dir} took longer than {timeout_s:.0f} s") from exc
    if done.returncode != 0 or not target.exists():
        raise RuntimeError(f"ONNX export of {model_dir} failed: {done.stderr.strip()[-2000:]}")
    return target


def _export_here(model_dir: Path, target: Path) -> None:
    """Body of :func:`export`'s child process: load the model (local files only) and write
    ``target``. Raises whatever torch raises."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    transformer = model[0].auto_model

    class _Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                    token_type_ids=token_type_ids).last_hidden_state

    sample = model.preprocess(["an example sentence"])
    names = ["input_ids", "attention_mask", "token_type_ids"]
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_Hidden().eval(), tuple(sample[name] for name in names), str(partial),
                              input_names=names, output_names=["last_hidden_state"],
                              dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names + ["last_hidden_state"]},
                              opset_version=17, dynamo=False)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


class OnnxEncoder:
    """Pooled token embeddings from an exported transformer (:func:`export`, or a catalog
    model's ONNX file, :mod:`pathweave.embedding.catalog`).

    ``pooling``: ``mean`` (the token states' mean under the attention mask) or ``cls`` (the
    first token's state). ``providers``: ONNX Runtime execution providers, best first
    (``CUDAExecutionProvider`` where onnxruntime-gpu and a GPU are there; the CPU otherwise).
    One intra-op thread per call on CPU: the embedder runs several calls at once on its own
    threads (ONNX Runtime releases the GIL), as it does with torch.
    ``pool(features)`` -> ``(n, dim)`` float32, not normalized. Thread-safe.
    """

    def __init__(self, path: Path, pooling: str = "mean", providers: tuple[str, ...] = ("CPUExecutionProvider",)) -> None:
        import onnxruntime as ort

        if pooling not in ("mean", "cls"):
            raise ValueError(f"unknown pooling {pooling!r} (mean | cls)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.path = path
        self.pooling = pooling
        self.session = ort.InferenceSession(str(path), options, providers=list(providers))
        self.providers = self.session.get_providers()
        self.inputs = [node.name for node in self.session.get_inputs()]

    def pool(self, features: dict) -> np.ndarray:
        """``features``: the tokenizer's ids and masks (``(n, tokens)`` arrays or CPU tensors) ->
        ``(n, dim)`` float32 pooled token states (:attr:`pooling`)."""
        feed = {name: np.ascontiguousarray(np.asarray(features[name]), dtype=np.int64) for name in self.inputs}
        hidden = self.session.run(None, feed)[0]
        if self.pooling == "cls":
            return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)
        mask = feed["attention_mask"][..., None].astype(np.float32)
        return (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)


if __name__ == "__main__":  # the child process of export(): python -m pathweave.embedding.onnx_encoder MODEL_DIR TARGET
    import sys

    _export_here(Path(sys.argv[1]), Path(sys.argv[2]))
