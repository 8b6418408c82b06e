"""Request body size limit (ASGI middleware) and the per-key rate limiter."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable

from pathweave_api.problems import PROBLEM_MEDIA_TYPE


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
