"""API keys: argon2id hashes at rest, tenant binding, revocation, and the
``keys create|list|revoke`` commands."""

from __future__ import annotations

import json
import os
import stat

import pytest
from typer.testing import CliRunner

from pathweave_api.keys import KeyStore


@pytest.fixture()
def key_store(tmp_path):
    from argon2 import PasswordHasher

    return KeyStore(tmp_path / "keys.sqlite3", hasher=PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))


def test_tokens_are_stored_only_as_argon2_hashes(key_store):
    token, record = key_store.create("acme", "ci")
    assert token.startswith(f"pw_{record.key_id}_")
    raw = key_store.path.read_bytes()
    secret = token.split("_", 2)[2]
    assert secret.encode() not in raw and token.encode() not in raw
    assert b"$argon2id$" in raw
    assert stat.S_IMODE(os.stat(key_store.path).st_mode) == 0o600
    assert key_store.authenticate(token).tenant == "acme"
    assert key_store.authenticate(token).tenant == "acme"  # cached verification


def test_wrong_malformed_and_revoked_tokens(key_store):
    token, record = key_store.create("acme")
    other, _ = key_store.create("globex")
    assert key_store.authenticate(other).tenant == "globex"
    assert key_store.authenticate(token[:-1] + ("x" if token[-1] != "x" else "y")) is None
    assert key_store.authenticate("") is None
    assert key_store.authenticate("pw_nothex_secretsecretsecretsecret") is None
    assert key_store.authenticate(f"pw_{'0' * 16}_{'a' * 43}") is None
    assert key_store.revoke(record.key_id) and not key_store.revoke(record.key_id)
    assert key_store.authenticate(token) is None
    assert key_store.authenticate(other) is not None
    assert [k.key_id for k in key_store.list(include_revoked=False)] == [key_store.list()[1].key_id]


def test_revocation_is_seen_by_another_process_store(key_store):
    token, record = key_store.create("acme")
    second = KeyStore(key_store.path)  # e.g. the API process
    assert second.authenticate(token) is not None
    key_store.revoke(record.key_id)  # e.g. `pathweave keys revoke` in a shell
    assert second.authenticate(token) is None


@pytest.mark.parametrize("tenant", ["", "-x", "a b", "x" * 65, "t/../u", "ten'ant"])
def test_invalid_tenant_names(key_store, tenant):
    with pytest.raises(ValueError):
        key_store.create(tenant)


def test_keys_cli(tmp_path, monkeypatch):
    from pathweave.settings import get_settings
    from pathweave_api.keys import key_store_for

    monkeypatch.setenv("PATHWEAVE_API_KEYS_FILE", str(tmp_path / "cli-keys.sqlite3"))
    monkeypatch.setenv("PATHWEAVE_API_ARGON2_TIME_COST", "1")
    monkeypatch.setenv("PATHWEAVE_API_ARGON2_MEMORY_KIB", "1024")
    get_settings.cache_clear()
    try:
        from pathweave_cli.main import app

        runner = CliRunner()
        created = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--name", "ci", "--json"])
        assert created.exit_code == 0, created.output
        info = json.loads(created.stdout.strip().splitlines()[-1])
        assert info["tenant"] == "acme" and info["token"].startswith("pw_")
        plain = runner.invoke(app, ["keys", "create", "--tenant", "acme"])
        assert plain.exit_code == 0 and plain.stdout.strip().splitlines()[-1].startswith("pw_")
        listed = runner.invoke(app, ["keys", "list", "--json"])
        rows = [json.loads(line) for line in listed.stdout.strip().splitlines()]
        assert len(rows) == 2 and all("token" not in r and "secret_hash" not in r for r in rows)
        assert runner.invoke(app, ["keys", "revoke", info["key_id"]]).exit_code == 0
        assert runner.invoke(app, ["keys", "revoke", info["key_id"]]).exit_code == 1
        assert len(runner.invoke(app, ["keys", "list", "--json"]).stdout.strip().splitlines()) == 1
        assert len(runner.invoke(app, ["keys", "list", "--all", "--json"]).stdout.strip().splitlines()) == 2
        assert runner.invoke(app, ["keys", "create", "--tenant", "bad tenant"]).exit_code == 2
        store = key_store_for(get_settings().api, tmp_path)
        assert store.authenticate(info["token"]) is None
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
                            "history"}
    help_text = CliRunner().invoke(app, ["bench", "--help"]).output
    assert all(name in help_text for name in ("musique", "scale", "api", "select", "qa", "extract", "reuse"))


def test_scopes_and_a_key_file_from_before_scopes(key_store, tmp_path):
    import sqlite3

    query, record = key_store.create("acme", "tool", scope="query")
    assert record.scope == "query" and key_store.authenticate(query).scope == "query"
    assert [key_store.create("acme", scope=s)[1].allows("ingest") for s in ("query", "ingest", "admin")] == \
        [False, True, True]
    with pytest.raises(ValueError, match="unknown scope 'root'"):
        key_store.create("acme", scope="root")
    # a key file written before scopes: its keys become admin, new keys get their scope
    old = tmp_path / "old-keys.sqlite3"
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE api_keys (key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL "
                   "DEFAULT '', secret_hash TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT, "
                   "rate_limit_per_s REAL)")
        db.execute("INSERT INTO api_keys VALUES ('0123456789abcdef', 'acme', 'old', 'x', '2026-01-01', NULL, NULL)")
    migrated = KeyStore(old)
    assert migrated.get("0123456789abcdef").scope == "admin"
    assert migrated.create("acme", scope="ingest")[1].scope == "ingest"


def test_keys_cli_scope(tmp_path, monkeypatch):
    from pathweave.settings import get_settings

    monkeypatch.setenv("PATHWEAVE_API_KEYS_FILE", str(tmp_path / "cli-keys.sqlite3"))
    get_settings.cache_clear()
    try:
        from pathweave_cli.main import app

        runner = CliRunner()
        created = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--scope", "query", "--json"])
        assert created.exit_code == 0 and json.loads(created.stdout.strip().splitlines()[-1])["scope"] == "query"
        listed = [json.loads(line) for line in runner.invoke(app, ["keys", "list", "--json"]).stdout.splitlines()]
        assert [row["scope"] for row in listed] == ["query"]
        refused = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--scope", "root"])
        assert refused.exit_code == 2 and "unknown scope" in refused.output
    finally:
        get_settings.cache_clear()
