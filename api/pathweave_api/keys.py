"""API keys: ``pw_<key id>_<secret>`` bearer tokens, each bound to one tenant and one
scope (:data:`SCOPES`): ``query`` may query and read reasoning records; ``ingest`` may
also submit, replace and delete documents and read jobs; ``admin`` may do everything
(keys themselves are managed with ``pathweave keys``). Keys made before scopes existed
are ``admin``.

Kept in the graph store (``cypher/keys.cypher``, under the registry tenant
:data:`REGISTRY`), the store every API replica, worker and ``pathweave keys`` shares: a key
created through one works in all, and a revocation holds in all from their next request (on
a Neo4j cluster keys are read on the leader, never from a follower that may lag).
The secret is stored only as its argon2id hash (a password KDF; ``argon2-cffi`` defaults:
64 MiB, 3 passes, or ``PATHWEAVE_API_ARGON2_*``); the plain token is shown once, at creation.
Verification reads the key by id (so a guessed token costs no KDF run unless its id exists),
checks it is not revoked, then verifies the secret. A successful verification is remembered
in memory for ``api_key_cache_s`` seconds (keyed by a SHA-256 of the token, never stored);
revocation is read from the store on every request.

The SQLite key file of earlier versions (``api.keys_file``, default
``<data_dir>/api/keys.sqlite3``) is imported on first use: :func:`import_key_file` copies its
keys (hashes and revocations as they were) and keeps the file as ``*.imported``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from pathweave.settings import ApiSettings, Settings

log = logging.getLogger("pathweave_api")

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TOKEN = re.compile(r"^pw_([0-9a-f]{16})_([A-Za-z0-9_-]{20,128})$")

SCOPES = ("query", "ingest", "admin")
"""Key scopes, each allowing what the ones before it allow."""

REGISTRY = "_keys"
"""The tenant the keys are stored under (not a valid tenant name, so no tenant's data)."""


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
    principals: tuple[str, ...] | None = None  # what its callers read (None: the whole tenant)
    delegate: bool = False  # may ask on behalf of an end user (their principals or ID token)

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        """Whether this key's scope includes ``scope`` (query < ingest < admin)."""
        return SCOPES.index(self.scope) >= SCOPES.index(scope)


def valid_tenant(tenant: str) -> bool:
    return bool(TENANT_PATTERN.match(tenant or ""))


def check_new_key(tenant: str, rate_limit_per_s: float | None, scope: str) -> None:
    """Raise ValueError when a key with these values cannot be made: an invalid tenant name
    (letters, digits, ``_.-``, at most 64, not starting with ``_.-``), a negative rate limit
    or an unknown scope."""
    if not valid_tenant(tenant):
        raise ValueError("tenant must be 1-64 characters: letters, digits, '_', '.', '-' (not first)")
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; use {', '.join(SCOPES)}")
    if rate_limit_per_s is not None and rate_limit_per_s < 0:
        raise ValueError("rate limit must be >= 0")


def key_store_for(api: ApiSettings, store: Callable[[], Any], key_file: Path | None = None) -> "KeyStore":
    """The :class:`KeyStore` the ``api`` settings describe (cache and argon2 cost) over
    ``store()``, which gives the graph store (any tenant's handle: the registry's is derived).
    ``key_file``: an earlier version's SQLite key file, imported on first use."""
    hasher = PasswordHasher(time_cost=api.argon2_time_cost, memory_cost=api.argon2_memory_kib,
                            parallelism=api.argon2_parallelism)
    return KeyStore(store, api.key_cache_s, hasher, key_file)


@contextmanager
def open_key_store(settings: Settings) -> Iterator["KeyStore"]:
    """A :class:`KeyStore` on the configured store (starting the managed server on demand),
    importing the key file of earlier versions on first use; closed on exit. For commands
    and benchmarks; the API uses its runtime's connection."""
    from pathweave.runtime import open_store

    with open_store(settings, tenant=REGISTRY) as graph:
        yield key_store_for(settings.api, lambda: graph, settings.api.keys_path(settings.data_dir))


def import_key_file(registry, path: Path) -> int:
    """Copy the keys of an earlier version's SQLite key file at ``path`` into the store
    (``registry``: the graph store of tenant :data:`REGISTRY`; ids, hashes, scopes and
    revocations as they were; a key id already stored is left alone) and keep the file as
    ``<name>.imported``. Returns how many keys it held (0: no file, or another process is
    importing it).

    The file is first claimed by an atomic rename, so of several processes starting at once
    one imports it; when the import fails the file is put back (the next start tries again)
    and the error is raised. Stop processes of the earlier version before: a key one of them
    writes to the file after the claim is not imported."""
    path = Path(path)
    claimed = path.with_name(f"{path.name}.importing-{os.getpid()}-{threading.get_ident()}")
    try:
        path.rename(claimed)
    except FileNotFoundError:
        return 0
    try:
        with closing(sqlite3.connect(f"file:{claimed}?mode=ro", uri=True, timeout=10)) as db:
            db.row_factory = sqlite3.Row
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            rows = [dict(row) for row in db.execute("SELECT * FROM api_keys")] if "api_keys" in tables else []
        imported = [{"key_id": row["key_id"], "key_tenant": row["tenant"], "name": row.get("name") or "",
                     "secret_hash": row["secret_hash"], "created_at": row["created_at"],
                     "revoked_at": row.get("revoked_at"), "rate_limit_per_s": row.get("rate_limit_per_s"),
                     "scope": row.get("scope") or "admin"} for row in rows]  # keys from before scopes: admin
        if imported:
            registry.write("api_key_import", imported)
    except BaseException:
        claimed.rename(path)
        raise
    done, n = path.with_name(path.name + ".imported"), 1
    while done.exists():  # an earlier import's copy is kept too
        done, n = path.with_name(f"{path.name}.imported.{n}"), n + 1
    claimed.rename(done)
    if imported:
        log.warning("imported %d API key(s) from %s into the store (the file is kept as %s)", len(imported), path,
                    done.name)
    return len(imported)


class KeyStore:
    """The API keys in the graph store. Thread-safe.

    ``store()`` gives the graph store (called on every operation, so a reconnected runtime is
    followed); errors of the store propagate (the API answers 503 on transient ones)."""

    def __init__(self, store: Callable[[], Any], cache_s: float = 300.0, hasher: PasswordHasher | None = None,
                 key_file: Path | None = None) -> None:
        self.store = store
        self.cache_s = cache_s
        self.key_file = key_file
        self._hasher = hasher or PasswordHasher()  # argon2id; verify reads the parameters from each hash
        self._verified: dict[str, tuple[str, str, float]] = {}  # sha256(token) -> (key_id, hash, until)
        self._lock = threading.Lock()
        self._import_lock = threading.Lock()
        self._imported = key_file is None

    def registry(self):
        """The graph store's handle for the key registry (tenant :data:`REGISTRY`); the first
        call imports ``key_file`` (:func:`import_key_file`: once per process; a failure is
        logged, the file left for the next start, and the keys in the store still serve)."""
        from pathweave.store.graph_store import GraphStore

        base = self.store()
        registry = base if base.tenant == REGISTRY else GraphStore(
            base.driver, base.database, base.backend, REGISTRY, base.batch_size, base.dimensions)
        if not self._imported:
            with self._import_lock:
                if not self._imported:
                    self._imported = True
                    try:
                        import_key_file(registry, self.key_file)
                    except Exception:  # noqa: BLE001 - an unreadable old file must not stop the service
                        log.exception("the API key file %s was not imported (left in place)", self.key_file)
        return registry

    @staticmethod
    def _record(row: dict) -> ApiKey:
        principals = row.get("principals")
        return ApiKey(row["key_id"], row["key_tenant"], row["name"] or "", row["created_at"], row["revoked_at"],
                      row["rate_limit_per_s"], row["scope"] or "admin",
                      None if principals is None else tuple(principals), bool(row.get("delegate")))

    def _row(self, key_id: str) -> dict | None:
        rows = self.registry().run("api_key_get", key_id=key_id, on_leader=True)  # a revocation, at once
        return rows[0] if rows else None

    def create(self, tenant: str, name: str = "", rate_limit_per_s: float | None = None,
               scope: str = "admin", principals: list[str] | None = None,
               delegate: bool = False) -> tuple[str, ApiKey]:
        """A new key for ``tenant`` with ``scope`` (:data:`SCOPES`): ``(token, record)``. The
        token is not stored and cannot be shown again. ``principals``: what its callers read
        (None: the whole tenant, :mod:`pathweave.access`); ``delegate``: it may ask on behalf
        of an end user (whose principals then replace its own).

        Raises ValueError on an invalid tenant name (letters, digits, ``_.-``, at most 64), a
        negative rate limit, an unknown scope or a malformed principal (nothing is written then).
        """
        check_new_key(tenant, rate_limit_per_s, scope)
        from pathweave.access import check_principals

        principals = check_principals(principals)
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        record = ApiKey(key_id, tenant, name[:200], datetime.now(timezone.utc).isoformat(), None, rate_limit_per_s,
                        scope, principals, delegate)
        secret_hash = self._hasher.hash(secret)
        self.registry().execute_write(lambda run: run(
            "api_key_create", key_id=key_id, key_tenant=tenant, key_name=record.name, secret_hash=secret_hash,
            created_at=record.created_at, scope=scope, principals=None if principals is None else list(principals),
            delegate=bool(delegate), rate_limit_per_s=None if rate_limit_per_s is None else float(rate_limit_per_s)))
        return f"pw_{key_id}_{secret}", record

    def list(self, include_revoked: bool = True) -> list[ApiKey]:
        """Every key, oldest first (``include_revoked=False``: the active ones)."""
        keys = [self._record(row) for row in self.registry().run("api_key_list", on_leader=True)]
        return keys if include_revoked else [k for k in keys if k.active]

    def get(self, key_id: str) -> ApiKey | None:
        row = self._row(key_id)
        return self._record(row) if row else None

    def revoke(self, key_id: str) -> bool:
        """Revoke a key (False when there is no such active key)."""
        revoked_at = datetime.now(timezone.utc).isoformat()
        changed = self.registry().execute_write(
            lambda run: int(run("api_key_revoke", key_id=key_id, revoked_at=revoked_at)[0]["n"]))
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
        argon2 verifications; it may raise to refuse the run). Store errors propagate."""
        match = _TOKEN.match(token or "")
        if not match:
            return None
        key_id, secret = match.groups()
        row = self._row(key_id)
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
