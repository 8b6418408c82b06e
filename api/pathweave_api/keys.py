"""API keys: ``pw_<key id>_<secret>`` bearer tokens, each bound to one tenant and one
scope (:data:`SCOPES`): ``query`` may query and read reasoning records; ``ingest`` may
also submit, replace and delete documents and read jobs; ``admin`` may do everything
(keys themselves are managed with ``pathweave keys``). Keys made before scopes existed
are ``admin``.

Stored in a small SQLite file (mode 0600) with the secret hashed by argon2id
(a password KDF; ``argon2-cffi`` defaults: 64 MiB, 3 passes, or
``PATHWEAVE_API_ARGON2_*``); the plain token is shown once, at
creation. Verification looks the key id up (so a guessed token costs no KDF
run unless its id exists), checks it is not revoked, then verifies the
secret. A successful verification is remembered in memory for
``api_key_cache_s`` seconds (keyed by a SHA-256 of the token, never stored);
revocation is read from the file on every request, so it takes effect at once
in every process.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from pathweave.settings import ApiSettings

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TOKEN = re.compile(r"^pw_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})$")

SCOPES = ("query", "ingest", "admin")
"""Key scopes, each allowing what the ones before it allow."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    secret_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    rate_limit_per_s REAL,
    scope TEXT NOT NULL DEFAULT 'admin'
)
"""


@dataclass(frozen=True)
class ApiKey:
    """A key's public record (never the secret or its hash)."""

    key_id: str
    tenant: str
    name: str
    created_at: str
    revoked_at: str | None = None
    rate_limit_per_s: float | None = None
    scope: str = "admin"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        """Whether this key's scope includes ``scope`` (query < ingest < admin)."""
        return SCOPES.index(self.scope) >= SCOPES.index(scope)


def valid_tenant(tenant: str) -> bool:
    return bool(TENANT_PATTERN.match(tenant or ""))


def key_store_for(api: ApiSettings, data_dir: Path) -> "KeyStore":
    """The :class:`KeyStore` the ``api`` settings describe (its file, cache and argon2 cost)."""
    hasher = PasswordHasher(time_cost=api.argon2_time_cost, memory_cost=api.argon2_memory_kib,
                            parallelism=api.argon2_parallelism)
    return KeyStore(api.keys_path(data_dir), api.key_cache_s, hasher)


class KeyStore:
    """The key file. Thread-safe (one SQLite connection per call)."""

    def __init__(self, path: str | Path, cache_s: float = 300.0, hasher: PasswordHasher | None = None) -> None:
        self.path = Path(path)
        self.cache_s = cache_s
        self._hasher = hasher or PasswordHasher()  # argon2id; verify reads the parameters from each hash
        self._verified: dict[str, tuple[str, str, float]] = {}  # sha256(token) -> (key_id, hash, until)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(self.path.parent, 0o700)
        except OSError:
            pass
        if not self.path.exists():
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
        with self._connect() as db:
            db.execute(_SCHEMA)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(api_keys)")}
            if "scope" not in columns:  # a key file from before scopes: its keys become admin
                db.execute("ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'admin'")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.row_factory = sqlite3.Row
        return db

    @staticmethod
    def _record(row: sqlite3.Row) -> ApiKey:
        return ApiKey(row["key_id"], row["tenant"], row["name"], row["created_at"], row["revoked_at"],
                      row["rate_limit_per_s"], row["scope"])

    def create(self, tenant: str, name: str = "", rate_limit_per_s: float | None = None,
               scope: str = "admin") -> tuple[str, ApiKey]:
        """A new key for ``tenant`` with ``scope`` (:data:`SCOPES`): ``(token, record)``. The
        token is not stored and cannot be shown again.

        Raises ValueError on an invalid tenant name (letters, digits, ``_.-``, at most 64), a
        negative rate limit or an unknown scope.
        """
        if not valid_tenant(tenant):
            raise ValueError("tenant must be 1-64 characters: letters, digits, '_', '.', '-' (not first)")
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}; use {', '.join(SCOPES)}")
        if rate_limit_per_s is not None and rate_limit_per_s < 0:
            raise ValueError("rate limit must be >= 0")
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        record = ApiKey(key_id, tenant, name[:200], datetime.now(timezone.utc).isoformat(), None, rate_limit_per_s,
                        scope)
        with self._connect() as db:
            db.execute(
                "INSERT INTO api_keys (key_id, tenant, name, secret_hash, created_at, rate_limit_per_s, scope) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key_id, tenant, record.name, self._hasher.hash(secret), record.created_at, rate_limit_per_s, scope),
            )
        return f"pw_{key_id}_{secret}", record

    def list(self, include_revoked: bool = True) -> list[ApiKey]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM api_keys ORDER BY created_at").fetchall()
        keys = [self._record(row) for row in rows]
        return keys if include_revoked else [k for k in keys if k.active]

    def get(self, key_id: str) -> ApiKey | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
        return self._record(row) if row else None

    def revoke(self, key_id: str) -> bool:
        """Revoke a key (False when there is no such active key)."""
        with self._connect() as db:
            changed = db.execute("UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
                                 (datetime.now(timezone.utc).isoformat(), key_id)).rowcount
        with self._lock:
            self._verified = {k: v for k, v in self._verified.items() if v[0] != key_id}
        return bool(changed)

    @staticmethod
    def key_id_of(token: str) -> str | None:
        """The key id of a well-formed token (whether or not it exists), else None."""
        match = _TOKEN.match(token or "")
        return match.group(1) if match else None

    def is_verified(self, token: str) -> bool:
        """Was ``token`` verified in this process within ``cache_s`` (no KDF run needed)?"""
        digest = hashlib.sha256((token or "").encode("utf-8", "replace")).hexdigest()
        with self._lock:
            cached = self._verified.get(digest)
        return bool(cached and cached[2] > time.monotonic())

    def authenticate(self, token: str, kdf_slot=None) -> ApiKey | None:
        """The active key of ``token``, or None (unknown, malformed, revoked or wrong secret).

        ``kdf_slot``: a context-manager factory held around the KDF run (bounds concurrent
        argon2 verifications; it may raise to refuse the run)."""
        match = _TOKEN.match(token or "")
        if not match:
            return None
        key_id, secret = match.groups()
        with self._connect() as db:
            row = db.execute("SELECT * FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
        if row is None or row["revoked_at"] is not None:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            cached = self._verified.get(digest)
        if cached and cached[0] == key_id and cached[1] == row["secret_hash"] and cached[2] > now:
            return self._record(row)
        try:
            if kdf_slot is None:
                self._hasher.verify(row["secret_hash"], secret)
            else:
                with kdf_slot():
                    self._hasher.verify(row["secret_hash"], secret)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        if self.cache_s > 0:
            with self._lock:
                if len(self._verified) > 10_000:
                    self._verified = {k: v for k, v in self._verified.items() if v[2] > now}
                self._verified[digest] = (key_id, row["secret_hash"], now + self.cache_s)
        return self._record(row)
