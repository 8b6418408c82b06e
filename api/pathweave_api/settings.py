"""API settings (``PATHWEAVE_API_*`` environment variables).

The store, models and tenant defaults come from :mod:`pathweave.settings`,
the broker and queue from :mod:`pathweave_ingest.worker_settings`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ApiSettings(BaseSettings):
    """Limits, auth and server options of the HTTP API."""

    model_config = SettingsConfigDict(env_prefix="PATHWEAVE_", extra="ignore")

    api_host: str = "127.0.0.1"
    api_port: int = Field(8000, ge=0, le=65535)
    api_workers: int = Field(1, ge=1)  # uvicorn processes (each: own models, snapshot, rate limits)

    # API keys: SQLite file (argon2id hashes); empty = <data_dir>/api/keys.sqlite3
    api_keys_file: Path | None = None
    # Seconds a successfully verified key stays verified in memory (revocation is checked
    # on every request regardless).
    api_key_cache_s: float = Field(300.0, ge=0)
    # argon2id cost of new key hashes (existing hashes keep theirs)
    api_argon2_time_cost: int = Field(3, ge=1)
    api_argon2_memory_kib: int = Field(65_536, ge=8)
    api_argon2_parallelism: int = Field(4, ge=1)

    # Request limits
    api_max_body_bytes: int = Field(25_000_000, ge=1024)  # POST /v1/documents (JSON or multipart)
    api_max_small_body_bytes: int = Field(65_536, ge=1024)  # every other request body
    api_max_documents: int = Field(1000, ge=1)  # documents (or files) per request
    api_max_question_chars: int = Field(2000, ge=1)
    api_max_k: int = Field(50, ge=1)
    api_min_token_budget: int = Field(16, ge=1)
    api_max_token_budget: int = Field(100_000, ge=1)
    api_max_page: int = Field(500, ge=1)  # GET /v1/documents limit

    # Rate limit per API key: token bucket (requests per second, burst); 0 disables.
    api_rate_limit_per_s: float = Field(20.0, ge=0)
    api_rate_limit_burst: int = Field(60, ge=1)

    # Failed authentication: at most this many failures per key id and per client address
    # within the window (a bucket refilled over api_auth_failure_window_s; 0 disables one),
    # then 429 with Retry-After before any KDF runs; at most api_auth_max_concurrent_kdf
    # secrets verified at once (each argon2 run holds api_argon2_memory_kib).
    api_auth_failures_per_key: int = Field(10, ge=0)
    api_auth_failures_per_address: int = Field(30, ge=0)
    api_auth_failure_window_s: float = Field(60.0, gt=0)
    api_auth_max_concurrent_kdf: int = Field(2, ge=1)

    api_preload: bool = True  # load models and connect at startup (in the background)
    api_docs: bool = True  # serve /docs and /redoc

    def keys_path(self, data_dir: Path) -> Path:
        return self.api_keys_file or Path(data_dir) / "api" / "keys.sqlite3"

    def key_store(self, data_dir: Path):
        """The :class:`~pathweave_api.keys.KeyStore` these settings describe."""
        from argon2 import PasswordHasher

        from pathweave_api.keys import KeyStore

        hasher = PasswordHasher(time_cost=self.api_argon2_time_cost, memory_cost=self.api_argon2_memory_kib,
                                parallelism=self.api_argon2_parallelism)
        return KeyStore(self.keys_path(data_dir), self.api_key_cache_s, hasher)


@lru_cache(maxsize=1)
def get_api_settings() -> ApiSettings:
    return ApiSettings()
