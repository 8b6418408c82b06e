"""Run segmentation (APR, spec §3 "Run segmentation"; paper §2.3 "Chunked small graphs").

A passage's triples, in text order, are cut into runs: locally coherent edge sequences that
are APR's retrieval atoms. One streaming pass keeps the running centroid of the current run
(the mean of its triples' "h r t" line embeddings); a triple joins the run when its fit
``max(0, cos(centroid, triple)) (+ chain bonus when the previous triple's tail is this
triple's head, case-insensitive)`` is at least ``tau``, else it starts a new run. Boundary
refinement then re-segments each boundary region (the last run of the left group + the first
run of the right group) and merges the two when the result is a single run or its first
cut is not at the old boundary. Duplicate runs (the same triple sequence) are dropped; the
order of the triples is the text order (the reference iterates a set; spec: don't).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Triple = tuple[str, str, str]


def line(triple: Triple) -> str:
    """The sentence a triple is embedded as: ``"h r t"`` (spec §3)."""
    return " ".join(part.strip() for part in triple)


def _single_pass(order: Sequence[int], triples: Sequence[Triple], vectors: np.ndarray, tau: float,
                 bonus: float) -> list[list[int]]:
    """One streaming pass over the triples ``order`` (indices into ``triples``/``vectors``)."""
    runs: list[list[int]] = []
    current: list[int] = []
    total = np.zeros(vectors.shape[1], dtype=np.float64)
    previous: int | None = None
    for i in order:
        if current:
            norm = float(np.linalg.norm(total))
            sim = max(0.0, float(total @ vectors[i]) / norm) if norm > 0 else 0.0
            if previous is not None and triples[previous][2].strip().lower() == triples[i][0].strip().lower():
                sim += bonus
            if sim < tau:
                runs.append(current)
                current, total = [], np.zeros_like(total)
        current.append(i)
        total += vectors[i]
        previous = i
    if current:
        runs.append(current)
    return runs


def segment(triples: Sequence[Triple], vectors: np.ndarray, tau: float = 0.7, bonus: float = 0.05) -> list[list[int]]:
    """Cut ``triples`` (text order) into runs; returns the runs as lists of indices into
    ``triples``, in text order, duplicates (same triple sequence) dropped.

    ``vectors``: ``(n, d)`` float, the L2-normalized embeddings of the triples' lines
    (:func:`line`). ``tau``: the fit threshold (spec 0.7); ``bonus``: the chaining bonus
    (spec 0.05). Raises ValueError when ``vectors`` does not have one row per triple.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if len(triples) != vectors.shape[0]:
        raise ValueError(f"{len(triples)} triples but {vectors.shape[0]} vectors")
    if not triples:
        return []
    runs = _single_pass(range(len(triples)), triples, vectors, tau, bonus)
    refined = [runs[0]]
    for run in runs[1:]:
        left = refined[-1]
        again = _single_pass(left + run, triples, vectors, tau, bonus)
        if len(again) == 1 or len(again[0]) != len(left):
            refined[-1] = left + run  # not a true cut: merge
        else:
            refined.append(run)
    out: list[list[int]] = []
    seen: set[tuple[str, ...]] = set()
    for run in refined:
        key = tuple("\x1f".join(triples[i]).lower() for i in run)
        if key not in seen:
            seen.add(key)
            out.append(run)
    return out
