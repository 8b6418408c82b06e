"""Embeddings as stored strings: base64 of little-endian float32.

Every embedded node keeps its vector twice: ``embedding`` (a float list, what the
store's vector index is built on) and ``vec`` (this encoding, what queries read back).
Over Bolt the neo4j driver decodes a 384-float list or a byte array in Python, slowly for
every row; the same vector as one 2,048-character string decodes an order of magnitude faster
(figures in docs/benchmarks-history.md, section "Figures moved from the code's docstrings").
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np


def encode_vector(vector: np.ndarray) -> str:
    """``(d,)`` float vector -> base64 string of its little-endian float32 bytes."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vectors(encoded: Sequence[str | None], dim: int) -> np.ndarray:
    """Strings from :func:`encode_vector` -> ``(n, dim)`` float32 (a missing or malformed
    one becomes a zero row, which scores 0 against any query)."""
    out = np.zeros((len(encoded), dim), dtype=np.float32)
    for row, text in enumerate(encoded):
        if not text:
            continue
        raw = np.frombuffer(base64.b64decode(text), dtype="<f4")
        if raw.shape[0] == dim:
            out[row] = raw
    return out
