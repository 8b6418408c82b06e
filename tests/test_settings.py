"""The one settings root: sections from the environment and pathweave.toml alike, unknown
keys refused by name, every setting described, ``pathweave config show`` with secrets masked
and each setting's description above it."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError
from typer.testing import CliRunner

from pathweave.settings import (DeprecatedSettingName, Settings, StoreSettings, UnknownSettingError, env_names,
                                legacy_env_names)


@pytest.fixture()
def toml(tmp_path, monkeypatch):
    """Write ``pathweave.toml`` and point PATHWEAVE_CONFIG at it."""
    path = tmp_path / "pathweave.toml"

    def write(text: str):
        path.write_text(text)
        monkeypatch.setenv("PATHWEAVE_CONFIG", str(path))
        return path

    return write


def test_the_documented_environment_names_set_the_sections(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names warn about nothing
        for name, value in {"PATHWEAVE_STORE_URI": "bolt://graph:7687", "PATHWEAVE_STORE_PASSWORD": "pw",
                            "PATHWEAVE_TENANT": "acme", "PATHWEAVE_MODELS_DEVICE": "cpu",
                            "PATHWEAVE_INGEST_CHUNK_TOKENS": "128", "PATHWEAVE_RETRIEVAL_STAGE1_PROPS": "300",
                            "PATHWEAVE_SELECTION_CONTEXT_PASSAGES": "7", "PATHWEAVE_API_MAX_K": "9",
                            "PATHWEAVE_WORKER_BROKER_URL": "redis://h:6379/0", "PATHWEAVE_WORKER_POOL": "prefork",
                            "PATHWEAVE_QUERY_NODE_CACHE_ENTRIES": "5", "PATHWEAVE_ALIASES_ENABLED": "false"}.items():
            monkeypatch.setenv(name, value)
        s = Settings()
    assert (s.store.uri, s.store.password, s.tenant, s.models.device) == ("bolt://graph:7687", "pw", "acme", "cpu")
    assert (s.ingest.chunk_tokens, s.retrieval.stage1_props, s.selection.context_passages) == (128, 300, 7)
    assert (s.api.max_k, s.worker.broker_url, s.worker.pool, s.query.node_cache_entries) == \
        (9, "redis://h:6379/0", "prefork", 5)
    assert s.aliases.enabled is False
    assert env_names()["PATHWEAVE_API_KEYS_FILE"] == ("api", "keys_file")
    # one rule: every setting is PATHWEAVE_<SECTION>_<FIELD> (or a top-level value)
    for env, path in env_names().items():
        assert env == "PATHWEAVE_" + "_".join(path).upper(), env


def test_the_names_before_the_section_rule_still_work_with_a_warning(monkeypatch, toml):
    monkeypatch.setenv("PATHWEAVE_BROKER_URL", "redis://old:6379/0")
    monkeypatch.setenv("PATHWEAVE_PROPRAG_STAGE1_PROPS", "300")
    monkeypatch.setenv("PATHWEAVE_PATH_WEIGHT", "0.5")
    monkeypatch.setenv("PATHWEAVE_ALIAS_ENABLED", "false")
    with pytest.warns(DeprecatedSettingName, match="PATHWEAVE_BROKER_URL is deprecated: use PATHWEAVE_WORKER_BROKER_URL"):
        s = Settings()
    assert (s.worker.broker_url, s.retrieval.stage1_props, s.selection.path_weight, s.aliases.enabled) == \
        ("redis://old:6379/0", 300, 0.5, False)
    monkeypatch.setenv("PATHWEAVE_WORKER_BROKER_URL", "redis://new:6379/0")  # both: the new name wins
    with pytest.warns(DeprecatedSettingName):
        assert Settings().worker.broker_url == "redis://new:6379/0"
    toml('[worker]\nworker_pool = "threads"\n')  # a renamed field, in the file
    with pytest.warns(DeprecatedSettingName, match="worker_pool is deprecated: use pool"):
        assert Settings().worker.pool == "threads"
    assert legacy_env_names()["PATHWEAVE_DEVICE"] == "PATHWEAVE_MODELS_DEVICE"
    assert not set(legacy_env_names()) & set(env_names())


def test_toml_sets_the_same_sections_and_the_environment_wins(toml, monkeypatch):
    toml('tenant = "acme"\n[store]\nuri = "bolt://a:7687"\n[retrieval]\nstage1_paths = 12\n'
         '[api]\nmax_k = 11\n[worker]\nqueue = "q1"\n')
    monkeypatch.setenv("PATHWEAVE_API_MAX_K", "13")
    s = Settings()
    assert (s.tenant, s.store.uri, s.retrieval.stage1_paths, s.worker.queue) == ("acme", "bolt://a:7687", 12, "q1")
    assert s.api.max_k == 13 and s.retrieval.stage1_props == 200  # env over file; defaults kept


def test_an_unknown_environment_key_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("PATHWEAVE_WRITE_BATCH_SIZE", "64")  # renamed PATHWEAVE_STORE_WRITE_BATCH_SIZE
    with pytest.raises(UnknownSettingError, match="PATHWEAVE_WRITE_BATCH_SIZE"):
        Settings()
    monkeypatch.delenv("PATHWEAVE_WRITE_BATCH_SIZE")
    monkeypatch.setenv("PATHWEAVE_API_MAX_KK", "3")
    with pytest.raises(UnknownSettingError, match="PATHWEAVE_API_MAX_KK.*PATHWEAVE_API_MAX_K"):
        Settings()


def test_an_unknown_toml_key_is_an_error_naming_it(toml):
    toml('[store]\nurl = "bolt://a:7687"\n')
    with pytest.raises(ValidationError, match=r"store\.url"):
        Settings()
    toml('stage1_props = 3\n')
    with pytest.raises(ValidationError, match="stage1_props"):
        Settings()


def test_the_llm_and_prunerag_sections_are_typed(monkeypatch, toml):
    monkeypatch.setenv("PATHWEAVE_LLM_MODEL", "qwen")
    monkeypatch.setenv("PATHWEAVE_PRUNERAG_MAX_DEPTH", "2")
    monkeypatch.setenv("PATHWEAVE_INGEST_EXTRACTOR", "llm")
    toml('[llm]\ntimeout_s = 30\n')
    settings = Settings()
    assert (settings.llm.model, settings.llm.timeout_s, settings.llm.managed) == ("qwen", 30.0, True)
    assert settings.prunerag.max_depth == 2 and settings.prunerag.threshold == 0.95
    assert settings.ingest.extractor == "llm"
    toml('[llm]\ntimeout = 30\n')
    with pytest.raises(ValidationError, match=r"llm\.timeout"):
        Settings()
    monkeypatch.setenv("PATHWEAVE_LLM_TIMEOUT", "30")
    with pytest.raises(UnknownSettingError, match="PATHWEAVE_LLM_TIMEOUT"):
        Settings()


def test_config_show_prints_the_effective_configuration_with_secrets_masked(monkeypatch, toml):
    from pathweave.settings import get_settings
    from pathweave_cli.main import app

    toml('[api]\nmax_k = 11\n')
    monkeypatch.setenv("PATHWEAVE_STORE_PASSWORD", "hunter2")
    monkeypatch.setenv("PATHWEAVE_WORKER_BROKER_URL", "redis://:brokerpw@cache:6379/0")
    monkeypatch.setenv("PATHWEAVE_LLM_API_KEY", "sk-secret")
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["config", "show"])
        assert result.exit_code == 0, result.output
        out = result.stdout
        assert "[api]" in out and "max_k = 11" in out and "[retrieval]" in out
        assert 'password = "***"' in out and 'broker_url = "redis://:***@cache:6379/0"' in out
        assert 'api_key = "***"' in out
        assert not any(secret in out for secret in ("hunter2", "brokerpw", "sk-secret"))
        monkeypatch.setenv("PATHWEAVE_NOPE", "1")
        get_settings.cache_clear()
        refused = CliRunner().invoke(app, ["config", "show"])
        assert refused.exit_code == 2 and "PATHWEAVE_NOPE" in refused.output
    finally:
        get_settings.cache_clear()


def test_every_setting_has_a_description():
    sections = {name: field.annotation for name, field in Settings.model_fields.items()
                if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)}
    assert {"store", "retrieval", "worker", "apr"} <= set(sections)
    missing = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    missing += [f"{section}.{name}" for section, model in sections.items()
                for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"settings without a description: {missing}"


def test_config_show_puts_each_description_above_its_setting(monkeypatch):
    from pathweave.settings import get_settings
    from pathweave_cli.main import app

    monkeypatch.setenv("PATHWEAVE_STORE_URI", "bolt://x:7687")
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["config", "show"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    parsed = tomllib.loads(result.stdout)  # the comments keep it valid TOML
    assert parsed["store"]["uri"] == "bolt://x:7687" and "tenant" in parsed
    lines = result.stdout.splitlines()
    uri = lines.index('uri = "bolt://x:7687"')
    assert lines[uri - 1] == "# " + StoreSettings.model_fields["uri"].description
    assert lines[lines.index("[store]") - 1] == "# " + Settings.model_fields["store"].description
    tenant = next(i for i, line in enumerate(lines) if line.startswith("tenant = "))
    assert lines[tenant - 1] == "# " + Settings.model_fields["tenant"].description


def test_the_configuration_reference_is_the_settings_own():
    """docs/configuration.md is what ``pathweave config table`` prints: every setting's
    variable, default and description, from the settings themselves."""
    from pathweave_cli.main import app

    printed = CliRunner().invoke(app, ["config", "table"])
    assert printed.exit_code == 0, printed.output
    reference = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert printed.stdout == reference, "docs/configuration.md is stale: pathweave config table > docs/configuration.md"
    for section in ("store", "retrieval", "llm"):
        for name in Settings.model_fields[section].annotation.model_fields:
            assert f"`PATHWEAVE_{section.upper()}_{name.upper()}`" in reference
