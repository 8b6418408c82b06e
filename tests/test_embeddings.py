"""The embedder's runtimes on the real packaged all-MiniLM-L6-v2: ONNX Runtime (the CPU
default) gives PyTorch's vectors, exports once, and refuses what it cannot run."""

from __future__ import annotations

import numpy as np
import pytest

from pathweave.embedding import onnx_encoder
from pathweave.embedding.embedders import Embedder, default_model_path

TEXTS = ["Who is the spouse of the director of Titanic (1997)?",
         "James Cameron directed Titanic. He married Suzy Amis in 2000.",
         "x", "The Vistula flows through Warsaw and Krakow into the Baltic Sea near Gdansk. " * 8]


@pytest.fixture(scope="module")
def torch_embedder():
    return Embedder(default_model_path(), runtime="torch")


def test_onnx_vectors_equal_torch_vectors_and_export_once(torch_embedder, tmp_path):
    onnx = Embedder(default_model_path(), runtime="auto", onnx_dir=tmp_path)
    assert onnx.runtime == "onnx" and torch_embedder.runtime == "torch"
    exported = list(tmp_path.glob("*.onnx"))
    assert len(exported) == 1
    expected = torch_embedder.encode(TEXTS)
    for batch in (TEXTS, TEXTS[:1], TEXTS[::-1]):
        got = onnx.encode(batch)
        assert got.shape == (len(batch), 384) and got.dtype == np.float32
        want = expected[[TEXTS.index(t) for t in batch]]
        assert np.all((got * want).sum(axis=1) > 0.9999)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    stamp = exported[0].stat().st_mtime_ns
    again = Embedder(default_model_path(), runtime="onnx", onnx_dir=tmp_path)
    assert again.runtime == "onnx" and list(tmp_path.glob("*")) == exported
    assert exported[0].stat().st_mtime_ns == stamp  # reused, not exported again
    assert again.encode([]).shape == (0, 384)


def test_runtimes_that_cannot_run_are_refused_or_fall_back(tmp_path):
    with pytest.raises(ValueError, match="unknown embedder runtime"):
        Embedder(default_model_path(), runtime="tensorrt", onnx_dir=tmp_path)
    with pytest.raises(ValueError, match="runtime onnx needs"):
        Embedder(default_model_path(), precision="bfloat16", runtime="onnx", onnx_dir=tmp_path)
    assert Embedder(default_model_path(), precision="bfloat16", runtime="auto", onnx_dir=tmp_path).runtime == "torch"
    assert Embedder(default_model_path(), runtime="auto").runtime == "torch"  # nowhere to export to
    assert not list(tmp_path.iterdir())


def test_a_failed_export_says_why_and_leaves_no_file(tmp_path):
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "config.json").write_text("{}")
    with pytest.raises(RuntimeError, match="ONNX export of .*not-a-model failed"):
        onnx_encoder.export(not_a_model, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_the_query_embedder_gives_torch_vectors_without_importing_torch(torch_embedder, tmp_path):
    """OnnxEmbedder (tokenizers + ONNX Runtime) = the float32 torch vectors, long texts
    truncated alike; a fresh process that loads it and embeds imports no torch."""
    import json
    import subprocess
    import sys

    from pathweave.embedding.embedders import OnnxEmbedder

    query = OnnxEmbedder(default_model_path(), tmp_path)
    got, want = query.encode(TEXTS), torch_embedder.encode(TEXTS)
    assert got.shape == (len(TEXTS), 384) and np.all((got * want).sum(axis=1) > 0.9999)
    assert query.encode([]).shape == (0, 384)
    code = ("import json, sys\nfrom pathlib import Path\nfrom pathweave.embedding.embedders import OnnxEmbedder, default_model_path\n"
            f"v = OnnxEmbedder(default_model_path(), Path({str(tmp_path)!r})).encode_one('Warsaw')\n"
            "print(json.dumps([sorted({m.split('.')[0] for m in sys.modules}), v.tolist()]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    loaded, vector = json.loads(done.stdout)
    assert not {"torch", "sentence_transformers", "transformers"} & set(loaded), done.stderr
    assert float(np.dot(vector, torch_embedder.encode_one("Warsaw"))) > 0.9999
    not_mean_pooled = tmp_path / "cls-model"
    not_mean_pooled.mkdir()
    (not_mean_pooled / "modules.json").write_text('[{"type": "x.Transformer", "path": ""}, {"type": "x.Pooling", "path": "p"}]')
    (not_mean_pooled / "p").mkdir()
    (not_mean_pooled / "p" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    with pytest.raises(ValueError, match="not a mean-pooled"):
        OnnxEmbedder(not_mean_pooled, tmp_path)


def test_a_line_gets_the_same_vector_in_any_batch(settings, store, extractor):
    """APR's triple lines and run texts are embedded by the query embedder (the catalog
    embedder, float32 ONNX, the same object as ingestion's): a text's vector does not depend on the batch it is in, so fact-run segmentation
    (cuts at cosine 0.7 between lines) is the same however documents were batched. The
    ingestion embedder in bf16 moved one such cosine from 0.7000 to 0.6993 between batches."""
    from pathweave.embedding.embedders import CatalogEmbedder, get_embedder, get_query_embedder
    from pathweave_ingest.pipeline import Pipeline

    lines = ["John H. Taylor (Mormon) ordain in 1896", "John H. Taylor (Mormon) receive Aaronic priesthood",
             "Taylor baptize into LDS Church"]
    embedder = get_query_embedder(settings)
    assert isinstance(embedder, CatalogEmbedder) and embedder is get_embedder(settings)  # one for both
    alone = np.stack([embedder.encode([line])[0] for line in lines])
    among = embedder.encode(["a much longer text that makes the batch pad every line " * 6] + lines[::-1])[1:][::-1]
    assert np.array_equal(alone, among)
    pipeline = Pipeline(store, embedder, extractor, settings)
    pipeline.ingest([])
    assert pipeline.line_embedder is embedder  # the pipeline's default
