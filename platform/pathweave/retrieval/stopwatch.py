"""Per-stage timings of one query (``result.timings_ms``)."""

from __future__ import annotations

import time


class Stopwatch:
    """Milliseconds per stage of one query: ``watch("stage")`` records the time since the
    previous stage (or since the watch was made) under ``timings["stage"]``."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._last = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self._last) * 1000, 2)
        self._last = now
