"""The history checker (shorter than ``pathweave bench history``): concurrent PUTs and
DELETEs of a few external ids through the real API, Celery worker, Redis and store, a worker
SIGKILLed mid-replacement, the store SIGKILLed, the API SIGKILLed between an accepting commit
and its publish, and Redis SIGKILLed and started without its files; the recorded history has
no lost update, no version left queued or running, no missing window, no going back, and
the graph equals a clean replay of the final versions."""

from __future__ import annotations

import pytest

import json

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def test_the_history_of_concurrent_versions_under_kills_checks_out(settings, base_store, tmp_path):
    from pathweave_bench.history import run_history

    results = run_history(tmp_path / "out", writes=40, ids=3, writers=2, worker_kills=1, store_kills=1,
                          backend=settings.store.backend, think_s=0.6, workdir=tmp_path / "service",
                          api_kills=1, redis_losses=1,  # the sweep: every 5 s, for versions queued 3 s
                          service_settings={"PATHWEAVE_WORKER_LEASE_S": "5", "PATHWEAVE_WORKER_REQUEUE_AFTER_S": "3"})
    check = results["check"]
    assert check["writes"] >= 30 and check["reads"] > 50, check
    assert [f["fault"] for f in results["faults"]] == ["worker", "store", "api", "redis-lost"], results["faults"]
    api_kill = results["faults"][2]
    assert api_kill["exit"] == -9 and api_kill["restarted"] != api_kill["killed"], api_kill
    assert results["left_in_flight"] == [], results["left_in_flight"]
    assert [(d["doc_id"], d["visible"]) for d in results["outbox"]] == [(api_kill["doc_id"], "O0000")], results["outbox"]
    assert results["ok"], json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=1)[:6000]


def test_the_checker_finds_a_missing_window_a_going_back_and_a_lost_update():
    """Pure logic: a hand-made history with each violation is flagged."""
    from pathweave_bench.history import Event, History, check

    history = History()
    history.events = [
        Event("put", 0.0, 0.1, id="a", marker="m1", version=1, job_id="j1", done_t=1.0, outcome="done"),
        Event("put", 2.0, 2.1, id="a", marker="m2", version=2, job_id="j2", done_t=3.0, outcome="done"),
        Event("get", 1.5, 1.6, id="a", found={"a": None}),  # m1 completed at 1.0: missing
        Event("get", 3.5, 3.6, id="a", found={"a": "m2"}),
        Event("query", 4.0, 4.1, found={"a": "m1"}),  # after m2: going back (and not a GET: not stale)
    ]
    out = check(history, final={"a": "m1"})  # the last accepted write is m2: lost
    assert (out["missing_n"], out["going_back_n"], out["lost_updates_n"], out["stale_n"]) == (1, 1, 1, 0)
    assert not out["ok"]
    # a read concurrent with a DELETE may find the document gone; a GET after a newer write
    # completed must not show the older one
    history.events = [
        Event("put", 0.0, 0.1, id="a", marker="m1", version=1, job_id="j1", done_t=1.0, outcome="done"),
        Event("delete", 2.0, 2.5, id="a", version=2),
        Event("get", 2.2, 2.3, id="a", found={"a": None}),
        Event("put", 3.0, 3.1, id="a", marker="m3", version=3, job_id="j3", done_t=4.0, outcome="done"),
        Event("get", 4.5, 4.6, id="a", found={"a": "m1"}),
    ]
    out = check(history, final={"a": "m3"})
    assert (out["missing_n"], out["stale_n"], out["going_back_n"], out["lost_updates_n"]) == (0, 1, 0, 0)
    clean = check(History(), final={})
    assert clean["ok"]
    # a PUT whose answer was lost (the API killed at its publish) may have been accepted: the final
    # state may show it when it was sent after the last acknowledged write, not when before
    history.events = [
        Event("put", 0.0, 0.1, id="a", marker="m1", version=1, job_id="j1", done_t=1.0, outcome="done"),
        Event("put", 2.0, 2.4, id="a", marker="m2", status=0),
        Event("get", 5.0, 5.1, id="a", found={"a": "m2"}),
    ]
    out = check(history, final={"a": "m2"})
    assert out["ok"] and (out["unsure_writes"], out["unsure_reads"]) == (1, 1), out
    history.events.insert(2, Event("put", 3.0, 3.1, id="a", marker="m3", version=3, job_id="j3", done_t=4.0,
                                   outcome="done"))
    assert check(history, final={"a": "m2"})["lost_updates_n"] == 1  # m3 was acknowledged after m2 was sent


def test_the_fault_plan_takes_each_kind_in_turn():
    from pathweave_bench.history import fault_plan

    assert fault_plan(3, 1, 2, 1) == ["worker", "store", "api", "redis-lost", "worker", "api", "worker"]
    assert fault_plan(0, 0) == []
