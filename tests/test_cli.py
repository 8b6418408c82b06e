"""CLI smoke tests (typer's runner, real store and models)."""

from pathlib import Path
import json

from typer.testing import CliRunner

from pathweave_cli.main import app

FIXTURES = Path(__file__).parent / "fixtures"

runner = CliRunner()


def test_ingest_query_and_db_status(base_store, tenant, tmp_path):
    result = runner.invoke(app, ["ingest", str(FIXTURES / "docs"), "--tenant", tenant])
    assert result.exit_code == 0, result.output
    assert "documents: 8 added;" in result.output
    again = runner.invoke(app, ["ingest", str(FIXTURES / "docs"), "--tenant", tenant])
    assert "documents: 8 unchanged;" in again.output
    answer = runner.invoke(app, ["query", "Where was Marie Curie born?", "--tenant", tenant, "--json", "--k", "2"])
    assert answer.exit_code == 0, answer.output
    payload = json.loads(answer.stdout)
    # the answer passage is among the two returned (ranking quality is `pathweave bench musique`'s job)
    assert "Marie Curie" in [hit["title"] for hit in payload["passages"]] and len(payload["passages"]) == 2
    text = runner.invoke(app, ["query", "Where was Marie Curie born?", "--tenant", tenant, "--mode", "dense"])
    assert text.exit_code == 0 and "[1]" in text.stdout
    assert runner.invoke(app, ["db", "status"]).exit_code == 0


def test_cli_errors_are_clear(base_store, tenant, tmp_path):
    missing = runner.invoke(app, ["ingest", str(tmp_path / "missing"), "--tenant", tenant])
    assert missing.exit_code == 2 and "no such file" in missing.output
    bad = runner.invoke(app, ["query", "x", "--mode", "magic", "--tenant", tenant])
    assert bad.exit_code == 2 and "unknown mode" in bad.output
    (tmp_path / "empty.txt").write_bytes(b"")
    empty = runner.invoke(app, ["ingest", str(tmp_path / "empty.txt"), "--tenant", tenant])
    assert "empty file" in empty.output and empty.exit_code == 1
