"""The one token bucket behind the request rate limit and the failed-authentication
throttle (pure logic: time is monotonic seconds)."""

from __future__ import annotations

import time

from pathweave_api.limits import AuthThrottle, RateLimiter, TokenBuckets


def test_a_bucket_gives_its_burst_then_waits_for_the_refill():
    limiter = RateLimiter()
    assert [limiter.acquire("k", rate=2.0, burst=3) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.acquire("k", rate=2.0, burst=3)
    assert 0.4 < wait <= 0.5  # half a second per token at 2/s
    assert limiter.acquire("other", rate=2.0, burst=3) == 0.0  # buckets are per key
    assert limiter.acquire("k", rate=0.0, burst=3) == 0.0  # rate 0: unlimited
    time.sleep(wait + 0.05)
    assert limiter.acquire("k", rate=2.0, burst=3) == 0.0


def test_spent_tokens_do_not_go_below_zero_and_wait_takes_nothing():
    buckets = TokenBuckets()
    for _ in range(5):
        buckets.spend("a", capacity=2.0, rate=1.0)
    assert 0.9 < buckets.wait("a", 2.0, 1.0) <= 1.0  # at 0 tokens, not -3
    assert 0.9 < buckets.wait("a", 2.0, 1.0) <= 1.0


def test_full_buckets_are_forgotten_beyond_max_entries():
    buckets = TokenBuckets(max_entries=2)
    buckets.spend("a", 1.0, 1000.0)  # refills within a millisecond
    buckets.spend("b", 1.0, 0.001)
    time.sleep(0.01)
    buckets.spend("c", 1.0, 0.001)
    assert set(buckets._buckets) == {"b", "c"}


def test_failed_attempts_throttle_the_key_and_the_address():
    throttle = AuthThrottle(per_key=2, per_address=3, window_s=60.0, kdf_slots=1)
    for _ in range(2):
        throttle.failed("key1", "10.0.0.1")
    assert throttle.wait("key1", "10.0.0.9") > 0  # the key's two failures are spent
    assert throttle.wait("key2", "10.0.0.1") == 0.0  # one failure left for the address
    throttle.failed("key2", "10.0.0.1")
    assert 19.0 < throttle.wait(None, "10.0.0.1") <= 20.0  # 3 per 60 s: one every 20 s
