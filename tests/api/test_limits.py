"""The rate limit and the failed-authentication throttle over the ``limits`` library's
moving windows: in memory (one process), and in a real Redis, where two API replicas share
one count; a Redis that cannot be reached counts nothing and refuses nothing."""

from __future__ import annotations

import time
import uuid

from pathweave_api.limits import AuthThrottle, Counters, RateLimiter


def test_a_key_gets_its_burst_then_waits_for_the_window():
    limiter = RateLimiter()
    assert [limiter.acquire("k", rate=2.0, burst=2) for _ in range(2)] == [0.0, 0.0]
    wait = limiter.acquire("k", rate=2.0, burst=2)  # 2 per 1 s
    assert 0.0 < wait <= 1.0
    assert limiter.acquire("other", rate=2.0, burst=2) == 0.0  # counts are per key
    assert limiter.acquire("k", rate=0.0, burst=2) == 0.0  # rate 0: unlimited
    time.sleep(wait + 0.05)
    assert limiter.acquire("k", rate=2.0, burst=2) == 0.0


def test_a_refused_request_is_not_counted():
    counters = Counters()
    item = Counters.item(1, 60)
    assert counters.hit(item, "a") == 0.0
    waits = [counters.hit(item, "a") for _ in range(5)]
    assert all(55.0 < wait <= 60.0 for wait in waits)  # still the first hit's window, not pushed back


def test_failed_attempts_throttle_the_key_and_the_address():
    throttle = AuthThrottle(per_key=2, per_address=3, window_s=60.0, kdf_slots=1)
    for _ in range(2):
        throttle.failed("key1", "10.0.0.1")
    assert throttle.wait("key1", "10.0.0.9") > 0  # the key's two failures are spent
    assert throttle.wait("key2", "10.0.0.1") == 0.0  # one failure left for the address
    throttle.failed("key2", "10.0.0.1")
    assert 55.0 < throttle.wait(None, "10.0.0.1") <= 60.0  # 3 in 60 s: until the oldest leaves the window
    assert throttle.wait(None, "10.0.0.2") == 0.0


def test_two_replicas_share_the_counts_in_redis(broker_url):
    """Each replica has its own Counters on one Redis: N requests spread over both trip the
    limit once, not once per replica."""
    first, second = Counters(broker_url), Counters(broker_url)
    key = uuid.uuid4().hex
    a, b = RateLimiter(first), RateLimiter(second)
    allowed = [limiter.acquire(key, rate=1.0, burst=4) == 0.0 for limiter in (a, b, a, b, a, b)]
    assert allowed == [True, True, True, True, False, False]
    throttle_a = AuthThrottle(per_key=3, per_address=0, window_s=60.0, kdf_slots=1, counters=first)
    throttle_b = AuthThrottle(per_key=3, per_address=0, window_s=60.0, kdf_slots=1, counters=second)
    for throttle in (throttle_a, throttle_b, throttle_a):
        assert throttle.wait(key, None) == 0.0
        throttle.failed(key, None)
    assert throttle_b.wait(key, None) > 0 and throttle_a.wait(key, None) > 0


def test_an_unreachable_storage_counts_in_the_process_meanwhile():
    """Redis away (nothing listens at its address): each replica counts on its own, without
    waiting on the storage longer than its timeout."""
    from pathweave.servers.processes import free_port

    counters = Counters(f"redis://:secret@127.0.0.1:{free_port()}/0")  # nothing listens there
    limiter = RateLimiter(counters)
    started = time.monotonic()
    assert [limiter.acquire("k", rate=1.0, burst=2) == 0.0 for _ in range(3)] == [True, True, False]
    assert time.monotonic() - started < 5.0
    throttle = AuthThrottle(1, 1, 60.0, 1, counters=counters)
    throttle.failed("k", "10.0.0.1")
    assert throttle.wait("k", None) > 0 and "secret" not in counters.url


def test_a_storage_url_it_cannot_use_is_refused_with_its_password_masked():
    import pytest

    with pytest.raises(ValueError) as refused:
        Counters("nosuchscheme://user:hunter2@host:1/0")
    assert "hunter2" not in str(refused.value) and "***" in str(refused.value)
