"""Settings of the LLM features (pydantic-settings), kept apart from
:mod:`pathweave.settings` so they can be folded into the root settings as one section.

``LLMSettings`` (``PATHWEAVE_LLM_*``): which OpenAI-compatible endpoint answers and how;
``base_url`` empty (default) means the managed local llama.cpp server
(:mod:`pathweave.llm.server`) serving a packaged Qwen2.5-Coder GGUF.
``PruneRAGParams`` (``PATHWEAVE_PRUNERAG_*``): the paper defaults of spec §4.
"""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class LLMSettings(BaseSettings):
    """One LLM endpoint for answers, PruneRAG and LLM extraction.

    - ``base_url``: an OpenAI-compatible ``.../v1`` URL (vLLM, Ollama, llama.cpp, OpenAI);
      empty = the managed local server started on demand under ``<data_dir>/llm``;
    - ``model``: the model name sent to the endpoint; for the managed server one of the
      packaged models (``qwen2.5-coder-1.5b`` default, ``qwen2.5-coder-0.5b``);
    - ``api_key`` (secret), ``timeout_s`` (seconds per request), ``max_tokens`` (per
      completion), ``concurrency`` (requests in flight per client), ``temperature``;
    - ``response_format``: how JSON schemas are sent: ``json_schema`` (OpenAI's
      ``{"type": "json_schema", ...}``), ``json_object`` (llama-cpp-python's
      ``{"type": "json_object", "schema": ...}``) or ``auto`` (the latter for the managed
      server, the former for any other endpoint);
    - managed server: ``server_port`` (0 = free port), ``server_threads`` (0 = every core),
      ``context_tokens`` (n_ctx, sized for 5 passages + few-shot prompts),
      ``start_timeout_s``.
    """

    model_config = SettingsConfigDict(env_prefix="PATHWEAVE_LLM_", extra="ignore")

    base_url: str = ""
    model: str = "qwen2.5-coder-1.5b"
    api_key: SecretStr = SecretStr("")
    timeout_s: float = 300.0
    max_tokens: int = 256
    concurrency: int = 1
    temperature: float = 0.0
    response_format: Literal["auto", "json_schema", "json_object"] = "auto"
    server_port: int = 0
    server_threads: int = 0
    context_tokens: int = 4096
    start_timeout_s: float = 180.0

    @property
    def managed(self) -> bool:
        """True when the managed local server answers (no ``base_url``)."""
        return not self.base_url.strip()


class PruneRAGParams(BaseSettings):
    """PruneRAG (spec §4, paper defaults): ``top_k`` passages retrieved per node (PropRAG),
    ``max_depth`` of the tree (root = 1), ``branching`` children per expansion,
    ``threshold`` on the answer confidence exp(mean log-prob of the answer tokens),
    ``retries`` on a low-confidence answer; ``keep_root_docs``: the aggregation keeps the
    root's own passages (our improvement over the reference); ``aggregate_docs``: passages
per node in the aggregated tree."""

    model_config = SettingsConfigDict(env_prefix="PATHWEAVE_PRUNERAG_", extra="ignore")

    top_k: int = 5
    max_depth: int = 3
    branching: int = 2
    threshold: float = 0.95
    retries: int = 1
    keep_root_docs: bool = True
    # passages per unanswered node in the aggregation prompt (each passage shown once in
    # the tree): bounds that prompt (up to 7 nodes) on CPU, where a prompt token costs ~0.1 s
    aggregate_docs: int = 3
