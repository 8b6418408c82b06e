"""Request body size limit (ASGI middleware) and the per-key rate limiter."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable

from pathweave_api.problems import PROBLEM_MEDIA_TYPE, ApiProblem


class BodyLimitMiddleware:
    """Reject bodies over the limit with 413 before the application sees them.

    ``limit_for(method, path)`` gives the limit in bytes. The declared
    ``Content-Length`` is checked first; a chunked body is read up to the limit
    and replayed to the application.
    """

    def __init__(self, app, limit_for: Callable[[str, str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["method"], scope["path"])
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _reject(send, scope, 400, "invalid Content-Length header", "bad-request")
                return
            if size > limit:
                await _reject(send, scope, 413, f"request body of {size} bytes exceeds the limit of {limit} bytes",
                              "body-too-large")
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > limit:
                await _reject(send, scope, 413, f"request body exceeds the limit of {limit} bytes", "body-too-large")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        payload = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": payload, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _reject(send, scope, status: int, detail: str, kind: str) -> None:
    from http import HTTPStatus

    body = json.dumps({"type": f"urn:pathweave:problem:{kind}", "title": HTTPStatus(status).phrase,
                       "status": status, "detail": detail, "instance": scope.get("path")}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class TokenBuckets:
    """Token buckets by name, each with its ``capacity`` (tokens) and ``rate`` (tokens/s
    refilled); a bucket not yet seen is full. Thread-safe. At most ``max_entries`` buckets
    are kept: beyond that, the full ones are forgotten (a full bucket is the default)."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._buckets: dict[str, tuple[float, float, float, float]] = {}  # name -> (tokens, at, capacity, rate)
        self._lock = threading.Lock()

    def _level(self, name: str, capacity: float, rate: float, now: float) -> float:
        tokens, at, _, _ = self._buckets.get(name, (capacity, now, capacity, rate))
        return min(capacity, tokens + (now - at) * rate)

    def wait(self, name: str, capacity: float, rate: float) -> float:
        """Seconds until bucket ``name`` holds a whole token (0: it does now)."""
        with self._lock:
            level = self._level(name, capacity, rate, time.monotonic())
        return 0.0 if level >= 1.0 else (1.0 - level) / rate

    def take(self, name: str, capacity: float, rate: float) -> float:
        """Take one token: 0 when there was one, else the seconds until there is one
        (nothing taken)."""
        now = time.monotonic()
        with self._lock:
            level = self._level(name, capacity, rate, now)
            taken = level >= 1.0
            self._store(name, level - 1.0 if taken else level, now, capacity, rate)
        return 0.0 if taken else (1.0 - level) / rate

    def spend(self, name: str, capacity: float, rate: float) -> None:
        """Spend one token whether or not there is one (the bucket stays at 0 at least)."""
        now = time.monotonic()
        with self._lock:
            self._store(name, max(0.0, self._level(name, capacity, rate, now) - 1.0), now, capacity, rate)

    def _store(self, name: str, tokens: float, now: float, capacity: float, rate: float) -> None:
        if len(self._buckets) >= self.max_entries and name not in self._buckets:
            self._buckets = {n: entry for n, entry in self._buckets.items()
                             if self._level(n, entry[2], entry[3], now) < entry[2]}
        self._buckets[name] = (tokens, now, capacity, rate)


class RateLimiter:
    """Requests per key: a token bucket of ``burst`` requests refilled at ``rate`` per s.
    Thread-safe."""

    def __init__(self) -> None:
        self._buckets = TokenBuckets()

    def acquire(self, key: str, rate: float, burst: int) -> float:
        """0 when the request may proceed, else seconds until it may (rate 0 = unlimited)."""
        if rate <= 0:
            return 0.0
        return self._buckets.take(key, float(burst), rate)


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


def too_many(detail: str, kind: str, wait: float) -> ApiProblem:
    """429 whose detail names the same whole seconds as its ``Retry-After``."""
    seconds = retry_after_header(wait)
    return ApiProblem(429, f"{detail}; retry in {seconds} s", kind, {"Retry-After": seconds})


class AuthThrottle:
    """Failed authentication, throttled per key id and per client address, and a bound on
    concurrent KDF (argon2) runs. Thread-safe.

    Each key id and each client address has a bucket of ``burst`` failures refilled at
    ``burst / window_s`` per second: once a bucket is empty, attempts with that key id (not
    yet verified in this process) or from that address are refused with 429 before any KDF
    runs, until a failure's worth has refilled. ``kdf_slots`` bounds how many secrets are
    verified at the same time (each argon2 run holds its memory cost, 64 MiB by default);
    a verification that finds no free slot within ``kdf_wait_s`` is refused with 429 too.
    """

    def __init__(self, per_key: int, per_address: int, window_s: float, kdf_slots: int,
                 kdf_wait_s: float = 2.0, max_entries: int = 100_000) -> None:
        self.per_key = per_key
        self.per_address = per_address
        self.window_s = window_s
        self.kdf_wait_s = kdf_wait_s
        self._failures = TokenBuckets(max_entries)  # "k:<id>" / "a:<addr>" -> failures left
        self._kdf = threading.BoundedSemaphore(kdf_slots)

    def _buckets(self, key_id: str | None, address: str | None) -> list[tuple[str, float, float]]:
        """``(name, capacity, rate)`` of the buckets an attempt counts against."""
        named = [(f"k:{key_id}", self.per_key) if key_id else None,
                 (f"a:{address}", self.per_address) if address else None]
        return [(name, float(capacity), capacity / self.window_s) for name, capacity in filter(None, named)
                if capacity > 0]

    def wait(self, key_id: str | None, address: str | None) -> float:
        """Seconds until an attempt by ``key_id`` from ``address`` may be checked (0: now)."""
        return max((self._failures.wait(*bucket) for bucket in self._buckets(key_id, address)), default=0.0)

    def failed(self, key_id: str | None, address: str | None) -> None:
        """Count one failed attempt against ``key_id`` (when the id exists) and ``address``."""
        for bucket in self._buckets(key_id, address):
            self._failures.spend(*bucket)

    def kdf_slot(self) -> "_Slot":
        """A context manager holding one KDF slot; raises :class:`KdfBusy` when none frees up."""
        return _Slot(self._kdf, self.kdf_wait_s)


class KdfBusy(RuntimeError):
    """Every KDF slot stayed busy: too many secrets are being verified at once."""


class _Slot:
    def __init__(self, semaphore: threading.BoundedSemaphore, wait_s: float) -> None:
        self.semaphore = semaphore
        self.wait_s = wait_s

    def __enter__(self) -> None:
        if not self.semaphore.acquire(timeout=self.wait_s):
            raise KdfBusy("too many API keys are being verified at once")

    def __exit__(self, *exc) -> None:
        self.semaphore.release()
