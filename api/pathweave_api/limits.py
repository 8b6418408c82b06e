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


class RateLimiter:
    """Token buckets per key: ``rate`` requests/s refill, ``burst`` capacity. Thread-safe."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str, rate: float, burst: int) -> float:
        """0 when the request may proceed, else seconds until it may (rate 0 = unlimited)."""
        if rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(burst), now))
            tokens = min(float(burst), tokens + (now - last) * rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / rate


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
        self.max_entries = max_entries
        self._failures: dict[str, tuple[float, float]] = {}  # "k:<id>" / "a:<addr>" -> (tokens, at)
        self._lock = threading.Lock()
        self._kdf = threading.BoundedSemaphore(kdf_slots)

    def _capacity(self, name: str) -> int:
        return self.per_key if name.startswith("k:") else self.per_address

    def _level(self, name: str, now: float) -> float:
        capacity = self._capacity(name)
        tokens, at = self._failures.get(name, (float(capacity), now))
        return min(float(capacity), tokens + (now - at) * capacity / self.window_s)

    def wait(self, key_id: str | None, address: str | None) -> float:
        """Seconds until an attempt by ``key_id`` from ``address`` may be checked (0: now)."""
        now = time.monotonic()
        names = [n for n in (f"k:{key_id}" if key_id else None, f"a:{address}" if address else None)
                 if n and self._capacity(n) > 0]
        with self._lock:
            waits = [(1.0 - level) * self.window_s / self._capacity(name)
                     for name in names if (level := self._level(name, now)) < 1.0]
        return max(waits, default=0.0)

    def failed(self, key_id: str | None, address: str | None) -> None:
        """Count one failed attempt against ``key_id`` (when the id exists) and ``address``."""
        now = time.monotonic()
        with self._lock:
            if len(self._failures) > self.max_entries:  # forget buckets that are full again
                self._failures = {n: v for n, v in self._failures.items()
                                  if self._level(n, now) < self._capacity(n)}
            for name in (f"k:{key_id}" if key_id else None, f"a:{address}" if address else None):
                if name and self._capacity(name) > 0:
                    self._failures[name] = (max(0.0, self._level(name, now) - 1.0), now)

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
