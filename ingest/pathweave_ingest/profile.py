"""Where an ingestion's time goes: busy seconds per stage, and what was embedded.

The pipeline runs three threads at once (extraction of the next group, embedding of this
one, the writes of the previous one), so a stage's seconds are the time a thread spent in
it, summed over threads: the stages add up to more than the wall time when they overlap.

Stages, in pipeline order (:data:`STAGES`): ``chunk`` (documents cut into passages with the
embedder's tokenizer), ``extract`` (spaCy's ``nlp.pipe``, or the LLM), ``lookup`` (store reads:
which nodes of a group exist already, so only new texts are embedded), ``embed`` (forward
passes of the embedder), ``apr_runs`` (APR fact-run segmentation, spec §3, without its
embedding), ``write`` (the group's UNWIND statements, one transaction), ``apr_codes`` (codebook
codes and run rows, in the same transaction), ``synonymy`` (kNN synonymy edges), ``aliases``
(alias consolidation, spec §3) and ``change`` (the graph-change record that query processes
follow).

With ``keep_texts`` the profile also keeps every list of texts sent to the embedder, in
order, so a benchmark can time the embedder alone on exactly that work
(:func:`embed_only_seconds`): the floor ingestion is measured against.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from pathweave.telemetry import stage_span

STAGES = ("chunk", "extract", "lookup", "embed", "apr_runs", "write", "apr_codes", "synonymy", "aliases", "change")


@dataclass
class IngestProfile:
    """Busy seconds per stage (:data:`STAGES`), texts embedded, and (``keep_texts``) the
    embedder's calls. Thread-safe."""

    keep_texts: bool = False
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    texts_embedded: int = 0
    calls: list[list[str]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` (just ended) to ``stage``, and record them as a span ``stage`` of a
        traced batch (:func:`pathweave.telemetry.stage_span`). Raises KeyError for a stage
        not in :data:`STAGES`."""
        with self._lock:
            self.seconds[stage] = self.seconds[stage] + max(0.0, seconds)
        ended = time.time_ns()
        stage_span(stage, ended - int(max(0.0, seconds) * 1e9), ended)

    @contextmanager
    def stage(self, stage: str) -> Iterator[None]:
        """Time the block as ``stage``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started)

    def encoder(self, encode: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
        """``encode`` timed as ``embed``, its texts counted (and kept with ``keep_texts``)."""
        def timed(texts: list[str]) -> np.ndarray:
            with self.stage("embed"):
                vectors = encode(texts)
            with self._lock:
                self.texts_embedded += len(texts)
                if self.keep_texts and texts:
                    self.calls.append(list(texts))
            return vectors
        return timed

    def merge(self, other: IngestProfile) -> None:
        """Add ``other``'s figures to these (e.g. the batches of one job)."""
        with self._lock:
            for stage, seconds in other.seconds.items():
                self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
            self.texts_embedded += other.texts_embedded
            self.calls.extend(other.calls)

    def as_dict(self) -> dict:
        """``{"stages_s": {stage: seconds}, "texts_embedded": n}`` (seconds rounded to ms)."""
        return {"stages_s": {stage: round(seconds, 3) for stage, seconds in self.seconds.items()},
                "texts_embedded": self.texts_embedded}


def embed_only_seconds(encode: Callable[[list[str]], np.ndarray], calls: Sequence[list[str]]) -> float:
    """Seconds ``encode`` takes for exactly ``calls`` (an :class:`IngestProfile`'s kept calls,
    in order, the same texts per call): the embedding floor of that ingestion."""
    started = time.perf_counter()
    for texts in calls:
        encode(texts)
    return time.perf_counter() - started


def tokens_of(tokenizer, calls: Sequence[list[str]], max_length: int = 256) -> int:
    """Tokens the embedder read for ``calls`` (each text cut at ``max_length``, the model's
    sequence limit, special tokens included)."""
    total = 0
    for texts in calls:
        if hasattr(tokenizer, "encode_batch"):  # tokenizers.Tokenizer (catalog embedders truncate themselves)
            total += sum(min(sum(e.attention_mask), max_length) for e in tokenizer.encode_batch(texts))  # not padding
            continue
        encoded = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
        total += sum(len(ids) for ids in encoded)
    return total
