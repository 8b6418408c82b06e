"""The LLM commands of the CLI against the real managed server (0.5B): ``llm status``,
``query --answer``, ``query --mode prunerag``, and the clear message when the model
cannot be had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pathweave_cli.main import app

FIXTURES = Path(__file__).parents[1] / "fixtures"
runner = CliRunner()


@pytest.fixture
def reread_settings():
    """The commands read the environment a test sets (get_settings is cached per process)."""
    from pathweave.settings import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_llm_status_and_query_with_answer(base_store, tenant, llm_server):
    # the tests' PATHWEAVE_LLM_MODEL (conftest) names the running server: reused, not restarted
    status = runner.invoke(app, ["llm", "status"])
    assert status.exit_code == 0 and f"pid {llm_server.pid}" in status.output
    assert runner.invoke(app, ["ingest", str(FIXTURES / "docs"), "--tenant", tenant]).exit_code == 0
    result = runner.invoke(app, ["query", "Where was Marie Curie born?", "--tenant", tenant, "--k", "2",
                                 "--answer", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["answer"]["text"] and payload["answer"]["error"] is None and payload["answer"]["llm_calls"] == 1
    shown = runner.invoke(app, ["query", "Where was Marie Curie born?", "--tenant", tenant, "--k", "2", "--answer"])
    assert shown.exit_code == 0 and "A:" in shown.stdout and "LLM call" in shown.stdout


def test_unknown_model_is_a_clear_error(base_store, tenant, llm_server, monkeypatch, reread_settings):
    monkeypatch.setenv("PATHWEAVE_LLM_MODEL", "gpt-9")
    result = runner.invoke(app, ["query", "Where was Marie Curie born?", "--tenant", tenant, "--answer"])
    assert result.exit_code == 2 and "unknown packaged model" in result.output
    assert runner.invoke(app, ["llm", "status"]).exit_code == 0  # the running server was left alone


@pytest.mark.arcadedb_only  # the command's printing; the stores are covered by the rest of the suite
def test_a_prunerag_query_prints_each_node_as_it_is_settled(base_store, tenant, llm_server, monkeypatch,
                                                           reread_settings):
    monkeypatch.setenv("PATHWEAVE_PRUNERAG_MAX_DEPTH", "1")  # the root alone: one node, few LLM calls
    assert runner.invoke(app, ["ingest", str(FIXTURES / "docs"), "--tenant", tenant]).exit_code == 0
    question = "Where was Marie Curie born?"
    shown = runner.invoke(app, ["query", question, "--tenant", tenant, "--k", "2", "--mode", "prunerag"])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    steps = [i for i, line in enumerate(lines) if line.startswith("  step ")]
    tree = next(i for i, line in enumerate(lines) if "PruneRAG tree" in line)
    assert len(steps) == 1 and f"query: {question}" in lines[steps[0]]  # the root, as it was settled
    assert steps[0] < tree and f"query: {question}" in lines[tree + 1]  # then the whole tree with the result
