"""Per-stage timings of one query (``result.timings_ms``), each stage also a span when the
query is traced (:func:`pathweave.telemetry.stage_span`)."""

from __future__ import annotations

import time

from pathweave.telemetry import stage_span


class Stopwatch:
    """Milliseconds per stage of one query: ``watch("stage")`` records the time since the
    previous stage (or since the watch was made) under ``timings["stage"]``, and the stage
    as a span named after it."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._last = time.perf_counter()
        self._last_ns = time.time_ns()

    def __call__(self, stage: str) -> None:
        now, now_ns = time.perf_counter(), time.time_ns()
        self.timings[stage] = round((now - self._last) * 1000, 2)
        stage_span(stage, self._last_ns, now_ns)
        self._last, self._last_ns = now, now_ns
