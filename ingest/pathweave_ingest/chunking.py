"""Split a document into passages by tokens with overlap.

Tokens are the embedder's tokenizer's (so a passage fits the embedder's input);
a text of at most ``chunk_tokens`` tokens is one passage.
"""

from __future__ import annotations

import copy
from functools import lru_cache


@lru_cache(maxsize=4)
def _untruncated(tokenizer):
    """A copy of the tokenizer (a ``tokenizers.Tokenizer``, or a Hugging Face fast
    tokenizer's backend) with truncation and padding off (the packaged MiniLM
    tokenizer.json truncates to 128 tokens)."""
    backend = copy.deepcopy(getattr(tokenizer, "backend_tokenizer", tokenizer))
    backend.no_truncation()
    backend.no_padding()
    return backend


def chunk_text(text: str, tokenizer, chunk_tokens: int, overlap: int) -> list[tuple[str, int]]:
    """``text`` -> ``[(passage_text, token_count)]`` (``tokenizer``: a Hugging Face fast tokenizer) windows of ``chunk_tokens`` tokens,
    consecutive windows sharing ``overlap`` tokens. Raises ValueError if overlap >= chunk_tokens.
    """
    if overlap >= chunk_tokens:
        raise ValueError("chunk overlap must be smaller than the chunk size")
    offsets = _untruncated(tokenizer).encode(text, add_special_tokens=False).offsets
    if len(offsets) <= chunk_tokens:
        return [(text, len(offsets))]
    chunks = []
    step = chunk_tokens - overlap
    for start in range(0, len(offsets), step):
        window = offsets[start:start + chunk_tokens]
        chunks.append((text[window[0][0]:window[-1][1]].strip(), len(window)))
        if start + chunk_tokens >= len(offsets):
            break
    return chunks


def chunk_segments(segments, tokenizer, chunk_tokens: int, overlap: int) -> list[tuple[str, int, int | None, str | None]]:
    """Passages of a document's segments (:class:`~pathweave_ingest.loaders.Segment`):
    ``[(passage_text, token_count, page, section)]`` in reading order. Each segment
    (a PDF page, a heading's section) is chunked on its own by :func:`chunk_text`, so a
    passage never spans two pages or sections and cites exactly one. Raises ValueError
    if overlap >= chunk_tokens.
    """
    out: list[tuple[str, int, int | None, str | None]] = []
    for segment in segments:
        for text, tokens in chunk_text(segment.text, tokenizer, chunk_tokens, overlap):
            if text:
                out.append((text, tokens, segment.page, segment.section))
    return out
