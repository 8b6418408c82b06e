"""``pathweave bench soak`` (issue 35): the pure bookkeeping around the real run — the fault
schedule, what counts as a bad 5xx, RSS growth at equal worker age, tracebacks dated by the
logs' sizes and attributed to the fault before them — and, on the real service, a short soak
on a small corpus of this test's own: API, Celery worker, Redis and the managed store under
load with a worker kill, a store kill and a Redis restart."""

from __future__ import annotations

import json
import shutil

import pytest

from pathweave_bench.soak import (Journal, client_kinds, fault_schedule, request_summary, rss_growth, run_soak,
                                  tracebacks)


def test_fault_schedule_spreads_the_faults_over_the_run():
    schedule = fault_schedule(30, 5, llm=True)
    assert [t for t, f in schedule if f == "worker"] == [300, 600, 900, 1200, 1500]
    assert dict((f, t) for t, f in schedule if f != "worker") == {"store": 720, "redis": 1080, "llm": 1350}
    assert schedule == sorted(schedule)
    assert "llm" not in {f for _, f in fault_schedule(30, 5, llm=False)}
    assert {f for _, f in fault_schedule(30, 0, llm=False)} == {"store", "redis"}
    assert len(client_kinds(False)) == len(client_kinds(True)) == 8
    assert {"proprag_answer", "prunerag"} <= set(client_kinds(True))


def test_only_a_503_with_retry_after_is_an_allowed_5xx():
    requests = [{"t": 1, "kind": "proprag", "status": 200, "ms": 5, "retry_after": False},
                {"t": 2, "kind": "proprag", "status": 503, "ms": 5, "retry_after": True},
                {"t": 3, "kind": "dense", "status": 503, "ms": 5, "retry_after": False},
                {"t": 4, "kind": "dense", "status": 500, "ms": 5, "retry_after": False},
                {"t": 5, "kind": "dense", "status": 0, "ms": 5, "retry_after": False}]
    summary = request_summary(requests)
    assert summary["bad_5xx"] == 2 and summary["no_response"] == 1
    assert summary["by_kind"]["proprag"] == {"200": 1, "503": 1}


def test_rss_growth_compares_the_worker_at_equal_age():
    samples = [{"t": t, "api": 800 + t / 60, "worker": 1000 + (t % 300)} for t in range(0, 1800, 30)]
    faults = [{"t": t, "fault": "worker"} for t in (300, 600, 900, 1200, 1500)]
    growth = rss_growth(samples, faults)
    assert growth["worker"]["growth_pct"] == 0.0  # every life peaks alike: no growth across restarts
    assert 0 < growth["api"]["growth_pct"] < 3


def test_tracebacks_are_dated_by_log_size_and_attributed_to_the_fault_before(tmp_path):
    log = tmp_path / "api.log"
    first = "Traceback (most recent call last):\n  File \"x\", line 1\nneo4j.exceptions.ServiceUnavailable: gone\n"
    second = "Traceback (most recent call last):\n  File \"y\", line 2\nKeyError: 'doc'\n"
    log.write_text("ok\n" + first + "ok\n" + second)
    journal = Journal()
    cut = len("ok\n" + first)
    journal.log_sizes["api"] = [(0.0, 3), (100.0, cut), (400.0, log.stat().st_size)]
    journal.faults = [{"t": 60.0, "fault": "store"}]
    found = tracebacks({"api": log, "worker": tmp_path / "none.log"}, journal)
    assert found["total"] == 2 and found["after_a_fault"] == 1 and found["unexplained"] == 1
    assert found["unexplained_first"][0]["exception"] == "KeyError: 'doc'"
    assert found["unexplained_first"][0]["t"] == 400.0


@pytest.mark.arcadedb_only
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server (tools/test.sh installs it)")
def test_a_short_soak_on_the_real_service_loses_nothing(tmp_path):
    data = tmp_path / "musique"
    data.mkdir()
    corpus = [{"title": f"Town {i}", "text": f"Town {i} lies on the river Ri{i % 7}. Its mayor is Person{i}. "
               f"Person{i} was born in Town {(i + 1) % 120}."} for i in range(120)]
    (data / "musique_train_corpus.json").write_text(json.dumps(corpus))
    (data / "musique_train.json").write_text(json.dumps([{"question": f"Which river does Town {i} lie on?"}
                                                         for i in range(20)]))
    # the short form (the full one: pathweave bench soak --minutes 30): 30 s of load, the store
    # killed at 12 s, the worker at 15 s, Redis at 18 s, while the history checker writes
    seed = 10  # documents ingested before the load
    results = run_soak(data, tmp_path / "no-distractors.json", tmp_path / "out", minutes=0.5, worker_kill_every=0.25,
                       think_s=0.5, ingest_every_s=2.0, ingest_batch=2, drain_minutes=5, history_writes=12, seed=seed)
    assert {f["fault"] for f in results["faults"]} == {"worker", "store", "redis"}
    assert all("error" not in f for f in results["faults"])
    assert results["requests"]["bad_5xx"] == 0, results["requests"]["bad_5xx_first"]
    assert results["requests"]["by_kind"]["proprag"].get("200", 0) > 0
    documents = results["documents"]
    assert documents["stuck"] == 0 and not documents["failed_reasons"], documents
    assert documents["by_state"].get("done", 0) >= seed + 5  # the seed, and documents of the load itself
    assert results["graph"]["same"], results["graph"]
    assert results["left_running"] == []
    history = results["history"]  # the checker beside the load, under the same faults
    assert history["check"]["writes"] >= 10 and history["check"]["reads"] > 20, history["check"]
    assert history["ok"], json.dumps({k: v for k, v in history.items() if k != "faults"}, indent=1)[:6000]
    assert (tmp_path / "out" / "soak.html").read_text().count("<svg") == 1
