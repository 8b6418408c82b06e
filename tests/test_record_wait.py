"""Reading a reasoning record waits for the record writer a bounded time (issue 42): a writer
that is behind makes flush(timeout) raise instead of blocking the reader for good."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def test_a_writer_that_is_behind_bounds_the_wait(monkeypatch):
    from pathweave.records import reasoning as reasoning_records
    from pathweave.records.reasoning import RecordsBehind, RecordWriter

    release = threading.Event()
    written = []
    monkeypatch.setattr(reasoning_records, "write_reasoning_record",
                        lambda store, result: (release.wait(30), written.append(result)))
    writer = RecordWriter(store=None)
    writer.submit("record-1")
    started = time.monotonic()
    with pytest.raises(RecordsBehind, match="1 reasoning record"):
        writer.flush(0.3)
    assert 0.25 < time.monotonic() - started < 5
    release.set()
    writer.flush(10)  # caught up: returns
    assert written == ["record-1"]
    writer.flush(0.01)  # nothing pending: returns at once
