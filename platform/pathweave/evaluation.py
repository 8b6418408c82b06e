"""Retrieval and answer metrics (spec §6; gold rule from shared/bench/README.md).

Recall@k: fraction of a question's gold passages among the top k retrieved
(passages are compared by document: title + text), averaged over questions.
EM / token F1 use SQuAD normalization, max over answer + aliases. Two answer sources
read on the same questions are compared per question (:func:`paired_difference`).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np


def recall_at_k(retrieved_docs: list[str], gold_docs: set[str], k: int) -> float:
    """Share of ``gold_docs`` among the first ``k`` distinct retrieved documents (0..1)."""
    if not gold_docs:
        raise ValueError("a question needs at least one gold passage")
    top = list(dict.fromkeys(retrieved_docs))[:k]
    return len(gold_docs.intersection(top)) / len(gold_docs)


def percentile_ms(samples_ms: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of latencies in ms (linear interpolation)."""
    return float(np.percentile(np.asarray(samples_ms, dtype=np.float64), q)) if samples_ms else 0.0


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower-case, drop punctuation and articles, collapse spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: list[str]) -> float:
    """1.0 when the normalized prediction equals a normalized answer, else 0.0."""
    return float(any(normalize_answer(prediction) == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: list[str]) -> float:
    """Max token-level F1 (0..1) of the prediction against the answers."""
    best = 0.0
    pred = normalize_answer(prediction).split()
    for answer in answers:
        gold = normalize_answer(answer).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


@dataclass(frozen=True)
class PairedDifference:
    """Per-question difference of one score between two answer sources on the same questions.

    Attributes:
        mean: mean of ``a_i - b_i`` (score units, e.g. F1 0..1).
        se: its standard error, ``std(a - b, ddof=1) / sqrt(n)`` (0.0 for n < 2).
        better / worse: questions where ``a_i > b_i`` / ``a_i < b_i``.
        n: questions compared.
    """

    mean: float
    se: float
    better: int
    worse: int
    n: int

    def as_dict(self) -> dict:
        """The fields, mean and se rounded to 4 decimals (for a results JSON)."""
        return {**asdict(self), "mean": round(self.mean, 4), "se": round(self.se, 4)}


def paired_difference(a: list[float], b: list[float]) -> PairedDifference:
    """Paired comparison of per-question scores ``a`` and ``b`` (same questions, same order):
    on a few dozen questions a difference within about one ``se`` is a tie, not a result.

    Raises:
        ValueError: ``a`` and ``b`` differ in length or are empty.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"paired scores need two equally long, non-empty lists, got {len(a)} and {len(b)}")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
    return PairedDifference(mean=float(diff.mean()), se=se, better=int((diff > 0).sum()),
                            worse=int((diff < 0).sum()), n=len(diff))
