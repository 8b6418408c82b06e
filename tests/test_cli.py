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


_IMPORTS_OF_A_QUERY = """
import json, sys
from pathweave_cli.main import app
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted({name.split(".")[0] for name in sys.modules})
sys.stderr.write("LOADED " + json.dumps(loaded) + "\\n")
sys.exit(code)
"""


def _query_in_a_new_process(*args: str) -> tuple[dict, set[str]]:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _IMPORTS_OF_A_QUERY, "query", *args, "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stderr.rsplit("LOADED ", 1)[1])
    return json.loads(done.stdout), set(loaded)


def test_a_query_process_loads_neither_torch_nor_ingestion(base_store, tenant):
    """`pathweave query` embeds with ONNX Runtime (no torch, no sentence-transformers: a
    process that only asks starts in about a second) and never passes through ingest/;
    its passages are the ones the in-process CLI returns."""
    assert runner.invoke(app, ["ingest", str(FIXTURES / "docs"), "--tenant", tenant]).exit_code == 0
    question = "Which river flows through the city where Marie Curie was born?"
    result, loaded = _query_in_a_new_process(question, "--tenant", tenant)
    assert not loaded & {"torch", "sentence_transformers", "transformers", "pathweave_ingest"}, loaded
    here = json.loads(runner.invoke(app, ["query", question, "--tenant", tenant, "--json"]).stdout)
    assert [p["passage_id"] for p in result["passages"]] == [p["passage_id"] for p in here["passages"]]
    assert result["passages"] and result["paths"]
    _, loaded = _query_in_a_new_process(question, "--tenant", tenant, "--mode", "apr")
    assert "pathweave_ingest" not in loaded and "spacy" in loaded  # APR parses the question (spec §3)
