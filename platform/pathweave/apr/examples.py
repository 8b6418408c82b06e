"""Training examples for the APR selector policy: every action combination measured per query.

For each question (with its gold passages) an evaluator runs the APR selection with each of
the 27 combinations of ``include_all | unique | not_include`` over the channels facts,
questions and answers, and reports (accuracy, prompt tokens, latency ms); accuracy is the
context recall of the gold passages (EM of the LLM's answer when one answers). The
utility U and the preference pairs are computed from these at training time
(:mod:`pathweave.apr.policy`), so other utility weights need no new measurements.
Source: APR paper §2.8 ("offline, for each query we evaluate several selector
configurations y"); spec §3 "Selector policy (DPO)".

Examples are kept as JSONL, one line per question (:func:`read_examples`,
:func:`measure_examples` appends each question as soon as it is measured and skips the
questions already in the file, so a run can stop and resume and training can rerun without
measuring again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pathweave.apr.policy import CHANNELS, COMBINATIONS, combination, feature_vector, utility
from pathweave.settings import SelectorSettings


@dataclass(frozen=True)
class SelectorQuestion:
    """A training question: ``id`` (stable, e.g. the MuSiQue id), ``text``, ``gold`` (the
    document ids of its gold passages) and ``answers`` (gold answer + aliases, for EM)."""

    id: str
    text: str
    gold: frozenset[str]
    answers: tuple[str, ...] = ()


@dataclass
class Outcome:
    """One combination tried on one question: ``actions`` per channel, ``accuracy``
    (0..1), ``prompt_tokens`` (tokens of the prompt sent), ``latency_ms``."""

    actions: dict[str, str]
    accuracy: float
    prompt_tokens: int
    latency_ms: float


@dataclass
class SelectorExample:
    """A measured question: its query ``embedding`` ``(d,)``, ``query_tokens``,
    ``token_budget`` (tokens, 0 = none) and one :class:`Outcome` per combination, in
    :data:`pathweave.apr.policy.COMBINATIONS` order."""

    id: str
    question: str
    embedding: list[float]
    query_tokens: int
    token_budget: int
    outcomes: list[Outcome] = field(default_factory=list)

    def features(self) -> np.ndarray:
        """The policy's input ``(d + 2,)`` float32 (:func:`feature_vector`)."""
        return feature_vector(np.asarray(self.embedding, dtype=np.float32), self.query_tokens, self.token_budget)

    def utilities(self, settings: SelectorSettings) -> np.ndarray:
        """U of each combination ``(27,)`` under ``settings`` (alpha, beta_tokens, gamma)."""
        return np.array([utility(o.accuracy, o.prompt_tokens, o.latency_ms, settings) for o in self.outcomes])

    def best(self, settings: SelectorSettings) -> dict[str, str]:
        """The combination with the highest utility (the first of equals)."""
        return self.outcomes[int(np.argmax(self.utilities(settings)))].actions


Evaluator = Callable[[SelectorQuestion, dict[str, str]], tuple[float, int, float]]
"""``(question, {"facts": a, "questions": a, "answers": a}) -> (accuracy 0..1, prompt tokens,
latency ms)``."""


def context_recall(covered_docs: Iterable[str], gold: Iterable[str]) -> float:
    """Share (0..1) of the ``gold`` documents among ``covered_docs`` (the documents whose
    evidence is in the selected context). Raises ValueError when ``gold`` is empty."""
    gold = set(gold)
    if not gold:
        raise ValueError("a question needs at least one gold passage")
    return len(gold.intersection(covered_docs)) / len(gold)


def measure_example(question: SelectorQuestion, evaluator: Evaluator, embedding: np.ndarray, query_tokens: int,
                    token_budget: int = 0) -> SelectorExample:
    """Run ``evaluator`` on all 27 combinations of ``question`` -> a :class:`SelectorExample`.
    Raises ValueError when the evaluator returns an accuracy outside 0..1 or negative
    tokens/latency."""
    example = SelectorExample(question.id, question.text, [float(v) for v in np.asarray(embedding).ravel()],
                              int(query_tokens), int(token_budget))
    for combo in COMBINATIONS:
        actions = dict(zip(CHANNELS, combo))
        accuracy, tokens, latency = evaluator(question, dict(actions))
        if not 0.0 <= accuracy <= 1.0 or tokens < 0 or latency < 0:
            raise ValueError(f"evaluator returned accuracy {accuracy}, tokens {tokens}, latency {latency} "
                             f"for {question.id} {actions}")
        example.outcomes.append(Outcome(actions, float(accuracy), int(tokens), float(latency)))
    return example


def read_examples(path: str | Path) -> list[SelectorExample]:
    """The examples in a JSONL file (empty list when the file does not exist). Raises
    ValueError naming the line of a malformed record."""
    path = Path(path)
    if not path.exists():
        return []
    examples = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            outcomes = [Outcome(**o) for o in record.pop("outcomes")]
            if [combination(o.actions) for o in outcomes] != list(COMBINATIONS):
                raise ValueError("outcomes are not the 27 combinations in order")
            examples.append(SelectorExample(**record, outcomes=outcomes))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}:{number}: not a selector example: {exc}") from exc
    return examples


def append_example(path: str | Path, example: SelectorExample) -> None:
    """Append one example as a JSON line (the file and its folder are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(asdict(example)) + "\n")


def measure_examples(questions: list[SelectorQuestion], evaluator: Evaluator | None,
                     embed: Callable[[list[str]], np.ndarray] | None, count_tokens: Callable[[str], int] | None,
                     token_budget: int = 0, path: str | Path | None = None,
                     progress: Callable[[SelectorQuestion], None] | None = None,
                     prepare: Callable[[SelectorQuestion], None] | None = None) -> list[SelectorExample]:
    """Examples for ``questions``, in their order: those already in the JSONL ``path`` are
    read back (by id), the others measured (:func:`measure_example`) and appended to
    ``path`` one by one. ``embed(texts) -> (n, d)`` float32 L2-normalized (the configured
    embedder), ``count_tokens(text) -> tokens`` (the configured tokenizer); ``evaluator``, ``embed``
    and ``count_tokens`` are only called for questions not in ``path`` (None will do when all are there).
    ``prepare(question)`` runs before a question is measured (e.g. asks its earlier
    questions), ``progress(question)`` after each question."""
    known = {example.id: example for example in read_examples(path)} if path else {}
    missing = [q for q in questions if q.id not in known]
    vectors = dict(zip((q.id for q in missing), embed([q.text for q in missing]))) if missing else {}
    examples = []
    for question in questions:
        example = known.get(question.id)
        if example is None:
            if prepare:
                prepare(question)
            example = measure_example(question, evaluator, vectors[question.id], count_tokens(question.text),
                                      token_budget)
            if path:
                append_example(path, example)
        examples.append(example)
        if progress:
            progress(question)
    return examples


def training_arrays(examples: list[SelectorExample], settings: SelectorSettings) -> tuple[np.ndarray, np.ndarray]:
    """``(features (n, d + 2) float32, utilities (n, 27))`` of ``examples`` for
    :func:`pathweave.apr.policy.train_policy`. Raises ValueError when there are none."""
    if not examples:
        raise ValueError("no selector examples to train on")
    return (np.stack([e.features() for e in examples]), np.stack([e.utilities(settings) for e in examples]))
