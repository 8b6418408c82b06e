"""JSON outputs and answer confidence from token log-probabilities (PruneRAG, spec §4).

The model's decision is the LAST JSON object in its output (text before it, code fences
around it are ignored). Its confidence is exp(mean log-prob) of the generated tokens that
cover the answer VALUE only, not the JSON keys, quotes or fences (PruneRAG eq. 4): the
logprobs are the unconstrained distribution, and the structural tokens a JSON grammar
forces can have a low probability that says nothing about the answer.
"""

from __future__ import annotations

import json
import math
import re

from pathweave.llm.client import TokenLogprob

_DECODER = json.JSONDecoder()


def last_json_object(text: str) -> tuple[dict, int, int] | None:
    """The last top-level JSON object in ``text`` with its character span ``(obj, start,
    end)``, or None when there is none (nested objects belong to their parent)."""
    found = None
    i = text.find("{")
    while i != -1:
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found = (obj, i, end)
        i = text.find("{", end)
    return found


def value_span(text: str, start: int, end: int, key: str) -> tuple[int, int] | None:
    """Character span of the value of top-level ``key`` in the JSON object ``text[start:end]``
    (a string value without its quotes), or None when the key is absent."""
    for match in re.finditer(r'"' + re.escape(key) + r'"\s*:\s*', text[start:end]):
        pos = start + match.end()
        try:
            if text[pos] == '"':
                _, after = json.decoder.scanstring(text, pos + 1)
                return pos + 1, after - 1
            _, after = _DECODER.raw_decode(text, pos)
            return pos, after
        except (ValueError, IndexError):
            continue
    return None


def span_confidence(text: str, tokens: list[TokenLogprob], span: tuple[int, int]) -> float:
    """exp(mean log-prob) of the tokens overlapping character span ``span`` of ``text``
    (0..1; 0.0 for an empty span). Tokens are aligned to the text by their UTF-8 bytes.

    Raises ValueError when the tokens do not spell the text.
    """
    encoded = text.encode("utf-8")
    byte_start = len(text[:span[0]].encode("utf-8"))
    byte_end = len(text[:span[1]].encode("utf-8"))
    if byte_end <= byte_start:
        return 0.0
    pieces = [bytes(t.bytes) if t.bytes is not None else t.token.encode("utf-8") for t in tokens]
    joined = b"".join(pieces)
    shift = joined.find(encoded)  # the endpoint may strip leading whitespace from the text
    if shift < 0:
        raise ValueError("the token logprobs do not spell the completion text")
    picked, offset = [], -shift
    for token, piece in zip(tokens, pieces):
        if offset < byte_end and offset + len(piece) > byte_start:
            picked.append(token.logprob)
        offset += len(piece)
    if not picked:
        return 0.0
    return math.exp(sum(picked) / len(picked))


def answer_confidence(text: str, tokens: list[TokenLogprob], key: str = "answer") -> float | None:
    """Confidence of the ``key`` value of the last JSON object of ``text`` (spec §4), or None
    when there is no such object or key, or the tokens cannot be aligned."""
    found = last_json_object(text)
    if found is None:
        return None
    span = value_span(text, found[1], found[2], key)
    if span is None:
        return None
    try:
        return span_confidence(text, tokens, span)
    except ValueError:
        return None
