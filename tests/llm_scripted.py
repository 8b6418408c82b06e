"""A scripted chat client for the pure PruneRAG tree logic (no model): it replays
completions whose token log-probabilities the test sets (one token per character;
characters inside the JSON ``answer`` value get ``answer_logprob``, all others -5.0, so
a confidence over the whole output would be far from one over the answer value)."""

from __future__ import annotations

from pathweave.llm.client import Completion, LLMError, TokenLogprob
from pathweave.llm.confidence import last_json_object, value_span


def completion(text: str, answer_logprob: float = -0.01) -> Completion:
    span = None
    found = last_json_object(text)
    if found is not None:
        span = value_span(text, found[1], found[2], "answer")
    tokens = [TokenLogprob(ch, answer_logprob if span and span[0] <= i < span[1] else -5.0)
              for i, ch in enumerate(text)]
    return Completion(text=text, tokens=tokens, prompt_tokens=100, completion_tokens=len(text), latency_ms=1.0,
                      model="scripted")


class ScriptedClient:
    """Replies in order; an ``LLMError`` instance in the script is raised instead."""

    model = "scripted"

    def __init__(self, replies: list) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict]] = []

    def chat(self, messages, **kwargs) -> Completion:
        self.calls.append(messages)
        reply = self.replies.pop(0)
        if isinstance(reply, LLMError):
            raise reply
        return reply if isinstance(reply, Completion) else completion(reply)

    def chat_stream(self, messages, **kwargs) -> "ScriptedStream":
        """The next reply, streamed word by word (:class:`ScriptedStream`)."""
        return ScriptedStream(self.chat(messages, **kwargs))


class ScriptedStream:
    """A completion's text in pieces (its words, each with the space before it), then the
    completion itself as ``completion`` (None when closed before the end)."""

    def __init__(self, whole: Completion) -> None:
        self.whole, self.completion, self.closed = whole, None, False

    def __iter__(self):
        words = self.whole.text.split(" ")
        for i, word in enumerate(words):
            if self.closed:
                return
            yield word if i == 0 else " " + word
        self.completion = self.whole

    def close(self) -> None:
        self.closed = True


def two_level_tree() -> list:
    """Replies that build a PruneRAG tree of three levels for the Marie Curie question: the root's
    answer rejected (low confidence) and decomposed, one child answered, one asking for two
    entities, then the aggregated answer "the Vistula" (5 nodes)."""
    return [
        completion('{"type": "answer", "answer": "Paris"}', answer_logprob=-1.0),  # low confidence: retried
        '{"type": "decomposition", "subquery1": "Where was Marie Curie born?", '
        '"subquery2": "On which river is that city?"}',
        '{"type": "answer", "answer": "Warsaw"}',
        '{"type": "entity", "entity1": "Warsaw", "entity2": "river of Warsaw"}',
        '{"answer": "the Vistula"}',  # aggregation
    ]
