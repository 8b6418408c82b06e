"""Backup and restore of the managed ArcadeDB store (issue 35) with ArcadeDB's own
BACKUP/RESTORE DATABASE: a backup taken while queries run restores a store that answers
the same questions with the same top-5 passages; a query process that saw the later graph
catches up by the restored graph version; a file that is no backup changes nothing. Its
own data dir: the session's store is not touched."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pathweave.servers import store_server
from pathweave.servers.processes import ServerError
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import SourceDocument, load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"
EXTRA = SourceDocument("zephyria.txt", "Zephyria", "Zephyria is a hidden valley. Marie Curie never went there.")
"""The document that moves a graph on past its backup."""
QUESTIONS = ["Where was Marie Curie born?", "On which river stands the city where Marie Curie was born?",
             "Which prize did Pierre Curie win?"]


@pytest.mark.arcadedb_only
def test_an_online_backup_restores_the_same_answers(settings, embedder, extractor, tmp_path, monkeypatch):
    from pathweave.settings import get_settings
    from pathweave.runtime import open_store
    from pathweave_cli.main import app

    own = settings.model_copy(update={"data_dir": tmp_path / "data", "tenant": "backup"})
    monkeypatch.setenv("PATHWEAVE_DATA_DIR", str(own.data_dir))  # the CLI's settings
    get_settings.cache_clear()
    store = open_store(own)
    try:
        retriever, before, version = _ingest_and_ask(store, embedder, extractor, own)

        stop = threading.Event()
        answered: list[int] = []

        def ask() -> None:  # queries go on while the backup runs
            while not stop.is_set():
                answered.append(len(retriever.query(QUESTIONS[0], write_record=False).passages))

        asking = threading.Thread(target=ask)
        asking.start()
        try:
            result = CliRunner().invoke(app, ["db", "backup", str(tmp_path / "store.zip")])
        finally:
            stop.set()
            asking.join()
        assert result.exit_code == 0, result.output
        assert (tmp_path / "store.zip").stat().st_size > 0 and answered and all(answered)
        again = CliRunner().invoke(app, ["db", "backup", str(tmp_path / "store.zip")])
        assert again.exit_code == 2 and "never overwrite" in again.output

        # the graph moves on, then the backup is restored
        assert _move_on(store, embedder, extractor, own) > version
        assert retriever.query(QUESTIONS[0], write_record=False).graph_version > version
        (tmp_path / "bad.zip").write_text("not a backup")
        with pytest.raises(ServerError, match="nothing changed"):
            store_server.restore(own, tmp_path / "bad.zip")
        assert store.graph_version() > version  # the bad file changed nothing
        restored = CliRunner().invoke(app, ["db", "restore", str(tmp_path / "store.zip")])
        assert restored.exit_code == 0, restored.output
        assert _retry(store.graph_version) == version
        # the query process that saw the later graph catches up (its topology reloads)
        assert _answers(retriever) == before
        assert _answers(Retriever(store, embedder, own)) == before
    finally:
        get_settings.cache_clear()
        store.close()
        store_server.stop(own)


def _ingest_and_ask(store, embedder, extractor, own):
    """Ingest the fixture documents; the retriever, the top passages of each question and the
    graph version."""
    from pathweave_ingest.pipeline import Pipeline

    documents, errors = load_path(FIXTURES / "docs", own.ingest.max_file_bytes)
    Pipeline(store, embedder, extractor, own).ingest(documents, errors)
    retriever = Retriever(store, embedder, own)
    return retriever, _answers(retriever), store.graph_version()


def _move_on(store, embedder, extractor, own) -> int:
    """Ingest :data:`EXTRA` (unchanged when it is there already: the graph then stays past the
    backup); returns the graph version."""
    from pathweave_ingest.pipeline import Pipeline

    _retry(lambda: Pipeline(store, embedder, extractor, own).ingest([EXTRA]))
    return store.graph_version()


def _answers(retriever) -> dict[str, list[str]]:
    return {q: [h.passage_id for h in _retry(lambda q=q: retriever.query(q, write_record=False)).passages]
            for q in QUESTIONS}


def _retry(call, attempts: int = 5):
    """A client's first call after the database was replaced may meet the old one's closed
    session (a transient error); the next one works."""
    import time

    for attempt in range(attempts):
        try:
            return call()
        except Exception:  # noqa: BLE001
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)


@pytest.fixture(scope="module")
def dumped(settings, embedder, extractor, tmp_path_factory):
    """A managed Neo4j of its own (tenant ``backup``) with the fixture documents ingested and
    dumped by ``db backup``: ``(own settings, store, retriever, top passages, graph version,
    dump)``; stopped after the module's tests. The tests need no order: each moves the graph
    on past the dump (the same document: once moved, it stays moved)."""
    from pathweave.runtime import open_store

    tmp_path = tmp_path_factory.mktemp("neo4j-backup")
    own = settings.model_copy(update={"data_dir": tmp_path / "data", "tenant": "backup"})
    assert own.store.backend == "neo4j"
    store = open_store(own)
    try:
        retriever, before, version = _ingest_and_ask(store, embedder, extractor, own)
        dump = store_server.backup(own, tmp_path / "store.dump")
        yield own, store, retriever, before, version, dump
    finally:
        store.close()
        store_server.stop(own)


@pytest.mark.neo4j_only
def test_a_neo4j_dump_is_taken_and_a_file_that_is_no_dump_changes_nothing(dumped, embedder, extractor, tmp_path):
    """``db backup`` on the managed Neo4j: ``neo4j-admin database dump`` with the server stopped
    meanwhile (Community has no online backup) and started again where its clients point; it
    never overwrites a file. A file that is no dump is refused with the server running on, and
    a damaged dump (checked by loading it as a scratch database while the server serves) is
    refused with no downtime and changes nothing."""
    own, store, retriever, _, version, dump = dumped
    assert dump.stat().st_size > 0 and store_server.status(own) is not None  # running again
    with pytest.raises(ValueError, match="never overwrite"):
        store_server.backup(own, dump)
    moved = _move_on(store, embedder, extractor, own)
    assert moved > version
    (tmp_path / "bad.dump").write_text("not a dump")
    (tmp_path / "cut.dump").write_bytes(dump.read_bytes()[:4096])  # a dump's start, the rest lost
    running = store_server.status(own)
    for refused in ("bad.dump", "cut.dump"):
        with pytest.raises(ServerError, match="nothing changed"):
            store_server.restore(own, tmp_path / refused)
        assert store_server.status(own).pid == running.pid  # refused while the server ran on
    assert _retry(store.graph_version) == moved  # neither file changed anything (nor restored the dump)
    assert retriever.query(QUESTIONS[0], write_record=False).graph_version == moved


@pytest.mark.neo4j_only
def test_a_neo4j_dump_restores_the_same_answers(dumped, embedder, extractor):
    """``db restore`` of a dump after the graph moved on: ``neo4j-admin database load`` with the
    server stopped meanwhile; the restored store answers as before, and a query process that
    saw the later graph (its bookmarks ahead of the restored database) catches up."""
    own, store, retriever, before, version, dump = dumped
    assert _move_on(store, embedder, extractor, own) > version
    assert retriever.query(QUESTIONS[0], write_record=False).graph_version > version
    store_server.restore(own, dump)
    assert _retry(store.graph_version) == version
    assert _answers(retriever) == before
