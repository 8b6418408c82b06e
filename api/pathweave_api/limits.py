"""Request body size limit (ASGI middleware), the per-key rate limit and the
failed-authentication throttle (counted in Redis when replicas share it)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable

from pathweave_api.problems import PROBLEM_MEDIA_TYPE, ApiProblem

log = logging.getLogger("pathweave_api")


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


class Counters:
    """Moving-window counters (the ``limits`` library) in one storage: a Redis URL, shared by
    every API replica, so N replicas give one limit and not N; or ``memory://``, this
    process's own. While a shared storage cannot be reached (each call waits at most
    ``timeout_s`` for it), this process counts on its own in memory, logged at most once a
    minute: limits hold per replica meanwhile, and the API keeps answering.

    Names are prefixed ``pathweave:``. Thread-safe (the library's storages are). Raises
    ValueError (the URL's password masked) for a URL the library cannot use."""

    def __init__(self, url: str = "memory://", timeout_s: float = 0.25) -> None:
        from limits.storage import MemoryStorage, storage_from_string
        from limits.strategies import MovingWindowRateLimiter

        from pathweave.settings import masked_url

        self.url = masked_url(url)
        options = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s} \
            if url.startswith(("redis://", "rediss://", "redis+unix://")) else {}
        try:
            storage = storage_from_string(url, **options)
        except Exception as exc:  # noqa: BLE001 - the library's message holds the URL, password and all
            raise ValueError(f"rate-limit storage {self.url} cannot be used: {type(exc).__name__}") from None
        self._shared = MovingWindowRateLimiter(storage)
        self._local = MovingWindowRateLimiter(MemoryStorage())
        self._warned = 0.0

    @staticmethod
    def item(amount: float, seconds: float):
        """``amount`` hits per ``seconds`` (both rounded to whole numbers, at least 1)."""
        from limits import RateLimitItemPerSecond

        return RateLimitItemPerSecond(max(1, round(amount)), max(1, round(seconds)))

    def _count(self, fn):
        """``fn(limiter)`` on the shared storage, or on this process's own while it is away."""
        try:
            return fn(self._shared)
        except Exception as exc:  # noqa: BLE001 - the storage is away: count here meanwhile
            if time.monotonic() - self._warned > 60:
                self._warned = time.monotonic()
                log.warning("rate-limit storage %s unreachable (%s); counting in this process meanwhile",
                            self.url, type(exc).__name__)
            return fn(self._local)

    @staticmethod
    def _wait(limiter, item, name: str) -> float:
        return max(0.01, limiter.get_window_stats(item, "pathweave", name).reset_time - time.time())

    def wait(self, item, name: str) -> float:
        """Seconds until ``name`` may be hit again under ``item`` (0: now); nothing counted."""
        return self._count(lambda limiter: 0.0 if limiter.test(item, "pathweave", name)
                           else self._wait(limiter, item, name))

    def hit(self, item, name: str) -> float:
        """Count one hit of ``name``: 0 when it fit under ``item``, else the seconds until one
        fits (nothing counted then)."""
        return self._count(lambda limiter: 0.0 if limiter.hit(item, "pathweave", name)
                           else self._wait(limiter, item, name))


class RateLimiter:
    """Requests per key: at most ``burst`` requests in any window of ``burst / rate``
    seconds, counted in :class:`Counters`. The window is a whole number of seconds (at least
    1) and the count is raised to ``rate`` times it when that is more than ``burst``: rate 5
    with burst 1 allows 5 requests in any second."""

    def __init__(self, counters: Counters | None = None) -> None:
        self.counters = counters or Counters()

    def acquire(self, key: str, rate: float, burst: int) -> float:
        """0 when the request may proceed, else seconds until it may (rate 0 = unlimited)."""
        if rate <= 0:
            return 0.0
        window = max(1, round(burst / rate))
        return self.counters.hit(Counters.item(max(burst, rate * window), window), f"rate:{key}")


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


def too_many(detail: str, kind: str, wait: float) -> ApiProblem:
    """429 whose detail names the same whole seconds as its ``Retry-After``."""
    seconds = retry_after_header(wait)
    return ApiProblem(429, f"{detail}; retry in {seconds} s", kind, {"Retry-After": seconds})


class AuthThrottle:
    """Failed authentication, throttled per key id and per client address, and a bound on
    concurrent KDF (argon2) runs. Thread-safe.

    Each key id may fail ``per_key`` times and each client address ``per_address`` times
    in any ``window_s`` seconds (counted in :class:`Counters`, shared by every replica when
    they are in Redis): beyond that, attempts with that key id (not yet verified in this
    process) or from that address are refused with 429 before any KDF runs, until the
    oldest failure leaves the window. The address is the client's as the trusted proxies
    report it (``api.trusted_proxies``), so clients behind one proxy do not share one count.
    ``kdf_slots`` bounds how many secrets are verified at the same time in this process
    (each argon2 run holds its memory cost, 64 MiB by default); a verification that finds
    no free slot within ``kdf_wait_s`` is refused with 429 too.
    """

    def __init__(self, per_key: int, per_address: int, window_s: float, kdf_slots: int,
                 kdf_wait_s: float = 2.0, counters: Counters | None = None) -> None:
        self.per_key = per_key
        self.per_address = per_address
        self.window_s = window_s
        self.kdf_wait_s = kdf_wait_s
        self.counters = counters or Counters()
        self._kdf = threading.BoundedSemaphore(kdf_slots)

    def _limits(self, key_id: str | None, address: str | None) -> list[tuple[object, str]]:
        """``(item, name)`` of the counts an attempt falls under."""
        named = [(f"fail-key:{key_id}", self.per_key) if key_id else None,
                 (f"fail-addr:{address}", self.per_address) if address else None]
        return [(Counters.item(allowed, self.window_s), name) for name, allowed in filter(None, named)
                if allowed > 0]

    def wait(self, key_id: str | None, address: str | None) -> float:
        """Seconds until an attempt by ``key_id`` from ``address`` may be checked (0: now)."""
        return max((self.counters.wait(item, name) for item, name in self._limits(key_id, address)), default=0.0)

    def failed(self, key_id: str | None, address: str | None) -> None:
        """Count one failed attempt against ``key_id`` (when the id exists) and ``address``."""
        for item, name in self._limits(key_id, address):
            self.counters.hit(item, name)

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

