"""API keys: argon2id hashes in the graph store, tenant binding, revocation seen by every
key store on the store, the import of an earlier version's SQLite key file, and the
``keys create|list|revoke`` commands."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest
from argon2 import PasswordHasher
from typer.testing import CliRunner

from pathweave_api.keys import REGISTRY, KeyStore, import_key_file

FAST = dict(time_cost=1, memory_cost=1024, parallelism=1)


@pytest.fixture()
def key_store(base_store):
    return KeyStore(lambda: base_store, hasher=PasswordHasher(**FAST))


def unique(prefix: str = "acme") -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def test_tokens_are_stored_only_as_argon2_hashes(key_store):
    tenant = unique()
    token, record = key_store.create(tenant, "ci")
    secret = token.split("_", 2)[2]
    [row] = key_store.registry().run("api_key_get", key_id=record.key_id)
    assert row["secret_hash"].startswith("$argon2id$")
    assert all(secret not in str(value) for value in row.values())
    assert key_store.registry().tenant == REGISTRY
    assert key_store.authenticate(token).tenant == tenant
    assert key_store.authenticate(token).tenant == tenant  # cached verification


def test_wrong_malformed_and_revoked_tokens(key_store):
    tenant = unique()
    token, record = key_store.create(tenant)
    other, other_record = key_store.create(unique("globex"))
    assert key_store.authenticate(other).key_id == other_record.key_id
    assert key_store.authenticate(token[:-1] + ("x" if token[-1] != "x" else "y")) is None
    assert key_store.authenticate("") is None
    assert key_store.authenticate("pw_nothex_secretsecretsecretsecret") is None
    assert key_store.authenticate(f"pw_{'0' * 16}_{'a' * 43}") is None
    assert key_store.revoke(record.key_id) and not key_store.revoke(record.key_id)
    assert key_store.authenticate(token) is None
    assert key_store.authenticate(other) is not None
    active = {k.key_id for k in key_store.list(include_revoked=False)}
    assert other_record.key_id in active and record.key_id not in active
    assert key_store.get(record.key_id).revoked_at is not None


def test_revocation_is_seen_by_another_key_store_at_once(key_store, base_store):
    token, record = key_store.create(unique())
    second = KeyStore(lambda: base_store, cache_s=300)  # e.g. another API replica
    assert second.authenticate(token) is not None  # verified: cached in the second one
    key_store.revoke(record.key_id)  # e.g. `pathweave keys revoke` in a shell
    assert second.authenticate(token) is None  # revocation is read from the store every time


def _old_key_file(path, tenant: str, hasher, secret: str) -> tuple[str, str]:
    """A key file of an earlier version (from before scopes): one active key (2.5 requests/s)
    and one revoked; their ids."""
    key_id, revoked_id = uuid.uuid4().hex[:16], uuid.uuid4().hex[:16]
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE api_keys (key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL "
                   "DEFAULT '', secret_hash TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT, "
                   "rate_limit_per_s REAL)")
        db.execute("INSERT INTO api_keys VALUES (?, ?, 'old', ?, '2026-01-01', NULL, 2.5)",
                   (key_id, tenant, hasher.hash(secret)))
        db.execute("INSERT INTO api_keys VALUES (?, ?, 'gone', ?, '2026-01-01', '2026-02-01', NULL)",
                   (revoked_id, tenant, hasher.hash(secret)))
    db.close()
    return key_id, revoked_id


@pytest.mark.store_contract  # the key registry's statements, on Neo4j too
def test_a_key_file_of_an_earlier_version_is_imported_on_first_use(base_store, tmp_path):
    """Keys of the SQLite file keep their ids, hashes and revocations; the file is kept
    beside as ``*.imported``, and the next process finds nothing to import."""
    hasher, tenant, secret = PasswordHasher(**FAST), unique(), "s" * 43
    old = tmp_path / "keys.sqlite3"
    key_id, revoked_id = _old_key_file(old, tenant, hasher, secret)
    keys = KeyStore(lambda: base_store, hasher=hasher, key_file=old)
    key = keys.authenticate(f"pw_{key_id}_{secret}")
    assert key is not None and (key.tenant, key.scope, key.rate_limit_per_s) == (tenant, "admin", 2.5)
    assert keys.authenticate(f"pw_{revoked_id}_{secret}") is None
    assert not old.exists() and (tmp_path / "keys.sqlite3.imported").exists()
    assert import_key_file(keys.registry(), old) == 0  # the next process: nothing left to import


@pytest.mark.store_contract  # the key registry's statements, on Neo4j too
def test_processes_importing_one_key_file_at_once_import_it_once(base_store, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    hasher, tenant, secret = PasswordHasher(**FAST), unique(), "s" * 43
    old = tmp_path / "keys.sqlite3"
    key_id, _ = _old_key_file(old, tenant, hasher, secret)
    registry = KeyStore(lambda: base_store).registry()
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda _: import_key_file(registry, old), range(4)))
    assert sorted(counts) == [0, 0, 0, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.sqlite3.imported"]
    assert KeyStore(lambda: base_store, hasher=hasher).authenticate(f"pw_{key_id}_{secret}").tenant == tenant


def test_an_unreadable_key_file_is_left_in_place_and_the_keys_in_the_store_serve(key_store, base_store, tmp_path):
    token, _ = key_store.create(unique())
    broken = tmp_path / "keys.sqlite3"
    broken.write_bytes(b"not a database")
    keys = KeyStore(lambda: base_store, hasher=PasswordHasher(**FAST), key_file=broken)
    assert keys.authenticate(token) is not None  # the import failed (logged), the service goes on
    assert broken.read_bytes() == b"not a database"  # put back for the next start


def test_scopes(key_store):
    tenant = unique()
    query, record = key_store.create(tenant, "tool", scope="query")
    assert record.scope == "query" and key_store.authenticate(query).scope == "query"
    assert [key_store.create(tenant, scope=s)[1].allows("ingest") for s in ("query", "ingest", "admin")] == \
        [False, True, True]
    before = len(key_store.list())
    with pytest.raises(ValueError, match="unknown scope 'root'"):
        key_store.create(tenant, scope="root")
    with pytest.raises(ValueError, match="rate limit"):
        key_store.create(tenant, rate_limit_per_s=-1)
    assert len(key_store.list()) == before  # bad input writes nothing


@pytest.mark.parametrize("tenant", ["", "-x", "a b", "x" * 65, "t/../u", "ten'ant", "_keys"])
def test_invalid_tenant_names(key_store, tenant):
    with pytest.raises(ValueError):
        key_store.create(tenant)


def test_keys_cli(base_store, tmp_path, monkeypatch):
    from pathweave.settings import get_settings

    monkeypatch.setenv("PATHWEAVE_API_KEYS_FILE", str(tmp_path / "none.sqlite3"))
    monkeypatch.setenv("PATHWEAVE_API_ARGON2_TIME_COST", "1")
    monkeypatch.setenv("PATHWEAVE_API_ARGON2_MEMORY_KIB", "1024")
    get_settings.cache_clear()
    tenant = unique()
    try:
        from pathweave_cli.main import app

        runner = CliRunner()
        created = runner.invoke(app, ["keys", "create", "--tenant", tenant, "--name", "ci", "--json"])
        assert created.exit_code == 0, created.output
        info = json.loads(created.stdout.strip().splitlines()[-1])
        assert info["tenant"] == tenant and info["token"].startswith("pw_")
        plain = runner.invoke(app, ["keys", "create", "--tenant", tenant])
        assert plain.exit_code == 0 and plain.stdout.strip().splitlines()[-1].startswith("pw_")
        mine = ["keys", "list", "--json", "--tenant", tenant]
        rows = [json.loads(line) for line in runner.invoke(app, mine).stdout.strip().splitlines()]
        assert len(rows) == 2 and all("token" not in r and "secret_hash" not in r for r in rows)
        assert runner.invoke(app, ["keys", "revoke", info["key_id"]]).exit_code == 0
        assert runner.invoke(app, ["keys", "revoke", info["key_id"]]).exit_code == 1
        assert len(runner.invoke(app, mine).stdout.strip().splitlines()) == 1
        assert len(runner.invoke(app, mine + ["--all"]).stdout.strip().splitlines()) == 2
        assert runner.invoke(app, ["keys", "create", "--tenant", "bad tenant"]).exit_code == 2
        assert runner.invoke(app, ["keys", "create", "--tenant", "_keys"]).exit_code == 2  # the registry's name
        keys = KeyStore(lambda: base_store, hasher=PasswordHasher(**FAST))  # e.g. the API
        assert keys.authenticate(info["token"]) is None
        assert keys.authenticate(plain.stdout.strip().splitlines()[-1]).tenant == tenant
    finally:
        get_settings.cache_clear()


def test_the_pathweave_command_has_every_command():
    """The console script (pathweave_cli.main:app) mounts the service commands and the benchmarks."""
    from pathweave_cli.main import app

    def names(typer_app):
        return {c.name or c.callback.__name__ for c in typer_app.registered_commands} | \
            {g.name for g in typer_app.registered_groups}

    assert {"db", "ingest", "query", "demo", "serve", "worker", "explore", "keys", "bench", "llm", "aliases", "train",
            "models", "reembed", "jobs"} <= names(app)
    bench = next(g.typer_instance for g in app.registered_groups if g.name == "bench")
    assert names(bench) == {"musique", "scale", "api", "select", "qa", "extract", "reuse", "soak", "calibrate",
                            "history", "tenants"}
    help_text = CliRunner().invoke(app, ["bench", "--help"]).output
    assert all(name in help_text for name in ("musique", "scale", "api", "select", "qa", "extract", "reuse"))


def test_keys_cli_scope(base_store, monkeypatch):
    from pathweave.settings import get_settings

    get_settings.cache_clear()
    tenant = unique()
    try:
        from pathweave_cli.main import app

        runner = CliRunner()
        created = runner.invoke(app, ["keys", "create", "--tenant", tenant, "--scope", "query", "--json"])
        assert created.exit_code == 0 and json.loads(created.stdout.strip().splitlines()[-1])["scope"] == "query"
        listed = [json.loads(line) for line in
                  runner.invoke(app, ["keys", "list", "--json", "--tenant", tenant]).stdout.splitlines()]
        assert [row["scope"] for row in listed] == ["query"]
        refused = runner.invoke(app, ["keys", "create", "--tenant", tenant, "--scope", "root"])
        assert refused.exit_code == 2 and "unknown scope" in refused.output
    finally:
        get_settings.cache_clear()
